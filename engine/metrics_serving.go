package engine

import (
	"sort"
	"time"
)

// SLO is a latency target per request, as a study's slo block gives it:
// a request meets it when its TTFT is at most TTFTms and its TPOT at most
// TPOTms (a target of 0 is not checked). Percentile is the share of
// requests, in percent, a load point must have meet it (or, judged by the
// latency percentiles, the percentile of TTFT and TPOT that must be
// within the targets); it decides whether a point meets the SLO, not
// whether a request does.
type SLO struct {
	TTFTms     float64 `json:"ttft_ms,omitempty"`
	TPOTms     float64 `json:"tpot_ms,omitempty"`
	Percentile float64 `json:"percentile,omitempty"`
}

// Meets reports whether a request meets the SLO.
func (s *SLO) Meets(r RequestRecord) bool {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	if s.TTFTms > 0 && ms(r.FirstToken-r.Start) > s.TTFTms {
		return false
	}
	if s.TPOTms > 0 && r.OutputTokens > 1 && ms(r.End-r.FirstToken)/float64(r.OutputTokens-1) > s.TPOTms {
		return false
	}
	return true
}

// Serving metric keys (ServingMetrics), beside MetricKeys.
const (
	AchievedRateKey  = "achieved_request_rate_req_s"
	GoodputKey       = "goodput_req_s"
	SLOAttainmentKey = "slo_attainment"
)

// Keys of the requests a load generator held back past their scheduled
// arrival, waiting for a free slot of its in-flight bound (engine
// openai's openai.max_in_flight), in a pass under a request_rate: how
// many, the longest wait (Sent - Start, in ms) and the bound. The engine
// that held them sets them, only in a pass where one waited; their
// latencies count the wait.
const (
	HeldRequestsKey = "client_held_requests"
	HeldMaxMsKey    = "client_held_max_ms"
	HeldBoundKey    = "client_max_in_flight"
)

// ITLKeys are the inter-token latency's keys: every gap between two
// consecutive tokens of a request, over all requests (vLLM's ITL; TPOT is
// the mean gap per request).
var ITLKeys = []string{"itl_avg_ms", "itl_p50_ms", "itl_p90_ms", "itl_p95_ms", "itl_p99_ms", "itl_min_ms", "itl_max_ms"}

// ServingMetrics are what a load point adds to ComputeMetrics, a pure
// function of the records:
//
//   - achieved_request_rate_req_s: requests over the span of their
//     sends, (n-1) / (last send - first send), a send being Sent where a
//     record has one, else Start: the rate the load generator kept
//     (absent with fewer than 2 requests or all sent at once). Under a
//     request_rate a client's Start is the scheduled arrival, so that its
//     latencies count a wait for its in-flight bound; the sends show the
//     rate it could keep, below the offered one when it fell behind.
//   - itl_*_ms: the inter-token latency percentiles, where the records
//     have token times.
//   - with an SLO, goodput_req_s: the requests meeting it over the total
//     latency (first start to last end), and slo_attainment: the share of
//     requests meeting it (0 to 1); both, as TTFT and the end-to-end
//     latency, from Start.
func ServingMetrics(reqs []RequestRecord, slo *SLO) map[string]float64 {
	m := map[string]float64{}
	n := len(reqs)
	if n == 0 {
		return m
	}
	first, last := reqs[0].Start, reqs[0].End
	firstSent, lastSent := reqs[0].sent(), reqs[0].sent()
	var gaps []float64
	meet := 0
	for _, r := range reqs {
		first, last = min(first, r.Start), max(last, r.End)
		firstSent, lastSent = min(firstSent, r.sent()), max(lastSent, r.sent())
		for i := 1; i < len(r.TokenTimes); i++ {
			gaps = append(gaps, float64(r.TokenTimes[i]-r.TokenTimes[i-1])/1e6)
		}
		if slo != nil && slo.Meets(r) {
			meet++
		}
	}
	if span := lastSent - firstSent; n > 1 && span > 0 {
		m[AchievedRateKey] = float64(n-1) / span.Seconds()
	}
	if len(gaps) > 0 {
		sort.Float64s(gaps)
		var sum float64
		for _, g := range gaps {
			sum += g
		}
		m["itl_avg_ms"] = sum / float64(len(gaps))
		for _, q := range []struct {
			key string
			q   float64
		}{{"itl_p50_ms", 0.5}, {"itl_p90_ms", 0.9}, {"itl_p95_ms", 0.95}, {"itl_p99_ms", 0.99}} {
			m[q.key] = Percentile(gaps, q.q)
		}
		m["itl_min_ms"], m["itl_max_ms"] = gaps[0], gaps[len(gaps)-1]
	}
	if slo != nil {
		m[SLOAttainmentKey] = float64(meet) / float64(n)
		m[GoodputKey] = 0
		if total := last - first; total > 0 {
			m[GoodputKey] = float64(meet) / total.Seconds()
		}
	}
	return m
}

// sent is when the request left the load generator (Sent, zero: Start).
func (r RequestRecord) sent() time.Duration {
	if r.Sent == 0 {
		return r.Start
	}
	return r.Sent
}

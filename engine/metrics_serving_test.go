package engine

import (
	"maps"
	"math"
	"testing"
	"time"
)

func TestServingMetrics(t *testing.T) {
	ms := time.Millisecond
	// Three requests submitted 0, 100 and 300 ms in; token times give
	// gaps of 10, 30, 20 and 50 ms.
	reqs := []RequestRecord{
		{Start: 0, FirstToken: 50 * ms, End: 60 * ms, OutputTokens: 2, TokenTimes: []time.Duration{50 * ms, 60 * ms}},
		{Start: 100 * ms, FirstToken: 400 * ms, End: 450 * ms, OutputTokens: 3, TokenTimes: []time.Duration{400 * ms, 430 * ms, 450 * ms}},
		{Start: 300 * ms, FirstToken: 320 * ms, End: 500 * ms, OutputTokens: 2, TokenTimes: []time.Duration{320 * ms, 370 * ms}},
	}
	for _, tc := range []struct {
		name string
		slo  *SLO
		want map[string]float64
	}{
		{"no slo", nil, map[string]float64{
			AchievedRateKey: 2 / 0.3,
			"itl_avg_ms":    27.5, "itl_p50_ms": 30, "itl_p90_ms": 50, "itl_p95_ms": 50, "itl_p99_ms": 50, "itl_min_ms": 10, "itl_max_ms": 50,
		}},
		// TTFTs 50, 300, 20; TPOTs 10, 25, 180.
		{"ttft 100", &SLO{TTFTms: 100, Percentile: 99}, map[string]float64{SLOAttainmentKey: 2.0 / 3, GoodputKey: 2 / 0.5}},
		{"ttft and tpot", &SLO{TTFTms: 100, TPOTms: 50}, map[string]float64{SLOAttainmentKey: 1.0 / 3, GoodputKey: 1 / 0.5}},
		{"tpot only", &SLO{TPOTms: 25}, map[string]float64{SLOAttainmentKey: 2.0 / 3, GoodputKey: 2 / 0.5}},
		{"all met", &SLO{TTFTms: 300, TPOTms: 180}, map[string]float64{SLOAttainmentKey: 1, GoodputKey: 3 / 0.5}},
	} {
		got := ServingMetrics(reqs, tc.slo)
		want := tc.want
		if tc.slo != nil {
			want = maps.Clone(ServingMetrics(reqs, nil))
			maps.Copy(want, tc.want)
		}
		if len(got) != len(want) {
			t.Errorf("%s: keys %v, want %v", tc.name, got, want)
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
				t.Errorf("%s: %s = %v, want %v", tc.name, k, g, w)
			}
		}
	}
}

// TestServingMetricsSent: a load generator that held requests back past
// their scheduled arrivals (Start) sent them later (Sent): the achieved
// rate is of the sends, what it could keep, while TTFT, the SLO and the
// goodput count from the arrivals.
func TestServingMetricsSent(t *testing.T) {
	ms := time.Millisecond
	// Offered every 10 ms; the client could send only every 40 ms. The
	// first request went at its arrival (Sent zero: at Start).
	reqs := []RequestRecord{
		{Start: 0, FirstToken: 30 * ms, End: 30 * ms, OutputTokens: 1},
		{Start: 10 * ms, Sent: 40 * ms, FirstToken: 70 * ms, End: 70 * ms, OutputTokens: 1},
		{Start: 20 * ms, Sent: 80 * ms, FirstToken: 110 * ms, End: 110 * ms, OutputTokens: 1},
	}
	m := ServingMetrics(reqs, &SLO{TTFTms: 50})
	// TTFTs from the arrivals: 30, 60 and 90 ms; from the sends all 30.
	want := map[string]float64{AchievedRateKey: 2 / 0.08, SLOAttainmentKey: 1.0 / 3, GoodputKey: 1 / 0.11}
	if len(m) != len(want) {
		t.Errorf("keys %v, want %v", m, want)
	}
	for k, w := range want {
		if g, ok := m[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	// Sent as the records of a client that kept up: the offered rate.
	for i := range reqs {
		reqs[i].Sent = reqs[i].Start
	}
	if g := ServingMetrics(reqs, nil)[AchievedRateKey]; math.Abs(g-100) > 1e-9 {
		t.Errorf("sent at their arrivals: achieved rate %v, want 100", g)
	}
}

func TestServingMetricsEdges(t *testing.T) {
	if m := ServingMetrics(nil, &SLO{TTFTms: 1}); len(m) != 0 {
		t.Errorf("no requests: %v", m)
	}
	// Offline records: all submitted at once, no token times; one output
	// token has no TPOT to miss.
	reqs := []RequestRecord{{Start: 0, FirstToken: time.Second, End: time.Second, OutputTokens: 1}, {Start: 0, FirstToken: time.Second, End: 2 * time.Second, OutputTokens: 2}}
	m := ServingMetrics(reqs, &SLO{TPOTms: 500})
	want := map[string]float64{SLOAttainmentKey: 0.5, GoodputKey: 0.5}
	if !maps.Equal(m, want) {
		t.Errorf("offline: %v, want %v", m, want)
	}
}

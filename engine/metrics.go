package engine

import (
	"sort"
	"time"
)

// MetricKeys are the keys of Result.Metrics, in report order (the
// contract with package results; trtllm-bench --report_json names where
// one exists).
var MetricKeys = []string{
	"request_throughput_req_s",
	"system_output_throughput_tok_s",
	"system_total_throughput_tok_s",
	"output_throughput_per_user_tok_s",
	"output_throughput_per_gpu_tok_s",
	"per_user_output_speed_tok_s",
	"total_latency_ms",
	"avg_request_latency_ms",
	"avg_concurrent_requests",
	"request_latency_p50_ms", "request_latency_p90_ms", "request_latency_p95_ms", "request_latency_p99_ms",
	"request_latency_min_ms", "request_latency_max_ms",
	"ttft_avg_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p95_ms", "ttft_p99_ms", "ttft_min_ms", "ttft_max_ms",
	"tpot_avg_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p95_ms", "tpot_p99_ms", "tpot_min_ms", "tpot_max_ms",
	"num_requests", "total_input_tokens", "total_output_tokens",
}

// Percentile is trtllm-bench's: sorted[int(n·q)], no interpolation (q < 1).
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted))*q)]
}

// ComputeMetrics computes the trtllm-bench throughput metrics from request
// records (trtllm-compat.md §2), a pure function of them. numGPUs divides
// the per-GPU throughput. Requests with one output token have a TPOT and an
// output speed of 0 (trtllm-bench's intertoken latency is 0 then). With no
// requests every metric is 0.
func ComputeMetrics(reqs []RequestRecord, numGPUs int) map[string]float64 {
	m := make(map[string]float64, len(MetricKeys))
	for _, k := range MetricKeys {
		m[k] = 0
	}
	n := len(reqs)
	if n == 0 {
		return m
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	sec := func(d time.Duration) float64 { return d.Seconds() }
	first, last := reqs[0].Start, reqs[0].End
	var inTok, outTok int
	var sumLat, perUser, speed float64
	lat := make([]float64, n)
	ttft := make([]float64, n)
	tpot := make([]float64, n)
	for i, r := range reqs {
		first, last = min(first, r.Start), max(last, r.End)
		inTok += r.InputTokens
		outTok += r.OutputTokens
		e2e := r.End - r.Start
		lat[i] = ms(e2e)
		sumLat += lat[i]
		ttft[i] = ms(r.FirstToken - r.Start)
		if e2e > 0 {
			perUser += float64(r.OutputTokens) / sec(e2e)
		}
		if gen := r.End - r.FirstToken; r.OutputTokens > 1 && gen > 0 {
			tpot[i] = ms(gen) / float64(r.OutputTokens-1)
			speed += float64(r.OutputTokens-1) / sec(gen)
		}
	}
	total := last - first
	m["num_requests"] = float64(n)
	m["total_input_tokens"] = float64(inTok)
	m["total_output_tokens"] = float64(outTok)
	m["total_latency_ms"] = ms(total)
	if total > 0 {
		m["request_throughput_req_s"] = float64(n) / sec(total)
		m["system_output_throughput_tok_s"] = float64(outTok) / sec(total)
		m["system_total_throughput_tok_s"] = float64(inTok+outTok) / sec(total)
		m["output_throughput_per_gpu_tok_s"] = m["system_output_throughput_tok_s"] / float64(max(numGPUs, 1))
		m["avg_concurrent_requests"] = sumLat / ms(total)
	}
	m["avg_request_latency_ms"] = sumLat / float64(n)
	m["output_throughput_per_user_tok_s"] = perUser / float64(n)
	m["per_user_output_speed_tok_s"] = speed / float64(n)
	stats := func(prefix string, v []float64, withAvg bool) {
		sort.Float64s(v)
		var sum float64
		for _, x := range v {
			sum += x
		}
		if withAvg {
			m[prefix+"_avg_ms"] = sum / float64(len(v))
		}
		m[prefix+"_p50_ms"] = Percentile(v, 0.50)
		m[prefix+"_p90_ms"] = Percentile(v, 0.90)
		m[prefix+"_p95_ms"] = Percentile(v, 0.95)
		m[prefix+"_p99_ms"] = Percentile(v, 0.99)
		m[prefix+"_min_ms"] = v[0]
		m[prefix+"_max_ms"] = v[len(v)-1]
	}
	stats("request_latency", lat, false)
	stats("ttft", ttft, true)
	stats("tpot", tpot, true)
	return m
}

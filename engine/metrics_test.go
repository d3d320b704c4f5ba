package engine

import (
	"math"
	"slices"
	"sort"
	"testing"
	"time"
)

// TestMetricsHandComputed feeds four hand-made records to ComputeMetrics.
// Every request is submitted at 100 ms; all numbers below are worked out by
// hand from trtllm-compat.md §2.
func TestMetricsHandComputed(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	recs := []RequestRecord{
		{TaskID: 0, Start: ms(100), FirstToken: ms(200), End: ms(500), InputTokens: 10, OutputTokens: 4},
		{TaskID: 1, Start: ms(100), FirstToken: ms(300), End: ms(1100), InputTokens: 20, OutputTokens: 5},
		{TaskID: 2, Start: ms(100), FirstToken: ms(400), End: ms(700), InputTokens: 30, OutputTokens: 1},
		{TaskID: 3, Start: ms(100), FirstToken: ms(150), End: ms(950), InputTokens: 40, OutputTokens: 9},
	}
	// Latencies 400, 1000, 600, 850 ms (sorted 400 600 850 1000); total
	// latency 1100 - 100 = 1000 ms; 100 input and 19 output tokens.
	// TTFT 100, 200, 300, 50 (sorted 50 100 200 300).
	// TPOT (end - first)/(out - 1): 300/3 = 100, 800/4 = 200, 0 (one
	// token), 800/8 = 100 (sorted 0 100 100 200).
	// Per-user output throughput: mean(4/0.4, 5/1, 1/0.6, 9/0.85).
	// Per-user output speed: mean(3/0.3, 4/0.8, 0, 8/0.8) = 6.25.
	// Percentile q of n=4 sorted values is sorted[int(4q)]: p50 -> [2],
	// p90, p95, p99 -> [3].
	want := map[string]float64{
		"request_throughput_req_s":         4,
		"system_output_throughput_tok_s":   19,
		"system_total_throughput_tok_s":    119,
		"output_throughput_per_user_tok_s": (10 + 5 + 1/0.6 + 9/0.85) / 4,
		"output_throughput_per_gpu_tok_s":  9.5, // 2 GPUs
		"per_user_output_speed_tok_s":      6.25,
		"total_latency_ms":                 1000,
		"avg_request_latency_ms":           712.5,
		"avg_concurrent_requests":          2.85,
		"request_latency_p50_ms":           850,
		"request_latency_p90_ms":           1000,
		"request_latency_p95_ms":           1000,
		"request_latency_p99_ms":           1000,
		"request_latency_min_ms":           400,
		"request_latency_max_ms":           1000,
		"ttft_avg_ms":                      162.5,
		"ttft_p50_ms":                      200,
		"ttft_p90_ms":                      300,
		"ttft_p95_ms":                      300,
		"ttft_p99_ms":                      300,
		"ttft_min_ms":                      50,
		"ttft_max_ms":                      300,
		"tpot_avg_ms":                      100,
		"tpot_p50_ms":                      100,
		"tpot_p90_ms":                      200,
		"tpot_p95_ms":                      200,
		"tpot_p99_ms":                      200,
		"tpot_min_ms":                      0,
		"tpot_max_ms":                      200,
		"num_requests":                     4,
		"total_input_tokens":               100,
		"total_output_tokens":              19,
	}
	got := ComputeMetrics(recs, 2)
	keys := func(m map[string]float64) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		sort.Strings(k)
		return k
	}
	wantKeys := slices.Clone(MetricKeys)
	sort.Strings(wantKeys)
	if !slices.Equal(keys(got), wantKeys) || !slices.Equal(keys(want), wantKeys) {
		t.Fatalf("keys %v, want %v", keys(got), wantKeys)
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %.12g, want %.12g", k, got[k], w)
		}
	}
	// Records in another order give the same metrics.
	slices.Reverse(recs)
	for k, v := range ComputeMetrics(recs, 2) {
		if math.Abs(v-got[k]) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("order changed %s: %g vs %g", k, v, got[k])
		}
	}
	if empty := ComputeMetrics(nil, 1); len(empty) != len(MetricKeys) || empty["num_requests"] != 0 {
		t.Errorf("empty: %v", empty)
	}
}

func TestPercentileRule(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 6, 0.9: 10, 0.95: 10, 0.99: 10, 0.1: 2} {
		if got := Percentile(s, q); got != want {
			t.Errorf("p%v = %v, want %v", q*100, got, want)
		}
	}
}

func TestParseProfileWindow(t *testing.T) {
	for in, want := range map[string][]Span{
		"none": nil, "": nil, "100-150": {{100, 150}}, "7": {{7, 7}}, "20-30, 200-210,300": {{20, 30}, {200, 210}, {300, 300}},
	} {
		got, err := ParseProfileWindow(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"a-b", "-1", "5-2", "3-5,5-6", "10,2", "1-"} {
		if _, err := ParseProfileWindow(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseProfileWindow(f *testing.F) {
	for _, s := range []string{"none", "1-2,4", "20-30,200-210", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spans, err := ParseProfileWindow(s)
		if err != nil {
			return
		}
		for i, sp := range spans {
			if sp.First < 0 || sp.Last < sp.First || (i > 0 && sp.First <= spans[i-1].Last) {
				t.Fatalf("%q gave %v", s, spans)
			}
		}
	})
}

func FuzzParseRoutingMode(f *testing.F) {
	for _, s := range []string{"learned", "perfect", "uniform", "zipf:1.5", "zipf:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRoutingMode(s)
		if err == nil && r.Mode == 3 && !(r.S > 0) {
			t.Fatalf("%q gave zipf exponent %v", s, r.S)
		}
	})
}

package results

import (
	"fmt"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/results/editdist"
)

// Direction says which way a metric improves.
type Direction int

const (
	// Neither: descriptive metrics (counts, concurrency) never make a
	// verdict of faster or slower.
	Neither Direction = iota
	HigherIsBetter
	LowerIsBetter
)

func (d Direction) String() string {
	switch d {
	case HigherIsBetter:
		return "higher"
	case LowerIsBetter:
		return "lower"
	}
	return "none"
}

// Metric describes one metric key: how trtllm-bench names it, its unit,
// and which way is better.
type Metric struct {
	Key string
	// Name is trtllm-bench's display name, unit included.
	Name string
	// Unit is the short unit shown next to values.
	Unit   string
	Better Direction
	// BenchUnit is the unit written in the Go benchmark format. It is
	// unique per metric because benchstat treats each unit as one
	// measurement, and it avoids "ns" and "MB", which benchstat rescales.
	BenchUnit string
	// Exact marks counts that do not vary between repeats of one cell.
	Exact bool
	// Headline metrics make up the default tables and the default set
	// xrun diff judges.
	Headline bool
	// Energy metrics join the headline metrics in the default tables and
	// the default set xrun diff judges (DefaultMetrics) where a cell has
	// them: GPU cells whose GPUs have NVML's energy counter. Not headline
	// metrics, because most cells (the CPU backend's, every file written
	// before xrun measured energy) have none.
	Energy bool
	// Serving metrics (goodput, inter-token latency, the achieved rate)
	// exist only for cells under load or with an SLO; where any cell has
	// one, they and the TTFT and TPOT p99 join the default tables and the
	// default set xrun diff judges (DefaultMetricsFor).
	Serving bool
}

// registry lists the metrics in display order; keys are fixed by the
// contract with package engine (trtllm-bench --report_json names).
var registry = func() []Metric {
	m := []Metric{
		{Key: "request_throughput_req_s", Name: "Request Throughput (req/sec)", Unit: "req/s", Better: HigherIsBetter, BenchUnit: "req/s", Headline: true},
		{Key: "system_output_throughput_tok_s", Name: "Total Output Throughput (tokens/sec)", Unit: "tok/s", Better: HigherIsBetter, BenchUnit: "out-tok/s", Headline: true},
		{Key: "system_total_throughput_tok_s", Name: "Total Token Throughput (tokens/sec)", Unit: "tok/s", Better: HigherIsBetter, BenchUnit: "tok/s"},
		{Key: "output_throughput_per_user_tok_s", Name: "Per User Output Throughput [w/ ctx] (tps/user)", Unit: "tok/s/user", Better: HigherIsBetter, BenchUnit: "out-tok/s/user", Headline: true},
		{Key: "output_throughput_per_gpu_tok_s", Name: "Per GPU Output Throughput (tps/gpu)", Unit: "tok/s/gpu", Better: HigherIsBetter, BenchUnit: "out-tok/s/gpu"},
		{Key: "per_user_output_speed_tok_s", Name: "Per User Output Speed (tps/user)", Unit: "tok/s/user", Better: HigherIsBetter, BenchUnit: "speed-tok/s/user"},
		{Key: "total_latency_ms", Name: "Total Latency (ms)", Unit: "ms", Better: LowerIsBetter, BenchUnit: "total-latency-ms", Headline: true},
		{Key: "avg_request_latency_ms", Name: "Average request latency (ms)", Unit: "ms", Better: LowerIsBetter, BenchUnit: "latency-avg-ms", Headline: true},
		{Key: "avg_concurrent_requests", Name: "Average number of concurrent requests", Unit: "req", Better: Neither, BenchUnit: "concurrent-req"},
	}
	stats := []struct{ key, name string }{
		{"avg", "Average"}, {"p50", "P50"}, {"p90", "P90"}, {"p95", "P95"}, {"p99", "P99"}, {"min", "Minimum"}, {"max", "Maximum"},
	}
	for _, s := range stats {
		if s.key == "avg" {
			continue // avg_request_latency_ms above is trtllm-bench's average
		}
		m = append(m, Metric{Key: "request_latency_" + s.key + "_ms", Name: "Request Latency " + s.name + " (ms)", Unit: "ms", Better: LowerIsBetter, BenchUnit: "latency-" + s.key + "-ms"})
	}
	for _, fam := range []struct{ key, name string }{{"ttft", "TTFT"}, {"tpot", "TPOT"}, {"itl", "Inter-token Latency"}} {
		for _, s := range stats {
			m = append(m, Metric{Key: fam.key + "_" + s.key + "_ms", Name: fam.name + " " + s.name + " (ms)", Unit: "ms", Better: LowerIsBetter, BenchUnit: fam.key + "-" + s.key + "-ms",
				Serving: fam.key == "itl" && s.key == "p99"})
		}
	}
	// Load points (engine.ServingMetrics): what a serving benchmark reports
	// beside trtllm-bench's numbers.
	m = append(m,
		Metric{Key: "achieved_request_rate_req_s", Name: "Achieved Request Rate (req/sec)", Unit: "req/s", Better: Neither, BenchUnit: "achieved-req/s", Serving: true},
		Metric{Key: "goodput_req_s", Name: "Goodput (req/sec meeting the SLO)", Unit: "req/s", Better: HigherIsBetter, BenchUnit: "goodput-req/s", Serving: true},
		Metric{Key: "slo_attainment", Name: "SLO Attainment (share of requests)", Unit: "share", Better: HigherIsBetter, BenchUnit: "slo-share", Serving: true},
	)
	m = append(m,
		Metric{Key: "num_requests", Name: "Number of requests", Unit: "req", Better: Neither, BenchUnit: "requests", Exact: true},
		Metric{Key: "total_input_tokens", Name: "Total Input Length (tokens)", Unit: "tok", Better: Neither, BenchUnit: "input-tok", Exact: true},
		Metric{Key: "total_output_tokens", Name: "Total Output Length (tokens)", Unit: "tok", Better: Neither, BenchUnit: "output-tok", Exact: true},
		// xrun's engine's: batch_size, or fewer where the KV cache held no
		// more whole (trtllm-bench's report gives its runtime batch size).
		Metric{Key: MaxInFlightKey, Name: "Max Requests in Flight", Unit: "req", Better: Neither, BenchUnit: "max-in-flight-req", Exact: true},
		// The most requests one timed iteration served: what the cache held
		// in fact (a paged one as requests come and go).
		Metric{Key: PeakInFlightKey, Name: "Peak Requests in an Iteration", Unit: "req", Better: Neither, BenchUnit: "peak-iter-req"},
		// Whether the pass paged its KV cache (under XRUN_CUDA_KV_PAGED=auto
		// the engine decides per run).
		Metric{Key: KVBlocksKey, Name: "KV Cache Blocks (0: fixed slots)", Unit: "blocks", Better: Neither, BenchUnit: "kv-blocks", Exact: true},
		// xrun's own, from the GPUs' energy counter over each timed repeat
		// (AddEnergyMetrics); trtllm-bench has none.
		Metric{Key: EnergyPerTokenKey, Name: "Energy per Output Token (J/token)", Unit: "J/tok", Better: LowerIsBetter, BenchUnit: "J/out-tok", Energy: true},
		Metric{Key: TokSPerWattKey, Name: "Output Throughput per Watt (tokens/sec/W)", Unit: "tok/s/W", Better: HigherIsBetter, BenchUnit: "out-tok/s/W", Energy: true},
	)
	return m
}()

var registryIndex = func() map[string]int {
	idx := make(map[string]int, len(registry))
	for i, m := range registry {
		idx[m.Key] = i
	}
	return idx
}()

// RegisteredMetrics returns the known metrics in display order.
func RegisteredMetrics() []Metric { return append([]Metric(nil), registry...) }

// LookupMetric returns the registry entry for key.
func LookupMetric(key string) (Metric, bool) {
	i, ok := registryIndex[key]
	if !ok {
		return Metric{}, false
	}
	return registry[i], true
}

// MetricFor returns the registry entry for key, or a neutral description
// for a key the registry does not know (an engine may report more), so
// every renderer can treat all keys alike.
func MetricFor(key string) Metric {
	if m, ok := LookupMetric(key); ok {
		return m
	}
	return Metric{Key: key, Name: key, Better: Neither, BenchUnit: benchUnitFor(key)}
}

// HeadlineMetrics returns the keys of the default table columns.
func HeadlineMetrics() []string {
	var keys []string
	for _, m := range registry {
		if m.Headline {
			keys = append(keys, m.Key)
		}
	}
	return keys
}

// DefaultMetrics returns the keys tables show and xrun diff judges when
// none are asked for, in display order: the headline metrics, then the
// energy metrics. Callers keep those their results have.
func DefaultMetrics() []string {
	var keys []string
	for _, m := range registry {
		if m.Headline || m.Energy {
			keys = append(keys, m.Key)
		}
	}
	return keys
}

// servingLatency are the latency percentiles serving studies read first;
// every cell has them, so they join the defaults only where a serving
// metric says the study is one.
var servingLatency = []string{"ttft_p99_ms", "tpot_p99_ms"}

// DefaultMetricsFor is DefaultMetrics for results whose cells have the
// metrics have: with any serving metric among them, the serving metrics
// and the TTFT and TPOT p99 too, in display order. Callers keep those
// their results have.
func DefaultMetricsFor(have map[string]bool) []string {
	serving := false
	for _, m := range registry {
		if m.Serving && have[m.Key] {
			serving = true
		}
	}
	var keys []string
	for _, m := range registry {
		if m.Headline || m.Energy || serving && (m.Serving || slices.Contains(servingLatency, m.Key)) {
			keys = append(keys, m.Key)
		}
	}
	return keys
}

// sortMetricKeys orders keys as the registry does, unknown keys last in
// lexical order.
func sortMetricKeys(keys []string) {
	rank := func(k string) int {
		if i, ok := registryIndex[k]; ok {
			return i
		}
		return len(registry)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
}

// benchUnitFor makes an unknown key usable as a Go benchmark unit.
func benchUnitFor(key string) string {
	u := strings.ReplaceAll(key, "_", "-")
	// benchstat rescales units containing "ns" or "MB" as nanoseconds
	// or megabytes; an engine-defined key must not be misread so.
	u = strings.ReplaceAll(u, "ns", "n-s")
	return strings.ReplaceAll(u, "MB", "M-B")
}

// CheckMetrics verifies metric keys a user asked for: each must be in the
// registry or measured in one of rs. The error suggests the closest key.
func CheckMetrics(keys []string, rs ...*Results) error {
	known := map[string]bool{}
	for _, m := range registry {
		known[m.Key] = true
	}
	for _, r := range rs {
		for k := range presentMetrics(r) {
			known[k] = true
		}
	}
	for _, k := range keys {
		if known[k] {
			continue
		}
		best, bestD := "", len(k)/2+1
		for c := range known {
			if d := editdist.Distance(k, c); d < bestD || (d == bestD && c < best) {
				best, bestD = c, d
			}
		}
		if best != "" {
			return fmt.Errorf("unknown metric %q; did you mean %q?", k, best)
		}
		return fmt.Errorf("unknown metric %q; known metrics are the keys of results.json repeats, e.g. %s", k, strings.Join(HeadlineMetrics(), ", "))
	}
	return nil
}

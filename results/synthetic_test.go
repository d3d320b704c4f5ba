package results

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Synthetic results stand in for the runner's until it exists: metrics
// built the way trtllm-bench derives them from one total latency per
// repeat, with deterministic pseudo-random noise (PCG, fixed seeds), so
// throughput and latency move together as they do in real runs.

// synthCell describes one cell to synthesise.
type synthCell struct {
	params Params
	// reqPerSec is the cell's true request throughput; slow multiplies
	// its latencies (1.10 = a 10 % slowdown).
	reqPerSec float64
	slow      float64
	status    Status
	err       string
	throttled []string // throttle reasons; nil = not throttled
	moe       bool
}

// synthStudy describes a whole results file.
type synthStudy struct {
	name, description string
	axes              []Axis
	slugKeys          []string // parameters in the cell id's slug
	compare           []CompareSpec
	repeats           int
	noise             float64 // relative standard deviation of the latency
	seed              uint64
	env               Environment
	cells             []synthCell
}

func testEnvironment() Environment {
	return Environment{
		Xrun:        Build{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.0"},
		Host:        "gpu-node-7",
		OS:          "linux/amd64",
		Kernel:      "6.8.0-45-generic",
		CPUModel:    "AMD EPYC 9454 48-Core Processor",
		CPUCount:    96,
		MemoryBytes: 1 << 40,
		GPUs: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-6c1b1a4e-93b5-4c5e-9d3e-8f0a2b6c7d10",
			Driver: "550.54.15", CUDAVersion: "12.4", MemoryBytes: 80 << 30, ComputeCapability: "9.0",
			SMClockMHz: 1980, MemClockMHz: 2619, PowerLimitW: 700}},
		Repo: &Repo{Commit: "fedcba9876543210fedcba9876543210fedcba98"},
	}
}

// cellID mimics the runner's ids: a readable slug and a short hash of
// the parameters.
func cellID(slug string, p Params) string {
	h := fnv.New32a()
	b, _ := json.Marshal(p)
	h.Write(b)
	return fmt.Sprintf("%s-%08x", slug, h.Sum32())
}

func (s synthStudy) build() *Results {
	spec := map[string]any{"name": s.name, "repeats": s.repeats}
	specJSON, _ := json.Marshal(spec)
	r := &Results{
		Name: s.name, Description: s.description, Spec: specJSON, Environment: s.env,
		Axes: s.axes, Compare: s.compare,
		Started:  time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 3, 1, 2, 17, 42, 0, time.UTC),
	}
	for i, sc := range s.cells {
		var slug []string
		for _, k := range s.slugKeys {
			slug = append(slug, fmt.Sprintf("%s%v", pick(k == "batch_size", "bs", ""), sc.params[k]))
		}
		c := Cell{ID: cellID(strings.Join(slug, "-"), sc.params), Params: sc.params, Status: sc.status, Error: sc.err}
		if c.Status == "" {
			c.Status = StatusOK
		}
		rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
		if c.Status == StatusOK {
			for range s.repeats {
				c.Repeats = append(c.Repeats, synthRepeat(rng, sc, s.noise))
			}
			c.Artifacts = []string{"cells/" + c.ID + "/requests.jsonl", "cells/" + c.ID + "/iterations.csv"}
			none, some := 0.0, 0.3125
			tel := &Telemetry{SMClockMHzMean: 1975.4, SMClockMHzMax: 1980, MemClockMHzMean: 2619, MemClockMHzMax: 2619, PowerWMean: 512.31, PowerWMax: 688.2,
				SMClockMHzMin: 1950, MaxSMClockMHz: 1980, ThrottleThreshold: 0.75, Samples: 256, ClockSamples: 240, BelowThresholdShare: &none}
			if sc.throttled != nil {
				// A third of the timed samples at half the clock: the rule flags it.
				tel.Throttled, tel.ThrottleReasons = true, sc.throttled
				tel.SMClockMHzMean, tel.SMClockMHzMin, tel.BelowThresholdShare, tel.PowerCappedS = 1602.7, 990, &some, 4.2
			}
			c.Telemetry = tel
			if sc.moe {
				c.ExpertLoad = &ExpertLoad{MaxOverMean: 1, Histogram: []int64{4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}}
				if sc.params["routing_mode"] == "learned" {
					c.ExpertLoad = &ExpertLoad{MaxOverMean: 1.8125, Histogram: []int64{7424, 2048, 3072, 5120, 4096, 2560, 3584, 4864}}
				}
			}
		}
		r.Cells = append(r.Cells, c)
	}
	return r
}

// synthRepeat derives one repeat's metrics from a noisy total latency,
// with the trtllm-bench formulas (trtllm-compat.md §2).
func synthRepeat(rng *rand.Rand, sc synthCell, noise float64) Metrics {
	const n, in, out = 3000.0, 128.0, 128.0
	slow := sc.slow
	if slow == 0 {
		slow = 1
	}
	jitter := func() float64 { return 1 + noise*rng.NormFloat64() }
	total := 1000 * n / sc.reqPerSec * slow * jitter()
	avgReq := 0.74 * total * jitter()
	m := Metrics{
		"request_throughput_req_s":         n / total * 1000,
		"system_output_throughput_tok_s":   n * out / total * 1000,
		"system_total_throughput_tok_s":    n * (in + out) / total * 1000,
		"output_throughput_per_gpu_tok_s":  n * out / total * 1000,
		"output_throughput_per_user_tok_s": out / avgReq * 1000,
		"per_user_output_speed_tok_s":      (out - 1) / (avgReq * 0.97) * 1000,
		"total_latency_ms":                 total,
		"avg_request_latency_ms":           avgReq,
		"avg_concurrent_requests":          n * avgReq / total,
		"num_requests":                     n,
		"total_input_tokens":               n * in,
		"total_output_tokens":              n * out,
	}
	for _, q := range []struct {
		k string
		f float64
	}{{"p50", 1.0}, {"p90", 1.21}, {"p95", 1.27}, {"p99", 1.33}, {"min", 0.08}, {"max", 1.35}} {
		m["request_latency_"+q.k+"_ms"] = avgReq * q.f * jitter()
	}
	ttft, tpot := avgReq*0.03, avgReq*0.97/(out-1)
	for _, q := range []struct {
		k string
		f float64
	}{{"avg", 1}, {"p50", 0.98}, {"p90", 1.4}, {"p95", 1.6}, {"p99", 2.1}, {"min", 0.2}, {"max", 2.4}} {
		m["ttft_"+q.k+"_ms"] = ttft * q.f * jitter()
		m["tpot_"+q.k+"_ms"] = tpot * q.f * jitter()
	}
	return m
}

// gemmStudy is the motivating study (trtllm-compat.md §2): gemm_plugin
// auto vs disable over batch sizes, auto 1.7 % slower at batch 64, one
// cell out of memory.
func gemmStudy() synthStudy {
	s := synthStudy{
		name: "gemm-plugin", description: "cuBLASLt GEMMs vs the engine's own GEMM kernels across batch sizes",
		axes:     []Axis{{Name: "batch_size", Values: []any{1, 16, 64, 256}}, {Name: "gemm_plugin", Values: []any{"auto", "disable"}}},
		compare:  []CompareSpec{{Axis: "gemm_plugin", Baseline: "disable"}},
		slugKeys: []string{"batch_size", "gemm_plugin"},
		repeats:  6, noise: 0.004, seed: 420, env: testEnvironment(),
	}
	rates := map[int]float64{1: 9.8, 16: 98.5, 64: 143.7, 256: 151.2}
	for _, bs := range []int{1, 16, 64, 256} {
		for _, plugin := range []string{"auto", "disable"} {
			sc := synthCell{params: Params{"model": "tinyllama-1.1b", "batch_size": bs, "gemm_plugin": plugin,
				"dataset.input_mean": 128, "dataset.output_mean": 128, "dtype": "float16", "profile_window": "none"},
				reqPerSec: rates[bs]}
			if plugin == "auto" {
				sc.slow = map[int]float64{1: 0.93, 16: 1.0, 64: 1.017}[bs]
			}
			if bs == 256 && plugin == "auto" {
				sc.status, sc.err = StatusFailed, "engine: cuMemAlloc(2.1 GiB): CUDA_ERROR_OUT_OF_MEMORY: out of memory"
			}
			s.cells = append(s.cells, sc)
		}
	}
	return s
}

// moeStudy compares routing modes with only 3 repeats, so no difference
// can be significant and the report must say so; one cell throttled.
func moeStudy() synthStudy {
	s := synthStudy{
		name: "moe-routing", description: "learned vs perfectly balanced MoE routing",
		slugKeys: []string{"batch_size", "routing_mode"},
		repeats:  3, noise: 0.01, seed: 7, env: testEnvironment(),
	}
	for _, bs := range []int{16, 64} {
		for _, mode := range []string{"learned", "perfect"} {
			sc := synthCell{params: Params{"model": "mixtral-8x7b", "batch_size": bs, "routing_mode": mode}, reqPerSec: 40, moe: true}
			if mode == "perfect" {
				sc.slow = map[int]float64{16: 1 / 1.04, 64: 1 / 1.15}[bs]
			}
			if bs == 64 && mode == "learned" {
				sc.throttled = []string{"sw_power_cap"}
			}
			s.cells = append(s.cells, sc)
		}
	}
	return s
}

// nightly is the diff pair's study: four batch sizes, 6 repeats, 1 %
// noise. slowBS, when set, slows that cell's latencies by 10 %.
func nightly(seed uint64, slowBS int) synthStudy {
	s := synthStudy{name: "nightly", description: "nightly batch sweep",
		axes:     []Axis{{Name: "batch_size", Values: []any{1, 16, 64, 256}}},
		slugKeys: []string{"batch_size"},
		repeats:  6, noise: 0.01, seed: seed, env: testEnvironment()}
	for _, bs := range []int{1, 16, 64, 256} {
		sc := synthCell{params: Params{"model": "llama-3.2-1b", "batch_size": bs}, reqPerSec: 20 * math.Pow(float64(bs), 0.6)}
		if bs == slowBS {
			sc.slow = 1.10
		}
		s.cells = append(s.cells, sc)
	}
	return s
}

// nightlySlow is the regression side: a 10 % slowdown at batch 64, a new
// driver and xrun build, and one throttled cell.
func nightlySlow() synthStudy {
	s := nightly(2, 64)
	s.env.GPUs[0].Driver = "555.42.02"
	s.env.GPUs[0].CUDAVersion = "12.5"
	s.env.Xrun.Commit = "89abcdef0123456789abcdef0123456789abcdef"
	s.cells[3].throttled = []string{"hw_slowdown"}
	return s
}

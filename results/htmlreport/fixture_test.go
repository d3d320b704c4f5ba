package htmlreport

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// gpuStudyDir is the fixture with every kind of chart: a MoE study on a
// GPU (batch 16 and 64, learned against perfect routing) whose cells have
// the files a run leaves in cells/<id>/ (telemetry.csv, cell.json,
// iterations.csv, expert_load.csv), energy metrics and rooflines; the
// batch-64 cells are profiled, and the learned one throttled.
const gpuStudyDir = "testdata/gpu-study"

// gpuStudy writes the fixture into dir.
func gpuStudy(t *testing.T, dir string) {
	t.Helper()
	origin := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	r := &results.Results{
		Name: "moe-gpu", Description: "learned against perfect routing on a GPU, with every chart",
		Spec:     json.RawMessage(`{"name":"moe-gpu","repeats":6,"compare":[{"axis":"routing_mode","baseline":"learned"}]}`),
		SpecFile: "experiments/moe-gpu.yaml", SpecSets: []string{"repeats=6", "matrix.batch_size=[16,64]"},
		Environment: results.Environment{
			Xrun: results.Build{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.0"},
			Host: "gpu-node-7", OS: "linux/amd64", Kernel: "6.8.0", CPUModel: "AMD EPYC 9454", CPUCount: 96, MemoryBytes: 1 << 40,
			GPUs: []results.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", Driver: "550.54.15", CUDAVersion: "12.4",
				MemoryBytes: 80 << 30, ComputeCapability: "9.0", SMClockMHz: 1980, MemClockMHz: 2619, PowerLimitW: 700, MaxSMClockMHz: 1980, MaxMemClockMHz: 2619}},
		},
		Axes:    []results.Axis{{Name: "batch_size", Values: []any{16, 64}}, {Name: "routing_mode", Values: []any{"learned", "perfect"}}},
		Compare: []results.CompareSpec{{Axis: "routing_mode", Baseline: "learned"}},
		Started: origin, Finished: origin.Add(5 * time.Minute),
	}
	rng := rand.New(rand.NewPCG(19, 2026))
	i := 0
	for _, bs := range []int{16, 64} {
		for _, mode := range []string{"learned", "perfect"} {
			id := fmt.Sprintf("bs%d_%s-%08x", bs, mode, 0xc0de0000+i)
			rate := float64(bs) * 40 * (1 + 0.12*float64(i%2)) // perfect routing is faster
			throttled := bs == 64 && mode == "learned"
			profiled := bs == 64
			c := results.Cell{ID: id, Status: results.StatusOK,
				Params: results.Params{"batch_size": bs, "routing_mode": mode, "model": "tiny-moe", "engine": "cuda",
					"profile_window": map[bool]string{true: "10-12", false: "none"}[profiled]}}
			for range 6 {
				tok := rate * (1 + 0.01*rng.NormFloat64())
				c.Repeats = append(c.Repeats, results.Metrics{
					"system_output_throughput_tok_s":   tok,
					"request_throughput_req_s":         tok / 128,
					"output_throughput_per_user_tok_s": tok / float64(bs) * (1 - 0.002*float64(bs)),
					"total_latency_ms":                 4096 * 128 / tok * 1000,
					"avg_request_latency_ms":           float64(bs) * 128 / tok * 1000,
					EnergyPerTokenMetric:               350 / tok * (1 + 0.01*rng.NormFloat64()),
					TokensPerWattMetric:                tok / 350 * (1 + 0.01*rng.NormFloat64()),
				})
			}
			share := 0.0
			if throttled {
				share = 0.3
			}
			c.Telemetry = &results.Telemetry{SMClockMHzMean: map[bool]float64{true: 1600, false: 1975}[throttled], SMClockMHzMax: 1980,
				SMClockMHzMin: map[bool]float64{true: 1200, false: 1965}[throttled], MemClockMHzMean: 2619, MemClockMHzMax: 2619,
				PowerWMean: 520, PowerWMax: 690, Throttled: throttled, MaxSMClockMHz: 1980, ThrottleThreshold: 0.75,
				ClockSamples: 36, BelowThresholdShare: &share, TempCMax: 71, Samples: 36}
			if throttled {
				c.Telemetry.ThrottleReasons = []string{"sw_thermal_slowdown"}
			}
			hist := make([]int64, 8)
			for x := range hist {
				hist[x] = 4096
				if mode == "learned" {
					hist[x] = int64(4096 * (0.4 + 0.3*float64((x*5)%8)/2))
				}
			}
			c.ExpertLoad = &results.ExpertLoad{MaxOverMean: map[string]float64{"learned": 1.7, "perfect": 1}[mode], Histogram: hist}
			c.Roofline = &results.Roofline{FloorS: 1, OutputTokS: rate * 2.5, MemoryBoundS: 0.9, Iterations: 100, Bytes: 1e12, FLOPs: 1e13,
				Device: "NVIDIA H100 80GB HBM3", PeakBytesPerS: 3.35e12, PeakFLOPS: 989e12, PeakSource: "datasheet", Basis: "iterations.csv"}
			if profiled {
				c.Profile = &results.Profile{Window: "10-12", Iterations: 3, DistinctKernels: 9,
					Diagnosis: []string{"MoE kernels take 41.0% of kernel time", "GEMMs ran on the engine's own kernels"}}
				gate := map[string]int64{"learned": 900000, "perfect": 600000}[mode]
				for _, k := range []struct {
					name string
					ns   int64
				}{{"moe_gate_up_f16", gate}, {"gemm_m_f16", 700000}, {"moe_down_f16", gate / 2}, {"attention_f16_d64", 300000},
					{"moe_route_topk_f16", 90000}, {"moe_gather_f16", 60000}, {"moe_combine_f16", 50000}, {"rmsnorm_f16", 40000}, {"memcpy_f16", 10000}} {
					c.Profile.Kernels = append(c.Profile.Kernels, results.Kernel{Name: k.name, TotalNs: k.ns, Instances: 3 * 4, AvgNs: float64(k.ns) / 12,
						MedNs: float64(k.ns) / 12, MinNs: k.ns / 13, MaxNs: k.ns / 11})
				}
				var total int64
				for _, k := range c.Profile.Kernels {
					total += k.TotalNs
				}
				for j := range c.Profile.Kernels {
					c.Profile.Kernels[j].TimePct = math.Round(1000*float64(c.Profile.Kernels[j].TotalNs)/float64(total)) / 10
				}
			}
			for _, name := range []string{layout.CellFile, layout.TelemetryFile, layout.IterationsFile, layout.ExpertLoadFile} {
				c.Artifacts = append(c.Artifacts, layout.CellArtifact(id, name))
			}
			r.Cells = append(r.Cells, c)
			writeCellFiles(t, dir, id, origin.Add(time.Duration(i)*time.Minute), throttled, profiled)
			i++
		}
	}
	if err := results.WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
}

// writeCellFiles writes a cell's records as a run leaves them: six timed
// repeats of 5 s from 2 s on, 1 s apart, then the profiled pass; GPU
// telemetry every 0.5 s, the SM clock of a throttled cell down to
// 1200 MHz in its third repeat; expert loads of 2 layers over 4
// iterations, the first a warm-up.
func writeCellFiles(t *testing.T, dir, id string, started time.Time, throttled, profiled bool) {
	t.Helper()
	cdir := layout.CellDir(dir, id)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		t.Fatal(err)
	}
	type pass struct {
		Repeat   int       `json:"repeat,omitempty"`
		Profiled bool      `json:"profiled,omitempty"`
		Session  int       `json:"session"`
		Started  time.Time `json:"started"`
		Finished time.Time `json:"finished"`
	}
	at := func(s float64) time.Time { return started.Add(time.Duration(s * float64(time.Second))) }
	var passes []pass
	for n := range 6 {
		from := 2 + 6*float64(n)
		passes = append(passes, pass{Repeat: n + 1, Started: at(from), Finished: at(from + 5)})
	}
	end := 38.0
	if profiled {
		passes = append(passes, pass{Profiled: true, Started: at(38), Finished: at(42)})
		end = 43
	}
	rec := map[string]any{"id": id, "status": "ok", "started": started, "finished": at(end),
		"sessions": []map[string]any{{"host": "gpu-node-7", "pid": 4242, "started": started}}, "passes": passes}
	b, _ := json.MarshalIndent(rec, "", "  ")
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(cdir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(layout.CellFile, append(b, '\n'))
	var tel strings.Builder
	tel.WriteString("time_ms,gpu,sm_clock_mhz,mem_clock_mhz,gpu_util_pct,mem_util_pct,power_w,energy_j,temp_c,mem_used_bytes,throttle_reasons\n")
	for k := 0; float64(k)*0.5 <= end; k++ {
		ts := float64(k) * 0.5
		busy := ts >= 2
		clock, power, temp, reasons := 1980.0, 80.0, 40.0+ts/2, "gpu_idle"
		if busy {
			clock, power, temp, reasons = 1975, 520, 55+ts/2, ""
		}
		if throttled && ts >= 14 && ts < 19 {
			clock, reasons = 1200, "sw_thermal_slowdown"
		}
		fmt.Fprintf(&tel, "%.3f,0,%.0f,2619,%d,40,%.3f,%.3f,%.0f,1000000,%s\n", ts*1000, clock, map[bool]int{true: 98, false: 0}[busy], power, 1000+power*ts, temp, reasons)
	}
	write(layout.TelemetryFile, []byte(tel.String()))
	var it strings.Builder
	it.WriteString("pass,profiled,iteration,ctx_requests,ctx_tokens,gen_requests,start_ns,duration_ns,warmup,in_window\n")
	for n := range 6 {
		for k := range 4 {
			fmt.Fprintf(&it, "%d,false,%d,1,128,15,%d,1000000000,%t,false\n", n, k, int64(k)*1e9, k == 0)
		}
	}
	if profiled {
		for k := range 4 {
			fmt.Fprintf(&it, "6,true,%d,1,128,15,%d,900000000,%t,%t\n", k, int64(k)*1e9, k == 0, k >= 1 && k <= 2)
		}
	}
	write(layout.IterationsFile, []byte(it.String()))
	var el strings.Builder
	el.WriteString("iteration,warmup,layer,max_over_mean")
	for x := range 8 {
		fmt.Fprintf(&el, ",expert_%d", x)
	}
	el.WriteString("\n")
	for k := range 4 {
		for layer := range 2 {
			imb := 1.0
			if !profiled || throttled {
				imb = 1.4 + 0.2*float64(layer) + 0.1*float64(k)
			}
			fmt.Fprintf(&el, "%d,%t,%d,%.3f", k, k == 0, layer, imb)
			for x := range 8 {
				fmt.Fprintf(&el, ",%d", 10+x)
			}
			el.WriteString("\n")
		}
	}
	write(layout.ExpertLoadFile, []byte(el.String()))
}

// TestGPUStudyFixture keeps testdata/gpu-study in step with gpuStudy.
func TestGPUStudyFixture(t *testing.T) {
	dir := t.TempDir()
	gpuStudy(t, dir)
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == layout.MarkdownFile && !golden.Update() {
			return nil // package results golden-tests its own rendering
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		golden.Check(t, filepath.Join("gpu-study", rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

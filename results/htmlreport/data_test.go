package htmlreport

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

func TestParetoFront(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name string
		pts  [][2]float64
		want []int
	}{
		{"empty", nil, nil},
		{"one", [][2]float64{{1, 1}}, []int{0}},
		// Batch sizes trade per-user speed for total throughput: all on
		// the front.
		{"trade-off", [][2]float64{{100, 50}, {400, 40}, {1600, 20}, {3200, 5}}, []int{0, 1, 2, 3}},
		{"dominated", [][2]float64{{100, 50}, {90, 40}, {400, 40}, {300, 45}, {400, 30}}, []int{0, 3, 2}},
		// Equal throughput: only the faster per user is on the front.
		{"tie on x", [][2]float64{{100, 10}, {100, 20}}, []int{1}},
		{"tie on y", [][2]float64{{100, 10}, {200, 10}}, []int{1}},
		{"duplicate", [][2]float64{{100, 10}, {100, 10}, {50, 5}}, []int{1, 0}},
		{"NaN left out", [][2]float64{{nan, 10}, {100, nan}, {10, 1}}, []int{2}},
	} {
		got := ParetoFront(c.pts)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: front %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRatioBounds(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	lo, hi := ratioBounds(results.Summary{Median: 10, CILow: f(9), CIHigh: f(11), N: 6}, results.Summary{Median: 12, CILow: f(11), CIHigh: f(13), N: 6})
	if lo == nil || hi == nil || *lo != 1 || math.Abs(*hi-13.0/9) > 1e-5 {
		t.Errorf("bounds %v %v, want 11/11 and 13/9", lo, hi)
	}
	if lo, hi := ratioBounds(results.Summary{Median: 10, N: 3}, results.Summary{Median: 12, CILow: f(11), CIHigh: f(13), N: 6}); lo != nil || hi != nil {
		t.Error("bounds from an unbounded interval")
	}
	if lo, _ := ratioBounds(results.Summary{Median: 0, CILow: f(0), CIHigh: f(1), N: 6}, results.Summary{Median: 1, CILow: f(1), CIHigh: f(1), N: 6}); lo != nil {
		t.Error("bounds dividing by zero")
	}
}

func TestCategory(t *testing.T) {
	for name, want := range map[string]string{
		"moe_gate_up_f16":                         "MoE expert GEMM",
		"moe_route_topk_f16":                      "MoE router",
		"moe_gather_f16":                          "MoE grouping",
		"moe_combine_f16":                         "MoE combine",
		"nvjet_sm90_hsh_64x32_64x16_2x1_v_bz_TNT": "GEMM",
		"attention_f16_d64_r8":                    "attention",
		"add_rmsnorm_f16":                         "norm",
		"rope_f16":                                "rope",
		"memcpy_f16":                              "memory",
		"argmax_f16":                              "other",
	} {
		if got := Category(name, profile.MoEStage); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// Without the engine's stages MoE kernels go by results' kinds.
	if got := Category("moe_gate_up_f16", nil); got != "GEMM" {
		t.Errorf("moe_gate_up_f16 without stages: %q, want GEMM", got)
	}
}

// TestKernelTimesIncomplete: a cell that lists only its top kernels gets
// the rest of its kernel time, from the top kernel's share, as unlisted.
func TestKernelTimesIncomplete(t *testing.T) {
	k := results.KernelCell{Iterations: 2, Kernels: []results.Kernel{
		{Name: "gemm_m_f16", TotalNs: 6000, TimePct: 60}, {Name: "attention_f16", TotalNs: 2000, TimePct: 20}}}
	kt := kernelTimes(k, nil)
	if kt.Unit != "µs/iter" || kt.Complete {
		t.Errorf("unit %q complete %v", kt.Unit, kt.Complete)
	}
	want := []Bar{{Label: "GEMM", Value: 3, Share: 0.6}, {Label: "attention", Value: 1, Share: 0.2}, {Label: unlistedCategory, Value: 1, Share: 0.2}}
	if !slices.Equal(kt.Categories, want) {
		t.Errorf("categories %+v, want %+v", kt.Categories, want)
	}
	k.Iterations, k.Complete = 0, true
	kt = kernelTimes(k, nil)
	if kt.Unit != "µs in the window" || len(kt.Categories) != 2 || kt.Categories[0].Value != 6 {
		t.Errorf("window totals: %+v", kt)
	}
}

func TestThrottleVerdict(t *testing.T) {
	share := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		tel  *results.Telemetry
		want string
	}{
		{nil, "no GPU telemetry: nothing judged"},
		{&results.Telemetry{Throttled: true, ThrottleThreshold: 0.75, MaxSMClockMHz: 1980, BelowThresholdShare: share(0.3), ClockSamples: 40,
			SMClockMHzMean: 1600, SMClockMHzMin: 990, PowerCappedS: 4.2, ThrottleReasons: []string{"sw_power_cap"}},
			"throttled: 30.0% of 40 timed samples ran below 75% of the maximum SM clock (1980 MHz; the rule flags more than 5%); SM clock mean 1600 MHz, min 990 MHz; power-capped 4.20 s; NVML reasons: sw_power_cap"},
		{&results.Telemetry{ThrottleThreshold: 0.75, MaxSMClockMHz: 1980, BelowThresholdShare: share(0), ClockSamples: 40, SMClockMHzMean: 1975, SMClockMHzMin: 1965},
			"not throttled: 0% of 40 timed samples"},
		{&results.Telemetry{ThrottleThreshold: 0.75}, "not judged: no timed sample had an SM clock to judge"},
		{&results.Telemetry{Throttled: true, ThrottleReasons: []string{"hw_slowdown"}}, "marked throttled by a file written before xrun judged throttling"},
		// Without the rule's figures, nothing was judged: never "not throttled".
		{&results.Telemetry{SMClockMHzMean: 1975}, "not judged by the clock rule"},
	} {
		if got := ThrottleVerdict(c.tel); !strings.HasPrefix(got, c.want) {
			t.Errorf("%+v: %q, want it to start %q", c.tel, got, c.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"experiments/gemm.yaml":        "experiments/gemm.yaml",
		"id=bs1_gemm-auto-36000ddd":    "id=bs1_gemm-auto-36000ddd",
		"matrix.batch_size=[8,16]":     "'matrix.batch_size=[8,16]'",
		"params.model=my model":        "'params.model=my model'",
		"description=it's":             `'description=it'\''s'`,
		"":                             "''",
		"params.dataset.input_mean=64": "params.dataset.input_mean=64",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestReproduceCommands(t *testing.T) {
	r := loadStudy(t, filepath.Join(resultsFixtures, "gemm"))
	cmds := ReproduceCommands(r)
	if len(cmds) != len(r.Cells) || cmds[0].Command != "xrun run SPEC --only id=bs1-auto-a83312e6" || cmds[0].Label != "batch_size=1 gemm_plugin=auto" {
		t.Errorf("without a recorded spec file: %+v", cmds[0])
	}
	r.SpecFile, r.SpecSets = "experiments/gemm.yaml", []string{"repeats=3", "matrix.batch_size=[1,16]"}
	if got := ReproduceCommands(r)[0].Command; got != "xrun run experiments/gemm.yaml --set repeats=3 --set 'matrix.batch_size=[1,16]' --only id=bs1-auto-a83312e6" {
		t.Errorf("with the spec file and its --set: %s", got)
	}
}

func TestAverageRuns(t *testing.T) {
	var pts [][2]float64
	for i := range 10 {
		pts = append(pts, [2]float64{float64(i), float64(10 * i)})
	}
	got := averageRuns(pts, 4)
	want := [][2]float64{{1, 10}, {4, 40}, {7, 70}, {9, 90}}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// TestCellFilesBad: a cell's files that are missing or malformed become
// notes naming the file and line, and the rest of the chart stays.
func TestCellFilesBad(t *testing.T) {
	r := loadStudy(t, gpuStudyDir)
	c := &r.Cells[0]
	for _, tc := range []struct {
		file, data, want string
	}{
		{layout.TelemetryFile, "", "telemetry.csv: no header"},
		{layout.TelemetryFile, "gpu,sm_clock_mhz\n0,1980\n", "telemetry.csv: no time_ms column"},
		{layout.TelemetryFile, "time_ms,gpu,sm_clock_mhz\n0,0,1980\nsoon,0,1980\n", "telemetry.csv:3: time_ms: \"soon\" is not a number"},
		{layout.TelemetryFile, "time_ms,gpu,sm_clock_mhz\n0,-1,1980\n", `telemetry.csv:2: gpu: "-1" is not a GPU index`},
		{layout.TelemetryFile, "time_ms,gpu,power_w\n0,0,NaN\n", `telemetry.csv:2: power_w: "NaN" is not a number`},
		{layout.CellFile, "{", "cell.json: unexpected end of JSON input: the timed repeats are not shaded"},
		{layout.ExpertLoadFile, "a,b\n", "expert_load.csv:1: expected the header iteration,warmup,layer,max_over_mean"},
		{layout.ExpertLoadFile, "iteration,warmup,layer,max_over_mean\n0,false,x,1.5\n", "expert_load.csv:2: layer and max_over_mean must be numbers"},
		{layout.IterationsFile, "pass,profiled\n", "iterations.csv: no start_ns column: the profile window is not shaded"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := t.TempDir()
			cdir := layout.CellDir(dir, c.ID)
			if err := os.MkdirAll(cdir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{layout.TelemetryFile, layout.CellFile, layout.ExpertLoadFile, layout.IterationsFile} {
				b, err := os.ReadFile(filepath.Join(layout.CellDir(gpuStudyDir, c.ID), f))
				if err != nil {
					t.Fatal(err)
				}
				if f == layout.IterationsFile {
					// The profile window is read only for a profiled cell.
					b = append(b, []byte("6,true,1,1,128,15,1000000000,900000000,false,true\n")...)
				}
				os.WriteFile(filepath.Join(cdir, f), b, 0o644)
			}
			if tc.file == layout.CellFile || tc.file == layout.IterationsFile {
				os.WriteFile(filepath.Join(cdir, layout.CellFile), []byte(`{"passes":[{"repeat":1,"started":"2026-03-01T02:00:02Z","finished":"2026-03-01T02:00:07Z"},{"profiled":true,"started":"2026-03-01T02:00:08Z","finished":"2026-03-01T02:00:09Z"}]}`), 0o644)
			}
			os.WriteFile(filepath.Join(cdir, tc.file), []byte(tc.data), 0o644)
			var notes []string
			if tc.file == layout.ExpertLoadFile {
				notes = CellExperts(dir, c, "x").Notes
			} else {
				notes = CellTelemetry(dir, c, "x").Notes
			}
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "cells/"+c.ID+"/"+tc.want) }) {
				t.Errorf("notes %q, want one saying %q", notes, tc.want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		ch := CellTelemetry(t.TempDir(), c, "x")
		if len(ch.GPUs) != 0 || len(ch.Notes) != 1 || !strings.HasSuffix(ch.Notes[0], "telemetry.csv: no such file or directory") {
			t.Errorf("notes %q", ch.Notes)
		}
	})
}

// FuzzReadTelemetry: no telemetry.csv makes the reader panic, and what it
// reads is finite.
func FuzzReadTelemetry(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(gpuStudyDir, "cells", "bs64_learned-c0de0002", layout.TelemetryFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("time_ms,gpu\n"))
	f.Add([]byte("time_ms,gpu,temp_c\n1,0,\n2,1,40\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "t.csv"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		gpus, _, err := readTelemetry(dir, "t.csv")
		if err != nil {
			return
		}
		for _, g := range gpus {
			for _, s := range [][][2]float64{g.SMClockMHz, g.PowerW, g.TempC} {
				for _, p := range s {
					if math.IsNaN(p[0]) || math.IsInf(p[0], 0) || math.IsNaN(p[1]) || math.IsInf(p[1], 0) {
						t.Fatalf("non-finite sample %v", p)
					}
				}
			}
		}
	})
}

// FuzzReadLayerLoads: no expert_load.csv makes the reader panic.
func FuzzReadLayerLoads(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(gpuStudyDir, "cells", "bs64_learned-c0de0002", layout.ExpertLoadFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("iteration,warmup,layer,max_over_mean\n0,false,0,1e308\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "e.csv"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		layers, err := readLayerLoads(dir, "e.csv")
		if err != nil {
			return
		}
		for _, l := range layers {
			if l.Layer < 0 || math.IsNaN(l.Mean) || math.IsInf(l.Mean, 0) {
				t.Fatalf("layer %+v", l)
			}
		}
	})
}

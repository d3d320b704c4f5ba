package results

import (
	"bytes"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// TestMarkdownProfiles checks the profile sections of results.md: a
// kernel table and the diagnosis per profiled cell, in table order, and
// nothing for a cell without a profile.
func TestMarkdownProfiles(t *testing.T) {
	s := gemmStudy()
	var kept []synthCell
	for _, c := range s.cells {
		if bs := c.params["batch_size"]; bs == 16 || bs == 64 {
			c.params["profile_window"] = "100-149"
			kept = append(kept, c)
		}
	}
	s.cells = kept
	s.axes[0].Values = []any{16, 64}
	r := s.build()
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Params["batch_size"] != 64 {
			continue
		}
		gemm := "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT"
		if c.Params["gemm_plugin"] == "disable" {
			gemm = "gemm_f16_tile_128x64 | own"
		}
		c.Profile = &Profile{Window: "100-149", Iterations: 50,
			Kernels: []Kernel{
				{Name: gemm, TimePct: 71.23456, TotalNs: 1234567, Instances: 7700, AvgNs: 160.333, MedNs: 158.5, MinNs: 120, MaxNs: 2400, StdDevNs: 33.0001},
				{Name: "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false, float, __half, __half, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*)", TimePct: 0.5, TotalNs: 5000, Instances: 50, AvgNs: 100, MedNs: 100, MinNs: 90, MaxNs: 110, StdDevNs: 5},
				{Name: "attention_decode<__half, 64>", TimePct: 28.76544, TotalNs: 498765, Instances: 1100, AvgNs: 453.423, MedNs: 450, MinNs: 400, MaxNs: 900, StdDevNs: 12.5},
			},
			Diagnosis: []string{"memory-bandwidth bound: achieved 1.23 TB/s = 41.0% of the 3.00 TB/s ceiling", "note: 3 CUPTI records dropped"},
			Stats:     map[string]float64{"busy_fraction": 0.912345678, "kernels_per_iteration": 176},
		}
		if c.Params["gemm_plugin"] == "disable" {
			// The own engine's profile has the exclusive times (the
			// attention waiting under PDL), its table the column.
			for i, x := range []int64{1234567, 5000, 301234} {
				c.Profile.Kernels[i].ExclusiveNs = x
			}
		}
	}
	var b bytes.Buffer
	if err := Render(&b, "markdown", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "profiles.markdown.golden", b.Bytes())
	// The stats are rounded like every other measured number.
	data, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"busy_fraction": 0.912346`)) {
		t.Errorf("profile stats not rounded to 6 significant digits:\n%s", data)
	}
	back, err := Parse(data, "results.json")
	if err != nil {
		t.Fatal(err)
	}
	profiled := 0
	for _, c := range back.Cells {
		if c.Profile != nil {
			profiled++
			if c.Profile.Iterations != 50 || c.Profile.Stats["kernels_per_iteration"] != 176 {
				t.Errorf("cell %s: profile did not round-trip: %+v", c.ID, c.Profile)
			}
		}
	}
	if profiled != 2 {
		t.Errorf("%d profiled cells read back, want 2", profiled)
	}
}

// TestPassLine: the profiled pass's throughput is set beside the timed
// median, so the cost of profiling reads off the report; no line without
// the pass's metrics (files written before they were kept).
func TestPassLine(t *testing.T) {
	c := &Cell{ID: "c", Summary: map[string]Summary{"system_output_throughput_tok_s": {Median: 25000}}}
	got := passLine(c, &Profile{PassMetrics: Metrics{"system_output_throughput_tok_s": 24500}})
	want := "profiled pass: 24500 output tok/s, 0.980x the timed repeats' median of 25000 (what profiling cost; the repeats run without the profiler)"
	if got != want {
		t.Errorf("passLine:\n got %q\nwant %q", got, want)
	}
	if got := passLine(c, &Profile{}); got != "" {
		t.Errorf("passLine without pass metrics = %q, want none", got)
	}
	c.Summary = nil
	if got := passLine(c, &Profile{PassMetrics: Metrics{"system_output_throughput_tok_s": 24500}}); got != "profiled pass: 24500 output tok/s" {
		t.Errorf("passLine without a summary = %q", got)
	}
}

// A window that profiled warm-up iterations says so first, with where the
// timed requests start; one that did not says nothing.
func TestWarmupLine(t *testing.T) {
	got := warmupLine(&Profile{Iterations: 5, WarmupIterations: 5, FirstTimedIteration: 128})
	want := "NOT THE TIMED RUN: 5 of its 5 iterations ran the warm-up requests (the timed ones start at iteration 128), so this profile is largely the warm-up's; a profile_window from 128 on profiles the run"
	if got != want {
		t.Errorf("warmupLine:\n got %q\nwant %q", got, want)
	}
	// A pass that stopped inside the warm-up, its end unknown: no number.
	got = warmupLine(&Profile{Iterations: 3, WarmupIterations: 3})
	want2 := "NOT THE TIMED RUN: 3 of its 3 iterations ran the warm-up requests, and the pass stopped after its window still in the warm-up, so this profile is the warm-up's; a profile_window after the warm-up's last iteration (iterations.csv's warmup column) profiles the run"
	if got != want2 {
		t.Errorf("warmupLine, the warm-up's end unknown:\n got %q\nwant %q", got, want2)
	}
	if got := warmupLine(&Profile{Iterations: 5}); got != "" {
		t.Errorf("warmupLine of a window in the timed run = %q, want none", got)
	}
	secs := profileSections(&Results{Cells: []Cell{{ID: "c", Profile: &Profile{Window: "100-104", Iterations: 5, WarmupIterations: 5,
		FirstTimedIteration: 128, Diagnosis: []string{"d"}}}}}, nil)
	if len(secs) != 1 || len(secs[0].Diagnosis) != 2 || secs[0].Diagnosis[0] != want {
		t.Errorf("profile sections %+v: want the warm-up line first, then the diagnosis", secs)
	}
}

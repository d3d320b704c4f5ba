package results

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// h200Environment is testEnvironment on an H200 host.
func h200Environment() Environment {
	e := testEnvironment()
	e.GPUs[0].Name, e.GPUs[0].MemoryBytes = "NVIDIA H200", 141<<30
	return e
}

// rooflineStudy is a GPU study whose cells carry the rooflines the
// assembler (engine/profile.AttachRooflines) gives them: TinyLlama at
// batch 256 near its measured 88.9k output tok/s against a roofline of
// 186k, Mixtral at batch 64 near 1,402 against 2,676 (the floors
// engine/profile computes for those runs on an H200), and one cell
// without a roofline (it ran before rooflines existed, or on the CPU).
func rooflineStudy() *Results {
	s := synthStudy{name: "roofline", description: "output throughput against the roofline on an H200",
		slugKeys: []string{"model", "batch_size"}, repeats: 3, noise: 0.005, seed: 9, env: h200Environment()}
	rf := map[string]*Roofline{}
	for _, c := range []struct {
		model string
		bs    int
		tokS  float64 // measured output tok/s
		roof  *Roofline
	}{
		{"tinyllama-1.1b", 256, 88929, &Roofline{FloorS: 2.06419, OutputTokS: 186029, MemoryBoundS: 1.08634, Iterations: 1538,
			Bytes: 4.67127e12, FLOPs: 1.57046e15, Basis: "iterations.csv (first repeat, warm-up left out)"}},
		{"mixtral-8x7b", 64, 1402, &Roofline{FloorS: 143.498, OutputTokS: 2676.0, MemoryBoundS: 131.207, Iterations: 6016,
			Bytes: 5.64188e14, FLOPs: 1.94552e16, Basis: "iterations.csv (first repeat, warm-up left out); experts reached from expert_load.csv"}},
		{"llama-3.2-1b", 64, 25420, nil},
	} {
		sc := synthCell{params: Params{"model": c.model, "batch_size": c.bs, "dtype": "float16"}, reqPerSec: c.tokS / 128, moe: c.model == "mixtral-8x7b"}
		s.cells = append(s.cells, sc)
		if c.roof != nil {
			c.roof.Device, c.roof.PeakBytesPerS, c.roof.PeakFLOPS = "NVIDIA H200", 4.3e12, 790e12
			c.roof.PeakSource = "measured on an H200: device-to-device copy and bf16 GEMM"
			c.roof.Fraction = 0.99 // the writer's to compute: ignored
			rf[c.model] = c.roof
		}
	}
	r := s.build()
	for i := range r.Cells {
		r.Cells[i].Roofline = rf[r.Cells[i].Params["model"].(string)]
	}
	return r
}

// TestRooflineFraction: the writer sets Fraction to the median measured
// output throughput over the roofline's, whatever the caller left there,
// and the summary table shows it with the roofline's throughput.
func TestRooflineFraction(t *testing.T) {
	n, err := normalized(rooflineStudy())
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var entries []string
	for _, c := range n.Cells {
		if c.Roofline == nil {
			if !strings.HasPrefix(c.ID, "llama-3.2-1b") {
				t.Errorf("%s lost its roofline", c.ID)
			}
			continue
		}
		seen++
		med := c.Summary["system_output_throughput_tok_s"].Median
		if want := med / c.Roofline.OutputTokS; math.Abs(c.Roofline.Fraction-want) > 1e-5*want {
			t.Errorf("%s: fraction %g; want %g / %g = %g", c.ID, c.Roofline.Fraction, med, c.Roofline.OutputTokS, want)
		}
		entries = append(entries, fmt.Sprintf("%.1f%% of %.0f", 100*med/c.Roofline.OutputTokS, c.Roofline.OutputTokS))
	}
	if seen != 2 {
		t.Fatalf("%d cells with a roofline; want 2", seen)
	}
	// About 1,402 of 2,676 output tok/s (52.4 %) and 88,929 of 186,029
	// (47.8 %): the synthetic repeats wander a little around both.
	if want := []string{"52.3% of 2676", "48.0% of 186029"}; !slices.Equal(entries, want) {
		t.Errorf("entries %q; want %q", entries, want)
	}
	var buf bytes.Buffer
	if err := Render(&buf, "text", rooflineStudy(), RenderOptions{Metrics: []string{"system_output_throughput_tok_s"}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"% roofline", entries[0], entries[1],
		"max(bytes / 4.30 TB/s, FLOPs / 790 TFLOP/s)", "NVIDIA H200, measured on an H200"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// Without rooflines, no column.
	buf.Reset()
	if err := Render(&buf, "text", loadFixture(t, "moe"), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "roofline") {
		t.Errorf("a study without rooflines shows the column:\n%s", buf.String())
	}
}

func TestRooflineRefusesNonFinite(t *testing.T) {
	r := rooflineStudy()
	r.Cells[0].Roofline.FloorS = math.Inf(1)
	if _, err := Marshal(r); err == nil || !strings.Contains(err.Error(), "roofline.floor_s: +Inf cannot be stored") {
		t.Errorf("err %v; want roofline.floor_s refused", err)
	}
}

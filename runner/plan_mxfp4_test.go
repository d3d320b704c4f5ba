package runner

import (
	"context"
	"strings"
	"testing"
)

// moe_weights (issue 21): an axis of MoE models on the built-in engine, in
// a cell's id only where given, handed to the engine as written, collapsed
// on dense models and external engines, refused where a run would fail,
// and a warning on the CUDA backend while its kernels are unverified.
// (The refusals' messages are in testdata/bad, 280 onwards.)
func TestPlanMoEWeights(t *testing.T) {
	cases := []struct {
		name, spec string
		cells      int    // cells planned
		collapsed  string // a substring of the one collapse reason; "" for none
		err        string // a substring of the error; "" when the spec plans
		warning    string // a substring of the one warning; "" for none
	}{
		{"cpu axis", "params: {model: tiny-moe, engine: cpu}\nmatrix: {moe_weights: [auto, bf16, mxfp4]}", 3, "", "", ""},
		{"dense collapses", "params: {model: tiny-llama, engine: cpu}\nmatrix: {moe_weights: [bf16, mxfp4]}", 1, "moe_weights has no effect on dense model tiny-llama", "", ""},
		{"trtllm collapses", "params: {model: mixtral-8x7b, engine: trtllm}\nmatrix: {moe_weights: [bf16, mxfp4]}", 1, "moe_weights has no effect on engine trtllm", "", ""},
		{"cuda warns", "params: {model: gpt-oss-20b, engine: cuda, dtype: bfloat16, moe_weights: mxfp4}", 1, "", "", "slower than bf16 experts"},
		{"cuda bf16 is quiet", "params: {model: gpt-oss-20b, engine: cuda, dtype: bfloat16, moe_weights: bf16}", 1, "", "", ""},
		{"fp8", "params: {model: tiny-moe, engine: cpu, dtype: fp8, moe_weights: mxfp4}", 0, "", "(W4A8) are not supported", ""},
		{"bad value", "params: {model: tiny-moe, engine: cpu, moe_weights: nvfp4}", 0, "", "auto, bf16 or mxfp4", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := planCells(t, c.spec, c.err, c.cells)
			if s == nil {
				return
			}
			col := s.Plan.Collapsed
			switch {
			case c.collapsed == "" && len(col) > 0:
				t.Errorf("collapsed %+v, want none", col)
			case c.collapsed != "" && (len(col) != 1 || !strings.Contains(col[0].Reason, c.collapsed)):
				t.Errorf("collapsed %+v, want one saying %q", col, c.collapsed)
			}
			checkWarning(t, s.Plan.Warnings, c.warning)
			for i := range s.Plan.Cells {
				cell := &s.Plan.Cells[i]
				if cfg := engineConfig(cell, "cpu"); cfg.MoEWeights != cell.Params.MoEWeights || cfg.MoEWeights == "" {
					t.Errorf("%s: engine config moe_weights %q, params %q", cell.ID, cfg.MoEWeights, cell.Params.MoEWeights)
				}
			}
		})
	}
	// In the id where given only: a spec without it keeps its ids.
	checkIDWhenGiven(t, "model: tiny-moe, engine: cpu", "moe_weights", "mxfp4", "moe-", []string{"bf16", "mxfp4"})
}

// TestMoEWeightsMemory: a cell of MXFP4 experts needs its routed experts'
// weights at 4.25 bits in the plan's memory, and the estimate reads them
// so; auto is bf16 on the GPU while the kernels are unverified.
func TestMoEWeightsMemory(t *testing.T) {
	s := mustParse(t, "params: {model: gpt-oss-20b, engine: cuda, dtype: bfloat16}\nmatrix: {moe_weights: [auto, bf16, mxfp4]}\n")
	if len(s.Plan.Cells) != 3 {
		t.Fatalf("%d cells", len(s.Plan.Cells))
	}
	const total = 80 << 30
	var mem [3]CellMemory
	for i := range s.Plan.Cells {
		c := &s.Plan.Cells[i]
		mem[i] = c.memory(total, kvPaging{})
		w, _ := cellWorkload(c)
		if w.formats.MXFP4Experts != (c.Params.MoEWeights == "mxfp4") {
			t.Errorf("%s: workload mxfp4 %v", c.ID, w.formats.MXFP4Experts)
		}
	}
	mc := s.Plan.Cells[0].Model
	routed := float64(mc.Layers*mc.Experts) * 3 * float64(mc.Hidden*mc.FFN)
	if mem[0].Weights != mem[1].Weights {
		t.Errorf("auto %.4g GiB, bf16 %.4g GiB: want equal on CUDA", gib(mem[0].Weights), gib(mem[1].Weights))
	}
	if d, want := mem[1].Weights-mem[2].Weights, routed*(2-4.25/8); d != want {
		t.Errorf("MXFP4 saves %.6g bytes, want %.6g", d, want)
	}
	if !(mem[2].Need < mem[1].Need) || mem[2].InFlight < mem[1].InFlight {
		t.Errorf("MXFP4 needs %.4g GiB (%d in flight), bf16 %.4g GiB (%d)", gib(mem[2].Need), mem[2].InFlight, gib(mem[1].Need), mem[1].InFlight)
	}
}

// TestWorkerRecordsMoEWeights: cell.json says how the engine kept the
// experts, moe_weights resolved (auto on the cpu engine: bf16 for a
// Mixtral-shaped zoo model), and nothing for a dense model.
func TestWorkerRecordsMoEWeights(t *testing.T) {
	s, dir := plannedStudyOf(t, `name: tiny
params:
  engine: cpu
  batch_size: 2
  dataset: {num_requests: 2, input_mean: 8, output_mean: 3}
matrix:
  include:
    - {model: tiny-moe, moe_weights: mxfp4}
    - {model: tiny-moe}
    - {model: tiny-llama}
repeats: 1
`)
	if n := len(s.spec.Plan.Cells); n != 3 {
		t.Fatalf("%d cells, want 3", n)
	}
	want := map[string]string{"mxfp4": "mxfp4", "auto": "bf16"}
	for _, c := range s.spec.Plan.Cells {
		if err := RunWorker(context.Background(), dir, c.ID, WorkerOptions{Getenv: func(string) string { return "" }}); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		rec, err := readCellRecord(dir, c.ID)
		if err != nil || rec == nil {
			t.Fatalf("%s: no record (%v)", c.ID, err)
		}
		w := want[c.Params.MoEWeights]
		if !c.Model.MoE() {
			w = ""
		}
		if rec.MoEWeights != w {
			t.Errorf("%s: cell.json moe_weights %q, want %q", c.ID, rec.MoEWeights, w)
		}
	}
}

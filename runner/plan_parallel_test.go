package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParallelCells: tp and ep on the built-in engine are axes; a cell
// uses max(tp, ep) GPUs unless gpus_per_cell says more, its engine gets
// both, ep on a dense model collapses (as on engine trtllm), and cells of
// specs without them keep the ids they had before they applied here.
func TestParallelCells(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-moe, engine: cpu}\nmatrix:\n  tp: [1, 2, 4]\n  ep: [1, 2]\n")
	type cell struct{ tp, ep, gpus int }
	var got []cell
	for _, c := range s.Plan.Cells {
		cfg := engineConfig(&c, "cpu")
		if cfg.TP != c.Params.TP || cfg.EP != c.Params.EP || cfg.NumGPUs != c.Params.GPUsPerCell {
			t.Errorf("cell %s: engine config tp %d ep %d gpus %d, params %+v", c.ID, cfg.TP, cfg.EP, cfg.NumGPUs, c.Params)
		}
		got = append(got, cell{c.Params.TP, c.Params.EP, c.Params.GPUsPerCell})
	}
	want := []cell{{1, 1, 1}, {1, 2, 2}, {2, 1, 2}, {2, 2, 2}, {4, 1, 4}, {4, 2, 4}}
	if !slices.Equal(got, want) {
		t.Errorf("cells (tp, ep, gpus) %v, want %v", got, want)
	}
	// Given, they set cells apart (and name them); not given, a cell's
	// encoding has neither, so its id is what it was before they applied.
	for _, c := range s.Plan.Cells {
		if flat := c.Flat(); flat["tp"] != c.Params.TP || flat["ep"] != c.Params.EP {
			t.Errorf("cell %s: flat %v", c.ID, flat)
		}
	}
	if id := s.Plan.Cells[3].ID; !strings.HasPrefix(id, "tp2_ep2-") {
		t.Errorf("tp 2, ep 2 cell id %q", id)
	}
	plain := mustParse(t, "params: {model: tiny-moe, engine: cpu}\n").Plan.Cells[0]
	if enc := string(appendCanonical(nil, &plain.Params, plain.na, "")); strings.Contains(enc, "tp=") || strings.Contains(enc, "ep=") {
		t.Errorf("encoding of a cell without tp and ep:\n%s", enc)
	}

	more := mustParse(t, "params: {model: tiny-llama, engine: cpu, tp: 2, gpus_per_cell: 8}\n").Plan.Cells[0]
	if more.Params.GPUsPerCell != 8 {
		t.Errorf("gpus_per_cell 8 given: %d", more.Params.GPUsPerCell)
	}

	dense := mustParse(t, "params: {model: tiny-llama, engine: cpu, tp: 2}\nmatrix:\n  ep: [1, 4]\n")
	if len(dense.Plan.Cells) != 1 || len(dense.Plan.Collapsed) != 1 || dense.Plan.Collapsed[0].Reason != "ep has no effect on dense model tiny-llama" {
		t.Fatalf("ep on a dense model: %d cells, collapsed %+v", len(dense.Plan.Cells), dense.Plan.Collapsed)
	}
	if c := dense.Plan.Cells[0]; c.Params.GPUsPerCell != 2 || engineConfig(&c, "cpu").EP != 1 {
		t.Errorf("dense tp 2 cell: gpus %d, engine ep %d", c.Params.GPUsPerCell, engineConfig(&c, "cpu").EP)
	}
}

// TestParallelOnCUDA: the CUDA backend splits cells over NCCL, so engine
// cuda plans tp and ep like engine cpu, and engine auto's split cells run
// on whichever backend auto resolves to.
func TestParallelOnCUDA(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-moe, engine: cuda}\nmatrix:\n  tp: [1, 2]\n  ep: [1, 2]\n")
	if len(s.Plan.Cells) != 4 {
		t.Fatalf("%d cells, want 4", len(s.Plan.Cells))
	}
	for _, c := range s.Plan.Cells {
		cfg := engineConfig(&c, "cuda")
		if cfg.TP != c.Params.TP || cfg.EP != c.Params.EP || cfg.NumGPUs != max(c.Params.TP, c.Params.EP) {
			t.Errorf("cell %s: engine config tp %d ep %d gpus %d", c.ID, cfg.TP, cfg.EP, cfg.NumGPUs)
		}
	}
	auto := mustParse(t, "params: {model: tiny-moe, engine: auto}\nmatrix:\n  ep: [1, 2]\n")
	for _, c := range auto.Plan.Cells {
		for _, backend := range []string{"cpu", "cuda"} {
			if err := c.CheckBackend(backend); err != nil {
				t.Errorf("cell %s on %s: %v", c.ID, backend, err)
			}
		}
	}
}

// TestParallelRefusals: what the model cannot split is a spec error at
// plan time, naming the line, on every engine of xrun's own (the
// messages of each are in testdata/bad, 93 to 98).
func TestParallelRefusals(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"params: {model: tiny-llama, engine: cpu, dtype: fp8}\nmatrix:\n  tp: [1, 2]\n", "t.yaml:3:11: matrix.tp[1]: dtype fp8 with tp 2, ep 1: FP8 GEMMs on a split model are not supported yet"},
		{"params: {model: tiny-deepseek, engine: auto, ep: 2}\n", "t.yaml:1:50: params.ep: tp 1, ep 2: model tiny-deepseek has the DeepSeek-V3 architecture"},
		{"params: {model: gpt-oss-20b, engine: cuda, tp: 2}\n", "t.yaml:1:48: params.tp: tp 2, ep 1: model gpt-oss-20b has GPT-OSS's attention sinks"},
	} {
		_, err := ParseSpec("t.yaml", []byte(c.spec), LoadOptions{})
		var se *SpecError
		if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q...", c.spec, err, c.want)
		}
	}
}

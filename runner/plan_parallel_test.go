package runner

import (
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

// TestParallelOnAutoRefusedOnCUDA: engine auto plans a split cell (it may
// run on the CPU) and refuses it where auto resolves to cuda.
func TestParallelOnAutoRefusedOnCUDA(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-moe, engine: auto}\nmatrix:\n  ep: [1, 2]\n")
	if err := s.Plan.Cells[0].CheckBackend("cuda"); err != nil {
		t.Errorf("unsplit cell on cuda: %v", err)
	}
	c := s.Plan.Cells[1]
	if err := c.CheckBackend("cpu"); err != nil {
		t.Errorf("split cell on cpu: %v", err)
	}
	err := c.CheckBackend("cuda")
	if err == nil || !strings.Contains(err.Error(), "t.yaml:3:11: matrix.ep[1]: engine auto, which runs on the cuda backend here: tp 1, ep 2: engine cuda runs a cell on one GPU until its NCCL collectives exist") {
		t.Errorf("split cell on cuda: %v", err)
	}
}

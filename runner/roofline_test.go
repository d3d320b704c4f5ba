package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestResumeKeepsPriorRoofline: a resumed study whose finished cells'
// iterations.csv are gone (bench/gpu-multi.sh carries only what --resume
// reads) keeps the roofline the previous results.json gave a cell whose
// record is the very measurement that file shows, and no other.
func TestResumeKeepsPriorRoofline(t *testing.T) {
	spec, err := ParseSpec("rf.yaml", []byte(`schema_version: 1
name: rf
params:
  model: tiny-llama
  engine: cpu
  dataset: {num_requests: 2, input_mean: 4, output_mean: 2}
matrix:
  batch_size: [1, 2, 4]
repeats: 1
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &study{spec: spec, dir: dir, log: zerolog.Nop(), progress: noProgress{}, o: Options{CacheDir: dir, Resume: true}}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	if len(s.cells) != 3 {
		t.Fatalf("%d cells, want 3", len(s.cells))
	}
	// Full precision in the records, as workers write them; results.json
	// rounds to 6 significant digits.
	full := []results.Metrics{{"system_output_throughput_tok_s": 1217.83749123}}
	other := []results.Metrics{{"system_output_throughput_tok_s": 1100}}
	rf := func(tokS float64) *results.Roofline {
		return &results.Roofline{FloorS: 1, OutputTokS: tokS, Iterations: 10, Bytes: 1e9, Device: "NVIDIA H200",
			PeakBytesPerS: 4.3e12, PeakFLOPS: 790e12, PeakSource: "test"}
	}
	old := &results.Results{Name: "rf", Cells: []results.Cell{
		{ID: s.cells[0].cell.ID, Status: results.StatusOK, Repeats: full, Roofline: rf(2074)},  // kept: same repeats
		{ID: s.cells[1].cell.ID, Status: results.StatusOK, Repeats: other, Roofline: rf(4130)}, // measured again since
		{ID: s.cells[2].cell.ID, Status: results.StatusOK, Repeats: full, Roofline: rf(8142)},  // no record now
	}}
	if err := results.WriteDir(dir, old); err != nil {
		t.Fatal(err)
	}
	for _, rc := range s.cells[:2] {
		rc.record = &cellRecord{Cell: results.Cell{Status: results.StatusOK, Repeats: full}}
	}
	s.initResults(context.Background())
	s.write()
	if s.lastErr != nil {
		t.Fatal(s.lastErr)
	}
	got, err := results.ReadFile(filepath.Join(dir, layout.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{2074, 0, 0}
	for i, c := range got.Cells {
		var have float64
		if c.Roofline != nil {
			have = c.Roofline.OutputTokS
		}
		if have != want[i] {
			t.Errorf("cell %s (%s): roofline output %v tok/s, want %v", c.ID, c.Status, have, want[i])
		}
	}
	if f := got.Cells[0].Roofline; f == nil || f.Fraction != 0.587194 {
		t.Errorf("kept roofline %+v: want its fraction recomputed from the kept repeats (1217.84 / 2074 = 0.587194)", f)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestRunSplitCells runs a study over tp and ep on the CPU backend: every
// split cell generates the unsplit cell's tokens for every request, and
// its per-GPU throughput divides by the GPUs it was split over.
func TestRunSplitCells(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "split.yaml")
	err := os.WriteFile(spec, []byte(`schema_version: 1
name: split
params:
  engine: cpu
  model: tiny-moe
  warmup: 0
  batch_size: 4
  dataset: {generator: token-norm-dist, num_requests: 6, input_mean: 12, input_stdev: 3, output_mean: 6, output_stdev: 2}
matrix:
  tp: [1, 2]
  ep: [1, 2]
repeats: 1
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", spec, "--out", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	_, cells := loadResults(t, dir)
	if len(cells) != 4 {
		t.Fatalf("%d cells, want 4", len(cells))
	}
	var want [][]int32
	for id, c := range cells {
		if c.Status != results.StatusOK {
			t.Fatalf("cell %s: %s %s", id, c.Status, c.Error)
		}
		tp, ep := c.Params["tp"], c.Params["ep"]
		gpus := 1.0
		for _, v := range []any{tp, ep} {
			if n, err := strconv.ParseFloat(fmt.Sprint(v), 64); err == nil {
				gpus = max(gpus, n)
			}
		}
		if g := fmt.Sprint(c.Params["gpus_per_cell"]); g != fmt.Sprint(gpus) {
			t.Errorf("cell %s (tp %v, ep %v): gpus_per_cell %s, want %v", id, tp, ep, g, gpus)
		}
		per, sys := c.Summary["output_throughput_per_gpu_tok_s"].Median, c.Summary["system_output_throughput_tok_s"].Median
		if d := per - sys/gpus; d > 1e-4*sys || d < -1e-4*sys {
			t.Errorf("cell %s (tp %v, ep %v): per-GPU throughput %v, want %v / %v GPUs", id, tp, ep, per, sys, gpus)
		}
		b, err := os.ReadFile(cellFile(dir, id, layout.RequestsFile))
		if err != nil {
			t.Fatal(err)
		}
		var got [][]int32
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec struct {
				OutputIDs []int32 `json:"output_ids"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			got = append(got, rec.OutputIDs)
		}
		if want == nil {
			want = got
		} else if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("cell %s (tp %v, ep %v): tokens %v, another cell's %v", id, tp, ep, got, want)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunSplitProfile: the diagnosis of a split cell's profiled pass
// (rank 0's kernels) is one GPU's share of the work, and says so; the
// unsplit cell's says nothing of it.
func TestRunSplitProfile(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "split.yaml")
	err := os.WriteFile(spec, []byte(`schema_version: 1
name: split-profile
params:
  engine: cpu
  model: tiny-llama
  warmup: 0
  batch_size: 4
  profile_window: "1-3"
  dataset: {generator: token-norm-dist, num_requests: 4, input_mean: 8, output_mean: 6}
matrix:
  tp: [1, 2]
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
	if len(cells) != 2 {
		t.Fatalf("%d cells, want 2", len(cells))
	}
	const note = "roofline per GPU: rank 0's slice of the model (tp 2, ep 1 over 2 GPUs) against one GPU's ceilings"
	splits := 0
	for id, c := range cells {
		if c.Profile == nil {
			t.Fatalf("cell %s: no profile", id)
		}
		split := strings.HasPrefix(id, "tp2")
		if split {
			splits++
		}
		if has := slices.ContainsFunc(c.Profile.Diagnosis, func(l string) bool { return strings.Contains(l, note) }); has != split {
			t.Errorf("cell %s: note %v, want %v; diagnosis:\n%s", id, has, split, strings.Join(c.Profile.Diagnosis, "\n"))
		}
	}
	if splits != 1 {
		t.Errorf("%d cells named tp2, want 1", splits)
	}
}

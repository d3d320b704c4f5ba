package runner

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// tinyStudy is a study small enough to run in-process in a unit test.
const tinyStudy = `schema_version: 1
name: tiny
params:
  engine: cpu
  model: tiny-llama
  warmup: 1
  dataset: {generator: token-norm-dist, num_requests: 3, input_mean: 6, input_stdev: 0, output_mean: 3, output_stdev: 0}
matrix:
  batch_size: [1, 2]
  profile_window: [none, "2-3"]
repeats: 2
`

// plannedStudy writes the worker plan of tinyStudy into a new results
// directory, as Run does before it starts workers.
func plannedStudy(t *testing.T) (*study, string) {
	t.Helper()
	return plannedStudyOf(t, tinyStudy)
}

func plannedStudyOf(t *testing.T, specText string) (*study, string) {
	t.Helper()
	spec, err := ParseSpec("tiny.yaml", []byte(specText), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &study{spec: spec, dir: dir, log: zerolog.Nop(), o: Options{CacheDir: filepath.Join(dir, "cache")}}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	if err := s.prepareDatasets(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, layout.StateDir), 0o755)
	if err := writeJSONAtomic(filepath.Join(dir, layout.StateDir, layout.PlanFile), s.plan); err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestRunWorker(t *testing.T) {
	s, dir := plannedStudy(t)
	env := func(string) string { return "" }
	for _, c := range s.spec.Plan.Cells {
		if err := RunWorker(context.Background(), dir, c.ID, WorkerOptions{Getenv: env}); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		rec, err := readCellRecord(dir, c.ID)
		if err != nil || rec == nil {
			t.Fatalf("%s: no record (%v)", c.ID, err)
		}
		profiled := c.Params.ProfileWindow != "none"
		if rec.Status != results.StatusOK || len(rec.Repeats) != 2 || rec.Fingerprint != s.cells[c.Index].wc.Fingerprint ||
			!strings.HasPrefix(rec.Backend, "cpu/") || (rec.Profile != nil) != profiled {
			t.Errorf("%s: record %+v", c.ID, rec)
		}
		if p := rec.Profile; p != nil && (p.DistinctKernels == 0 || p.DistinctKernels != len(p.Kernels)+len(p.OtherKernels) || len(p.Kernels) > 10) {
			t.Errorf("%s: %d distinct kernels, %d listed, %d others; want every kernel counted, the top 10 listed", c.ID, p.DistinctKernels, len(p.Kernels), len(p.OtherKernels))
		}
		// The profiled pass stopped after its window (iterations 2-3):
		// no metrics of its own, its window's iterations against the
		// same ones of the timed repeats instead.
		if p := rec.Profile; p != nil && (len(p.PassMetrics) != 0 || p.WindowIterationNs <= 0 || p.TimedWindowIterationNs <= 0) {
			t.Errorf("%s: profiled pass metrics %v, window %g ns an iteration (timed %g)", c.ID, p.PassMetrics, p.WindowIterationNs, p.TimedWindowIterationNs)
		}
		// Two timed passes of 3 requests, and what the profiled pass
		// finished by its window's end (fewer than 3).
		if n := countLines(t, filepath.Join(layout.CellDir(dir, c.ID), layout.RequestsFile)); n < 6 || n > 6 && !profiled || n >= 9 {
			t.Errorf("%s: %d request lines, want 6 and, profiled, fewer than 3 more", c.ID, n)
		}
		if n := countLines(t, filepath.Join(layout.CellDir(dir, c.ID), layout.IterationsFile)); n < 2 {
			t.Errorf("%s: %d lines in %s", c.ID, n, layout.IterationsFile)
		}
		for _, a := range rec.Artifacts {
			if _, err := os.Stat(filepath.Join(dir, a)); err != nil {
				t.Errorf("%s: artifact %v", c.ID, err)
			}
		}
	}
}

func TestRunWorkerExpertLoad(t *testing.T) {
	const moeStudy = `schema_version: 1
name: tiny-moe
params:
  engine: cpu
  model: tiny-moe
  warmup: 0
  dataset: {generator: token-norm-dist, num_requests: 4, input_mean: 8, input_stdev: 0, output_mean: 4, output_stdev: 0}
matrix:
  routing_mode: [learned, perfect]
repeats: 1
`
	s, dir := plannedStudyOf(t, moeStudy)
	model := s.spec.Plan.Cells[0].Model
	for _, c := range s.spec.Plan.Cells {
		if err := RunWorker(context.Background(), dir, c.ID, WorkerOptions{Getenv: func(string) string { return "" }}); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		rec, err := readCellRecord(dir, c.ID)
		if err != nil || rec.ExpertLoad == nil || len(rec.ExpertLoad.Histogram) != model.Experts {
			t.Fatalf("%s: expert load %+v (%v)", c.ID, rec.ExpertLoad, err)
		}
		if !slices.Contains(rec.Artifacts, layout.CellArtifact(c.ID, layout.ExpertLoadFile)) {
			t.Errorf("%s: %s not among the artifacts %v", c.ID, layout.ExpertLoadFile, rec.Artifacts)
		}
		b, err := os.ReadFile(filepath.Join(layout.CellDir(dir, c.ID), layout.ExpertLoadFile))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if !strings.HasPrefix(lines[0], "iteration,warmup,layer,max_over_mean,expert_0,") || len(lines) < 1+model.Layers {
			t.Fatalf("%s: expert_load.csv:\n%s", c.ID, b)
		}
		perfect := c.Params.RoutingMode == "perfect"
		balanced := 0
		for _, line := range lines[1:] {
			f := strings.Split(line, ",")
			if len(f) != 4+model.Experts {
				t.Fatalf("%s: row %q has %d fields", c.ID, line, len(f))
			}
			tokens := 0
			for _, v := range f[4:] {
				n, _ := strconv.Atoi(v)
				tokens += n
			}
			// Perfect routing spreads tokens*k evenly whenever it divides.
			if perfect && tokens%model.Experts == 0 {
				if f[3] != "1" {
					t.Errorf("%s: perfect routing row %q: max/mean %s, want 1", c.ID, line, f[3])
				}
				balanced++
			}
		}
		if perfect && balanced == 0 {
			t.Errorf("%s: no iteration had tokens*k divisible by the experts; the check proved nothing", c.ID)
		}
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

func TestRunWorkerRecordsFailures(t *testing.T) {
	s, dir := plannedStudy(t)
	id := s.spec.Plan.Cells[0].ID
	env := func(k string) string {
		if k == FaultEnv {
			return "nomatch:crash, " + id[:4] + ":error"
		}
		return ""
	}
	if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: env}); err != nil {
		t.Fatal(err)
	}
	rec, _ := readCellRecord(dir, id)
	if rec == nil || rec.Status != results.StatusFailed || !strings.Contains(rec.Error, "injected error") {
		t.Errorf("record %+v, want failed with the injected error", rec)
	}

	// Interrupted: nothing is recorded, so --resume runs the cell again.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := RunWorker(ctx, dir, id, WorkerOptions{Getenv: func(string) string { return "" }})
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("cancelled worker: %v, want ErrInterrupted", err)
	}
	if rec, _ := readCellRecord(dir, id); rec != nil {
		t.Errorf("an interrupted worker left a record: %+v", rec)
	}

	if err := RunWorker(context.Background(), dir, "no-such-cell", WorkerOptions{}); err == nil || !strings.Contains(err.Error(), "no cell") {
		t.Errorf("unknown cell: %v", err)
	}
	os.WriteFile(filepath.Join(dir, layout.StateDir, layout.PlanFile), []byte(`{"version": 99}`), 0o644)
	if err := RunWorker(context.Background(), dir, id, WorkerOptions{}); err == nil || !strings.Contains(err.Error(), "plan version 99") {
		t.Errorf("plan of another version: %v", err)
	}
}

func TestFaultFor(t *testing.T) {
	for _, c := range []struct{ value, id, want string }{
		{"", "bs1-x", ""},
		{"bs1:crash", "bs1-x", "crash"},
		{"bs1:crash", "bs16-x", "crash"},
		{"bs2:crash", "bs1-x", ""},
		{"bs2:hang, bs1:error", "bs1-x", "error"},
		{"malformed", "bs1-x", ""},
		{"bs1:slow@r2", "bs1-x", "slow@r2"},
	} {
		if got := faultFor(c.value, c.id); got != c.want {
			t.Errorf("faultFor(%q, %q) = %q, want %q", c.value, c.id, got, c.want)
		}
	}
	for _, c := range []struct{ fault, point, want string }{
		{"", "", ""},
		{"crash", "", "crash"},
		{"crash", "r1", ""},
		{"slow@r2", "", ""},
		{"slow@r2", "r2", "slow"},
		{"kill@write-r1", "write-r1", "kill"},
	} {
		if got := faultAt(c.fault, c.point); got != c.want {
			t.Errorf("faultAt(%q, %q) = %q, want %q", c.fault, c.point, got, c.want)
		}
	}
	if err := injectFault(context.Background(), "explode"); err == nil || !strings.Contains(err.Error(), "unknown fault") {
		t.Errorf("unknown fault: %v", err)
	}
}

// TestTopKernels: results.json keeps the top kernels in full and the
// others by name, time and launches, with their count.
func TestTopKernels(t *testing.T) {
	var ks []results.Kernel
	for i := range 5 {
		ks = append(ks, results.Kernel{Name: "k" + strconv.Itoa(i), TotalNs: int64(500 - i), Instances: 2, AvgNs: 1})
	}
	p := topKernels(&results.Profile{Kernels: slices.Clone(ks)}, 3)
	if len(p.Kernels) != 3 || p.DistinctKernels != 5 || !slices.Equal(p.OtherKernels, []results.KernelTime{{Name: "k3", TotalNs: 497, Instances: 2}, {Name: "k4", TotalNs: 496, Instances: 2}}) {
		t.Errorf("top 3 of 5: %+v", p)
	}
	p = topKernels(&results.Profile{Kernels: slices.Clone(ks[:2])}, 3)
	if len(p.Kernels) != 2 || p.DistinctKernels != 2 || p.OtherKernels != nil {
		t.Errorf("top 3 of 2: %+v", p)
	}
}

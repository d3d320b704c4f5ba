package runner

import (
	"context"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// profiledWarmup finds the profiled warm-up iterations and where the timed
// requests start, also when the pass stopped after a window in the
// warm-up (no timed iteration recorded).
func TestProfiledWarmup(t *testing.T) {
	its := func(warm, timed int, window ...int) []engine.IterationRecord {
		var out []engine.IterationRecord
		for i := range warm + timed {
			out = append(out, engine.IterationRecord{Index: i, Warmup: i < warm})
		}
		for _, i := range window {
			out[i].Profiled = true
		}
		return out
	}
	for _, c := range []struct {
		name             string
		its              []engine.IterationRecord
		timedFirst       int // where the timed repeats' requests began
		warm, firstTimed int
	}{
		{"in the warm-up", its(128, 10, 100, 101, 102), 128, 3, 128},
		{"across its end", its(128, 10, 127, 128, 129), 128, 1, 128},
		{"in the timed run", its(128, 10, 130, 131), 128, 0, 0},
		// The warm-up went on past the window: the repeats say how far,
		// not the pass's last iteration.
		{"stopped in the warm-up", its(105, 0, 100, 101, 102, 103, 104), 4097, 5, 4097},
		{"stopped in the warm-up, no repeat's record", its(105, 0, 100, 101, 102, 103, 104), 0, 5, 0},
		{"stopped in the warm-up, a record not past it", its(105, 0, 100, 101, 102, 103, 104), 60, 5, 0},
		{"no warm-up", its(0, 10, 2, 3), 0, 0, 0},
	} {
		if w, f := profiledWarmup(c.its, c.timedFirst); w != c.warm || f != c.firstTimed {
			t.Errorf("%s: %d warm-up iterations profiled, timed from %d; want %d, %d", c.name, w, f, c.warm, c.firstTimed)
		}
	}
}

// A repeat records where its timed requests began: after a warm-up only.
func TestFirstTimedIteration(t *testing.T) {
	its := func(warm, timed int) []engine.IterationRecord {
		var out []engine.IterationRecord
		for i := range warm + timed {
			out = append(out, engine.IterationRecord{Index: i, Warmup: i < warm})
		}
		return out
	}
	for _, c := range []struct {
		name string
		its  []engine.IterationRecord
		want int
	}{
		{"a warm-up, then the run", its(4097, 4100), 4097},
		{"no warm-up", its(0, 10), 0},
		{"stopped in the warm-up", its(12, 0), 0},
		{"no iteration", nil, 0},
	} {
		if got := firstTimedIteration(c.its); got != c.want {
			t.Errorf("%s: first timed iteration %d, want %d", c.name, got, c.want)
		}
	}
}

// A window inside a long warm-up: the profiled pass stops there, and the
// record takes the timed requests' first iteration from the repeats, not
// from the pass's last warm-up iteration.
func TestRunWorkerWindowInWarmup(t *testing.T) {
	const spec = `schema_version: 1
name: tiny-warm
params:
  engine: cpu
  model: tiny-llama
  warmup: 1
  batch_size: 1
  profile_window: "1-2"
  dataset: {generator: token-norm-dist, num_requests: 2, input_mean: 6, input_stdev: 0, output_mean: 8, output_stdev: 0}
repeats: 1
`
	s, dir := plannedStudyOf(t, spec)
	c := s.spec.Plan.Cells[0]
	if err := RunWorker(context.Background(), dir, c.ID, WorkerOptions{Getenv: func(string) string { return "" }}); err != nil {
		t.Fatal(err)
	}
	rec, err := readCellRecord(dir, c.ID)
	if err != nil || rec == nil || rec.Profile == nil {
		t.Fatalf("record %+v (%v)", rec, err)
	}
	// The warm-up request's 8 output tokens take iterations 0 to 7 (its
	// prompt's iteration gives the first), so the timed ones start at 8.
	if p := rec.Profile; p.WarmupIterations != 2 || p.FirstTimedIteration != 8 {
		t.Errorf("profile: %d warm-up iterations, timed from %d; want 2, 8", p.WarmupIterations, p.FirstTimedIteration)
	}
}

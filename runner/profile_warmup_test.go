package runner

import (
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
		warm, firstTimed int
	}{
		{"in the warm-up", its(128, 10, 100, 101, 102), 3, 128},
		{"across its end", its(128, 10, 127, 128, 129), 1, 128},
		{"in the timed run", its(128, 10, 130, 131), 0, 0},
		{"stopped in the warm-up", its(105, 0, 100, 101, 102, 103, 104), 5, 105},
		{"no warm-up", its(0, 10, 2, 3), 0, 0},
	} {
		if w, f := profiledWarmup(c.its); w != c.warm || f != c.firstTimed {
			t.Errorf("%s: %d warm-up iterations profiled, timed from %d; want %d, %d", c.name, w, f, c.warm, c.firstTimed)
		}
	}
}

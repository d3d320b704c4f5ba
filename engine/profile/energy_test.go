package profile

import (
	"math"
	"testing"
	"time"
)

// TestTimedEnergy: the energy over a window is each GPU's counter
// difference between the window's ends, interpolated between the
// readings around them, summed over the GPUs; a GPU without a counter, a
// window the readings do not cover or a counter that went back gives no
// energy rather than a partial one.
func TestTimedEnergy(t *testing.T) {
	ms := time.Millisecond
	// readings makes samples every 10 ms from 0 to 500 ms of two GPUs:
	// GPU 0 at 400 W, GPU 1 at 200 W (counters from 1000 and 5000 J).
	// edit may change a sample.
	readings := func(edit func(s *Sample)) []Sample {
		var out []Sample
		for at := time.Duration(0); at <= 500*ms; at += 10 * ms {
			for g, w := range []float64{400, 200} {
				s := missing(at, g)
				s.EnergyJ = float64(1000+4000*g) + w*at.Seconds()
				if edit != nil {
					edit(&s)
				}
				out = append(out, s)
			}
		}
		return out
	}
	// stepped makes one GPU's samples every 10 ms from 0 to 3 s, at 400
	// W, whose counter advances only every 100 ms.
	stepped := func() []Sample {
		var out []Sample
		for at := time.Duration(0); at <= 3*time.Second; at += 10 * ms {
			s := missing(at, 0)
			s.EnergyJ = 400 * (at - at%(100*ms)).Seconds()
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		samples  []Sample
		from, to time.Duration
		want     float64 // 0: none
	}{
		// 600 W for 0.2 s.
		{"on readings", readings(nil), 100 * ms, 300 * ms, 120},
		// 0.31 s, where the readings inside the window (130 to 430 ms)
		// alone would say 0.3 s.
		{"between readings", readings(nil), 125 * ms, 435 * ms, 600 * 0.31},
		// Ten of the counter's updates: the shortest window measured.
		{"ten updates", readings(nil), 110 * ms, 210 * ms, 60},
		// Fewer: the counter's steps would dominate.
		{"nine updates", readings(nil), 110 * ms, 200 * ms, 0},
		{"within one update", readings(nil), 112 * ms, 118 * ms, 0},
		// A counter that steps every 100 ms, read every 10 ms (as the
		// driver's is): 1 s is ten steps; 0.5 s would be off by up to
		// 40 %, and is refused.
		{"stepped counter", stepped(), 1000 * ms, 2000 * ms, 400},
		{"stepped counter, short window", stepped(), 1000 * ms, 1500 * ms, 0},
		{"whole span", readings(nil), 0, 500 * ms, 300},
		// GPU 1 has no energy counter: the cell's energy is unknown.
		{"a GPU without counter", readings(func(s *Sample) {
			if s.GPU == 1 {
				s.EnergyJ = math.NaN()
			}
		}), 100 * ms, 300 * ms, 0},
		{"no counter", readings(func(s *Sample) { s.EnergyJ = math.NaN() }), 100 * ms, 300 * ms, 0},
		// A missing reading is bridged by its neighbours.
		{"a reading missing", readings(func(s *Sample) {
			if s.T == 200*ms && s.GPU == 0 {
				s.EnergyJ = math.NaN()
			}
		}), 100 * ms, 300 * ms, 120},
		// The readings end before the window does.
		{"window past the readings", readings(nil), 400 * ms, 600 * ms, 0},
		{"window before the readings", readings(func(s *Sample) { s.T += time.Second }), 100 * ms, 300 * ms, 0},
		// The driver reloaded: the counter started again.
		{"counter reset", readings(func(s *Sample) {
			if s.T >= 250*ms {
				s.EnergyJ -= 1000
			}
		}), 100 * ms, 300 * ms, 0},
		// An idle counter that did not move: no energy, not 0 J.
		{"counter still", readings(func(s *Sample) { s.EnergyJ = 7 }), 100 * ms, 300 * ms, 0},
		{"empty window", readings(nil), 300 * ms, 300 * ms, 0},
		{"no samples", nil, 100 * ms, 300 * ms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TimedEnergy(tc.samples, tc.from, tc.to)
			if ok != (tc.want > 0) {
				t.Fatalf("TimedEnergy = %v, %v; want ok %v", got, ok, tc.want > 0)
			}
			if ok && math.Abs(got-tc.want) > 1e-9*tc.want {
				t.Errorf("TimedEnergy = %v J, want %v J", got, tc.want)
			}
		})
	}
}

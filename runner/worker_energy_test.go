package runner

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
)

// energyGPUs stands in for NVML: two GPUs drawing 300 W and 100 W, whose
// energy counters count from when they were opened; without a counter
// (counter false), as GPUs before Volta, the energy reads NaN.
type energyGPUs struct {
	opened  time.Time
	counter bool
}

func (g *energyGPUs) GPUs() []int { return []int{0, 1} }

func (g *energyGPUs) Read(dst []profile.Sample) error {
	for i, w := range []float64{300, 100} {
		dst[i].PowerW = w
		if g.counter {
			dst[i].EnergyJ = 5000 + w*time.Since(g.opened).Seconds()
		}
	}
	return nil
}

func (g *energyGPUs) Close() error { return nil }

// TestRepeatEnergy: a timed repeat's energy metrics come from the GPUs'
// energy counters over its timed requests only (not the warm-up before
// them or what follows), summed over the cell's GPUs; they are in the
// repeat's record and the cell's repeats, and absent without a counter
// or without request records to time them by.
func TestRepeatEnergy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counter  bool
		requests bool
		want     bool
	}{
		{"counter", true, true, true},
		{"no counter", false, true, false},
		{"no request records", true, false, false},
	} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			w := &cellWorker{dir: dir, cell: &workerCell{ID: "c", Fingerprint: "f"}, plan: &workerPlan{},
				log: zerolog.Nop(), rec: &cellRecord{}, now: time.Now, telOrigin: start}
			w.tel, w.telStart = profile.StartTelemetryFrom(&energyGPUs{opened: start, counter: tc.counter}, 0), start
			// The pass starts at 100 ms; its warm-up runs to 230 ms, its
			// requests from then to 730 ms; the repeat is cut at 800 ms.
			time.Sleep(100 * time.Millisecond)
			passStart := time.Now()
			time.Sleep(700 * time.Millisecond)
			res := &engine.Result{Metrics: map[string]float64{"total_output_tokens": 1000, "system_output_throughput_tok_s": 2000}}
			if tc.requests {
				res.Requests = []engine.RequestRecord{
					{Start: 130 * time.Millisecond, End: 500 * time.Millisecond},
					{Start: 140 * time.Millisecond, End: 630 * time.Millisecond},
				}
			}
			if err := w.recordRepeat(context.Background(), 1, res, passStart, passStart); err != nil {
				t.Fatal(err)
			}
			if len(res.Metrics) != 2 {
				t.Errorf("the engine's metrics changed: %v", res.Metrics)
			}
			// 400 W over the 0.5 s of timed requests: 200 J for 1000 tokens.
			want := results.Metrics{"total_output_tokens": 1000, "system_output_throughput_tok_s": 2000}
			if tc.want {
				want[results.EnergyPerTokenKey], want[results.TokSPerWattKey] = 0.2, 5
			}
			b, err := os.ReadFile(repeatPath(dir, "c", 1, repeatRecordName))
			if err != nil {
				t.Fatal(err)
			}
			var rec repeatRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			for _, got := range []results.Metrics{rec.Metrics, keptMetrics(dir, w.cell, 1)[0]} {
				if !sameMetrics(got, want) {
					t.Errorf("repeat metrics %v, want %v", got, want)
				}
			}
		})
	}
}

// sameMetrics compares metrics to a part in 1e9: the energy is
// interpolated between readings.
func sameMetrics(a, b results.Metrics) bool {
	return maps.EqualFunc(a, b, func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Abs(y) })
}

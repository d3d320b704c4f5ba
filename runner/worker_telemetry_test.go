package runner

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// passGPU stands in for NVML: one 1980 MHz GPU, idle at 345 MHz except
// from 200 to 700 ms after it was opened, when it runs at 1620 MHz (82 %
// of its maximum) under the power cap, as a loaded H100 does.
type passGPU struct{ opened time.Time }

func (g *passGPU) GPUs() []int { return []int{0} }

func (g *passGPU) Read(dst []profile.Sample) error {
	s := &dst[0]
	s.MaxSMClockMHz = 1980
	s.SMClockMHz, s.Throttle = 345, 1 // gpu_idle
	if t := time.Since(g.opened); t >= 200*time.Millisecond && t <= 700*time.Millisecond {
		s.SMClockMHz, s.Throttle = 1620, 4 // sw_power_cap
	}
	return nil
}

func (g *passGPU) Close() error { return nil }

// TestRepeatTelemetry: a repeat's telemetry summary covers its timed
// requests only — not the engine's creation, its warm-up or what follows
// — and judges them at the plan's throttle threshold; telemetry.csv keeps
// every sample.
func TestRepeatTelemetry(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		throttled bool
	}{
		{0, false},   // the default, 0.75: 1620 MHz is above 1485
		{0.9, true},  // 1782: every timed sample is below
		{0.8, false}, // 1584
		{0.82, true}, // 1623.6, just above 1620
	} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			w := &cellWorker{dir: dir, cell: &workerCell{ID: "c", Fingerprint: "f"}, plan: &workerPlan{ThrottleThreshold: tc.threshold},
				log: zerolog.Nop(), rec: &cellRecord{}, now: time.Now, telOrigin: start}
			w.tel, w.telStart = profile.StartTelemetryFrom(&passGPU{opened: start}, 0), start
			// The engine is created; the pass starts at 100 ms, its
			// warm-up runs to 200 ms, its requests from then to 700 ms.
			time.Sleep(100 * time.Millisecond)
			passStart := time.Now()
			time.Sleep(625 * time.Millisecond)
			res := &engine.Result{Requests: []engine.RequestRecord{
				{Start: 100 * time.Millisecond, End: 450 * time.Millisecond},
				{Start: 100 * time.Millisecond, End: 600 * time.Millisecond},
			}}
			if err := w.recordRepeat(context.Background(), 1, res, passStart, passStart); err != nil {
				t.Fatal(err)
			}
			if err := w.writeTelemetry(); err != nil {
				t.Fatal(err)
			}
			got := w.rec.Telemetry
			if got == nil {
				t.Fatal("no telemetry summary")
			}
			// Samples at 200, 250, ..., 700 ms: eleven, all at 1620 MHz.
			wantTh := tc.threshold
			if wantTh == 0 {
				wantTh = profile.DefaultThrottleThreshold
			}
			if got.Samples != 11 || got.SMClockMHzMean != 1620 || got.SMClockMHzMin != 1620 || got.MaxSMClockMHz != 1980 ||
				got.ClockSamples != 11 || got.ThrottleThreshold != wantTh || math.Abs(got.PowerCappedS-0.55) > 1e-9 {
				t.Errorf("threshold %v: summary %+v; want the 11 timed samples at 1620 of 1980 MHz, 0.55 s power-capped", tc.threshold, got)
			}
			share := 0.0
			if tc.throttled {
				share = 1
			}
			if got.Throttled != tc.throttled || got.BelowThresholdShare == nil || *got.BelowThresholdShare != share {
				t.Errorf("threshold %v: throttled %v, share below %v; want %v, %v", tc.threshold, got.Throttled, got.BelowThresholdShare, tc.throttled, share)
			}
			csv, err := os.ReadFile(filepath.Join(layout.CellDir(dir, "c"), layout.TelemetryFile))
			if err != nil {
				t.Fatal(err)
			}
			// 0 to 725 ms every 50 ms and the last at the cut: 16 rows.
			if rows := bytes.Count(csv, []byte("\n")) - 1; rows != 16 {
				t.Errorf("telemetry.csv has %d rows, want every sample's 16:\n%s", rows, csv)
			}
		})
	}
}

func TestTimedWindow(t *testing.T) {
	ms := time.Millisecond
	req := func(start, end time.Duration) engine.RequestRecord {
		return engine.RequestRecord{Start: start, End: end}
	}
	for _, tc := range []struct {
		name     string
		reqs     []engine.RequestRecord
		from, to time.Duration
	}{
		{"requests", []engine.RequestRecord{req(30*ms, 200*ms), req(30*ms, 500*ms), req(40*ms, 300*ms)}, 1030 * ms, 1500 * ms},
		{"none: the whole pass", nil, 1000 * ms, 2000 * ms},
		// An external engine's times past the pass are cut at its end.
		{"clamped", []engine.RequestRecord{req(900*ms, 5000*ms)}, 1900 * ms, 2000 * ms},
		{"all past the pass", []engine.RequestRecord{req(3000*ms, 5000*ms)}, 2000 * ms, 2000 * ms},
	} {
		from, to := timedWindow(&engine.Result{Requests: tc.reqs}, 1000*ms, 2000*ms)
		if from != tc.from || to != tc.to {
			t.Errorf("%s: window %v..%v, want %v..%v", tc.name, from, to, tc.from, tc.to)
		}
	}
}

func TestMergeTelemetry(t *testing.T) {
	a := &results.Telemetry{SMClockMHzMean: 1000, SMClockMHzMax: 1200, PowerWMean: 300, PowerWMax: 400, TempCMax: 60,
		EnergyJ: 10, MemUsedBytesMax: 5, Samples: 10}
	b := &results.Telemetry{SMClockMHzMean: 1600, SMClockMHzMax: 1700, PowerWMean: 600, PowerWMax: 700, TempCMax: 70,
		EnergyJ: 20, MemUsedBytesMax: 3, Samples: 30, Throttled: true, ThrottleReasons: []string{"sw_thermal", "hw_slowdown"}}
	// Records of builds before the throttle rule: throttled by the reasons.
	got := mergeTelemetry([]*results.Telemetry{a, nil, b, {}}, 0)
	want := &results.Telemetry{SMClockMHzMean: 1450, SMClockMHzMax: 1700, PowerWMean: 525, PowerWMax: 700, TempCMax: 70,
		EnergyJ: 30, MemUsedBytesMax: 5, Samples: 40, Throttled: true, ThrottleReasons: []string{"hw_slowdown", "sw_thermal"}}
	if !jsonEqual(got, want) {
		t.Errorf("merged %+v\nwant %+v", got, want)
	}
	if one := mergeTelemetry([]*results.Telemetry{nil, a}, 0); !jsonEqual(one, a) || one == a {
		t.Errorf("one segment: %+v, want a copy of %+v", one, a)
	}
	if none := mergeTelemetry([]*results.Telemetry{nil}, 0); none != nil {
		t.Errorf("no segment: %+v", none)
	}

	// Repeats judged by the rule pool their judged samples: 2 of 20 and
	// 10 of 20 below is 30 %.
	share := func(v float64) *float64 { return &v }
	judged := func(samples, judged int, below float64, min float64, th float64) *results.Telemetry {
		return &results.Telemetry{SMClockMHzMean: 1900, SMClockMHzMin: min, MaxSMClockMHz: 1980, Samples: samples, ClockSamples: judged,
			BelowThresholdShare: share(below), ThrottleThreshold: th, Throttled: profile.Throttled(below), PowerCappedS: 1,
			ThrottleReasons: []string{"sw_power_cap"}}
	}
	r1, r2 := judged(22, 20, 0.1, 1700, 0.75), judged(20, 20, 0.5, 990, 0.75)
	got = mergeTelemetry([]*results.Telemetry{r1, r2}, 0.75)
	if got.ClockSamples != 40 || got.BelowThresholdShare == nil || math.Abs(*got.BelowThresholdShare-0.3) > 1e-12 || !got.Throttled ||
		got.SMClockMHzMin != 990 || got.PowerCappedS != 2 || got.ThrottleThreshold != 0.75 || got.MaxSMClockMHz != 1980 {
		t.Errorf("pooled: %+v", got)
	}
	// 1 of 40 below: not throttled, although one repeat alone would be.
	got = mergeTelemetry([]*results.Telemetry{judged(20, 20, 0.05, 1700, 0.75), judged(20, 20, 0, 1900, 0.75)}, 0)
	if got.Throttled || math.Abs(*got.BelowThresholdShare-0.025) > 1e-12 {
		t.Errorf("1 of 40 below: %+v", got)
	}
	// A repeat judged at another threshold (a resumed cell run with
	// another --throttle-threshold) and one of an earlier build count for
	// the means but not for the rule.
	old := &results.Telemetry{SMClockMHzMean: 1980, Samples: 10, Throttled: true, ThrottleReasons: []string{"sw_power_cap"}}
	got = mergeTelemetry([]*results.Telemetry{judged(20, 20, 1, 1000, 0.9), old, judged(20, 20, 0, 1950, 0.75)}, 0)
	if got.ClockSamples != 20 || *got.BelowThresholdShare != 0 || got.Throttled || got.Samples != 50 || got.SMClockMHzMin != 1000 {
		t.Errorf("other thresholds: %+v", got)
	}
	// None judged at this threshold: no figures of the rule, and the
	// verdict of the records that have one by the reasons.
	got = mergeTelemetry([]*results.Telemetry{judged(20, 20, 1, 1000, 0.9), old}, 0.75)
	if got.ThrottleThreshold != 0 || got.BelowThresholdShare != nil || got.ClockSamples != 0 || !got.Throttled {
		t.Errorf("none judged at 0.75: %+v", got)
	}
}

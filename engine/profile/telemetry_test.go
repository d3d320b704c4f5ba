package profile

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xrun-dev/xrun/results/layout"
)

// fakeGPUs stands in for NVML: two GPUs whose readings change with every
// read; GPU 1 reports no temperature; the fourth read sees a power cap.
type fakeGPUs struct {
	reads  int
	closed bool
}

func (f *fakeGPUs) GPUs() []int { return []int{0, 1} }

func (f *fakeGPUs) Read(dst []Sample) error {
	k := float64(f.reads)
	for i := range dst {
		s := &dst[i]
		g := float64(s.GPU)
		s.SMClockMHz, s.MemClockMHz = 1980-10*k-g, 2619
		s.GPUUtilPct, s.MemUtilPct = 90+k, 40+g
		s.PowerW, s.EnergyJ = 500+25*k+g, 1e6+12.5*k*(1+g)
		s.MemUsedBytes = 70e9 + 1e9*k
		if s.GPU == 0 {
			s.TempC = 60 + k
		}
		s.MaxSMClockMHz = 1980
		s.Throttle = idleReason
		if f.reads == 3 {
			s.Throttle |= 4 // sw_power_cap
		}
	}
	f.reads++
	return nil
}

func (f *fakeGPUs) Close() error { f.closed = true; return nil }

func TestTelemetrySampler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeGPUs{}
		tel := StartTelemetryFrom(src, 0) // the default period, 50 ms
		time.Sleep(225 * time.Millisecond)
		samples := tel.Stop()
		if again := tel.Stop(); len(again) != len(samples) {
			t.Errorf("a second Stop returned %d samples, the first %d", len(again), len(samples))
		}
		// Reads at 0, 50, 100, 150, 200 ms and the last at Stop (225 ms).
		var times []time.Duration
		for _, s := range samples {
			if s.GPU == 0 {
				times = append(times, s.T)
			}
		}
		ms := time.Millisecond
		if want := []time.Duration{0, 50 * ms, 100 * ms, 150 * ms, 200 * ms, 225 * ms}; !slices.Equal(times, want) || len(samples) != 12 {
			t.Fatalf("sample times %v (%d samples); want %v for each of 2 GPUs", times, len(samples), want)
		}
		if !src.closed {
			t.Error("Stop did not close the source")
		}
		var b bytes.Buffer
		if err := WriteTelemetryCSV(&b, samples); err != nil {
			t.Fatal(err)
		}
		golden(t, "telemetry.csv", b.Bytes())

		sum := SummarizeTelemetry(samples, SummaryOptions{})
		near := func(name string, got, want float64) {
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		near("sm mean", sum.SMClockMHzMean, 1980-25-0.5)
		near("sm max", sum.SMClockMHzMax, 1980)
		near("power max", sum.PowerWMax, 500+125+1)
		near("temp max", sum.TempCMax, 65) // GPU 1 reports none
		near("energy", sum.EnergyJ, 12.5*5+12.5*5*2)
		near("gpu util", sum.GPUUtilPctMean, 92.5)
		if sum.Samples != 12 || sum.MemUsedBytesMax != 75e9 {
			t.Errorf("samples %d, memory max %d", sum.Samples, sum.MemUsedBytesMax)
		}
		// sw_power_cap is a fact, not a verdict; every sample is idle, so
		// the rule judges none.
		if sum.Throttled || !slices.Equal(sum.ThrottleReasons, []string{"sw_power_cap"}) || sum.ClockSamples != 0 || sum.BelowThresholdShare != nil {
			t.Errorf("throttled %v %v, judged %d; want sw_power_cap only (idle is not throttling), nothing judged", sum.Throttled, sum.ThrottleReasons, sum.ClockSamples)
		}
		near("sm min", sum.SMClockMHzMin, 1980-50-1)
		near("power capped", sum.PowerCappedS, 0.05) // one instant, both GPUs
		near("max sm", sum.MaxSMClockMHz, 1980)
		near("threshold", sum.ThrottleThreshold, DefaultThrottleThreshold)

		dir := t.TempDir()
		tel = StartTelemetryFrom(&fakeGPUs{}, 10*time.Millisecond)
		time.Sleep(35 * time.Millisecond)
		s, files, err := tel.Finish(dir)
		if err != nil || s == nil || s.Samples != 10 || !slices.Equal(files, []string{layout.TelemetryFile}) {
			t.Fatalf("Finish = %+v, %v, %v", s, files, err)
		}
		if _, err := os.Stat(filepath.Join(dir, layout.TelemetryFile)); err != nil {
			t.Error(err)
		}
	})
}

func TestTelemetryUnavailable(t *testing.T) {
	tel := StartTelemetry(0)
	if tel.Reason() == "" {
		tel.Stop()
		t.Skip("NVML is available here; the no-telemetry path is not exercised")
	}
	if _, err := OpenNVML(nil); !errors.Is(err, ErrNoTelemetry) {
		t.Errorf("OpenNVML error %v does not wrap ErrNoTelemetry", err)
	}
	dir := t.TempDir()
	s, files, err := tel.Finish(dir)
	if s != nil || files != nil || err != nil {
		t.Errorf("Finish without telemetry = %v, %v, %v; want nothing", s, files, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Finish without telemetry wrote %d files", len(entries))
	}
	t.Logf("no telemetry: %s", tel.Reason())
}

func TestThrottleNames(t *testing.T) {
	if got := ThrottleNames(1 | 4 | 64 | 1<<12); !slices.Equal(got, []string{"gpu_idle", "sw_power_cap", "hw_thermal_slowdown", "bit_12"}) {
		t.Errorf("ThrottleNames = %v", got)
	}
}

// loaded is n samples of one GPU 50 ms apart, at clock MHz of a 1980 MHz
// GPU, with throttle reasons mask.
func loaded(n int, clock float64, mask uint64) []Sample {
	var out []Sample
	for i := range n {
		s := missing(time.Duration(i)*50*time.Millisecond, 0)
		s.SMClockMHz, s.MaxSMClockMHz, s.Throttle = clock, 1980, mask
		out = append(out, s)
	}
	return out
}

// TestThrottleRule: a cell is throttled when more than 5 % of its judged
// samples ran below the threshold of the maximum SM clock, whatever NVML's
// reasons say.
func TestThrottleRule(t *testing.T) {
	const swPowerCap, hwSlowdown = 4, 8
	// cat puts parts one after the other, 50 ms apart.
	cat := func(parts ...[]Sample) []Sample {
		out := slices.Concat(parts...)
		for i := range out {
			out[i].T = time.Duration(i) * 50 * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		samples   []Sample
		threshold float64
		throttled bool
		share     float64 // -1: none judged
		mean, min float64
		cappedS   float64
	}{
		// An H100 under load: the power cap reported all the time, the
		// clock at its maximum or close to it.
		{name: "max clock, sw_power_cap", samples: cat(loaded(60, 1980, swPowerCap), loaded(40, 1620, swPowerCap)),
			share: 0, mean: 1836, min: 1620, cappedS: 5},
		{name: "30% at half clock", samples: cat(loaded(70, 1980, 0), loaded(30, 990, hwSlowdown)),
			throttled: true, share: 0.3, mean: 1683, min: 990, cappedS: 1.5},
		{name: "5% below is not flagged", samples: cat(loaded(95, 1980, 0), loaded(5, 990, 0)),
			share: 0.05, mean: 1930.5, min: 990},
		{name: "6% below is", samples: cat(loaded(94, 1980, 0), loaded(6, 990, 0)),
			throttled: true, share: 0.06, mean: 1920.6, min: 990},
		// 1620 MHz is 82 % of 1980: below a threshold of 0.9, not of 0.75.
		{name: "threshold 0.9", samples: cat(loaded(60, 1980, 0), loaded(40, 1620, swPowerCap)), threshold: 0.9,
			throttled: true, share: 0.4, mean: 1836, min: 1620, cappedS: 2},
		// Idle samples are not judged: a GPU waiting for work lowers its
		// clock without being throttled.
		{name: "idle samples not judged", samples: cat(loaded(10, 1980, 0), loaded(30, 345, idleReason)),
			share: 0, mean: (10*1980 + 30*345) / 40.0, min: 345},
		// Without the GPU's maximum there is no verdict.
		{name: "max clock unknown", samples: func() []Sample {
			s := loaded(10, 500, hwSlowdown)
			for i := range s {
				s[i].MaxSMClockMHz = math.NaN()
			}
			return s
		}(), share: -1, mean: 500, min: 500, cappedS: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SummarizeTelemetry(tc.samples, SummaryOptions{Threshold: tc.threshold})
			if got.Throttled != tc.throttled {
				t.Errorf("throttled = %v, want %v", got.Throttled, tc.throttled)
			}
			switch {
			case tc.share < 0 && got.BelowThresholdShare != nil:
				t.Errorf("share below = %v, want none (nothing to judge against)", *got.BelowThresholdShare)
			case tc.share >= 0 && (got.BelowThresholdShare == nil || math.Abs(*got.BelowThresholdShare-tc.share) > 1e-12):
				t.Errorf("share below = %v, want %v", got.BelowThresholdShare, tc.share)
			}
			if math.Abs(got.SMClockMHzMean-tc.mean) > 1e-9 || got.SMClockMHzMin != tc.min || math.Abs(got.PowerCappedS-tc.cappedS) > 1e-9 {
				t.Errorf("sm mean %v min %v, capped %v s; want %v, %v, %v", got.SMClockMHzMean, got.SMClockMHzMin, got.PowerCappedS, tc.mean, tc.min, tc.cappedS)
			}
			wantTh := cmp.Or(tc.threshold, DefaultThrottleThreshold)
			if tc.share < 0 {
				wantTh = 0
			}
			if got.ThrottleThreshold != wantTh {
				t.Errorf("threshold recorded %v, want %v", got.ThrottleThreshold, wantTh)
			}
		})
	}
}

func TestTimedSamples(t *testing.T) {
	ms := time.Millisecond
	two := func(at ...time.Duration) []Sample {
		var out []Sample
		for _, a := range at {
			out = append(out, missing(a, 0), missing(a, 1))
		}
		return out
	}
	all := two(0, 50*ms, 100*ms, 150*ms, 200*ms)
	times := func(s []Sample) []time.Duration {
		var out []time.Duration
		for _, x := range s {
			if x.GPU == 0 {
				out = append(out, x.T)
			}
		}
		return out
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     []time.Duration
	}{
		{40 * ms, 160 * ms, []time.Duration{50 * ms, 100 * ms, 150 * ms}},
		{50 * ms, 100 * ms, []time.Duration{50 * ms, 100 * ms}},
		// Shorter than the period: the nearest instant, every GPU's.
		{110 * ms, 120 * ms, []time.Duration{100 * ms}},
		{300 * ms, 400 * ms, []time.Duration{200 * ms}},
	} {
		got := TimedSamples(all, tc.from, tc.to)
		if !slices.Equal(times(got), tc.want) || len(got) != 2*len(tc.want) {
			t.Errorf("TimedSamples(%v, %v) = %v (%d samples); want %v for both GPUs", tc.from, tc.to, times(got), len(got), tc.want)
		}
	}
	if got := TimedSamples(nil, 0, time.Second); got != nil {
		t.Errorf("no samples: %v", got)
	}
}

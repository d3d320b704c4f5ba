package profile

import (
	"bytes"
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

		sum := SummarizeTelemetry(samples)
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
		if !sum.Throttled || !slices.Equal(sum.ThrottleReasons, []string{"sw_power_cap"}) {
			t.Errorf("throttled %v %v; want sw_power_cap only (idle is not throttling)", sum.Throttled, sum.ThrottleReasons)
		}

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

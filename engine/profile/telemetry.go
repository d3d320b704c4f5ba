package profile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// DefaultTelemetryPeriod is how often the sampler reads the GPUs.
const DefaultTelemetryPeriod = 50 * time.Millisecond

// Sample is one reading of one GPU. A value the GPU or driver does not
// report is NaN (an empty field in telemetry.csv).
type Sample struct {
	// T is since the sampler started.
	T           time.Duration
	GPU         int // the NVML index
	SMClockMHz  float64
	MemClockMHz float64
	GPUUtilPct  float64
	MemUtilPct  float64
	PowerW      float64
	// EnergyJ is the driver's energy counter (joules since it loaded);
	// differences between samples are what a cell used.
	EnergyJ      float64
	TempC        float64
	MemUsedBytes float64
	// Throttle is NVML's clock event reasons bit mask (ClocksEventReason*).
	Throttle uint64
}

// missing starts every field as "not reported".
func missing(t time.Duration, gpu int) Sample {
	n := math.NaN()
	return Sample{T: t, GPU: gpu, SMClockMHz: n, MemClockMHz: n, GPUUtilPct: n, MemUtilPct: n, PowerW: n, EnergyJ: n, TempC: n, MemUsedBytes: n}
}

// throttleNames name NVML's clock event reason bits, lowest bit first.
var throttleNames = []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
	"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}

// ThrottleNames lists the reasons in a mask; unknown bits as "bit_N".
func ThrottleNames(mask uint64) []string {
	var out []string
	for mask != 0 {
		b := bits.TrailingZeros64(mask)
		mask &^= 1 << b
		if b < len(throttleNames) {
			out = append(out, throttleNames[b])
		} else {
			out = append(out, fmt.Sprintf("bit_%d", b))
		}
	}
	return out
}

// idleReason is the only reason that is not throttling: an idle GPU
// lowers its clocks.
const idleReason = 1

// Source reads GPUs; NVML in production, a fake in tests.
type Source interface {
	// GPUs are the NVML indexes sampled, fixed for the source's life.
	GPUs() []int
	// Read fills dst[i] for GPUs()[i]; fields it cannot read stay NaN.
	Read(dst []Sample) error
	Close() error
}

// ErrNoTelemetry is returned (wrapped) when no GPU telemetry can be had:
// no NVML library (no driver, as on CI machines) or no GPU.
var ErrNoTelemetry = errors.New("no telemetry")

// Telemetry samples GPUs at a fixed period on its own goroutine from
// StartTelemetry until Stop. A Telemetry without a source (NVML absent)
// samples nothing and says why.
type Telemetry struct {
	src    Source
	period time.Duration
	reason string

	mu      sync.Mutex
	samples []Sample
	readErr error

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartTelemetry opens NVML for the GPUs this process may use
// (CUDA_VISIBLE_DEVICES) and starts sampling every period (0: the
// default). Without NVML it returns a Telemetry that records nothing;
// Reason says why. It never fails the cell.
func StartTelemetry(period time.Duration) *Telemetry {
	src, err := OpenNVML(nil)
	if err != nil {
		return &Telemetry{reason: err.Error()}
	}
	return StartTelemetryFrom(src, period)
}

// StartTelemetryFrom samples src every period (0: the default) until
// Stop; the first sample is taken at once, the last at Stop.
func StartTelemetryFrom(src Source, period time.Duration) *Telemetry {
	if period <= 0 {
		period = DefaultTelemetryPeriod
	}
	t := &Telemetry{src: src, period: period, stop: make(chan struct{}), done: make(chan struct{})}
	go t.loop()
	return t
}

func (t *Telemetry) loop() {
	defer close(t.done)
	t0 := time.Now()
	gpus := t.src.GPUs()
	buf := make([]Sample, len(gpus))
	sample := func() {
		now := time.Since(t0)
		for i, g := range gpus {
			buf[i] = missing(now, g)
		}
		err := t.src.Read(buf)
		t.mu.Lock()
		t.samples = append(t.samples, buf...)
		if err != nil && t.readErr == nil {
			t.readErr = err
		}
		t.mu.Unlock()
	}
	tick := time.NewTicker(t.period)
	defer tick.Stop()
	sample()
	for {
		select {
		case <-tick.C:
			sample()
		case <-t.stop:
			sample()
			return
		}
	}
}

// Reason says why there is no telemetry; empty when sampling.
func (t *Telemetry) Reason() string { return t.reason }

// Stop ends sampling (once; later calls return the same samples) and
// returns every sample, in time order.
func (t *Telemetry) Stop() []Sample {
	if t == nil || t.src == nil {
		return nil
	}
	t.once.Do(func() {
		close(t.stop)
		<-t.done
		t.src.Close()
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.samples
}

// Finish stops sampling, writes cellDir/telemetry.csv atomically and
// returns the summary for results.json and the artifact's name. With no
// telemetry it writes nothing and returns nil, nil, nil: Reason says why.
func (t *Telemetry) Finish(cellDir string) (*results.Telemetry, []string, error) {
	s := t.Stop()
	if len(s) == 0 {
		return nil, nil, nil
	}
	var b bytes.Buffer
	if err := WriteTelemetryCSV(&b, s); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(filepath.Join(cellDir, layout.TelemetryFile), b.Bytes()); err != nil {
		return nil, nil, err
	}
	return SummarizeTelemetry(s), []string{layout.TelemetryFile}, nil
}

var telemetryHeader = "time_ms,gpu,sm_clock_mhz,mem_clock_mhz,gpu_util_pct,mem_util_pct,power_w,energy_j,temp_c,mem_used_bytes,throttle_reasons\n"

// WriteTelemetryCSV writes samples as telemetry.csv: one row per GPU and
// sample, time in milliseconds since sampling began, a value the GPU did
// not report left empty, throttle reasons joined by '|'.
func WriteTelemetryCSV(w interface{ Write([]byte) (int, error) }, samples []Sample) error {
	var b []byte
	b = append(b, telemetryHeader...)
	num := func(v float64, prec int) {
		b = append(b, ',')
		if !math.IsNaN(v) {
			b = strconv.AppendFloat(b, v, 'f', prec, 64)
		}
	}
	for _, s := range samples {
		b = strconv.AppendFloat(b, float64(s.T)/1e6, 'f', 3, 64)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(s.GPU), 10)
		num(s.SMClockMHz, 0)
		num(s.MemClockMHz, 0)
		num(s.GPUUtilPct, 0)
		num(s.MemUtilPct, 0)
		num(s.PowerW, 3)
		num(s.EnergyJ, 3)
		num(s.TempC, 0)
		num(s.MemUsedBytes, 0)
		b = append(b, ',')
		b = append(b, strings.Join(ThrottleNames(s.Throttle), "|")...)
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}

// SummarizeTelemetry is the per-cell summary: means and maxima over all
// samples of all GPUs, the energy used (counter difference, summed over
// GPUs), and throttling: any reason but idle in any sample.
func SummarizeTelemetry(samples []Sample) *results.Telemetry {
	type acc struct {
		sum, max float64
		n        int
	}
	var sm, mc, pw, gu, mu, tc, used acc
	add := func(a *acc, v float64) {
		if math.IsNaN(v) {
			return
		}
		a.sum += v
		a.n++
		if a.n == 1 || v > a.max {
			a.max = v
		}
	}
	first, last := map[int]float64{}, map[int]float64{}
	var reasons uint64
	for _, s := range samples {
		add(&sm, s.SMClockMHz)
		add(&mc, s.MemClockMHz)
		add(&pw, s.PowerW)
		add(&gu, s.GPUUtilPct)
		add(&mu, s.MemUtilPct)
		add(&tc, s.TempC)
		add(&used, s.MemUsedBytes)
		if !math.IsNaN(s.EnergyJ) {
			if _, ok := first[s.GPU]; !ok {
				first[s.GPU] = s.EnergyJ
			}
			last[s.GPU] = s.EnergyJ
		}
		reasons |= s.Throttle
	}
	mean := func(a acc) float64 {
		if a.n == 0 {
			return 0
		}
		return a.sum / float64(a.n)
	}
	t := &results.Telemetry{
		SMClockMHzMean: mean(sm), SMClockMHzMax: sm.max, MemClockMHzMean: mean(mc), MemClockMHzMax: mc.max,
		PowerWMean: mean(pw), PowerWMax: pw.max, GPUUtilPctMean: mean(gu), MemUtilPctMean: mean(mu),
		TempCMax: tc.max, MemUsedBytesMax: uint64(used.max), Samples: len(samples),
	}
	for g, e := range last {
		t.EnergyJ += max(0, e-first[g])
	}
	if th := reasons &^ idleReason; th != 0 {
		t.Throttled, t.ThrottleReasons = true, ThrottleNames(th)
		slices.Sort(t.ThrottleReasons)
	}
	return t
}

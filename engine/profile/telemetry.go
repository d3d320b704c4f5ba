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

	"github.com/xrun-dev/xrun/results/atomicfile"
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
	// MaxSMClockMHz is the most the GPU's SM clock can run at (NVML's max
	// clock, read once per GPU): the throttle threshold is a fraction of
	// it.
	MaxSMClockMHz float64
}

// missing starts every field as "not reported".
func missing(t time.Duration, gpu int) Sample {
	n := math.NaN()
	return Sample{T: t, GPU: gpu, SMClockMHz: n, MemClockMHz: n, GPUUtilPct: n, MemUtilPct: n, PowerW: n, EnergyJ: n, TempC: n, MemUsedBytes: n,
		MaxSMClockMHz: n}
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

// cappedReasons are the reasons counted as power-capped time: the
// software power cap (sw_power_cap), hardware slowdown (hw_slowdown) and
// the power brake (hw_power_brake_slowdown). A loaded H100 reports
// sw_power_cap nearly all the time while its SM clock stays near the
// maximum, so this is a fact about the run, not a verdict.
const cappedReasons = 1<<2 | 1<<3 | 1<<7

// DefaultThrottleThreshold is the default throttle threshold: a sample
// whose SM clock is below this fraction of its GPU's maximum SM clock ran
// throttled. It is nvbench's --throttle-threshold default (75 % of the
// device's clock rate).
const DefaultThrottleThreshold = 0.75

// ThrottledShare is how much of a cell's judged samples may fall below the
// throttle threshold before the cell is flagged as throttled. nvbench
// judges each timed kernel launch and discards those below the threshold;
// xrun's samples are readings every 50 ms beside a pass, and a reading
// taken as the clock ramps is no throttled run, so the cell is flagged
// only when more than 5 % of them are below.
const ThrottledShare = 0.05

// Throttled is the rule's verdict on a share of judged samples below the
// threshold.
func Throttled(belowShare float64) bool { return belowShare > ThrottledShare }

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

// Period is the sampling period (0 without telemetry).
func (t *Telemetry) Period() time.Duration { return t.period }

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
// returns the summary (SummarizeTelemetry) and the artifact's name. With
// no telemetry it writes nothing and returns nil, nil, nil: Reason says
// why.
func (t *Telemetry) Finish(cellDir string) (*TelemetrySummary, []string, error) {
	s := t.Stop()
	if len(s) == 0 {
		return nil, nil, nil
	}
	var b bytes.Buffer
	if err := WriteTelemetryCSV(&b, s); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.WriteBytes(filepath.Join(cellDir, layout.TelemetryFile), b.Bytes()); err != nil {
		return nil, nil, err
	}
	return SummarizeTelemetry(s, SummaryOptions{Period: t.period}), []string{layout.TelemetryFile}, nil
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

// SummaryOptions say how SummarizeTelemetry judges its samples.
type SummaryOptions struct {
	// Period is the sampling period, the time each sample stands for in
	// the power-capped time (0: DefaultTelemetryPeriod).
	Period time.Duration
	// Threshold is the throttle threshold, a fraction of each GPU's
	// maximum SM clock (0: DefaultThrottleThreshold).
	Threshold float64
}

// TelemetrySummary is what the samples of a cell's timed passes say about
// the GPUs, for the cell's record: clocks, power, utilization,
// temperature, energy and memory, and the throttle rule's verdict.
// Figures no sample reported are 0. It has the fields of results.json's
// telemetry, in their order, so that the runner converts one to the other
// by a type conversion: a field added to one alone stops the build. (That
// schema's comments say what each field promises a reader of older
// files.)
type TelemetrySummary struct {
	SMClockMHzMean  float64
	SMClockMHzMax   float64
	MemClockMHzMean float64
	MemClockMHzMax  float64
	PowerWMean      float64
	PowerWMax       float64
	// Throttled is the throttle rule's verdict (Throttled) on the judged
	// samples.
	Throttled bool
	// ThrottleReasons are NVML's clock event reasons seen in any sample
	// but gpu_idle, sorted.
	ThrottleReasons []string
	GPUUtilPctMean  float64
	MemUtilPctMean  float64
	TempCMax        float64
	// EnergyJ is the energy counters' rise, summed over GPUs.
	EnergyJ         float64
	MemUsedBytesMax uint64
	Samples         int
	// SMClockMHzMin is the least SM clock sampled. MaxSMClockMHz (the
	// highest GPU maximum), ThrottleThreshold and ClockSamples (the samples
	// judged) are set only where NVML told a GPU's maximum;
	// BelowThresholdShare only when a sample was judged. PowerCappedS is
	// the time some GPU reported a capping reason.
	SMClockMHzMin       float64
	MaxSMClockMHz       float64
	ThrottleThreshold   float64
	ClockSamples        int
	BelowThresholdShare *float64
	PowerCappedS        float64
}

// SummarizeTelemetry is the summary of samples for the cell's record: means,
// maxima and the least SM clock over all samples of all GPUs, the energy
// used (counter difference, summed over GPUs), the throttle reasons seen,
// the time power-capped, and the throttle rule's verdict.
//
// The rule judges each sample that has an SM clock, its GPU's maximum and
// no gpu_idle reason (an idle GPU lowers its clocks without being
// throttled): below the threshold or not. The cell is throttled when more
// than ThrottledShare of the judged samples are below. Throttle reasons
// are recorded but decide nothing: a loaded GPU at its maximum clock
// reports sw_power_cap all the same. Power-capped time is the number of
// sampling instants at which some GPU reported a capping reason
// (cappedReasons) times the period.
func SummarizeTelemetry(samples []Sample, o SummaryOptions) *TelemetrySummary {
	if o.Period <= 0 {
		o.Period = DefaultTelemetryPeriod
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThrottleThreshold
	}
	type acc struct {
		sum, max, min float64
		n             int
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
		if a.n == 1 || v < a.min {
			a.min = v
		}
	}
	first, last := map[int]float64{}, map[int]float64{}
	capped := map[time.Duration]bool{}
	var reasons uint64
	var maxSM float64
	var judged, below int
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
		if s.Throttle&cappedReasons != 0 {
			capped[s.T] = true
		}
		if !(s.MaxSMClockMHz > 0) { // NaN too: a GPU that does not say
			continue
		}
		maxSM = max(maxSM, s.MaxSMClockMHz)
		if math.IsNaN(s.SMClockMHz) || s.Throttle&idleReason != 0 {
			continue
		}
		judged++
		if s.SMClockMHz < o.Threshold*s.MaxSMClockMHz {
			below++
		}
	}
	mean := func(a acc) float64 {
		if a.n == 0 {
			return 0
		}
		return a.sum / float64(a.n)
	}
	t := &TelemetrySummary{
		SMClockMHzMean: mean(sm), SMClockMHzMax: sm.max, SMClockMHzMin: sm.min, MemClockMHzMean: mean(mc), MemClockMHzMax: mc.max,
		PowerWMean: mean(pw), PowerWMax: pw.max, GPUUtilPctMean: mean(gu), MemUtilPctMean: mean(mu),
		TempCMax: tc.max, MemUsedBytesMax: uint64(used.max), Samples: len(samples),
		PowerCappedS: float64(len(capped)) * o.Period.Seconds(),
	}
	for g, e := range last {
		t.EnergyJ += max(0, e-first[g])
	}
	if th := reasons &^ idleReason; th != 0 {
		t.ThrottleReasons = ThrottleNames(th)
		slices.Sort(t.ThrottleReasons)
	}
	if maxSM > 0 {
		// Without the GPU's maximum there is nothing to judge against:
		// no verdict, rather than one from the reasons.
		t.MaxSMClockMHz, t.ThrottleThreshold, t.ClockSamples = maxSM, o.Threshold, judged
		if judged > 0 {
			share := float64(below) / float64(judged)
			t.BelowThresholdShare = &share
			t.Throttled = Throttled(share)
		}
	}
	return t
}

// TimedSamples are the samples taken from..to (times as Sample.T): those
// of a timed pass, without the engine's creation, its warm-up or the
// profiled pass. A pass shorter than the sampling period may hold none:
// then it is the one sample nearest to it, so that the pass still says
// what the GPU ran at.
func TimedSamples(samples []Sample, from, to time.Duration) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.T >= from && s.T <= to {
			out = append(out, s)
		}
	}
	if len(out) > 0 || len(samples) == 0 {
		return out
	}
	dist := func(t time.Duration) time.Duration {
		if t < from {
			return from - t
		}
		return t - to
	}
	best := samples[0].T
	for _, s := range samples {
		if dist(s.T) < dist(best) {
			best = s.T
		}
	}
	// Every GPU's reading at that instant.
	for _, s := range samples {
		if s.T == best {
			out = append(out, s)
		}
	}
	return out
}

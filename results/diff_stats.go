package results

import (
	"math"
	"slices"
)

// The statistics behind xrun diff's verdict, beyond the U test itself.

// DefaultNoiseFactor is how many times its cell's repeat-to-repeat spread
// a change must exceed to count as a regression (DiffOptions.NoiseFactor,
// xrun diff --noise-factor).
//
// The rule: a change counts only if |delta| > k * s, where s pools the
// two sides' relative spreads, s = sqrt((s_old^2 + s_new^2) / 2), each
// s = 1.4826 * MAD / |median| (the median absolute deviation, scaled to
// estimate the standard deviation of normal noise, so one wild repeat
// barely moves it). With k = 2 the new median must lie outside the band in
// which about 95 % of single repeats fall: the U test can call two
// samples different whenever they separate, even when the gap is smaller
// than the wobble of one repeat, and such a gap is what drift between two
// runs of the same code on a busy machine looks like. The within-run
// spread is the best proxy a diff has for that drift, which one run
// cannot measure.
const DefaultNoiseFactor = 2.0

// madScale turns a median absolute deviation into an estimate of the
// standard deviation of normally distributed values (1 / Phi^-1(3/4)).
const madScale = 1.4826

// relSpread is a sample's repeat-to-repeat spread relative to its median
// (see DefaultNoiseFactor); 0 for fewer than 2 values or a median of 0.
func relSpread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	med := Median(v)
	if med == 0 {
		return 0
	}
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - med)
	}
	return madScale * Median(dev) / math.Abs(med)
}

// pooledSpread combines two relative spreads (root mean square), so that
// a noisy side widens the band even when the other is quiet.
func pooledSpread(a, b float64) float64 { return math.Sqrt((a*a + b*b) / 2) }

// Median is the middle of v (the mean of the two middle values of an
// even count); v is not changed. NaN for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Correction names the multiple-comparison procedure xrun diff applies.
//
// Benjamini-Hochberg, not Holm: both keep the chance of any false
// regression at alpha when nothing changed (two runs of the same code,
// the case a nightly gate must not cry wolf on), but real regressions come
// in clusters (every headline metric of a cell, often many cells) and BH
// keeps its power for them, where Holm asks the smallest p to beat
// alpha/m. With the U test's discrete p-values that is decisive: 6+6
// repeats can reach p = 0.0022 at best, below Holm's 0.05/40 = 0.00125
// for 8 cells x 5 metrics never, so Holm would find nothing at all. The
// price is that among several regressions found, about alpha of them may
// be chance, which matters little once the diff fails anyway.
const Correction = "benjamini-hochberg"

// benjaminiHochberg returns the BH-adjusted p-values (q-values) of p, in
// p's order: q_(i) = min over j >= i of min(1, p_(j) * m / j) for the
// p-values sorted ascending. A comparison is significant at alpha after
// the correction exactly when q < alpha.
func benjaminiHochberg(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case p[a] < p[b]:
			return -1
		case p[a] > p[b]:
			return 1
		}
		return 0
	})
	q := make([]float64, m)
	running := 1.0
	for r := m - 1; r >= 0; r-- {
		i := order[r]
		running = min(running, p[i]*float64(m)/float64(r+1), 1)
		q[i] = running
	}
	return q
}

// repeatsForCorrection is the fewest repeats a side with which a single
// comparison among m can be significant after the correction (its q is
// at best p * m when it is the only small p): the smallest n with
// MinP(n, n) * m < alpha. 0 when m is 0.
func repeatsForCorrection(m int) int {
	if m == 0 {
		return 0
	}
	n := 1
	for MinP(n, n)*float64(m) >= Alpha {
		n++
	}
	return n
}

// ClockTolerance is the relative difference between two cells' mean SM
// clocks (cells[].telemetry.sm_clock_mhz_mean) beyond which xrun diff
// says they ran at different clocks. NVIDIA GPUs step their SM clock by
// 15 MHz (0.75 % of an H100's 1980 MHz), so means within 1 % are one
// clock read with jitter, not a different clock.
const ClockTolerance = 0.01

// ClockDiff is a cell's mean SM clock during the timed repeats, old and
// new, when they differ by more than ClockTolerance.
type ClockDiff struct {
	OldMHz float64 `json:"old_mhz"`
	NewMHz float64 `json:"new_mhz"`
	// Change is NewMHz / OldMHz - 1.
	Change float64 `json:"change"`
}

// diffClock compares two cells' mean SM clocks; nil when either has no
// GPU telemetry or the clocks are within ClockTolerance.
func diffClock(oc, nc *Cell) *ClockDiff {
	if oc == nil || nc == nil || oc.Telemetry == nil || nc.Telemetry == nil {
		return nil
	}
	o, n := oc.Telemetry.SMClockMHzMean, nc.Telemetry.SMClockMHzMean
	if o <= 0 || n <= 0 || math.Abs(n/o-1) <= ClockTolerance {
		return nil
	}
	return &ClockDiff{OldMHz: o, NewMHz: n, Change: roundValue(n/o - 1)}
}

// perClock is a metric's change with the clock's change taken out, as
// nvbench's compare-robust checks cycles besides time: a throughput per
// clock cycle (ratio / clock ratio), a latency in cycles (ratio * clock
// ratio). It is an estimate: work bound by memory, not the SM clock,
// does not slow down with it. ok is false for metrics with no direction,
// which are neither throughputs nor latencies.
func perClock(metric string, ratio float64, c *ClockDiff) (delta float64, ok bool) {
	if MetricFor(metric).Energy {
		// Energy per token does not scale with the clock: a lower clock
		// explains lower throughput, not more joules per token.
		return 0, false
	}
	clock := c.NewMHz / c.OldMHz
	switch MetricFor(metric).Better {
	case HigherIsBetter:
		return ratio/clock - 1, true
	case LowerIsBetter:
		return ratio*clock - 1, true
	}
	return 0, false
}

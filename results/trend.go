package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/perf/benchmath"
)

// Trends follow a study's cells over many runs (nightly results, in time
// order) and find the steps in each cell's metrics: where the level moved
// and stayed, by how much, and when. xrun diff compares two runs; a trend
// sees the night-to-night drift a diff cannot, and the date a change
// began.
//
// Step detection works on the series of per-run medians of one cell and
// metric, in three stages:
//
//  1. Proposal: the piecewise-constant fit minimising the sum of absolute
//     deviations of the run medians from their segment's median plus a
//     penalty per step, found exactly by dynamic programming over every
//     segmentation (optimal partitioning; asv's step detection fits the
//     same L1 cost). The L1 cost keeps one wild run from pulling a level,
//     and the fit places a step at the very run it began, where binary
//     segmentation on medians can miss a regression that was later fixed.
//     A level held by a single run is an outlier, not a step, so segments
//     span at least two runs, but for the newest run's: it must be able to
//     start a step the night it happens (and with two runs, each is its
//     own level). The penalty is half the threshold's worth of the level,
//     less than any step that can count saves the fit, so every such step
//     is proposed and most noise is not.
//  2. Size: a step must move the level (the median of the run medians of
//     its segment; of two runs, the one nearer the other level, since one
//     outlier pulls the mean of two anywhere) by more than the threshold
//     and beyond its noise band: NoiseFactor standard errors of the
//     difference of the two levels (seriesFit.band), from the noise of one
//     run (seriesNoise: the larger of what the repeats within runs and the
//     run-to-run spread of the medians, nightly drift that one diff cannot
//     see, say), widened for a step before the newest run, which the fit
//     picked among many places. Steps that fail are merged away, smallest
//     first, and the levels refitted.
//  3. Significance: the Mann-Whitney U test between the repeats of the
//     runs on either side of each step, with the Benjamini-Hochberg
//     correction over every step of the trend, as xrun diff corrects over
//     its comparisons; steps with q >= alpha are merged away, weakest
//     first, and stages 2 and 3 repeat until every step passes both.
//
// So noise yields a step only where a level strays beyond the threshold
// and the noise band, and a clean step is found at the run it started.

// DefaultTrendNoiseFactor is how many standard errors of the difference
// of two levels a step must exceed (TrendOptions.NoiseFactor, xrun trend
// --noise-factor): 3, the limit of a control chart (Shewhart's), which
// normal noise crosses 0.27 % of the time. xrun diff's factor of 2
// multiplies the spread of single repeats, a wider unit; a trend's band
// is in standard errors of levels it estimated, over every run of every
// series each night, so it takes the control chart's stricter limit.
const DefaultTrendNoiseFactor = 3.0

// trendMinNoiseRuns is how many runs a series needs before its run-to-run
// spread is estimated from successive differences of the medians: the
// median absolute deviation of the differences ignores a step or two only
// when they are a minority of at least five differences.
const trendMinNoiseRuns = 6

// TrendOptions configure Trend.
type TrendOptions struct {
	// Threshold is the relative change (0.03 = 3 %) a step must exceed.
	Threshold float64
	// NoiseFactor is how many standard errors of the difference of its
	// two levels a step must also exceed (DefaultTrendNoiseFactor); 0
	// turns the rule off.
	NoiseFactor float64
	// Metrics are the metric keys followed; empty means the default
	// metrics (DefaultMetrics) some run measured.
	Metrics []string
	// Names label the runs (their paths), in the order they are given to
	// Trend; a missing name is "run N".
	Names []string
}

// TrendReport is what xrun trend found. It renders as text, Markdown or
// JSON; TrendFormats lists them.
type TrendReport struct {
	Study       string  `json:"study"`
	Outcome     Outcome `json:"outcome"`
	Threshold   float64 `json:"threshold"`
	NoiseFactor float64 `json:"noise_factor"`
	Alpha       float64 `json:"alpha"`
	Correction  string  `json:"correction"`
	// Metrics are the metric keys followed.
	Metrics []string `json:"metrics"`
	// Runs are the runs in time order (by Started); every index in the
	// report points into it, and the last one is the newest run.
	Runs   []TrendRun    `json:"runs"`
	Counts TrendCounts   `json:"counts"`
	Series []TrendSeries `json:"series"`
	// NewlyFailed lists the cells ok in the run before the newest that
	// failed in the newest ("id: error"): regressions, as in xrun diff.
	NewlyFailed []string `json:"newly_failed"`
	// Missing lists the cells ok in the run before the newest that the
	// newest lacks or skipped: not judged.
	Missing []string `json:"missing"`
	// Reason says why nothing was followed (OutcomeNothingCompared).
	Reason string `json:"reason,omitempty"`
	// Warnings are statistical caveats, deduplicated.
	Warnings []string `json:"warnings"`
}

// TrendRun is one run of the trend.
type TrendRun struct {
	Name    string    `json:"name"`
	Started time.Time `json:"started"`
	// Commit is the experiment repository's commit, else xrun's, when
	// the run recorded one: what to bisect between two runs.
	Commit string `json:"commit,omitempty"`
}

// TrendCounts tally the report for its headline.
type TrendCounts struct {
	Runs int `json:"runs"`
	// Cells and Series count what was followed: cells with a metric in
	// some run, and their cell x metric series.
	Cells  int `json:"cells"`
	Series int `json:"series"`
	// Steps counts every step found, Regressions and Improvements the
	// steps for the worse and the better (metrics without a direction
	// are neither), NewestRegressions the regressions that start at the
	// newest run: those fail the trend.
	Steps             int `json:"steps"`
	Regressions       int `json:"regressions"`
	Improvements      int `json:"improvements"`
	NewestRegressions int `json:"newest_regressions"`
	NewlyFailed       int `json:"newly_failed"`
	Missing           int `json:"missing"`
	// Inconclusive counts the series whose newest run is worse beyond the
	// threshold and the noise but not significantly (TrendSeries.Unjudged).
	Inconclusive int `json:"inconclusive,omitempty"`
}

// TrendSeries is one cell's metric over the runs.
type TrendSeries struct {
	Cell   string `json:"cell"`
	Metric string `json:"metric"`
	Name   string `json:"name"`
	// Better is the metric's direction: higher, lower or none.
	Better string `json:"better"`
	// Noise is the relative noise of one run's median (seriesNoise), the
	// unit of its steps' noise bands.
	Noise  float64      `json:"noise"`
	Points []TrendPoint `json:"points"`
	Steps  []TrendStep  `json:"steps"`
	// Unjudged is a change at the newest run for the worse, beyond the
	// threshold and the noise, that the repeats do not show significant:
	// not a step, but no all-clear either.
	Unjudged *TrendStep `json:"unjudged,omitempty"`
}

// TrendPoint is one run of a series: the median of the cell's repeats with
// its 95 % confidence interval, and the repeats.
type TrendPoint struct {
	// Run indexes TrendReport.Runs.
	Run     int       `json:"run"`
	Summary Summary   `json:"summary"`
	Repeats []float64 `json:"repeats"`
}

// TrendStep is a change of level that held.
type TrendStep struct {
	// Run indexes TrendReport.Runs: the first run at the new level.
	Run     int       `json:"run"`
	Started time.Time `json:"started"`
	// Before and After are the levels, each the median of the run medians
	// of its segment, which spans BeforeRuns and AfterRuns runs. (A level
	// of two runs was judged by the one nearer the other level.)
	Before     float64 `json:"before"`
	After      float64 `json:"after"`
	BeforeRuns int     `json:"before_runs"`
	AfterRuns  int     `json:"after_runs"`
	// Delta is After/Before - 1.
	Delta float64 `json:"delta"`
	// Band is the noise band Delta had to exceed: NoiseFactor standard
	// errors of the difference of the two levels, widened for a step
	// before the newest run (seriesFit.band).
	Band float64 `json:"noise_band"`
	// P is the U test's p-value between the repeats of the runs on either
	// side (N1 and N2 of them); Q is P adjusted over every step of the
	// trend.
	P  float64 `json:"p"`
	Q  float64 `json:"q"`
	N1 int     `json:"n1"`
	N2 int     `json:"n2"`
	// Verdict is direction-aware: slower is worse, whatever the metric.
	Verdict     Verdict `json:"verdict"`
	Regression  bool    `json:"regression"`
	Improvement bool    `json:"improvement"`
	// Newest marks a step that starts at the newest run.
	Newest bool `json:"newest"`
}

// trendNotCompared reads as the trend's reason and is ErrNotCompared to
// errors.Is (xrun exit status 4).
type trendNotCompared struct{ msg string }

func (e *trendNotCompared) Error() string { return e.msg }
func (e *trendNotCompared) Unwrap() error { return ErrNotCompared }

// Trend follows every cell and metric of runs, results of one study, over
// time and finds the steps in them (see the comment at the top of this
// file). The runs are put in time order by their Started time, whatever
// order they come in. Runs of different studies, or fewer than two, are
// refused with an error wrapping ErrNotCompared; a run without a start
// time, or two that started at the same second (the same run twice), is
// bad input.
func Trend(runs []*Results, opts TrendOptions) (*TrendReport, error) {
	if len(runs) < 2 {
		return nil, &trendNotCompared{msg: fmt.Sprintf("not compared: a trend needs at least 2 runs of a study; got %d", len(runs))}
	}
	type run struct {
		r    *Results
		name string
	}
	ordered := make([]run, len(runs))
	for i, r := range runs {
		ordered[i] = run{r: r, name: fmt.Sprintf("run %d", i+1)}
		if i < len(opts.Names) && opts.Names[i] != "" {
			ordered[i].name = opts.Names[i]
		}
		if r.Started.IsZero() {
			return nil, &FileError{File: ordered[i].name, Field: "started", Msg: "no start time; a trend orders runs by it"}
		}
		if r.Name != runs[0].Name {
			return nil, &trendNotCompared{msg: fmt.Sprintf("not comparable: %s is study %q, %s is study %q: a trend follows one study",
				ordered[0].name, runs[0].Name, ordered[i].name, r.Name)}
		}
	}
	slices.SortStableFunc(ordered, func(a, b run) int { return a.r.Started.Compare(b.r.Started) })
	for i := 1; i < len(ordered); i++ {
		if ordered[i].r.Started.Equal(ordered[i-1].r.Started) {
			return nil, &FileError{File: ordered[i].name, Field: "started",
				Msg: fmt.Sprintf("%s, the same start as %s: the same run given twice?", ordered[i].r.Started.UTC().Format(time.RFC3339), ordered[i-1].name)}
		}
	}
	t := &TrendReport{Study: runs[0].Name, Threshold: opts.Threshold, NoiseFactor: opts.NoiseFactor, Alpha: Alpha, Correction: Correction,
		Series: []TrendSeries{}, NewlyFailed: []string{}, Missing: []string{}, Warnings: []string{}}
	rs := make([]*Results, len(ordered))
	for i, o := range ordered {
		rs[i] = o.r
		t.Runs = append(t.Runs, TrendRun{Name: o.name, Started: o.r.Started.UTC(), Commit: runCommit(o.r)})
	}
	t.Counts.Runs = len(rs)
	t.Metrics = trendMetrics(rs, opts.Metrics)
	newest := len(rs) - 1

	cells := trendCells(rs)
	var fits []*seriesFit
	for _, c := range cells {
		followed := false
		for _, m := range t.Metrics {
			f := &seriesFit{metric: m, factor: opts.NoiseFactor}
			for i, r := range rs {
				rc := findCell(r, c.ID)
				if rc == nil || rc.Status != StatusOK {
					continue
				}
				v := column(rc.Repeats, m)
				if len(v) == 0 {
					continue
				}
				f.runs = append(f.runs, i)
				f.reps = append(f.reps, v)
				f.points = append(f.points, TrendPoint{Run: i, Summary: Summarize(v), Repeats: v})
			}
			if len(f.points) == 0 {
				continue
			}
			followed = true
			mt := MetricFor(m)
			f.series = TrendSeries{Cell: c.ID, Metric: m, Name: mt.Name, Better: mt.Better.String(), Points: f.points, Steps: []TrendStep{}}
			fits = append(fits, f)
		}
		if followed {
			t.Counts.Cells++
		}
	}
	t.findSteps(fits)
	compared := false
	for _, f := range fits {
		s := f.series
		for _, st := range s.Steps {
			t.Counts.Steps++
			if st.Regression {
				t.Counts.Regressions++
				if st.Newest {
					t.Counts.NewestRegressions++
				}
			}
			if st.Improvement {
				t.Counts.Improvements++
			}
		}
		if s.Unjudged != nil {
			t.Counts.Inconclusive++
		}
		if n := len(s.Points); n >= 2 && s.Points[n-1].Run == newest {
			compared = true
		}
		t.Series = append(t.Series, s)
	}
	t.Counts.Series = len(t.Series)
	t.newestCells(rs)
	switch {
	case t.Counts.NewestRegressions > 0 || t.Counts.NewlyFailed > 0:
		t.Outcome = OutcomeRegression
	case !compared:
		t.Outcome = OutcomeNothingCompared
		t.Reason = t.nothingFollowed(rs)
	case t.Counts.Inconclusive > 0:
		t.Outcome = OutcomeInconclusive
	default:
		t.Outcome = OutcomeOK
	}
	return t, nil
}

// runCommit is what identifies the code a run measured.
func runCommit(r *Results) string {
	if r.Environment.Repo != nil && r.Environment.Repo.Commit != "" {
		return r.Environment.Repo.Commit
	}
	return r.Environment.Xrun.Commit
}

// trendMetrics returns the metrics to follow: those asked for, or the
// default metrics some run measured.
func trendMetrics(rs []*Results, asked []string) []string {
	if len(asked) > 0 {
		return slices.Clone(asked)
	}
	have := map[string]bool{}
	for _, r := range rs {
		for k := range presentMetrics(r) {
			have[k] = true
		}
	}
	out := []string{}
	for _, k := range DefaultMetricsFor(have) {
		if have[k] {
			out = append(out, k)
		}
	}
	return out
}

// trendCells returns one cell per id in any run (its newest occurrence),
// in the order the newest run's tables use.
func trendCells(rs []*Results) []*Cell {
	byID := map[string]*Cell{}
	var cells []*Cell
	for i := len(rs) - 1; i >= 0; i-- {
		for j := range rs[i].Cells {
			c := &rs[i].Cells[j]
			if byID[c.ID] == nil {
				byID[c.ID] = c
				cells = append(cells, c)
			}
		}
	}
	all := &Results{Axes: rs[len(rs)-1].Axes, Compare: rs[len(rs)-1].Compare}
	for _, c := range cells {
		all.Cells = append(all.Cells, *c)
	}
	sortCells(cells, axes(all))
	return cells
}

func findCell(r *Results, id string) *Cell {
	i, ok := slices.BinarySearchFunc(r.Cells, id, func(c Cell, id string) int { return strings.Compare(c.ID, id) })
	if ok {
		return &r.Cells[i]
	}
	for i := range r.Cells { // not sorted by id: built in memory
		if r.Cells[i].ID == id {
			return &r.Cells[i]
		}
	}
	return nil
}

// newestCells lists the cells ok in the run before the newest that the
// newest failed (regressions, as in xrun diff) or lacks.
func (t *TrendReport) newestCells(rs []*Results) {
	prev, last := rs[len(rs)-2], rs[len(rs)-1]
	for _, c := range trendCells(rs[len(rs)-2:]) {
		if pc := findCell(prev, c.ID); pc == nil || pc.Status != StatusOK {
			continue
		}
		nc := findCell(last, c.ID)
		switch {
		case nc == nil:
			t.Missing = append(t.Missing, c.ID+": not in the newest run")
		case nc.Status == StatusSkipped:
			t.Missing = append(t.Missing, c.ID+": skipped in the newest run"+pick(nc.Error != "", ": "+nc.Error, ""))
		case nc.Status == StatusFailed:
			t.NewlyFailed = append(t.NewlyFailed, c.ID+": "+pick(nc.Error != "", nc.Error, "no error recorded"))
		}
	}
	t.Counts.Missing, t.Counts.NewlyFailed = len(t.Missing), len(t.NewlyFailed)
}

// nothingFollowed says why no series reaches the newest run from an
// earlier one.
func (t *TrendReport) nothingFollowed(rs []*Results) string {
	last := rs[len(rs)-1]
	ok := 0
	for _, c := range last.Cells {
		if c.Status == StatusOK {
			ok++
		}
	}
	switch {
	case len(t.Metrics) == 0:
		return "the runs measured none of the metrics followed"
	case len(last.Cells) == 0:
		return "the newest run has no cells"
	case ok == 0:
		return "no cell is ok in the newest run"
	}
	return "no cell ok in the newest run has the metrics followed in an earlier run: cell ids hash every parameter, so another model, dataset or matrix value makes other cells"
}

// seriesFit is one series while its steps are found.
type seriesFit struct {
	metric string
	series TrendSeries
	points []TrendPoint
	runs   []int       // the run of each point
	reps   [][]float64 // each point's repeats
	noise  float64
	factor float64 // TrendOptions.NoiseFactor
	starts []int   // indices into points where a new level starts
	q      []float64
	p      []float64
}

// medians are the points' medians, the series the fit works on.
func (f *seriesFit) medians() []float64 {
	m := make([]float64, len(f.points))
	for i, p := range f.points {
		m[i] = p.Summary.Median
	}
	return m
}

// findSteps runs the three stages of step detection on every series.
func (t *TrendReport) findSteps(fits []*seriesFit) {
	for _, f := range fits {
		x := f.medians()
		f.noise = seriesNoise(x, f.reps)
		f.series.Noise = roundValue(f.noise)
		// Every step that can count moves the level by more than the
		// threshold, so each saves the fit more than half that.
		level := math.Abs(Median(x))
		f.starts = fitLevels(x, max(t.Threshold*level/2, 1e-9*level, math.SmallestNonzeroFloat64))
		f.prune(t.Threshold, t.NoiseFactor)
	}
	for {
		var ps []float64
		for _, f := range fits {
			f.p = f.p[:0]
			for k := range f.starts {
				a, b := f.segmentRepeats(k)
				f.p = append(f.p, uTestP(a, b))
			}
			ps = append(ps, f.p...)
		}
		qs := benjaminiHochberg(ps)
		changed := false
		for _, f := range fits {
			f.q, qs = qs[:len(f.p)], qs[len(f.p):]
			weakest := -1
			for k, q := range f.q {
				if q >= Alpha && (weakest < 0 || q > f.q[weakest]) {
					weakest = k
				}
			}
			if weakest < 0 {
				continue
			}
			if st := f.step(weakest, t.Runs); st.Newest && worse(f.metric, st.Delta) {
				f.series.Unjudged = &st
				a, b := f.segmentRepeats(weakest)
				if !Testable(len(a), len(b)) {
					t.Warnings = append(t.Warnings, fmt.Sprintf("%d+%d repeats can never reach p < %g: a step at the newest run needs %d or more repeats a side",
						len(a), len(b), Alpha, TestableRepeats()))
				}
			}
			f.starts = slices.Delete(f.starts, weakest, weakest+1)
			f.prune(t.Threshold, t.NoiseFactor)
			changed = true
		}
		if !changed {
			break
		}
	}
	for _, f := range fits {
		for k := range f.starts {
			f.series.Steps = append(f.series.Steps, f.step(k, t.Runs))
		}
	}
	t.Warnings = dedupe(t.Warnings)
	if t.Warnings == nil {
		t.Warnings = []string{}
	}
}

// segments returns the bounds [lo, hi) of the segments before and after
// the k-th step.
func (f *seriesFit) segments(k int) (lo, mid, hi int) {
	lo, mid, hi = 0, f.starts[k], len(f.points)
	if k > 0 {
		lo = f.starts[k-1]
	}
	if k+1 < len(f.starts) {
		hi = f.starts[k+1]
	}
	return lo, mid, hi
}

// segmentRepeats pools the repeats of the runs on either side of the k-th
// step.
func (f *seriesFit) segmentRepeats(k int) (before, after []float64) {
	lo, mid, hi := f.segments(k)
	for i := lo; i < mid; i++ {
		before = append(before, f.reps[i]...)
	}
	for i := mid; i < hi; i++ {
		after = append(after, f.reps[i]...)
	}
	return before, after
}

// levels returns the levels before and after the k-th step, the medians
// of the run medians of the two segments, and the numbers of runs.
func (f *seriesFit) levels(k int) (before, after float64, nb, na int) {
	lo, mid, hi := f.segments(k)
	x := f.medians()
	return Median(x[lo:mid]), Median(x[mid:hi]), mid - lo, hi - mid
}

// judged returns the levels the size of the k-th step is judged by: the
// levels, but that a level of two runs counts as the one of them nearer
// the other level. The median of two is their mean, which one outlier
// pulls as far as it likes; a step into or out of two runs must show in
// both.
func (f *seriesFit) judged(k int) (before, after float64) {
	lo, mid, hi := f.segments(k)
	x := f.medians()
	b, a := x[lo:mid], x[mid:hi]
	before, after = Median(b), Median(a)
	nearer := func(two []float64, to float64) float64 {
		return pick(math.Abs(two[0]-to) <= math.Abs(two[1]-to), two[0], two[1])
	}
	switch {
	case len(b) == 2 && len(a) == 2: // the closest pair across the step
		before, after = b[0], a[0]
		for _, x := range b {
			for _, y := range a {
				if math.Abs(x-y) < math.Abs(before-after) {
					before, after = x, y
				}
			}
		}
	case len(b) == 2:
		before = nearer(b, after)
	case len(a) == 2:
		after = nearer(a, before)
	}
	return before, after
}

// step describes the k-th step; p and q are set once the significance
// stage has run.
func (f *seriesFit) step(k int, runs []TrendRun) TrendStep {
	before, after, nb, na := f.levels(k)
	a, b := f.segmentRepeats(k)
	run := f.runs[f.starts[k]]
	st := TrendStep{Run: run, Started: runs[run].Started, Before: roundValue(before), After: roundValue(after),
		BeforeRuns: nb, AfterRuns: na, Band: roundValue(f.band(f.factor, k)), N1: len(a), N2: len(b), Newest: run == len(runs)-1}
	if before != 0 {
		st.Delta = roundValue(after/before - 1)
	}
	if k < len(f.p) {
		st.P = roundP(f.p[k])
	}
	if k < len(f.q) {
		st.Q = roundP(f.q[k])
	}
	up := after > before
	switch MetricFor(f.metric).Better {
	case HigherIsBetter:
		st.Verdict = pick(up, Faster, Slower)
	case LowerIsBetter:
		st.Verdict = pick(up, Slower, Faster)
	default:
		st.Verdict = pick(up, Higher, Lower)
	}
	st.Regression, st.Improvement = st.Verdict == Slower, st.Verdict == Faster
	return st
}

// prune merges away the steps no larger than the threshold or their
// noise band, smallest first, refitting the levels after each merge.
func (f *seriesFit) prune(threshold, factor float64) {
	for {
		weakest, size := -1, math.Inf(1)
		for k := range f.starts {
			before, after := f.judged(k)
			d := 0.0 // a level of 0 has no relative change: never a step
			if before != 0 {
				d = math.Abs(after/before - 1)
			}
			if !(d > threshold && d > f.band(factor, k)) && d < size {
				weakest, size = k, d
			}
		}
		if weakest < 0 {
			return
		}
		f.starts = slices.Delete(f.starts, weakest, weakest+1)
	}
}

// band is how far apart the levels either side of the k-th step must lie
// to be told apart from noise: z standard errors of their difference
// (levelError). A new run against a long history must so move by about z times
// the noise of one run; two long segments by much less.
//
// z is factor for a step at the newest run, the one place judged every
// night whatever the fit finds. A step elsewhere is the best of the
// series' len-1 places the fit could have put one, and the largest of m
// noisy differences exceeds what one would, so its z is widened to keep
// the same chance for the series as a whole (Bonferroni: the two-sided
// tail of factor, shared out over the m places): 3 becomes 3.6 over 10
// runs, 4.5 over a year of nights.
func (f *seriesFit) band(factor float64, k int) float64 {
	if factor <= 0 {
		return 0
	}
	_, _, nb, na := f.levels(k)
	z := factor
	if m := len(f.points) - 1; f.starts[k] != len(f.points)-1 && m > 1 {
		tail := math.Erfc(factor/math.Sqrt2) / float64(m) // P(|Z| > z) for each place
		z = math.Sqrt2 * math.Erfcinv(tail)
	}
	return z * math.Hypot(levelError(f.noise, nb), levelError(f.noise, na))
}

// levelError is the standard error of a level, the median of n runs'
// medians that each have the noise given.
func levelError(noise float64, n int) float64 {
	return noise / math.Sqrt(float64(n)) * pick(n > 2, medianEfficiency, 1)
}

// fitLevels returns where the levels of the best piecewise-constant fit
// of x start: the fit minimising the sum over points of |x_i - level of
// its segment| (each level the segment's median) plus beta per step,
// every segment at least two points long but the last (the newest run's)
// and those of a series of two. Optimal partitioning by
// dynamic programming over every segmentation, O(n^2 log n): for each end
// j, the segments [i, j) grow backwards while a running median keeps
// their absolute deviation. Of fits that cost the same, the one with the
// longer last segment wins, so ties never invent steps.
func fitLevels(x []float64, beta float64) []int {
	n := len(x)
	best := make([]float64, n+1)
	from := make([]int, n+1)
	var m runningMedian
	for j := 1; j <= n; j++ {
		best[j] = math.Inf(1)
		m.reset()
		for i := j - 1; i >= 0; i-- {
			m.push(x[i])
			if j-i < 2 && j < n && n > 2 {
				continue // one run is an outlier, not a level, but the newest
			}
			c := best[i] + m.absDev()
			if i > 0 {
				c += beta
			}
			if c <= best[j] {
				best[j], from[j] = c, i
			}
		}
	}
	var starts []int
	for j := n; from[j] > 0; j = from[j] {
		starts = append(starts, from[j])
	}
	slices.Reverse(starts)
	return starts
}

// runningMedian keeps the median of the values pushed and the sum of
// their absolute deviations from it: the lower half (and, for an odd
// count, the median) in a max-heap, the upper half in a min-heap, with
// their sums. The deviations then sum to sum(upper) - sum(lower) plus the
// median when the count is odd.
type runningMedian struct {
	lo, hi       floatHeap
	sumLo, sumHi float64
}

func (m *runningMedian) reset() {
	m.lo.v, m.hi.v, m.lo.max = m.lo.v[:0], m.hi.v[:0], true
	m.sumLo, m.sumHi = 0, 0
}

func (m *runningMedian) push(v float64) {
	if len(m.lo.v) == 0 || v <= m.lo.v[0] {
		m.lo.push(v)
		m.sumLo += v
	} else {
		m.hi.push(v)
		m.sumHi += v
	}
	switch {
	case len(m.lo.v) > len(m.hi.v)+1:
		v := m.lo.pop()
		m.sumLo -= v
		m.hi.push(v)
		m.sumHi += v
	case len(m.hi.v) > len(m.lo.v):
		v := m.hi.pop()
		m.sumHi -= v
		m.lo.push(v)
		m.sumLo += v
	}
}

func (m *runningMedian) absDev() float64 {
	d := m.sumHi - m.sumLo
	if len(m.lo.v) > len(m.hi.v) {
		d += m.lo.v[0]
	}
	return max(d, 0) // the running sums may round a hair below 0
}

// floatHeap is a binary heap of float64s, a max-heap when max is set
// (container/heap would box every value).
type floatHeap struct {
	v   []float64
	max bool
}

func (h *floatHeap) before(i, j int) bool {
	if h.max {
		return h.v[i] > h.v[j]
	}
	return h.v[i] < h.v[j]
}

func (h *floatHeap) push(x float64) {
	h.v = append(h.v, x)
	for i := len(h.v) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.before(i, p) {
			break
		}
		h.v[i], h.v[p] = h.v[p], h.v[i]
		i = p
	}
}

func (h *floatHeap) pop() float64 {
	top, n := h.v[0], len(h.v)-1
	h.v[0] = h.v[n]
	h.v = h.v[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.before(c+1, c) {
			c++
		}
		if !h.before(c, i) {
			break
		}
		h.v[i], h.v[c] = h.v[c], h.v[i]
		i = c
	}
	return top
}

// seriesNoise is the relative noise of one run's median in a series.
// Runs drift from night to night by more than their repeats vary, and
// only the run medians show by how much: with trendMinNoiseRuns runs or
// more it is their spread from run to run, 1.4826 x the MAD of their
// successive differences / sqrt(2) (differences cancel the levels, so a
// step or two among many differences barely moves it), but never below
// the standard error of a median of the repeats (1.2533 x their spread /
// sqrt(repeats), the medians over runs). With fewer runs the drift cannot
// be measured and, as in xrun diff, the spread of single repeats (1.4826
// x MAD / median) stands in for it.
func seriesNoise(x []float64, reps [][]float64) float64 {
	var spread, se []float64
	for _, r := range reps {
		if len(r) >= 2 {
			s := relSpread(r)
			spread = append(spread, s)
			se = append(se, medianEfficiency*s/math.Sqrt(float64(len(r))))
		}
	}
	level := math.Abs(Median(x))
	if len(x) < trendMinNoiseRuns || level == 0 {
		if len(spread) == 0 {
			return 0
		}
		return Median(spread)
	}
	d := make([]float64, len(x)-1)
	for i := 1; i < len(x); i++ {
		d[i-1] = (x[i] - x[i-1]) / level
	}
	md := Median(d)
	for i := range d {
		d[i] = math.Abs(d[i] - md)
	}
	between := madScale * Median(d) / math.Sqrt2
	if len(se) > 0 {
		return max(between, Median(se))
	}
	return between
}

// medianEfficiency is how much wider a median of many normal values
// spreads than their mean: sqrt(pi/2), its standard error 1.2533 sigma /
// sqrt(n). For one or two values the median is the mean.
var medianEfficiency = math.Sqrt(math.Pi / 2)

// uTestP is the Mann-Whitney U test's p-value between two samples; 1 when
// either is empty or both are the same constant.
func uTestP(a, b []float64) float64 {
	if len(a) == 0 || len(b) == 0 || (constant(a) && constant(b) && a[0] == b[0]) {
		return 1
	}
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(slices.Clone(a), thresholds), benchmath.NewSample(slices.Clone(b), thresholds))
	if math.IsNaN(c.P) {
		return 1
	}
	return c.P
}

// Err returns an error wrapping ErrRegression when the newest run starts
// a regression step or a cell newly failed, and one wrapping
// ErrNotCompared when no series reaches the newest run.
func (t *TrendReport) Err() error {
	switch t.Outcome {
	case OutcomeRegression:
		return fmt.Errorf("%w: %s", ErrRegression, t.headline())
	case OutcomeNothingCompared:
		return &trendNotCompared{msg: "nothing compared: " + t.Reason}
	}
	return nil
}

// label is the verdict's first words.
func (t *TrendReport) label() string {
	switch t.Outcome {
	case OutcomeRegression:
		return "REGRESSION"
	case OutcomeInconclusive:
		return "INCONCLUSIVE"
	case OutcomeNothingCompared:
		return "NOTHING COMPARED"
	}
	return "OK"
}

// dateLayout prints runs by date, with the time when two runs share one.
func (t *TrendReport) dateLayout() string {
	seen := map[string]bool{}
	for _, r := range t.Runs {
		d := r.Started.Format(time.DateOnly)
		if seen[d] {
			return "2006-01-02 15:04"
		}
		seen[d] = true
	}
	return time.DateOnly
}

func (t *TrendReport) runDate(i int) string { return t.Runs[i].Started.Format(t.dateLayout()) }

// newestRun names the newest run: "2026-03-08 (results/nightly/2026-03-08)".
func (t *TrendReport) newestRun() string {
	n := len(t.Runs) - 1
	return t.runDate(n) + " (" + t.Runs[n].Name + ")"
}

// headline is the one-line verdict.
func (t *TrendReport) headline() string {
	if t.Outcome == OutcomeNothingCompared {
		return t.Reason
	}
	var parts []string
	if n := t.Counts.NewestRegressions; n > 0 {
		var cells []string
		for _, s := range t.Series {
			if len(s.Steps) > 0 && s.Steps[len(s.Steps)-1].Newest && s.Steps[len(s.Steps)-1].Regression && !slices.Contains(cells, s.Cell) {
				cells = append(cells, s.Cell)
			}
		}
		in := strings.Join(cells, ", ")
		if len(cells) > 3 {
			in = strings.Join(cells[:3], ", ") + fmt.Sprintf(" and %d more", len(cells)-3)
		}
		parts = append(parts, fmt.Sprintf("the newest run, %s, starts %s beyond %s (%s: %s)", t.newestRun(), plural(n, "regression step"),
			formatThreshold(t.Threshold), plural(len(cells), "cell"), in))
	}
	if n := t.Counts.NewlyFailed; n > 0 {
		parts = append(parts, plural(n, "newly failed cell")+" in the newest run")
	}
	if len(parts) == 0 {
		s := "no regression step starts at the newest run, " + t.newestRun()
		if n := t.Counts.Inconclusive; n > 0 {
			s += fmt.Sprintf(", but %s worse there by more than %s and the noise, not significantly: not judged",
				fmt.Sprintf("%d series", n), formatThreshold(t.Threshold))
		}
		parts = append(parts, s)
	}
	if n := t.Counts.Missing; n > 0 {
		parts = append(parts, fmt.Sprintf("%s ok in the run before %s missing or skipped in the newest and not judged", plural(n, "cell"), pick(n == 1, "is", "are")))
	}
	return strings.Join(parts, ", ")
}

// scope says what was followed and what was found.
func (t *TrendReport) scope() string {
	var names []string
	for _, m := range t.Metrics {
		names = append(names, MetricFor(m).Name)
	}
	s := fmt.Sprintf("Followed %s, %s (cell x metric) over %d runs of study %q; metrics: %s.", plural(t.Counts.Cells, "cell"),
		fmt.Sprintf("%d series", t.Counts.Series), t.Counts.Runs, t.Study, pick(len(names) > 0, strings.Join(names, ", "), "none"))
	s += " Found " + plural(t.Counts.Steps, "step")
	if t.Counts.Steps > 0 {
		s += fmt.Sprintf(": %s (%d starting at the newest run), %s", plural(t.Counts.Regressions, "regression"), t.Counts.NewestRegressions,
			plural(t.Counts.Improvements, "improvement"))
		if other := t.Counts.Steps - t.Counts.Regressions - t.Counts.Improvements; other > 0 {
			s += fmt.Sprintf(", %d in metrics without a direction", other)
		}
	}
	return s + "."
}

// rule says what a step is.
func (t *TrendReport) rule() string {
	s := "A step is a change of level (the best piecewise-constant fit of the run medians; a level is the median of its runs' medians) by more than " +
		formatThreshold(t.Threshold)
	if t.NoiseFactor > 0 {
		s += fmt.Sprintf(" and beyond its noise band (the noise column): %g standard errors of the difference of the two levels, from the noise of one run"+
			" (the larger of the repeats' spread within runs and the medians' spread from run to run), widened for steps before the newest run"+
			" for the many places the fit could put one", t.NoiseFactor)
	}
	s += fmt.Sprintf(", and significant: Mann-Whitney U test between the repeats of the runs on either side, q < %g after the Benjamini-Hochberg correction over the trend's steps.", t.Alpha)
	return s + " A level held by one run is an outlier, not a step, but the newest run's."
}

// span names the first and the newest run.
func (t *TrendReport) span() string {
	return fmt.Sprintf("%d runs of study %q, %s (%s) to %s", len(t.Runs), t.Study, t.runDate(0), t.Runs[0].Name, t.newestRun())
}

// stepTables are the steps starting at the newest run, then the earlier
// ones, in series order.
func (t *TrendReport) stepTables() (newest, earlier *Table) {
	newest, earlier = t.stepTable(), t.stepTable()
	for _, s := range t.Series {
		for _, st := range s.Steps {
			row := []string{s.Cell, s.Name, t.runDate(st.Run), t.Runs[st.Run].Name,
				formatNumber(st.Before) + " (" + plural(st.BeforeRuns, "run") + ")", formatNumber(st.After) + " (" + plural(st.AfterRuns, "run") + ")",
				formatDelta(1 + st.Delta), noiseBand(st.Band), stepVerdict(st)}
			if st.Newest {
				newest.Rows = append(newest.Rows, row)
			} else {
				earlier.Rows = append(earlier.Rows, row)
			}
		}
	}
	return newest, earlier
}

func (t *TrendReport) stepTable() *Table {
	return &Table{Columns: []Column{{Name: "cell"}, {Name: "metric"}, {Name: "from"}, {Name: "run"}, {Name: "before", Right: true},
		{Name: "after", Right: true}, {Name: "change", Right: true}, {Name: "noise", Right: true}, {Name: "verdict"}}}
}

func noiseBand(band float64) string {
	if band <= 0 {
		return "-"
	}
	return "±" + formatPct(100*band)
}

func stepVerdict(st TrendStep) string {
	v := fmt.Sprintf("%s (p=%.3f q=%.3f n=%d+%d)", st.Verdict, st.P, st.Q, st.N1, st.N2)
	switch {
	case st.Regression && st.Newest:
		v += " REGRESSION"
	case st.Regression:
		v += " regression"
	case st.Improvement:
		v += " improvement"
	}
	return v
}

// seriesTable has a row per series: its runs, the latest median and its
// steps with their dates and sizes.
func (t *TrendReport) seriesTable() *Table {
	tb := &Table{Columns: []Column{{Name: "cell"}, {Name: "metric"}, {Name: "runs", Right: true}, {Name: "latest", Right: true}, {Name: "steps"}}}
	newest := len(t.Runs) - 1
	for _, s := range t.Series {
		last := s.Points[len(s.Points)-1]
		latest := formatSummary(last.Summary)
		if last.Run != newest {
			latest += " (" + t.runDate(last.Run) + ")"
		}
		var steps []string
		for _, st := range s.Steps {
			steps = append(steps, fmt.Sprintf("%s %s %s", t.runDate(st.Run), formatDelta(1+st.Delta), st.Verdict))
		}
		if u := s.Unjudged; u != nil {
			steps = append(steps, fmt.Sprintf("%s %s not significant (p=%.3f q=%.3f n=%d+%d)", t.runDate(u.Run), formatDelta(1+u.Delta), u.P, u.Q, u.N1, u.N2))
		}
		tb.Rows = append(tb.Rows, []string{s.Cell, s.Name, fmt.Sprint(len(s.Points)), latest, pick(len(steps) > 0, strings.Join(steps, "; "), "-")})
	}
	return tb
}

// cellLists are the newly failed and the missing cells.
func (t *TrendReport) cellLists() (lists cellLists) {
	add := lists.add
	add("Newly failed in the newest run (counted as regressions)", t.NewlyFailed)
	add("Ok in the run before the newest, missing or skipped in the newest (not judged)", t.Missing)
	return lists
}

// WriteText renders the trend for a terminal.
func (t *TrendReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "xrun trend: %s\n", t.span())
	fmt.Fprintf(&b, "%s: %s\n", t.label(), t.headline())
	fmt.Fprintf(&b, "%s\n%s\n", t.scope(), t.rule())
	for _, l := range t.cellLists() {
		b.WriteString("\n" + l.title + ":\n")
		for _, it := range l.items {
			b.WriteString("  " + it + "\n")
		}
	}
	newest, earlier := t.stepTables()
	if len(newest.Rows) > 0 {
		newest.Title = "Steps starting at the newest run, " + t.newestRun()
		b.WriteString("\n")
		newest.WriteText(&b)
	}
	if len(earlier.Rows) > 0 {
		earlier.Title = "Earlier steps"
		b.WriteString("\n")
		earlier.WriteText(&b)
	}
	if len(t.Series) > 0 {
		s := t.seriesTable()
		s.Title = "Series (latest: median ±95% CI of the last run that has the cell)"
		s.Notes = t.Warnings
		b.WriteString("\n")
		s.WriteText(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown renders the trend for a pull request or an issue: the
// verdict first, the steps, then every series folded away.
func (t *TrendReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## xrun trend: %s: %s\n\n", t.label(), mdEscape(t.headline()))
	fmt.Fprintf(&b, "%s\n\n%s\n\n%s\n", mdEscape(t.span()), mdEscape(t.scope()), mdEscape(t.rule()))
	for _, l := range t.cellLists() {
		fmt.Fprintf(&b, "\n**%s**\n\n", mdEscape(l.title))
		for _, it := range l.items {
			b.WriteString("- " + mdEscape(it) + "\n")
		}
	}
	newest, earlier := t.stepTables()
	if len(newest.Rows) > 0 {
		b.WriteString("\n### Steps starting at the newest run\n\n")
		newest.WriteMarkdown(&b, 0)
	}
	if len(earlier.Rows) > 0 {
		b.WriteString("\n### Earlier steps\n\n")
		earlier.WriteMarkdown(&b, 0)
	}
	if len(t.Series) > 0 {
		fmt.Fprintf(&b, "\n<details><summary>All series (%s, latest: median ±95%% CI of the last run that has the cell)</summary>\n\n", fmt.Sprintf("%d series", t.Counts.Series))
		s := t.seriesTable()
		s.Notes = t.Warnings
		s.WriteMarkdown(&b, 0)
		b.WriteString("\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON renders the report as indented JSON for bots and charts.
func (t *TrendReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(t)
}

// TrendFormats are the formats TrendReport.Render draws, default first.
var TrendFormats = []string{"text", "markdown", "json"}

// Render draws the report in one of TrendFormats.
func (t *TrendReport) Render(w io.Writer, format string) error {
	switch format {
	case "text":
		return t.WriteText(w)
	case "markdown":
		return t.WriteMarkdown(w)
	case "json":
		return t.WriteJSON(w)
	}
	return fmt.Errorf("%q is not a trend format; expected %s", format, strings.Join(TrendFormats, ", "))
}

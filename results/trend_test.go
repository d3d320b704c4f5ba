package results

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results/golden"
)

// trendDay0 is the first synthetic night.
var trendDay0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// trendHistory synthesises n nightly runs of the nightly study, one a day
// from trendDay0, each drawn with its own seed (1 % noise between
// repeats) and shifted as a whole by drift (relative standard deviation
// of a run's level: the machine's night-to-night wobble). slow(run, bs)
// multiplies the latencies of batch size bs in that run: 1.10 is a 10 %
// regression. Runs are normalized as if read back from results.json.
func trendHistory(seed uint64, n int, drift float64, slow func(run, bs int) float64) []*Results {
	var out []*Results
	for i := range n {
		s := nightly(seed*1000+uint64(i), 0)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		for j := range s.cells {
			s.cells[j].slow = slow(i, s.cells[j].params["batch_size"].(int)) * (1 + drift*rng.NormFloat64())
		}
		r := s.build()
		r.Started = trendDay0.AddDate(0, 0, i)
		r.Finished = r.Started.Add(17 * time.Minute)
		nr, err := Normalized(r)
		if err != nil {
			panic(err)
		}
		out = append(out, nr)
	}
	return out
}

func steady(int, int) float64 { return 1 }

// trendNames labels runs as a nightly cron job's directories.
func trendNames(n int) []string {
	var names []string
	for i := range n {
		names = append(names, "nightly/"+trendDay0.AddDate(0, 0, i).Format(time.DateOnly))
	}
	return names
}

// trendOpts are xrun trend's defaults, changed by set.
func trendOpts(set func(*TrendOptions)) TrendOptions {
	o := TrendOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultTrendNoiseFactor}
	if set != nil {
		set(&o)
	}
	return o
}

func mustTrend(t *testing.T, runs []*Results, opts TrendOptions) *TrendReport {
	t.Helper()
	tr, err := Trend(runs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// stepRuns maps "cell prefix/metric" to the runs its steps start at.
func stepRuns(tr *TrendReport) map[string][]int {
	out := map[string][]int{}
	for _, s := range tr.Series {
		for _, st := range s.Steps {
			k := s.Cell[:strings.Index(s.Cell, "-")] + "/" + s.Metric
			out[k] = append(out[k], st.Run)
		}
	}
	return out
}

// knownSteps is the golden history: batch 64 regresses by 10 % on the
// fifth night and stays so, batch 16 improves by 8 % on the eighth,
// batch 256 regresses by 6 % on the newest (twelfth) night, and batch 1
// only wobbles, with one night 12 % slow in the middle: an outlier, not a
// step.
func knownSteps(run, bs int) float64 {
	switch {
	case bs == 64 && run >= 4:
		return 1.10
	case bs == 16 && run >= 7:
		return 1 / 1.08
	case bs == 256 && run == 11:
		return 1.06
	case bs == 1 && run == 5:
		return 1.12
	}
	return 1
}

// TestTrendKnownSteps: every step of the synthetic history is found at
// the run it started, with its size and direction; the outlier is not a
// step; the newest run's regression fails the trend.
func TestTrendKnownSteps(t *testing.T) {
	tr := mustTrend(t, trendHistory(1, 12, 0.003, knownSteps), trendOpts(func(o *TrendOptions) { o.Names = trendNames(12) }))
	want := map[string][]int{}
	for _, m := range HeadlineMetrics() {
		want["bs64/"+m] = []int{4}
		want["bs16/"+m] = []int{7}
		want["bs256/"+m] = []int{11}
	}
	if got := stepRuns(tr); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("steps at %v\nwant %v", got, want)
	}
	for _, s := range tr.Series {
		for _, st := range s.Steps {
			wantDelta := map[string]float64{"bs64": 1.10, "bs16": 1 / 1.08, "bs256": 1.06}[s.Cell[:strings.Index(s.Cell, "-")]]
			if MetricFor(s.Metric).Better == HigherIsBetter {
				wantDelta = 1 / wantDelta
			}
			if math.Abs(1+st.Delta-wantDelta) > 0.015 {
				t.Errorf("%s %s: delta %+.4f, want about %+.4f", s.Cell, s.Metric, st.Delta, wantDelta-1)
			}
			regression := wantDelta > 1 == (MetricFor(s.Metric).Better == LowerIsBetter)
			if st.Regression != regression || st.Improvement == regression || st.Newest != (st.Run == 11) {
				t.Errorf("%s %s: %+v", s.Cell, s.Metric, st)
			}
			if !st.Started.Equal(trendDay0.AddDate(0, 0, st.Run)) || st.Q >= Alpha || math.Abs(st.Delta) <= st.Band {
				t.Errorf("%s %s: %+v", s.Cell, s.Metric, st)
			}
		}
	}
	if tr.Outcome != OutcomeRegression || tr.Counts.NewestRegressions != 5 || tr.Counts.Steps != 15 || tr.Counts.Regressions != 10 {
		t.Errorf("outcome %s, counts %+v", tr.Outcome, tr.Counts)
	}
	if err := tr.Err(); !errors.Is(err, ErrRegression) || !strings.Contains(err.Error(), "the newest run, 2026-03-12 (nightly/2026-03-12), starts 5 regression steps beyond 3% (1 cell: bs256-fbe9d714)") {
		t.Errorf("Err() = %v", err)
	}
}

// TestTrendGolden renders the known steps, and a history of noise with
// one night 15 % slow in one cell: no step.
func TestTrendGolden(t *testing.T) {
	steps := mustTrend(t, trendHistory(1, 12, 0.003, knownSteps), trendOpts(func(o *TrendOptions) { o.Names = trendNames(12) }))
	for _, format := range TrendFormats {
		if format == "json" {
			continue // below, on one metric: every repeat of five is too long to review
		}
		var b bytes.Buffer
		if err := steps.Render(&b, format); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, "trend-steps."+format+".golden", b.Bytes())
	}
	one := mustTrend(t, trendHistory(1, 12, 0.003, knownSteps), trendOpts(func(o *TrendOptions) { o.Names = trendNames(12); o.Metrics = []string{"request_throughput_req_s"} }))
	var b bytes.Buffer
	if err := one.Render(&b, "json"); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trend-steps.json.golden", b.Bytes())

	outlier := func(run, bs int) float64 { return pick(bs == 16 && run == 7, 1.15, 1) }
	noise := mustTrend(t, trendHistory(2, 15, 0.005, outlier), trendOpts(func(o *TrendOptions) { o.Names = trendNames(15) }))
	if noise.Counts.Steps != 0 || noise.Outcome != OutcomeOK || noise.Err() != nil {
		t.Errorf("pure noise: %d steps, outcome %s", noise.Counts.Steps, noise.Outcome)
	}
	b.Reset()
	if err := noise.Render(&b, "text"); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trend-noise.text.golden", b.Bytes())
	if err := noise.Render(&b, "png"); err == nil {
		t.Error("Render accepted an unknown format")
	}
}

// TestTrendNoStepsOnNoise: histories of pure noise, their run-to-run
// wobble and repeat-to-repeat noise well within the threshold, have no
// step at all, over many seeds, lengths and outliers.
func TestTrendNoStepsOnNoise(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		n := 3 + int(seed%12)
		outlier := int(seed % uint64(n-1)) // never the newest: that would start a step
		tr := mustTrend(t, trendHistory(seed, n, 0.004, func(run, bs int) float64 {
			if bs == 16 && run == outlier && outlier > 0 {
				return 1.15
			}
			return 1
		}), trendOpts(nil))
		if tr.Counts.Steps != 0 || tr.Outcome != OutcomeOK {
			t.Errorf("seed %d, %d runs: steps %v, outcome %s", seed, n, stepRuns(tr), tr.Outcome)
		}
	}
}

// TestTrendFindsStepsExactly: a step of 8 to 14 % at any run, up or down,
// is found at that run in every headline metric of its cell, and nowhere
// else.
func TestTrendFindsStepsExactly(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		n := 4 + int(seed%10)
		at := 2 + int(seed%uint64(n-2)) // from the third run to the newest
		size := 1.08 + 0.06*float64(seed%8)/7
		if seed%2 == 0 {
			size = 1 / size
		}
		tr := mustTrend(t, trendHistory(seed, n, 0.003, func(run, bs int) float64 {
			if bs == 64 && run >= at {
				return size
			}
			return 1
		}), trendOpts(nil))
		want := map[string][]int{}
		for _, m := range HeadlineMetrics() {
			want["bs64/"+m] = []int{at}
		}
		if got := stepRuns(tr); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("seed %d, %d runs, x%.3f at run %d: steps at %v", seed, n, size, at, got)
		}
		if wantOutcome := pick(at == n-1 && size > 1, OutcomeRegression, OutcomeOK); tr.Outcome != wantOutcome {
			t.Errorf("seed %d: outcome %s, want %s", seed, tr.Outcome, wantOutcome)
		}
	}
}

// TestTrendRegressionFixed: a regression fixed some nights later is two
// steps, where one split of the whole series finds nothing (both halves
// have the same median).
func TestTrendRegressionFixed(t *testing.T) {
	tr := mustTrend(t, trendHistory(3, 15, 0.003, func(run, bs int) float64 {
		return pick(bs == 64 && run >= 6 && run < 10, 1.10, 1)
	}), trendOpts(func(o *TrendOptions) { o.Metrics = []string{"total_latency_ms"} }))
	got := stepRuns(tr)["bs64/total_latency_ms"]
	if !slices.Equal(got, []int{6, 10}) || len(stepRuns(tr)) != 1 {
		t.Fatalf("steps at %v, want bs64 at runs 6 and 10", stepRuns(tr))
	}
	s := tr.Series[slices.IndexFunc(tr.Series, func(s TrendSeries) bool { return strings.HasPrefix(s.Cell, "bs64") })]
	if !s.Steps[0].Regression || !s.Steps[1].Improvement || s.Steps[0].AfterRuns != 4 || s.Steps[1].BeforeRuns != 4 {
		t.Errorf("steps %+v", s.Steps)
	}
	if tr.Outcome != OutcomeOK {
		t.Errorf("outcome %s: an old regression, since fixed, does not fail the trend", tr.Outcome)
	}
}

// TestTrendThresholdAndNoise: a step within the threshold, or within the
// noise of a noisy cell, is no step.
func TestTrendThresholdAndNoise(t *testing.T) {
	mid := func(run, bs int) float64 { return pick(bs == 64 && run >= 5, 1.06, 1) }
	if tr := mustTrend(t, trendHistory(4, 10, 0.003, mid), trendOpts(func(o *TrendOptions) { o.Threshold = 0.08 })); tr.Counts.Steps != 0 {
		t.Errorf("a 6 %% step beyond an 8 %% threshold: %v", stepRuns(tr))
	}
	if tr := mustTrend(t, trendHistory(4, 10, 0.003, mid), trendOpts(nil)); len(stepRuns(tr)) != 5 {
		t.Errorf("the 6 %% step is not found at 3 %%: %v", stepRuns(tr))
	}
	// The same step at the newest run of a cell whose nights wobble by
	// 4 %: within 3 standard errors, so no step; --noise-factor 0 turns
	// the rule off and only the threshold and the test are left.
	last := func(run, bs int) float64 { return pick(bs == 64 && run == 9, 1.06, 1) }
	noisy := trendHistory(5, 10, 0.04, last)
	tr := mustTrend(t, noisy, trendOpts(nil))
	for _, s := range tr.Series {
		if strings.HasPrefix(s.Cell, "bs64-") && len(s.Steps) > 0 {
			t.Errorf("a 6 %% step within 4 %% run-to-run noise: %s %+v", s.Metric, s.Steps)
		}
		if s.Noise < 0.02 {
			t.Errorf("%s %s: noise %.4f, want the run-to-run wobble", s.Cell, s.Metric, s.Noise)
		}
	}
	if tr.Counts.NewestRegressions > 0 {
		t.Errorf("the noisy newest run fails the trend: %v", stepRuns(tr))
	}
	tr = mustTrend(t, noisy, trendOpts(func(o *TrendOptions) { o.NoiseFactor = 0 }))
	if got := stepRuns(tr)["bs64/total_latency_ms"]; !slices.Contains(got, 9) {
		t.Errorf("without the noise rule the newest run's 6 %% step is not found: %v", stepRuns(tr))
	}
}

// TestTrendUnsorted: runs given in any order are put in time order, with
// their names; the report is the same.
func TestTrendUnsorted(t *testing.T) {
	runs, names := trendHistory(1, 12, 0.003, knownSteps), trendNames(12)
	want := mustTrend(t, runs, trendOpts(func(o *TrendOptions) { o.Names = names }))
	perm := rand.New(rand.NewPCG(9, 9)).Perm(len(runs))
	var shuffled []*Results
	var shuffledNames []string
	for _, i := range perm {
		shuffled = append(shuffled, runs[i])
		shuffledNames = append(shuffledNames, names[i])
	}
	got := mustTrend(t, shuffled, trendOpts(func(o *TrendOptions) { o.Names = shuffledNames }))
	var a, b bytes.Buffer
	want.WriteJSON(&a)
	got.WriteJSON(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the report depends on the order the runs are given in")
	}
	if got.Runs[0].Name != names[0] || got.Runs[11].Name != names[11] {
		t.Errorf("runs %v", got.Runs)
	}
}

// TestTrendRefused: runs of different studies, fewer than two runs, a run
// without a start time and the same run twice are refused, with what is
// wrong; the first two are ErrNotCompared (exit 4), the others bad input.
func TestTrendRefused(t *testing.T) {
	runs := trendHistory(1, 3, 0.003, steady)
	other := *runs[1]
	other.Name = "gemm-plugin"
	undated := *runs[1]
	undated.Started = time.Time{}
	for _, c := range []struct {
		name     string
		runs     []*Results
		notComp  bool
		contains string
	}{
		{"other study", []*Results{runs[0], &other, runs[2]}, true, `not comparable: a is study "nightly", b is study "gemm-plugin": a trend follows one study`},
		{"one run", runs[:1], true, "a trend needs at least 2 runs of a study; got 1"},
		{"no runs", nil, true, "got 0"},
		{"undated", []*Results{runs[0], &undated}, false, "b: started: no start time"},
		{"twice", []*Results{runs[0], runs[1], runs[1]}, false, "c: started: 2026-03-02T02:00:00Z, the same start as b: the same run given twice?"},
	} {
		_, err := Trend(c.runs, trendOpts(func(o *TrendOptions) { o.Names = []string{"a", "b", "c"} }))
		var bi interface{ BadInput() bool }
		if err == nil || errors.Is(err, ErrNotCompared) != c.notComp || (errors.As(err, &bi) && bi.BadInput()) == c.notComp {
			t.Errorf("%s: %v (ErrNotCompared %v)", c.name, err, errors.Is(err, ErrNotCompared))
			continue
		}
		if !strings.Contains(err.Error(), c.contains) {
			t.Errorf("%s: %q lacks %q", c.name, err, c.contains)
		}
	}
}

// TestTrendNewestCells: a cell ok the night before that failed in the
// newest run is a regression, as in xrun diff; one missing or skipped is
// listed as not judged, never passed over in silence.
func TestTrendNewestCells(t *testing.T) {
	runs := trendHistory(1, 5, 0.003, steady)
	last := runs[4]
	last.Cells[0].Status, last.Cells[0].Error, last.Cells[0].Repeats = StatusFailed, "engine: out of memory", nil
	last.Cells[1].Status, last.Cells[1].Error, last.Cells[1].Repeats = StatusSkipped, "not run: the time limit", nil
	last.Cells = slices.Delete(last.Cells, 2, 3)
	tr := mustTrend(t, runs, trendOpts(nil))
	if tr.Outcome != OutcomeRegression || tr.Counts.NewlyFailed != 1 || tr.Counts.Missing != 2 {
		t.Fatalf("outcome %s, counts %+v", tr.Outcome, tr.Counts)
	}
	var b bytes.Buffer
	tr.WriteText(&b)
	for _, want := range []string{
		"REGRESSION: 1 newly failed cell in the newest run, 2 cells ok in the run before are missing or skipped in the newest and not judged",
		"Newly failed in the newest run (counted as regressions):\n  bs1-8aae56ba: engine: out of memory\n",
		"missing or skipped in the newest (not judged):\n  bs16-2af751de: skipped in the newest run: not run: the time limit\n  bs256-fbe9d714: not in the newest run\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	// The series of the failed cell ends the night before.
	if !strings.Contains(b.String(), "(2026-03-04)") {
		t.Errorf("the latest median of a cell the newest run lacks is not dated:\n%s", b.String())
	}
}

// TestTrendNothingCompared: when no series reaches the newest run from an
// earlier one, the trend says why and is ErrNotCompared, never OK.
func TestTrendNothingCompared(t *testing.T) {
	runs := trendHistory(1, 3, 0.003, steady)
	for i := range runs[2].Cells {
		runs[2].Cells[i].ID += "x" // another matrix: other cells
	}
	tr := mustTrend(t, runs, trendOpts(nil))
	err := tr.Err()
	if tr.Outcome != OutcomeNothingCompared || !errors.Is(err, ErrNotCompared) || !strings.Contains(err.Error(), "nothing compared: no cell ok in the newest run has the metrics followed in an earlier run") {
		t.Errorf("outcome %s, Err %v", tr.Outcome, err)
	}
	runs = trendHistory(1, 3, 0.003, steady)
	if tr := mustTrend(t, runs, trendOpts(func(o *TrendOptions) { o.Metrics = []string{"no_such_metric"} })); tr.Outcome != OutcomeNothingCompared || tr.Counts.Series != 0 {
		t.Errorf("a metric no run has: outcome %s", tr.Outcome)
	}
}

// TestTrendInconclusive: a newest run 10 % worse whose repeats cannot be
// significant (3 a side) is no step and no all-clear.
func TestTrendInconclusive(t *testing.T) {
	var runs []*Results
	for i := range 2 {
		s := nightly(uint64(50+i), pick(i == 1, 64, 0))
		s.repeats = 3
		r := s.build()
		r.Started = trendDay0.AddDate(0, 0, i)
		runs = append(runs, r)
	}
	tr := mustTrend(t, runs, trendOpts(func(o *TrendOptions) { o.Metrics = []string{"total_latency_ms"} }))
	if tr.Outcome != OutcomeInconclusive || tr.Counts.Steps != 0 || tr.Counts.Inconclusive != 1 || tr.Err() != nil {
		t.Fatalf("outcome %s, counts %+v", tr.Outcome, tr.Counts)
	}
	var b bytes.Buffer
	tr.WriteText(&b)
	for _, want := range []string{"INCONCLUSIVE: no regression step starts at the newest run", "but 1 series worse there by more than 3%",
		"not significant (p=0.100 q=0.100 n=3+3)", "3+3 repeats can never reach p < 0.05"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestTrendNoDirection: a step in a metric with no better direction is
// higher or lower, never a regression.
func TestTrendNoDirection(t *testing.T) {
	tr := mustTrend(t, trendHistory(1, 6, 0.003, func(run, bs int) float64 { return pick(bs == 64 && run == 5, 1.2, 1) }),
		trendOpts(func(o *TrendOptions) { o.Metrics = []string{"total_latency_ms", "avg_concurrent_requests"} }))
	for _, s := range tr.Series {
		for _, st := range s.Steps {
			if s.Metric == "avg_concurrent_requests" && (st.Verdict != Higher && st.Verdict != Lower || st.Regression || st.Improvement) {
				t.Errorf("%s: %+v", s.Metric, st)
			}
		}
	}
	if tr.Counts.NewestRegressions != 1 {
		t.Errorf("counts %+v", tr.Counts)
	}
}

// TestFitLevels checks the optimal partitioning on exact series.
func TestFitLevels(t *testing.T) {
	for _, c := range []struct {
		name string
		x    []float64
		want []int
	}{
		{"constant", []float64{5, 5, 5, 5, 5}, nil},
		{"step", []float64{10, 10, 10, 12, 12, 12}, []int{3}},
		{"step at the newest run", []float64{10, 10, 10, 10, 12}, []int{4}},
		{"two runs", []float64{10, 12}, []int{1}},
		{"outlier inside", []float64{10, 10, 14, 10, 10, 10}, nil},
		{"outlier first", []float64{14, 10, 10, 10}, nil},
		{"regression fixed", []float64{10, 10, 10, 12, 12, 10, 10, 10}, []int{3, 5}},
		{"two steps", []float64{10, 10, 11, 11, 13, 13, 13}, []int{2, 4}},
		{"wild run in a level", []float64{10, 10, 10, 12, 12, 30, 12, 12}, []int{3}},
	} {
		if got := fitLevels(c.x, 0.5); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := fitLevels([]float64{10, 10, 10, 10.4, 10.4, 10.4}, 2); got != nil {
		t.Errorf("a change saving less than the penalty is a step: %v", got)
	}
}

// TestFitLevelsOptimal: on small random series the dynamic programme's
// fit costs no more than the best of every allowed segmentation, found by
// brute force.
func TestFitLevelsOptimal(t *testing.T) {
	cost := func(x []float64, starts []int, beta float64) float64 {
		c := beta * float64(len(starts))
		bounds := append(append([]int{0}, starts...), len(x))
		for i := 1; i < len(bounds); i++ {
			seg := x[bounds[i-1]:bounds[i]]
			m := Median(seg)
			for _, v := range seg {
				c += math.Abs(v - m)
			}
		}
		return c
	}
	// Every level spans two runs but the newest run's, and in a series of
	// two each run's.
	allowed := func(starts []int, n int) bool {
		bounds := append(append([]int{0}, starts...), n)
		for i := 1; i < len(bounds); i++ {
			if bounds[i]-bounds[i-1] < 2 && bounds[i] < n && n > 2 {
				return false
			}
		}
		return true
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 2 + trial%7
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Round(10*rng.NormFloat64()) + pick(i >= n/2, float64(trial%3)*10, 0)
		}
		beta := float64(1 + trial%20)
		best := math.Inf(1)
		for mask := 0; mask < 1<<(n-1); mask++ {
			var starts []int
			for i := 1; i < n; i++ {
				if mask&(1<<(i-1)) != 0 {
					starts = append(starts, i)
				}
			}
			if allowed(starts, n) {
				best = min(best, cost(x, starts, beta))
			}
		}
		fit := fitLevels(x, beta)
		if got := cost(x, fit, beta); got > best+1e-9 || !allowed(fit, n) {
			t.Fatalf("%v, beta %v: fit %v costs %v, the best %v", x, beta, fit, got, best)
		}
	}
}

// TestRunningMedian: the running absolute deviation matches the direct
// sum, whatever order values come in.
func TestRunningMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m runningMedian
	for trial := range 50 {
		m.reset()
		var vals []float64
		for range 1 + trial {
			v := math.Round(rng.NormFloat64()*100) / 4
			m.push(v)
			vals = append(vals, v)
			med, want := Median(vals), 0.0
			for _, x := range vals {
				want += math.Abs(x - med)
			}
			if got := m.absDev(); math.Abs(got-want) > 1e-9 {
				t.Fatalf("%v: absDev %v, want %v", vals, got, want)
			}
		}
	}
}

// TestSeriesNoise: with few runs the noise is the repeats' spread; with
// enough, the run-to-run spread when larger, which a step barely moves.
func TestSeriesNoise(t *testing.T) {
	reps := func(n int) [][]float64 {
		var r [][]float64
		for range n {
			r = append(r, []float64{99, 100, 101})
		}
		return r
	}
	if got, want := seriesNoise([]float64{100, 104, 96}, reps(3)), relSpread([]float64{99, 100, 101}); got != want {
		t.Errorf("3 runs: %v, want the repeats' spread %v", got, want)
	}
	wobble := []float64{100, 103, 97, 103, 97, 103, 97, 103}
	got := seriesNoise(wobble, reps(8))
	if got < 0.03 || got > 0.06 {
		t.Errorf("a 3 %% wobble: noise %v", got)
	}
	stepped := append(slices.Clone(wobble[:4]), 120, 123, 117, 123)
	if s := seriesNoise(stepped, reps(8)); math.Abs(s-got) > 0.3*got {
		t.Errorf("a step moved the noise from %v to %v", got, s)
	}
}

// BenchmarkTrendYear is a year of nightly runs of the four-cell study.
func BenchmarkTrendYear(b *testing.B) {
	runs := trendHistory(1, 365, 0.003, func(run, bs int) float64 { return pick(bs == 64 && run >= 200, 1.1, 1) })
	for b.Loop() {
		if _, err := Trend(runs, trendOpts(nil)); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleTrend() {
	var runs []*Results
	for night := range 8 {
		s := nightly(uint64(night), 0)
		if night >= 6 {
			s.cells[2].slow = 1.10 // batch 64, 10 % slower from the seventh night
		}
		r := s.build()
		r.Started = trendDay0.AddDate(0, 0, night)
		runs = append(runs, r)
	}
	tr, _ := Trend(runs, trendOpts(func(o *TrendOptions) { o.Metrics = []string{"total_latency_ms"} }))
	for _, s := range tr.Series {
		for _, st := range s.Steps {
			fmt.Printf("%s %s: %s %+.0f%% from %s\n", s.Cell, s.Metric, st.Verdict, 100*st.Delta, st.Started.Format(time.DateOnly))
		}
	}
	fmt.Println(tr.Outcome)
	// Output:
	// bs64-3195f03b total_latency_ms: slower +10% from 2026-03-07
	// ok
}

package results

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// DefaultThreshold is the smallest relative change xrun diff calls a
// regression: below it, even a significant change is within what the
// same machine drifts from day to day.
const DefaultThreshold = 0.03

// MissingPolicy says what cells ok in OLD but missing or skipped in NEW
// do to the verdict.
type MissingPolicy string

const (
	// MissingFail (the default) makes them fail the diff with
	// ErrNotCompared (xrun exit status 4) unless a regression was found
	// (that fails it already): a nightly run that lost cells, interrupted
	// or cut by its time limit, has not shown that they did not regress.
	MissingFail MissingPolicy = "fail"
	// MissingWarn lists them and judges the rest: a pull request that
	// removes cells, or a run of part of the matrix, on purpose.
	MissingWarn MissingPolicy = "warn"
)

// MissingPolicies lists the policies, default first.
var MissingPolicies = []MissingPolicy{MissingFail, MissingWarn}

// DiffOptions configure Diff.
type DiffOptions struct {
	// Threshold is the relative change (0.03 = 3 %) a significant worse
	// change must exceed to count as a regression.
	Threshold float64
	// NoiseFactor is how many times its cell's repeat-to-repeat spread a
	// change must also exceed (DefaultNoiseFactor says why); 0 turns the
	// rule off.
	NoiseFactor float64
	// Missing is the policy for cells of OLD missing in NEW; "" means
	// MissingFail.
	Missing MissingPolicy
	// AnyStudy compares results whose studies have different names (a
	// study renamed by the change under test). Without it such results
	// are not comparable: nothing is judged.
	AnyStudy bool
	// Metrics are the metric keys judged; empty means the default
	// metrics (DefaultMetrics) both sides have. Fewer metrics mean fewer
	// chances of a false alarm.
	Metrics []string
	// OldName and NewName label the two sides (their paths).
	OldName, NewName string
}

// Outcome is the verdict of a diff in one word: its label, its "outcome"
// in JSON and, through Err, xrun's exit status.
type Outcome string

const (
	// OutcomeOK: cells were compared and none regressed.
	OutcomeOK Outcome = "ok"
	// OutcomeInconclusive: no regression, but metrics worse beyond the
	// threshold that the repeats cannot judge (too few of them, or the
	// change within their noise). Not an error.
	OutcomeInconclusive Outcome = "inconclusive"
	// OutcomeRegression: ErrRegression.
	OutcomeRegression Outcome = "regression"
	// OutcomeMissing: cells ok in OLD are missing or skipped in NEW under
	// MissingFail, and nothing regressed. ErrNotCompared.
	OutcomeMissing Outcome = "missing"
	// OutcomeNothingCompared: not one metric was compared (NEW has no
	// cells, no cell id matches, every cell was skipped, ...), and no
	// cell newly failed. ErrNotCompared.
	OutcomeNothingCompared Outcome = "nothing_compared"
	// OutcomeNotComparable: the results are of different studies (and
	// not DiffOptions.AnyStudy); nothing is judged. ErrNotCompared.
	OutcomeNotComparable Outcome = "not_comparable"
)

// ErrNotCompared is returned (wrapped) by a diff that compared nothing,
// whose two results cannot be compared, or that lacks cells OLD had
// (MissingFail): its silence about regressions is no all-clear.
var ErrNotCompared = errors.New("not compared")

// CellChange says how a cell id fared between two results.
type CellChange string

const (
	CellCompared    CellChange = "compared"     // ok in both: metrics compared
	CellAdded       CellChange = "added"        // only in new
	CellRemoved     CellChange = "removed"      // only in old, where it was not ok
	CellMissing     CellChange = "missing"      // ok in old; not in new, or skipped there
	CellNewlyFailed CellChange = "newly failed" // ok in old, failed in new: a regression
	CellFixed       CellChange = "fixed"        // failed or skipped in old, ok in new
	CellNotCompared CellChange = "not compared" // not ok in both
)

// DiffReport is what xrun diff found. It renders as text, Markdown (a
// pull-request comment) or JSON.
type DiffReport struct {
	Old string `json:"old"`
	New string `json:"new"`
	// OldStudy and NewStudy are the two results' study names.
	OldStudy    string        `json:"old_study"`
	NewStudy    string        `json:"new_study"`
	Outcome     Outcome       `json:"outcome"`
	Threshold   float64       `json:"threshold"`
	NoiseFactor float64       `json:"noise_factor"`
	Alpha       float64       `json:"alpha"`
	Missing     MissingPolicy `json:"missing"`
	Metrics     []string      `json:"metrics"`
	// Regression is true when at least one metric got significantly
	// worse beyond the threshold and the noise, or a cell newly failed.
	Regression  bool        `json:"regression"`
	Counts      DiffCounts  `json:"counts"`
	Tests       DiffTests   `json:"tests"`
	Environment []EnvChange `json:"environment"`
	Cells       []CellDiff  `json:"cells"`
	// KernelsUnchanged counts the cells profiled in both runs whose
	// kernels did not change (their CellDiff has no KernelChanges).
	KernelsUnchanged int `json:"kernels_unchanged,omitempty"`
	// Warnings are statistical caveats, deduplicated.
	Warnings []string `json:"warnings"`
	// Reason says why nothing was compared (OutcomeNothingCompared) or
	// why the results are not comparable.
	Reason string `json:"reason,omitempty"`
	// untestable is the sample sizes ("3+3") of the first metric
	// inconclusive for too few repeats, for the headline.
	untestable string
}

// DiffCounts tally the report for its headline.
type DiffCounts struct {
	Regressions  int `json:"regressions"`
	Improvements int `json:"improvements"`
	// Compared counts the cells ok in both results, Metrics the cell x
	// metric pairs compared in them.
	Compared    int `json:"compared"`
	Metrics     int `json:"compared_metrics"`
	Added       int `json:"added"`
	Removed     int `json:"removed"`
	Missing     int `json:"missing"`
	NewlyFailed int `json:"newly_failed"`
	Fixed       int `json:"fixed"`
	Throttled   int `json:"throttled"`
	// Inconclusive counts the metrics marked so (MetricDiff), WithinNoise
	// those of them that were significant but within the noise.
	Inconclusive int `json:"inconclusive,omitempty"`
	WithinNoise  int `json:"within_noise,omitempty"`
	// ClockDiffers counts the compared cells whose mean SM clocks differ
	// (CellDiff.Clock), ClockExplained the regressions the clock explains.
	ClockDiffers   int `json:"clock_differs,omitempty"`
	ClockExplained int `json:"clock_explained,omitempty"`
}

// DiffTests account for the many comparisons a diff makes: with cells x
// metrics of them, some come out significant by chance alone.
type DiffTests struct {
	// Comparisons is how many cell x metric pairs were tested, the family
	// the correction is over.
	Comparisons int `json:"comparisons"`
	// Correction is the procedure applied to their p-values (Correction).
	Correction string `json:"correction"`
	// ExpectedFalsePositives is Alpha x Comparisons: how many would come
	// out significant by chance if nothing changed and nothing corrected.
	ExpectedFalsePositives float64 `json:"expected_false_positives_uncorrected"`
	// SignificantUncorrected counts comparisons with p < alpha,
	// Significant those still significant after the correction.
	SignificantUncorrected int `json:"significant_uncorrected"`
	Significant            int `json:"significant"`
}

// CellDiff is one cell id's comparison.
type CellDiff struct {
	ID        string     `json:"id"`
	Change    CellChange `json:"change"`
	OldStatus Status     `json:"old_status,omitempty"`
	NewStatus Status     `json:"new_status,omitempty"`
	Error     string     `json:"error,omitempty"` // the new run's error
	Throttled string     `json:"throttled,omitempty"`
	// Trend says which side's repeats rose or fell from each to the next
	// (repeatTrend): its verdicts compare a trend, not noise.
	Trend string `json:"trend,omitempty"`
	// Held says how the engine held the requests differently (heldDiffNote):
	// how many at once, paged or in fixed slots.
	Held    string       `json:"held,omitempty"`
	Metrics []MetricDiff `json:"metrics,omitempty"`
	// Clock is set when the cell ran at mean SM clocks more than
	// ClockTolerance apart; its metrics then carry PerClock.
	Clock *ClockDiff `json:"sm_clock,omitempty"`
	// Roofline is the share of the roofline reached, old and new, when
	// either side has a roofline; informational, never a regression.
	Roofline *RooflineDiff `json:"roofline,omitempty"`
	// KernelChanges say what changed in the kernels, old to new, when
	// both runs profiled the cell (KernelDiff.Changes). They never make
	// a regression: one profiled pass a side is no statistical test.
	KernelChanges []string `json:"kernel_changes,omitempty"`
}

// MetricDiff is one metric of one cell, old against new.
type MetricDiff struct {
	Metric string  `json:"metric"`
	Name   string  `json:"name"`
	Old    Summary `json:"old"`
	New    Summary `json:"new"`
	// Delta is new/old - 1 on the medians; null when old is 0.
	Delta *float64 `json:"delta"`
	// P is the U test's p-value; Q is P adjusted for all the diff's
	// comparisons (Correction). Significant is Q < alpha with medians
	// that differ, and the verdict follows it.
	P           float64 `json:"p"`
	Q           float64 `json:"q"`
	Significant bool    `json:"significant"`
	Verdict     Verdict `json:"verdict"`
	// Noise is the relative change the metric must exceed besides the
	// threshold: NoiseFactor times the pooled spread of the repeats
	// (DefaultNoiseFactor); 0 with the rule off. WithinNoise marks a
	// significant change beyond the threshold that stays within it.
	Noise       float64 `json:"noise"`
	WithinNoise bool    `json:"within_noise,omitempty"`
	// PerClock is Delta with the change of the mean SM clock taken out
	// (perClock), set where the cell's clocks differ (CellDiff.Clock).
	// ClockExplained marks a regression whose per-clock change is none.
	PerClock       *float64 `json:"per_clock_delta,omitempty"`
	ClockExplained bool     `json:"clock_explained,omitempty"`
	Regression     bool     `json:"regression"`
	Improvement    bool     `json:"improvement"`
	// Inconclusive marks a metric worse by more than the threshold that
	// the repeats cannot judge: too few of them for the test ever to find
	// it significant (Testable), or a significant change within the
	// noise. Not a regression, but not an all-clear either.
	Inconclusive bool `json:"inconclusive,omitempty"`
}

// Diff compares two results cell by cell (matched by id). A metric is a
// regression only when the Mann-Whitney U test finds the change
// significant at alpha 0.05 after the Benjamini-Hochberg correction over
// every cell x metric compared, AND it is worse by more than the
// threshold, AND by more than NoiseFactor times the cell's own
// repeat-to-repeat spread; so a diff of two runs of the same code does not
// cry wolf. What it could not compare is its own outcome, never OK.
func Diff(old, new *Results, opts DiffOptions) *DiffReport {
	d := &DiffReport{Old: opts.OldName, New: opts.NewName, OldStudy: old.Name, NewStudy: new.Name,
		Threshold: opts.Threshold, NoiseFactor: opts.NoiseFactor, Alpha: Alpha, Missing: cmp.Or(opts.Missing, MissingFail),
		Tests:       DiffTests{Correction: Correction},
		Environment: DiffEnvironment(old.Environment, new.Environment), Cells: []CellDiff{}, Warnings: []string{}}
	if d.Environment == nil {
		d.Environment = []EnvChange{}
	}
	d.Metrics = opts.Metrics
	if len(d.Metrics) == 0 {
		ho, hn := presentMetrics(old), presentMetrics(new)
		for _, k := range DefaultMetricsFor(ho) {
			if ho[k] && hn[k] {
				d.Metrics = append(d.Metrics, k)
			}
		}
	}
	if d.Metrics == nil {
		d.Metrics = []string{}
	}
	if old.Name != new.Name && !opts.AnyStudy {
		// Cells of two studies share ids only by accident; judging them
		// would be a verdict about nothing in particular.
		d.Outcome = OutcomeNotComparable
		d.Reason = fmt.Sprintf("OLD is study %q, NEW is study %q: results of different studies are not compared (--any-study compares a renamed study)", old.Name, new.Name)
		return d
	}
	oldCells := map[string]*Cell{}
	for i := range old.Cells {
		oldCells[old.Cells[i].ID] = &old.Cells[i]
	}
	newCells := map[string]*Cell{}
	for i := range new.Cells {
		newCells[new.Cells[i].ID] = &new.Cells[i]
	}
	var ids []string
	matched := 0
	for id := range oldCells {
		ids = append(ids, id)
		if newCells[id] != nil {
			matched++
		}
	}
	for id := range newCells {
		if oldCells[id] == nil {
			ids = append(ids, id)
		}
	}
	sortIDs(ids, oldCells, newCells, old, new)
	var warn []string
	var tests []pendingTest
	for _, id := range ids {
		oc, nc := oldCells[id], newCells[id]
		cd := CellDiff{ID: id, Throttled: throttledNote(oc, nc), Trend: trendDiffNote(oc, nc), Held: heldDiffNote(oc, nc)}
		if oc != nil {
			cd.OldStatus = oc.Status
		}
		if nc != nil {
			cd.NewStatus = nc.Status
			cd.Error = nc.Error
		}
		switch {
		case oc == nil:
			cd.Change = CellAdded
			d.Counts.Added++
		case oc.Status == StatusOK && (nc == nil || nc.Status == StatusSkipped):
			cd.Change = CellMissing
			d.Counts.Missing++
		case nc == nil:
			cd.Change = CellRemoved
			d.Counts.Removed++
		case oc.Status == StatusOK && nc.Status == StatusFailed:
			cd.Change = CellNewlyFailed
			d.Counts.NewlyFailed++
			d.Regression = true
		case oc.Status != StatusOK && nc.Status == StatusOK:
			cd.Change = CellFixed
			d.Counts.Fixed++
		case oc.Status == StatusOK && nc.Status == StatusOK:
			cd.Change = CellCompared
			d.Counts.Compared++
			cd.Clock = diffClock(oc, nc)
			if cd.Clock != nil {
				d.Counts.ClockDiffers++
			}
			for _, m := range d.Metrics {
				ov, nv := column(oc.Repeats, m), column(nc.Repeats, m)
				if len(ov) == 0 || len(nv) == 0 {
					continue
				}
				c := CompareSamples(m, ov, nv)
				warn = append(warn, c.Warnings...)
				md := MetricDiff{Metric: m, Name: MetricFor(m).Name, Old: c.Base, New: c.New,
					P: roundP(c.P), Significant: c.Significant, Verdict: c.Verdict}
				if !math.IsNaN(c.Ratio) {
					delta := roundValue(c.Ratio - 1)
					md.Delta = &delta
					if cd.Clock != nil {
						if pc, ok := perClock(m, c.Ratio, cd.Clock); ok {
							pc = roundValue(pc)
							md.PerClock = &pc
						}
					}
				}
				if opts.NoiseFactor > 0 {
					md.Noise = roundValue(opts.NoiseFactor * pooledSpread(relSpread(ov), relSpread(nv)))
				}
				tests = append(tests, pendingTest{cell: len(d.Cells), metric: len(cd.Metrics), c: c})
				cd.Metrics = append(cd.Metrics, md)
			}
		default:
			cd.Change = CellNotCompared
		}
		if cd.Change == CellCompared {
			cd.Roofline = diffRoofline(oc, nc)
			a, okA := ProfileKernels(oc, "old")
			b, okB := ProfileKernels(nc, "new")
			if okA && okB {
				if lines, changed := DiffKernels(a, b).Changes(); changed {
					cd.KernelChanges = lines
				} else {
					d.KernelsUnchanged++
				}
			}
		}
		if cd.Throttled != "" {
			d.Counts.Throttled++
		}
		d.Cells = append(d.Cells, cd)
	}
	warn = append(warn, d.judge(tests)...)
	d.Warnings = dedupe(warn)
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	switch {
	case d.Regression:
		d.Outcome = OutcomeRegression
	case d.Counts.Metrics == 0:
		d.Outcome = OutcomeNothingCompared
		d.Reason = d.nothingCompared(old, new, matched)
	case d.Counts.Missing > 0 && d.Missing == MissingFail:
		d.Outcome = OutcomeMissing
	case d.Counts.Inconclusive > 0:
		d.Outcome = OutcomeInconclusive
	default:
		d.Outcome = OutcomeOK
	}
	return d
}

// pendingTest is a comparison waiting for the correction, which needs
// every p-value of the diff.
type pendingTest struct {
	cell, metric int // indices into DiffReport.Cells and its Metrics
	c            Comparison
}

// judge corrects the p-values of all comparisons together and decides
// each metric's verdict; it returns warnings about the correction.
func (d *DiffReport) judge(tests []pendingTest) []string {
	p := make([]float64, len(tests))
	for i, t := range tests {
		p[i] = t.c.P
	}
	q := benjaminiHochberg(p)
	d.Counts.Metrics = len(tests)
	d.Tests.Comparisons = len(tests)
	d.Tests.ExpectedFalsePositives = roundValue(Alpha * float64(len(tests)))
	var warn []string
	for i, t := range tests {
		md := &d.Cells[t.cell].Metrics[t.metric]
		md.Q = roundP(q[i])
		if t.c.Significant {
			d.Tests.SignificantUncorrected++
		}
		// CompareSamples' Significant also requires the medians to differ,
		// so a direction exists whenever this holds.
		md.Significant = t.c.Significant && q[i] < Alpha
		if !md.Significant && md.Verdict != NoVerdict {
			md.Verdict = Same
		}
		if md.Significant {
			d.Tests.Significant++
		}
		if md.Delta == nil {
			continue
		}
		change := math.Abs(*md.Delta)
		beyond := change > d.Threshold
		outside := change > md.Noise
		md.Regression = md.Significant && md.Verdict == Slower && beyond && outside
		md.Improvement = md.Significant && md.Verdict == Faster && beyond && outside
		md.WithinNoise = md.Significant && (md.Verdict == Slower || md.Verdict == Faster) && beyond && !outside
		if md.Regression {
			d.Counts.Regressions++
			d.Regression = true
			if md.PerClock != nil && !(worse(md.Metric, *md.PerClock) && math.Abs(*md.PerClock) > d.Threshold) {
				md.ClockExplained = true
				d.Counts.ClockExplained++
			}
		}
		if md.Improvement {
			d.Counts.Improvements++
		}
		n1, n2 := t.c.Base.N, t.c.New.N
		switch {
		case !beyond || !worse(md.Metric, *md.Delta):
		case !Testable(n1, n2):
			md.Inconclusive = true
			d.Counts.Inconclusive++
			if d.untestable == "" {
				d.untestable = fmt.Sprintf("%d+%d", n1, n2)
			}
		case md.WithinNoise:
			md.Inconclusive = true
			d.Counts.Inconclusive++
			d.Counts.WithinNoise++
		}
		// Testable samples can still be too small for one comparison
		// among many: its q is at best p x m.
		if m := len(tests); m > 1 && Testable(n1, n2) && MinP(n1, n2)*float64(m) >= Alpha {
			warn = append(warn, fmt.Sprintf("with %d comparisons, a change in one metric alone must reach p < %.2g to be significant after the correction; %d+%d repeats reach p = %.2g at best: use %d repeats a side, or judge fewer metrics (--metric)",
				m, Alpha/float64(m), n1, n2, MinP(n1, n2), repeatsForCorrection(m)))
		}
	}
	return warn
}

// nothingCompared says why no metric was compared.
func (d *DiffReport) nothingCompared(old, new *Results, matched int) string {
	switch {
	case len(old.Cells) == 0 && len(new.Cells) == 0:
		return "neither OLD nor NEW has cells"
	case len(new.Cells) == 0:
		return "NEW has no cells"
	case len(old.Cells) == 0:
		return "OLD has no cells"
	case matched == 0:
		return fmt.Sprintf("no cell of OLD is in NEW (%d only in OLD, %d only in NEW): cell ids hash every parameter, so another model, dataset or matrix value makes other cells",
			len(old.Cells), len(new.Cells))
	case d.Counts.Compared == 0 && d.Counts.Missing > 0:
		return fmt.Sprintf("every cell ok in OLD is missing or skipped in NEW (%s): an interrupted run? xrun run --resume finishes it", plural(d.Counts.Missing, "cell"))
	case d.Counts.Compared == 0:
		return "no cell is ok in both OLD and NEW"
	case len(d.Metrics) == 0:
		return "OLD and NEW have none of the metrics judged in common"
	}
	return "no metric judged was measured in both OLD and NEW in the cells ok in both"
}

// sortIDs orders cell ids the way tables order cells: by the new
// results' axis values (batch 1, 16, 64, 256 rather than 1, 16, 256, 64),
// then by id.
func sortIDs(ids []string, oldCells, newCells map[string]*Cell, old, new *Results) {
	cells := make([]*Cell, len(ids))
	for i, id := range ids {
		cells[i] = cmp.Or(newCells[id], oldCells[id])
	}
	by := new
	if len(new.Cells) == 0 {
		by = old // NEW has no cells, so no axes: list OLD's in its order
	}
	sortCells(cells, axes(by))
	for i, c := range cells {
		ids[i] = c.ID
	}
}

// Err returns an error wrapping ErrRegression when the diff found a
// regression, and one wrapping ErrNotCompared when it compared nothing,
// the results are not comparable or cells are missing (MissingFail).
func (d *DiffReport) Err() error {
	switch d.Outcome {
	case OutcomeRegression:
		return fmt.Errorf("%w: %s", ErrRegression, d.headline())
	case OutcomeMissing, OutcomeNothingCompared, OutcomeNotComparable:
		return &notComparedError{msg: strings.ToLower(d.label()) + ": " + d.headline()}
	}
	return nil
}

// notComparedError reads as the verdict ("nothing compared: NEW has no
// cells") and is ErrNotCompared to errors.Is.
type notComparedError struct{ msg string }

func (e *notComparedError) Error() string { return e.msg }
func (e *notComparedError) Unwrap() error { return ErrNotCompared }

// roundP keeps 4 significant digits of a p-value, enough to read and
// stable across platforms.
func roundP(p float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(p, 'g', 4, 64), 64)
	return f
}

// trendDiffNote names the sides whose repeats trend, with how much.
func trendDiffNote(oc, nc *Cell) string {
	var parts []string
	for _, s := range []struct {
		side string
		c    *Cell
	}{{"old", oc}, {"new", nc}} {
		if way, first, last, ok := repeatTrend(s.c); ok {
			parts = append(parts, fmt.Sprintf("%s %s %s to %s (%+.0f%%)", s.side, way, formatSig(first, 4), formatSig(last, 4), 100*(last/first-1)))
		}
	}
	return strings.Join(parts, ", ")
}

func throttledNote(oc, nc *Cell) string {
	var parts []string
	if oc != nil && oc.Telemetry != nil && oc.Telemetry.Throttled {
		parts = append(parts, "old"+reasons(oc.Telemetry))
	}
	if nc != nil && nc.Telemetry != nil && nc.Telemetry.Throttled {
		parts = append(parts, "new"+reasons(nc.Telemetry))
	}
	return strings.Join(parts, ", ")
}

// heldMetrics are the run-shape counts of xrun's engine that explain a
// change in throughput without being one: the requests it could hold at
// once and the most one iteration served, and whether the KV cache was
// paged (KVBlocksKey; 0 for fixed slots).
var heldMetrics = []string{MaxInFlightKey, PeakInFlightKey, KVBlocksKey}

// heldDiffNote says which of heldMetrics differ between the cell's old and
// new repeats (their medians), "max_in_flight 357 → 1500, peak_in_flight
// 357 → 1100, kv_cache_blocks 0 → 31645"; "" where none differs or a side
// lacks them (results of an older xrun, external engines).
func heldDiffNote(oc, nc *Cell) string {
	if oc == nil || nc == nil || oc.Status != StatusOK || nc.Status != StatusOK {
		return ""
	}
	var parts []string
	for _, k := range heldMetrics {
		o, n := column(oc.Repeats, k), column(nc.Repeats, k)
		if len(o) == 0 || len(n) == 0 {
			continue
		}
		if mo, mn := Summarize(o).Median, Summarize(n).Median; mo != mn {
			parts = append(parts, fmt.Sprintf("%s %s → %s", k, strconv.FormatFloat(mo, 'f', -1, 64), strconv.FormatFloat(mn, 'f', -1, 64)))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func formatThreshold(t float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", 100*t), "0"), ".0") + "%"
}

// label is the verdict's first words, from the outcome.
func (d *DiffReport) label() string {
	switch d.Outcome {
	case OutcomeRegression:
		return "REGRESSION"
	case OutcomeInconclusive:
		return "INCONCLUSIVE"
	case OutcomeMissing:
		return "MISSING CELLS"
	case OutcomeNothingCompared:
		return "NOTHING COMPARED"
	case OutcomeNotComparable:
		return "NOT COMPARABLE"
	}
	return "OK"
}

// worse reports whether a change delta of metric is for the worse.
func worse(metric string, delta float64) bool {
	switch MetricFor(metric).Better {
	case HigherIsBetter:
		return delta < 0
	case LowerIsBetter:
		return delta > 0
	}
	return false
}

// headline is the one-line verdict.
func (d *DiffReport) headline() string {
	switch d.Outcome {
	case OutcomeNotComparable, OutcomeNothingCompared:
		return d.Reason
	}
	var parts []string
	if d.Outcome == OutcomeMissing {
		parts = append(parts, d.missing()+" (--missing warn accepts that)")
	}
	if d.Counts.Regressions > 0 {
		s := plural(d.Counts.Regressions, "significant regression") + " beyond " + formatThreshold(d.Threshold)
		if d.Counts.ClockExplained > 0 {
			s += fmt.Sprintf(" (%d explained by the SM clock: not worse per clock cycle)", d.Counts.ClockExplained)
		}
		parts = append(parts, s)
	}
	if d.Counts.NewlyFailed > 0 {
		parts = append(parts, plural(d.Counts.NewlyFailed, "newly failed cell"))
	}
	if d.Counts.Regressions == 0 && d.Counts.NewlyFailed == 0 {
		s := "no significant regression beyond " + formatThreshold(d.Threshold)
		if d.Outcome == OutcomeMissing {
			s += " in the " + plural(d.Counts.Compared, "cell") + " compared"
		}
		if n := d.Counts.Inconclusive - d.Counts.WithinNoise; n > 0 {
			r := TestableRepeats()
			s += fmt.Sprintf(", but %s worse by more than %s with too few repeats to test (%s can never reach p < %g; %d+%d can)",
				plural(n, "metric"), formatThreshold(d.Threshold), d.untestable, d.Alpha, r, r)
		}
		if n := d.Counts.WithinNoise; n > 0 {
			s += fmt.Sprintf(", but %s significantly worse by more than %s yet within %g× the spread of their repeats (noise)",
				plural(n, "metric"), formatThreshold(d.Threshold), d.NoiseFactor)
		}
		parts = append(parts, s)
	}
	if d.Outcome != OutcomeMissing && d.Counts.Missing > 0 {
		parts = append(parts, d.missing())
	}
	if d.Counts.Improvements > 0 {
		parts = append(parts, plural(d.Counts.Improvements, "significant improvement"))
	}
	return strings.Join(parts, ", ")
}

// missing sums up the cells of OLD that NEW lacks.
func (d *DiffReport) missing() string {
	return fmt.Sprintf("%s ok in OLD %s missing or skipped in NEW and not compared", plural(d.Counts.Missing, "cell"), pick(d.Counts.Missing == 1, "is", "are"))
}

// scope says what was compared.
func (d *DiffReport) scope() string {
	var names []string
	for _, m := range d.Metrics {
		names = append(names, MetricFor(m).Name)
	}
	study := fmt.Sprintf("study %q", d.NewStudy)
	if d.OldStudy != d.NewStudy {
		study = fmt.Sprintf("studies %q and %q", d.OldStudy, d.NewStudy)
	}
	return fmt.Sprintf("Compared %s, %s (%s); metrics: %s", plural(d.Counts.Compared, "cell"), plural(d.Counts.Metrics, "metric comparison"),
		study, pick(len(names) > 0, strings.Join(names, ", "), "none"))
}

// rule says what counts as a regression, and how many false positives
// the comparisons would give by chance without the correction.
func (d *DiffReport) rule() string {
	s := "A regression is worse by more than " + formatThreshold(d.Threshold)
	if d.NoiseFactor > 0 {
		s += fmt.Sprintf(" and by more than %g× the spread of its cell's repeats (the noise column)", d.NoiseFactor)
	}
	s += fmt.Sprintf(", and significant: Mann-Whitney U test, q < %g after the Benjamini-Hochberg correction over the %s.", d.Alpha, plural(d.Tests.Comparisons, "comparison"))
	s += fmt.Sprintf(" Uncorrected, %s of them would be significant by chance alone if nothing changed; %d had p < %g, %d have q < %g.",
		strconv.FormatFloat(d.Tests.ExpectedFalsePositives, 'g', 3, 64), d.Tests.SignificantUncorrected, d.Alpha, d.Tests.Significant, d.Alpha)
	return s
}

// findings returns the metrics flagged as regressions or improvements.
func (d *DiffReport) findings(regression bool) *Table {
	t := d.diffTable()
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if (regression && m.Regression) || (!regression && m.Improvement) {
				t.Rows = append(t.Rows, d.diffRow(c, m, false))
			}
		}
	}
	return t
}

// all returns every compared metric.
func (d *DiffReport) all(mark bool) *Table {
	t := d.diffTable()
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			t.Rows = append(t.Rows, d.diffRow(c, m, mark))
		}
	}
	return t
}

// perClockColumn heads the change with the SM clock's change taken out;
// the column is there only when some cell's clocks differ.
const perClockColumn = "per clock"

func (d *DiffReport) diffTable() *Table {
	cols := []Column{{Name: "cell"}, {Name: "metric"}, {Name: "old", Right: true}, {Name: "new", Right: true},
		{Name: "delta", Right: true}, {Name: "noise", Right: true}}
	if d.Counts.ClockDiffers > 0 {
		cols = append(cols, Column{Name: perClockColumn, Right: true})
	}
	return &Table{Columns: append(cols, Column{Name: "verdict"})}
}

func (d *DiffReport) diffRow(c CellDiff, m MetricDiff, mark bool) []string {
	delta := "n/a"
	if m.Delta != nil {
		delta = formatDelta(1 + *m.Delta)
	}
	noise := "-"
	if m.Noise > 0 {
		noise = "±" + formatPct(100*m.Noise)
	}
	v := fmt.Sprintf("%s (p=%.3f q=%.3f n=%d+%d)", m.Verdict, m.P, m.Q, m.Old.N, m.New.N)
	if mark && m.Regression {
		v += " REGRESSION" + pick(m.ClockExplained, " explained by the SM clock", "")
	}
	if mark && m.Improvement {
		v += " improvement"
	}
	if mark && m.WithinNoise {
		v += " within noise"
	}
	if mark && m.Inconclusive && !m.WithinNoise {
		v += " too few repeats"
	}
	row := []string{diffCellName(c), m.Name, formatSummary(m.Old), formatSummary(m.New), delta, noise}
	if d.Counts.ClockDiffers > 0 {
		pc := ""
		if m.PerClock != nil {
			pc = formatDelta(1 + *m.PerClock)
		}
		row = append(row, pc)
	}
	return append(row, v)
}

// diffCellName is a cell's id, flagged when the GPU throttled.
func diffCellName(c CellDiff) string {
	return c.ID + pick(c.Throttled != "", " (throttled)", "")
}

// kernelsDiffNote qualifies the kernel changes of a diff.
const kernelsDiffNote = "one profiled pass a side, so not judged for significance"

// unchangedKernels sums up the profiled cells whose kernels did not
// change: "3 other profiled cells: no kernel ran in only one of them ...".
func (d *DiffReport) unchangedKernels(listed int) string {
	return plural(d.KernelsUnchanged, pick(listed > 0, "other profiled cell", "profiled cell")) + ": " + unchangedKernels
}

// kernelCells are the cells with kernel changes to report.
func (d *DiffReport) kernelCells() []CellDiff {
	var out []CellDiff
	for _, c := range d.Cells {
		if len(c.KernelChanges) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// cellList is a titled list of cells a report prints (failed, missing,
// ...); cellLists keeps only the lists that have cells.
type cellList struct {
	title string
	items []string
}

type cellLists []cellList

func (l *cellLists) add(title string, items []string) {
	if len(items) > 0 {
		*l = append(*l, cellList{title, items})
	}
}

// cellLists are the failed, missing, throttled, re-clocked, fixed, added
// and removed cells.
func (d *DiffReport) cellLists() (lists cellLists) {
	add := lists.add
	var failed, missing, fixed, added, removed, throttled, trends, clocks, held, notCompared []string
	for _, c := range d.Cells {
		switch c.Change {
		case CellNewlyFailed:
			failed = append(failed, c.ID+": "+pick(c.Error != "", c.Error, "no error recorded"))
		case CellMissing:
			if c.NewStatus == "" {
				missing = append(missing, c.ID+": not in NEW")
			} else {
				missing = append(missing, c.ID+": skipped in NEW"+pick(c.Error != "", ": "+c.Error, ""))
			}
		case CellFixed:
			fixed = append(fixed, c.ID)
		case CellAdded:
			added = append(added, c.ID)
		case CellRemoved:
			removed = append(removed, fmt.Sprintf("%s (%s in OLD)", c.ID, c.OldStatus))
		case CellNotCompared:
			notCompared = append(notCompared, fmt.Sprintf("%s (old %s, new %s)", c.ID, c.OldStatus, c.NewStatus))
		}
		if c.Throttled != "" {
			throttled = append(throttled, c.ID+": "+c.Throttled)
		}
		if c.Trend != "" {
			trends = append(trends, c.ID+": "+c.Trend)
		}
		if c.Held != "" {
			held = append(held, c.ID+": "+c.Held)
		}
		if k := c.Clock; k != nil {
			clocks = append(clocks, fmt.Sprintf("%s: %s → %s MHz (%s)", c.ID, formatNumber(k.OldMHz), formatNumber(k.NewMHz), formatDelta(1+k.Change)))
		}
	}
	add("Newly failed cells (counted as regressions)", failed)
	add("Cells ok in OLD, missing or skipped in NEW (not compared; "+pick(d.Missing == MissingFail, "they fail the diff unless --missing warn", "--missing warn")+")", missing)
	add("Throttled cells (their numbers may reflect the GPU, not the code)", throttled)
	add("Cells whose output throughput rose or fell from every repeat to the next (a trend, not noise: their verdicts compare where the trends stood)", trends)
	add("Mean SM clock differs (the per clock column takes it out: throughput per cycle, latency in cycles)", clocks)
	add("Cells whose engine held their requests differently (requests at once, KV cache blocks: 0 is fixed slots; numbers may reflect it)", held)
	add("Cells fixed (failed before, ok now)", fixed)
	add("Cells only in NEW", added)
	add("Cells only in OLD", removed)
	add("Cells not compared", notCompared)
	return lists
}

// WriteText renders the diff for a terminal.
func (d *DiffReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "xrun diff %s -> %s\n", d.Old, d.New)
	fmt.Fprintf(&b, "%s: %s\n", d.label(), d.headline())
	fmt.Fprintf(&b, "%s\n", d.scope())
	if d.Tests.Comparisons > 0 {
		fmt.Fprintf(&b, "%s\n", d.rule())
	}
	if len(d.Environment) > 0 {
		b.WriteString("\nEnvironment differs (numbers may reflect it):\n")
		for _, e := range d.Environment {
			fmt.Fprintf(&b, "  %s: %s -> %s\n", e.Field, e.Old, e.New)
		}
	}
	for _, l := range d.cellLists() {
		b.WriteString("\n" + l.title + ":\n")
		for _, it := range l.items {
			b.WriteString("  " + it + "\n")
		}
	}
	if d.Counts.Regressions > 0 {
		b.WriteString("\n")
		t := d.findings(true)
		t.Title = "Regressions"
		t.WriteText(&b)
	}
	if d.Counts.Improvements > 0 {
		b.WriteString("\n")
		t := d.findings(false)
		t.Title = "Improvements"
		t.WriteText(&b)
	}
	if cells := d.kernelCells(); len(cells) > 0 || d.KernelsUnchanged > 0 {
		b.WriteString("\nKernel changes, old → new (" + kernelsDiffNote + "):\n")
		for _, c := range cells {
			b.WriteString("  " + diffCellName(c) + "\n")
			for _, l := range c.KernelChanges {
				b.WriteString("    " + l + "\n")
			}
		}
		if d.KernelsUnchanged > 0 {
			b.WriteString("  " + d.unchangedKernels(len(cells)) + "\n")
		}
	}
	if t := d.rooflines(); len(t.Rows) > 0 {
		b.WriteString("\n")
		t.Title = rooflineColumn + ", old → new (" + rooflineDiffNote + ")"
		t.WriteText(&b)
	}
	if d.Counts.Metrics > 0 {
		b.WriteString("\n")
		t := d.all(true)
		t.Title = "All compared metrics (median ±95% CI)"
		t.Notes = d.Warnings
		t.WriteText(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown renders the diff as a pull-request comment: the verdict
// first, then what could explain it (environment, throttling), the
// regressions and improvements, and every metric folded away.
func (d *DiffReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## xrun diff: %s: %s\n\n", d.label(), mdEscape(d.headline()))
	fmt.Fprintf(&b, "`%s` → `%s` · %s\n", d.Old, d.New, mdEscape(d.scope()))
	if d.Tests.Comparisons > 0 {
		fmt.Fprintf(&b, "\n%s\n", mdEscape(d.rule()))
	}
	if len(d.Environment) > 0 {
		b.WriteString("\n> [!WARNING]\n> **The environment differs** between the two runs; the numbers may reflect it.\n>\n")
		for _, e := range d.Environment {
			fmt.Fprintf(&b, "> - `%s`: `%s` → `%s`\n", e.Field, e.Old, e.New)
		}
	}
	for _, l := range d.cellLists() {
		fmt.Fprintf(&b, "\n**%s**\n\n", mdEscape(l.title))
		for _, it := range l.items {
			b.WriteString("- " + mdEscape(it) + "\n")
		}
	}
	if d.Counts.Regressions > 0 {
		b.WriteString("\n### Regressions\n\n")
		d.findings(true).WriteMarkdown(&b, 0)
	}
	if d.Counts.Improvements > 0 {
		b.WriteString("\n### Improvements\n\n")
		d.findings(false).WriteMarkdown(&b, 0)
	}
	if cells := d.kernelCells(); len(cells) > 0 || d.KernelsUnchanged > 0 {
		b.WriteString("\n### Kernel changes\n\nOld → new, " + kernelsDiffNote + ".\n")
		for _, c := range cells {
			b.WriteString("\n**" + mdEscape(diffCellName(c)) + "**\n\n")
			for _, l := range c.KernelChanges {
				b.WriteString("- " + mdEscape(l) + "\n")
			}
		}
		if d.KernelsUnchanged > 0 {
			b.WriteString("\n" + mdEscape(d.unchangedKernels(len(cells))) + ".\n")
		}
	}
	if t := d.rooflines(); len(t.Rows) > 0 {
		b.WriteString("\n### " + mdEscape(rooflineColumn) + "\n\nOld → new, " + rooflineDiffNote + ".\n\n")
		t.WriteMarkdown(&b, 0)
	}
	if d.Counts.Metrics > 0 {
		fmt.Fprintf(&b, "\n<details><summary>All compared metrics (%s, %s, median ±95%% CI)</summary>\n\n",
			plural(d.Counts.Compared, "cell"), plural(d.Counts.Metrics, "comparison"))
		t := d.all(true)
		t.Notes = d.Warnings
		t.WriteMarkdown(&b, 0)
		b.WriteString("\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DiffFormats are the formats Render draws, default first.
var DiffFormats = []string{"text", "markdown", "json"}

// Render draws the report in one of DiffFormats.
func (d *DiffReport) Render(w io.Writer, format string) error {
	switch format {
	case "text":
		return d.WriteText(w)
	case "markdown":
		return d.WriteMarkdown(w)
	case "json":
		return d.WriteJSON(w)
	}
	return fmt.Errorf("%q is not a diff format; expected %s", format, strings.Join(DiffFormats, ", "))
}

// WriteJSON renders the report as indented JSON for bots.
func (d *DiffReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(d)
}

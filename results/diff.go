package results

import (
	"cmp"
	"encoding/json"
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

// DiffOptions configure Diff.
type DiffOptions struct {
	// Threshold is the relative change (0.03 = 3 %) a significant worse
	// change must exceed to count as a regression.
	Threshold float64
	// Metrics are the metric keys judged; empty means the headline
	// metrics. Fewer metrics mean fewer chances of a false alarm.
	Metrics []string
	// OldName and NewName label the two sides (their paths).
	OldName, NewName string
}

// CellChange says how a cell id fared between two results.
type CellChange string

const (
	CellCompared    CellChange = "compared"     // ok in both: metrics compared
	CellAdded       CellChange = "added"        // only in new
	CellRemoved     CellChange = "removed"      // only in old
	CellNewlyFailed CellChange = "newly failed" // ok in old, failed in new: a regression
	CellFixed       CellChange = "fixed"        // failed or skipped in old, ok in new
	CellNotCompared CellChange = "not compared" // not ok in both, or skipped in new
)

// DiffReport is what xrun diff found. It renders as text, Markdown (a
// pull-request comment) or JSON.
type DiffReport struct {
	Old       string   `json:"old"`
	New       string   `json:"new"`
	Threshold float64  `json:"threshold"`
	Alpha     float64  `json:"alpha"`
	Metrics   []string `json:"metrics"`
	// Regression is true when at least one metric got significantly
	// worse beyond the threshold, or a cell newly failed.
	Regression  bool        `json:"regression"`
	Counts      DiffCounts  `json:"counts"`
	Environment []EnvChange `json:"environment"`
	Cells       []CellDiff  `json:"cells"`
	// KernelsUnchanged counts the cells profiled in both runs whose
	// kernels did not change (their CellDiff has no KernelChanges).
	KernelsUnchanged int `json:"kernels_unchanged,omitempty"`
	// Warnings are statistical caveats, deduplicated.
	Warnings []string `json:"warnings"`
	// untestable is the sample sizes ("3+3") of the first inconclusive
	// metric, for the headline.
	untestable string
}

// DiffCounts tally the report for its headline.
type DiffCounts struct {
	Regressions  int `json:"regressions"`
	Improvements int `json:"improvements"`
	Compared     int `json:"compared"`
	Added        int `json:"added"`
	Removed      int `json:"removed"`
	NewlyFailed  int `json:"newly_failed"`
	Fixed        int `json:"fixed"`
	Throttled    int `json:"throttled"`
	// Inconclusive counts the metrics marked so (MetricDiff).
	Inconclusive int `json:"inconclusive,omitempty"`
}

// CellDiff is one cell id's comparison.
type CellDiff struct {
	ID        string       `json:"id"`
	Change    CellChange   `json:"change"`
	OldStatus Status       `json:"old_status,omitempty"`
	NewStatus Status       `json:"new_status,omitempty"`
	Error     string       `json:"error,omitempty"` // the new run's error
	Throttled string       `json:"throttled,omitempty"`
	Metrics   []MetricDiff `json:"metrics,omitempty"`
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
	Delta       *float64 `json:"delta"`
	P           float64  `json:"p"`
	Significant bool     `json:"significant"`
	Verdict     Verdict  `json:"verdict"`
	Regression  bool     `json:"regression"`
	Improvement bool     `json:"improvement"`
	// Inconclusive marks a metric worse by more than the threshold whose
	// samples are too small for the test ever to find it significant
	// (Testable): not a regression, but not an all-clear either.
	Inconclusive bool `json:"inconclusive,omitempty"`
}

// Diff compares two results cell by cell (matched by id). A metric is a
// regression only when the Mann-Whitney U test finds the change
// significant at alpha 0.05 AND it is worse by more than the threshold;
// an insignificant or small change never is, so a diff of two runs of the
// same code does not cry wolf.
func Diff(old, new *Results, opts DiffOptions) *DiffReport {
	d := &DiffReport{Old: opts.OldName, New: opts.NewName, Threshold: opts.Threshold, Alpha: Alpha,
		Environment: DiffEnvironment(old.Environment, new.Environment)}
	if d.Environment == nil {
		d.Environment = []EnvChange{}
	}
	d.Metrics = opts.Metrics
	if len(d.Metrics) == 0 {
		ho, hn := presentMetrics(old), presentMetrics(new)
		for _, k := range HeadlineMetrics() {
			if ho[k] && hn[k] {
				d.Metrics = append(d.Metrics, k)
			}
		}
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
	for id := range oldCells {
		ids = append(ids, id)
	}
	for id := range newCells {
		if oldCells[id] == nil {
			ids = append(ids, id)
		}
	}
	sortIDs(ids, oldCells, newCells, new)
	var warn []string
	for _, id := range ids {
		oc, nc := oldCells[id], newCells[id]
		cd := CellDiff{ID: id, Throttled: throttledNote(oc, nc)}
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
				}
				beyond := md.Delta != nil && math.Abs(*md.Delta) > opts.Threshold
				md.Regression = c.Significant && c.Verdict == Slower && beyond
				md.Improvement = c.Significant && c.Verdict == Faster && beyond
				if md.Regression {
					d.Counts.Regressions++
					d.Regression = true
				}
				if md.Improvement {
					d.Counts.Improvements++
				}
				if beyond && !Testable(c.Base.N, c.New.N) && worse(m, *md.Delta) {
					md.Inconclusive = true
					d.Counts.Inconclusive++
					if d.untestable == "" {
						d.untestable = fmt.Sprintf("%d+%d", c.Base.N, c.New.N)
					}
				}
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
	d.Warnings = dedupe(warn)
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	return d
}

// sortIDs orders cell ids the way tables order cells: by the new
// results' axis values (batch 1, 16, 64, 256 rather than 1, 16, 256, 64),
// then by id.
func sortIDs(ids []string, oldCells, newCells map[string]*Cell, new *Results) {
	cells := make([]*Cell, len(ids))
	for i, id := range ids {
		cells[i] = cmp.Or(newCells[id], oldCells[id])
	}
	sortCells(cells, axes(new))
	for i, c := range cells {
		ids[i] = c.ID
	}
}

// Err returns an error wrapping ErrRegression when the diff found one.
func (d *DiffReport) Err() error {
	if !d.Regression {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRegression, d.headline())
}

// roundP keeps 4 significant digits of a p-value, enough to read and
// stable across platforms.
func roundP(p float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(p, 'g', 4, 64), 64)
	return f
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

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func formatThreshold(t float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", 100*t), "0"), ".0") + "%"
}

// label is the verdict's first word: REGRESSION, INCONCLUSIVE (metrics
// worse beyond the threshold that the repeats cannot test) or OK.
func (d *DiffReport) label() string {
	switch {
	case d.Regression:
		return "REGRESSION"
	case d.Counts.Inconclusive > 0:
		return "INCONCLUSIVE"
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
	var parts []string
	if d.Counts.Regressions > 0 {
		parts = append(parts, plural(d.Counts.Regressions, "significant regression")+" beyond "+formatThreshold(d.Threshold))
	}
	if d.Counts.NewlyFailed > 0 {
		parts = append(parts, plural(d.Counts.NewlyFailed, "newly failed cell"))
	}
	if len(parts) == 0 {
		parts = append(parts, "no significant regression beyond "+formatThreshold(d.Threshold))
		if d.Counts.Inconclusive > 0 {
			n := TestableRepeats()
			parts[0] += fmt.Sprintf(", but %s worse by more than %s with too few repeats to test (%s can never reach p < %g; %d+%d can)",
				plural(d.Counts.Inconclusive, "metric"), formatThreshold(d.Threshold), d.untestable, d.Alpha, n, n)
		}
	}
	if d.Counts.Improvements > 0 {
		parts = append(parts, plural(d.Counts.Improvements, "significant improvement"))
	}
	return strings.Join(parts, ", ")
}

func (d *DiffReport) scope() string {
	var names []string
	for _, m := range d.Metrics {
		names = append(names, MetricFor(m).Name)
	}
	return fmt.Sprintf("%s compared, threshold %s, Mann-Whitney U test at alpha %g; metrics: %s",
		plural(d.Counts.Compared, "cell"), formatThreshold(d.Threshold), d.Alpha, strings.Join(names, ", "))
}

// findings returns the metrics flagged as regressions or improvements.
func (d *DiffReport) findings(regression bool) *Table {
	t := diffTable()
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if (regression && m.Regression) || (!regression && m.Improvement) {
				t.Rows = append(t.Rows, diffRow(c, m, false))
			}
		}
	}
	return t
}

// all returns every compared metric.
func (d *DiffReport) all(mark bool) *Table {
	t := diffTable()
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			t.Rows = append(t.Rows, diffRow(c, m, mark))
		}
	}
	return t
}

func diffTable() *Table {
	return &Table{Columns: []Column{{Name: "cell"}, {Name: "metric"}, {Name: "old", Right: true}, {Name: "new", Right: true},
		{Name: "delta", Right: true}, {Name: "verdict"}}}
}

func diffRow(c CellDiff, m MetricDiff, mark bool) []string {
	delta := "n/a"
	if m.Delta != nil {
		delta = formatDelta(1 + *m.Delta)
	}
	v := fmt.Sprintf("%s (%s)", m.Verdict, testString(m.P, m.Old.N, m.New.N))
	if mark && m.Regression {
		v += " REGRESSION"
	}
	if mark && m.Improvement {
		v += " improvement"
	}
	if mark && m.Inconclusive {
		v += " too few repeats"
	}
	return []string{diffCellName(c), m.Name, formatSummary(m.Old), formatSummary(m.New), delta, v}
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

// cellLists are the added, removed, failed and throttled cells.
func (d *DiffReport) cellLists() (lists []struct {
	title string
	items []string
}) {
	add := func(title string, items []string) {
		if len(items) > 0 {
			lists = append(lists, struct {
				title string
				items []string
			}{title, items})
		}
	}
	var failed, fixed, added, removed, throttled, notCompared []string
	for _, c := range d.Cells {
		switch c.Change {
		case CellNewlyFailed:
			failed = append(failed, c.ID+": "+pick(c.Error != "", c.Error, "no error recorded"))
		case CellFixed:
			fixed = append(fixed, c.ID)
		case CellAdded:
			added = append(added, c.ID)
		case CellRemoved:
			removed = append(removed, c.ID)
		case CellNotCompared:
			notCompared = append(notCompared, fmt.Sprintf("%s (old %s, new %s)", c.ID, c.OldStatus, c.NewStatus))
		}
		if c.Throttled != "" {
			throttled = append(throttled, c.ID+": "+c.Throttled)
		}
	}
	add("Newly failed cells (counted as regressions)", failed)
	add("Throttled cells (their numbers may reflect the GPU, not the code)", throttled)
	add("Cells fixed (failed before, ok now)", fixed)
	add("Cells only in new", added)
	add("Cells only in old", removed)
	add("Cells not compared", notCompared)
	return lists
}

// WriteText renders the diff for a terminal.
func (d *DiffReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "xrun diff %s -> %s\n", d.Old, d.New)
	fmt.Fprintf(&b, "%s: %s\n", d.label(), d.headline())
	fmt.Fprintf(&b, "%s\n", d.scope())
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
	if len(d.Cells) > 0 && d.Counts.Compared > 0 {
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
	fmt.Fprintf(&b, "## xrun diff: %s\n\n", mdEscape(d.headline()))
	fmt.Fprintf(&b, "`%s` → `%s` · %s\n", d.Old, d.New, mdEscape(d.scope()))
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
	if d.Counts.Compared > 0 {
		fmt.Fprintf(&b, "\n<details><summary>All compared metrics (%s, median ±95%% CI)</summary>\n\n", plural(d.Counts.Compared, "cell"))
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

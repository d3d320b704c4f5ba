package htmlreport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/results"
)

// maxDeltas caps the rows of the diff's chart: a nightly diff judges
// hundreds of cell x metric pairs; the chart shows the regressions, the
// improvements and the largest other changes, the table every one.
const maxDeltas = 40

// Delta is one cell and metric of a diff: the relative change of the
// median, old to new, with what the diff judged of it.
type Delta struct {
	Cell   string `json:"cell"`
	Metric string `json:"metric"`
	// Change is new/old - 1; Low and High bound it by the two medians'
	// 95 % intervals (the new one's lowest over the old one's highest,
	// and the reverse), nil where either is unbounded.
	Change       float64  `json:"change"`
	Low          *float64 `json:"low,omitempty"`
	High         *float64 `json:"high,omitempty"`
	Noise        float64  `json:"noise,omitempty"`
	Verdict      string   `json:"verdict"`
	P            float64  `json:"p"`
	Q            float64  `json:"q"`
	Regression   bool     `json:"regression,omitempty"`
	Improvement  bool     `json:"improvement,omitempty"`
	Inconclusive bool     `json:"inconclusive,omitempty"`
	WithinNoise  bool     `json:"within_noise,omitempty"`
}

// DiffData is what the diff page draws.
type DiffData struct {
	Outcome   string  `json:"outcome"`
	Label     string  `json:"label"`
	Headline  string  `json:"headline"`
	Threshold float64 `json:"threshold"`
	// Deltas are the compared metrics, regressions first, then
	// improvements, then inconclusive ones, then the rest by the size of
	// their change; Charted is how many of them the chart shows.
	Deltas  []Delta `json:"deltas"`
	Charted int     `json:"charted"`
	// Kernels set old against new for the cells profiled in both runs
	// whose kernels changed.
	Kernels []KernelPairChart `json:"kernels,omitempty"`
	Left    string            `json:"left,omitempty"`
}

// BuildDiff lays out a diff for its page; old and new are the results
// it compared (normalized, as results.Diff takes them), for the kernel
// charts.
func BuildDiff(d *results.DiffReport, old, new *results.Results, o Options) *DiffData {
	dd := &DiffData{Outcome: string(d.Outcome), Label: d.Label(), Headline: d.Headline(), Threshold: d.Threshold}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if m.Delta == nil {
				continue
			}
			x := Delta{Cell: c.ID, Metric: m.Metric, Change: *m.Delta, Noise: m.Noise, Verdict: string(m.Verdict), P: m.P, Q: m.Q,
				Regression: m.Regression, Improvement: m.Improvement, Inconclusive: m.Inconclusive, WithinNoise: m.WithinNoise}
			if lo, hi := ratioBounds(m.Old, m.New); lo != nil {
				l, h := round6(*lo-1), round6(*hi-1)
				x.Low, x.High = &l, &h
			}
			dd.Deltas = append(dd.Deltas, x)
		}
	}
	rank := func(x Delta) int {
		switch {
		case x.Regression:
			return 0
		case x.Improvement:
			return 1
		case x.Inconclusive:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(dd.Deltas, func(a, b Delta) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(math.Abs(b.Change), math.Abs(a.Change)))
	})
	dd.Charted = min(len(dd.Deltas), maxDeltas)

	oc, nc := map[string]*results.Cell{}, map[string]*results.Cell{}
	for i := range old.Cells {
		oc[old.Cells[i].ID] = &old.Cells[i]
	}
	for i := range new.Cells {
		nc[new.Cells[i].ID] = &new.Cells[i]
	}
	var pairs []KernelPairChart
	for _, c := range d.Cells {
		if len(c.KernelChanges) == 0 || oc[c.ID] == nil || nc[c.ID] == nil {
			continue
		}
		if ch, ok := kernelPair("kernels-"+c.ID, oc[c.ID], nc[c.ID], "old", "new", c.KernelChanges, o.Stage); ok {
			ch.Where = c.ID
			pairs = append(pairs, ch)
		}
	}
	if limit := o.maxCells(); len(pairs) > limit {
		dd.Left = fmt.Sprintf("charts for %d of %d cells whose kernels changed; the list above has every one", limit, len(pairs))
		pairs = pairs[:limit]
	}
	dd.Kernels = pairs
	return dd
}

// Section ids of the diff page, in page order.
const (
	SectionVerdict = "verdict"
	SectionDeltas  = "deltas"
	SectionKernels = "kernels"
	SectionMetrics = "metrics"
)

// DiffSections lists the diff page's section ids in page order.
var DiffSections = []string{SectionVerdict, SectionDeltas, SectionKernels, SectionMetrics}

// WriteDiff renders the page of `xrun diff --format html`: the verdict
// and what it rests on, a chart of every compared metric's change with
// its bounds (regressions first), the kernel changes of cells profiled in
// both runs, and every compared metric. old and new are the results the
// diff compared.
func WriteDiff(w io.Writer, d *results.DiffReport, old, new *results.Results, o Options) error {
	return writePage(w, diffPage(d, BuildDiff(d, old, new, o)))
}

// DiffJSON is the data behind the diff page's charts as indented JSON,
// for golden tests.
func DiffJSON(d *results.DiffReport, old, new *results.Results, o Options) ([]byte, error) {
	b, err := json.MarshalIndent(BuildDiff(d, old, new, o), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func diffPage(d *results.DiffReport, dd *DiffData) *page {
	p := &page{Title: "xrun diff: " + dd.Label, Heading: "xrun diff", Subtitle: d.Old + " → " + d.New,
		Verdict: &verdictLine{Label: dd.Label, Text: dd.Headline, Class: outcomeClass(d.Outcome)},
		Footer:  "Written by xrun diff; `xrun diff --format markdown` prints the same findings for a pull request. The page loads nothing from the network."}

	v := &section{ID: SectionVerdict, Title: "Verdict"}
	v.p(d.Scope())
	if r := d.Rule(); r != "" {
		v.muted(r)
	}
	if len(d.Environment) > 0 {
		t := &results.Table{Title: "The environment differs (the numbers may reflect it)", Columns: []results.Column{{Name: "field"}, {Name: "old"}, {Name: "new"}}}
		for _, e := range d.Environment {
			t.Rows = append(t.Rows, []string{e.Field, e.Old, e.New})
		}
		v.table(t, "")
	}
	for _, l := range d.CellLists() {
		v.h3(l.Title)
		v.list(l.Items, "")
	}

	ds := &section{ID: SectionDeltas, Title: "Changes, old → new"}
	if len(dd.Deltas) == 0 {
		ds.muted("Nothing was compared: no metric of a cell ok in both runs.")
	} else {
		svg, err := drawDeltas(dd)
		caption := fmt.Sprintf("Each row is one cell and metric: the change of its median, with bars bounding it by the two medians' 95%% intervals (none below 6 repeats). "+
			"Orange: a regression, green: an improvement, grey: neither; the shaded band is the threshold (±%s). Regressions first, then improvements, then the largest other changes.",
			strconv.FormatFloat(100*dd.Threshold, 'g', 4, 64)+"%")
		if dd.Charted < len(dd.Deltas) {
			caption += fmt.Sprintf(" The chart shows %d of the %d compared metrics; the table below has every one.", dd.Charted, len(dd.Deltas))
		}
		ds.chart("delta-all", caption, svg, err)
		for _, which := range []bool{true, false} {
			t := diffTable(d, func(m results.MetricDiff) bool { return pick(which, m.Regression, m.Improvement) })
			if len(t.Rows) > 0 {
				t.Title = pick(which, "Regressions", "Improvements")
				b := tableBlock(t, "")
				b.Table.RowClass = slices.Repeat([]string{pick(which, "bad", "good")}, len(t.Rows))
				ds.add(b)
			}
		}
	}

	ks := &section{ID: SectionKernels, Title: "Kernel changes"}
	var kcells []results.CellDiff
	for _, c := range d.Cells {
		if len(c.KernelChanges) > 0 {
			kcells = append(kcells, c)
		}
	}
	if len(kcells) == 0 && d.KernelsUnchanged == 0 {
		ks.muted("No cell was profiled in both runs: no kernels to compare.")
	} else {
		ks.muted("Old → new, " + results.KernelsDiffNote + ".")
	}
	charts := map[string]KernelPairChart{}
	for _, ch := range dd.Kernels {
		charts[ch.Where] = ch
	}
	for _, c := range kcells {
		ks.h3(c.ID)
		ks.list(c.KernelChanges, "")
		if ch, ok := charts[c.ID]; ok {
			svg, err := drawKernelPair(ch)
			ks.chart(ch.Name, "Kernel time by kind in the cell's profile window, old and new ("+ch.Unit+").", svg, err)
		}
	}
	if s := d.KernelsUnchangedText(len(kcells)); s != "" {
		ks.p(s + ".")
	}
	if dd.Left != "" {
		ks.muted(dd.Left)
	}

	ms := &section{ID: SectionMetrics, Title: "All compared metrics"}
	if t := diffTable(d, func(results.MetricDiff) bool { return true }); len(t.Rows) > 0 {
		t.Title = "All compared metrics (median ±95% CI)"
		t.Notes = d.Warnings
		b := tableBlock(t, "")
		for _, c := range d.Cells {
			for _, m := range c.Metrics {
				b.Table.RowClass = append(b.Table.RowClass, pick(m.Regression, "bad", pick(m.Improvement, "good", "")))
			}
		}
		ms.add(b)
	} else {
		ms.muted("Nothing was compared.")
	}
	p.Sections = []*section{v, ds, ks, ms}
	return p
}

func outcomeClass(o results.Outcome) string {
	switch o {
	case results.OutcomeOK:
		return "good"
	case results.OutcomeInconclusive:
		return ""
	}
	return "bad"
}

// diffTable lists the compared metrics keep accepts, as the diff's text
// does.
func diffTable(d *results.DiffReport, keep func(results.MetricDiff) bool) *results.Table {
	t := &results.Table{Columns: []results.Column{{Name: "cell"}, {Name: "metric"}, {Name: "old", Right: true}, {Name: "new", Right: true},
		{Name: "delta", Right: true}, {Name: "noise", Right: true}, {Name: "verdict"}}}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if !keep(m) {
				continue
			}
			delta, noise := "n/a", "-"
			if m.Delta != nil {
				delta = results.FormatDelta(1 + *m.Delta)
			}
			if m.Noise > 0 {
				noise = "±" + strings.TrimPrefix(results.FormatDelta(1+m.Noise), "+")
			}
			v := fmt.Sprintf("%s (p=%.3f q=%.3f n=%d+%d)", m.Verdict, m.P, m.Q, m.Old.N, m.New.N)
			switch {
			case m.Regression:
				v += " REGRESSION" + pick(m.ClockExplained, " explained by the SM clock", "")
			case m.Improvement:
				v += " improvement"
			case m.WithinNoise:
				v += " within noise"
			case m.Inconclusive:
				v += " too few repeats"
			}
			t.Rows = append(t.Rows, []string{c.ID + pick(c.Throttled != "", " (throttled)", ""), m.Name,
				results.FormatSummary(m.Old), results.FormatSummary(m.New), delta, noise, v})
		}
	}
	return t
}

// drawDeltas draws the charted changes in percent, against the band of
// the threshold.
func drawDeltas(dd *DiffData) (template.HTML, error) {
	var cats []string
	s := catSeries{color: neutral}
	for i, x := range dd.Deltas[:dd.Charted] {
		cats = append(cats, x.Cell+" · "+results.MetricFor(x.Metric).Name)
		pt := catPoint{cat: i, x: 100 * x.Change, highlight: neutral}
		if x.Low != nil && x.High != nil {
			lo, hi := 100**x.Low, 100**x.High
			pt.lo, pt.hi = &lo, &hi
		}
		switch {
		case x.Regression:
			pt.highlight = bad
		case x.Improvement:
			pt.highlight = good
		}
		note := fmt.Sprintf("%s %s (q=%.3f)", results.FormatDelta(1+x.Change), x.Verdict, x.Q)
		switch {
		case x.Regression:
			note += " REGRESSION"
		case x.Improvement:
			note += " improvement"
		case x.WithinNoise:
			note += " within noise"
		case x.Inconclusive:
			note += " too few repeats"
		}
		pt.note = note
		s.points = append(s.points, pt)
	}
	zero := 0.0
	band := [2]float64{-100 * dd.Threshold, 100 * dd.Threshold}
	return drawCategories("Change of each compared metric, old → new", "change of the median (%)", cats, []catSeries{s}, &zero, &band)
}

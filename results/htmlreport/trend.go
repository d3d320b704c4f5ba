package htmlreport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/xrun-dev/xrun/results"
)

// maxTrendCharts caps the series the trend page draws: a nightly study
// follows hundreds of cell x metric series; the page draws those with
// steps first, and the tables list every step.
const maxTrendCharts = 30

// Level is a stretch of runs at one level of a series, between its steps.
type Level struct {
	From  int     `json:"from"` // run index, inclusive
	To    int     `json:"to"`
	Level float64 `json:"level"`
}

// TrendChart is one cell and metric over the runs: each run's median with
// its interval, the levels between the steps, and the steps.
type TrendChart struct {
	Name   string              `json:"name"`
	Cell   string              `json:"cell"`
	Metric string              `json:"metric"`
	Points []Point             `json:"points"` // X is the run's index
	Levels []Level             `json:"levels,omitempty"`
	Steps  []results.TrendStep `json:"steps,omitempty"`
}

// TrendData is what the trend page draws.
type TrendData struct {
	Study  string       `json:"study"`
	Dates  []string     `json:"dates"`
	Charts []TrendChart `json:"charts"`
	// Left says how many series got no chart (the cap).
	Left string `json:"left,omitempty"`
}

// BuildTrend lays out a trend for its page: a chart per series, those
// with a step at the newest run first, then those with steps, then those
// the newest run left unjudged, then the rest, up to maxTrendCharts (or
// o.MaxCellCharts where set).
func BuildTrend(t *results.TrendReport, o Options) *TrendData {
	td := &TrendData{Study: t.Study}
	for i := range t.Runs {
		td.Dates = append(td.Dates, t.RunDate(i))
	}
	rank := func(s results.TrendSeries) int {
		switch {
		case len(s.Steps) > 0 && s.Steps[len(s.Steps)-1].Newest:
			return 0
		case len(s.Steps) > 0:
			return 1
		case s.Unjudged != nil:
			return 2
		}
		return 3
	}
	series := slices.Clone(t.Series)
	slices.SortStableFunc(series, func(a, b results.TrendSeries) int { return cmp.Compare(rank(a), rank(b)) })
	limit := maxTrendCharts
	if o.MaxCellCharts > 0 {
		limit = o.MaxCellCharts
	}
	if len(series) > limit {
		td.Left = fmt.Sprintf("charts for %d of %d series (those with steps first); the tables list every step", limit, len(series))
		series = series[:limit]
	}
	for _, s := range series {
		ch := TrendChart{Name: "trend-" + s.Cell + "-" + s.Metric, Cell: s.Cell, Metric: s.Metric, Steps: s.Steps}
		for _, p := range s.Points {
			ch.Points = append(ch.Points, Point{X: float64(p.Run), Y: p.Summary.Median, Low: p.Summary.CILow, High: p.Summary.CIHigh})
		}
		ch.Levels = trendLevels(ch.Points, s.Steps)
		td.Charts = append(td.Charts, ch)
	}
	return td
}

// trendLevels are the levels a series' steps separate: before the first
// step its Before, after each step its After, each over the runs the
// series has up to the next step.
func trendLevels(pts []Point, steps []results.TrendStep) []Level {
	if len(steps) == 0 || len(pts) == 0 {
		return nil
	}
	first, last := int(pts[0].X), int(pts[len(pts)-1].X)
	out := []Level{{From: first, To: steps[0].Run - 1, Level: steps[0].Before}}
	for i, st := range steps {
		to := last
		if i+1 < len(steps) {
			to = steps[i+1].Run - 1
		}
		out = append(out, Level{From: st.Run, To: to, Level: st.After})
	}
	return out
}

// Section ids of the trend page, in page order.
const (
	SectionTrendVerdict = "verdict"
	SectionTrendSteps   = "steps"
	SectionTrendSeries  = "series"
	SectionTrendRuns    = "runs"
)

// TrendSections lists the trend page's section ids in page order.
var TrendSections = []string{SectionTrendVerdict, SectionTrendSteps, SectionTrendSeries, SectionTrendRuns}

// WriteTrend renders the page of `xrun trend --format html`: the verdict,
// every step found, a chart per series (capped, those with steps first)
// and the runs.
func WriteTrend(w io.Writer, t *results.TrendReport, o Options) error {
	return writePage(w, trendPage(t, BuildTrend(t, o)))
}

// TrendJSON is the data behind the trend page's charts as indented JSON,
// for golden tests.
func TrendJSON(t *results.TrendReport, o Options) ([]byte, error) {
	b, err := json.MarshalIndent(BuildTrend(t, o), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func trendPage(t *results.TrendReport, td *TrendData) *page {
	p := &page{Title: "xrun trend: " + t.Study, Heading: "xrun trend: " + t.Study,
		Subtitle: fmt.Sprintf("%d runs, %s to %s", len(t.Runs), first(td.Dates), lastOf(td.Dates)),
		Verdict:  &verdictLine{Label: t.Label(), Text: t.Headline(), Class: outcomeClass(t.Outcome)},
		Footer:   "Written by xrun trend from the runs' results.json. The page loads nothing from the network."}

	v := &section{ID: SectionTrendVerdict, Title: "Verdict"}
	v.p(t.Scope())
	v.muted(t.Rule())
	if len(t.NewlyFailed) > 0 {
		v.h3("Newly failed in the newest run (regressions)")
		v.list(t.NewlyFailed, "")
	}
	if len(t.Missing) > 0 {
		v.h3("Ok in the run before, missing or skipped in the newest (not judged)")
		v.list(t.Missing, "")
	}
	v.list(t.Warnings, "notes")

	st := &section{ID: SectionTrendSteps, Title: "Steps"}
	steps := &results.Table{Title: "Every step found", Columns: []results.Column{{Name: "cell"}, {Name: "metric"}, {Name: "from run"},
		{Name: "before", Right: true}, {Name: "after", Right: true}, {Name: "change", Right: true}, {Name: "noise", Right: true}, {Name: "verdict"}}}
	var classes []string
	for _, s := range t.Series {
		for _, x := range s.Steps {
			verdict := fmt.Sprintf("%s (p=%.3f q=%.3f n=%d+%d)", x.Verdict, x.P, x.Q, x.N1, x.N2)
			switch {
			case x.Regression:
				verdict += " REGRESSION" + pick(x.Newest, " at the newest run", "")
			case x.Improvement:
				verdict += " improvement"
			}
			steps.Rows = append(steps.Rows, []string{s.Cell, s.Name, t.RunDate(x.Run), results.FormatSig(x.Before, 4), results.FormatSig(x.After, 4),
				results.FormatDelta(1 + x.Delta), "±" + strconv.FormatFloat(100*x.Band, 'f', 1, 64) + "%", verdict})
			classes = append(classes, pick(x.Regression, "bad", pick(x.Improvement, "good", "")))
		}
	}
	if len(steps.Rows) == 0 {
		st.muted("No step: every series stayed at one level over the runs (within the threshold and its noise).")
	} else {
		b := tableBlock(steps, "")
		b.Table.RowClass = classes
		st.add(b)
	}

	ss := &section{ID: SectionTrendSeries, Title: "Series"}
	if len(td.Charts) == 0 {
		ss.muted("No series was followed.")
	}
	ss.muted("Each chart is one cell and metric over the runs: each run's median with its 95% interval (none below 6 repeats), the levels between steps dashed, a step marked where its new level begins.")
	for _, ch := range td.Charts {
		svg, err := drawTrend(ch, td.Dates)
		ss.chart(ch.Name, "", svg, err)
	}
	if td.Left != "" {
		ss.muted(td.Left)
	}

	rs := &section{ID: SectionTrendRuns, Title: "Runs"}
	runs := &results.Table{Title: "Runs in time order", Columns: []results.Column{{Name: "#", Right: true}, {Name: "started"}, {Name: "results"}, {Name: "commit"}}}
	for i, r := range t.Runs {
		runs.Rows = append(runs.Rows, []string{strconv.Itoa(i + 1), t.RunDate(i), r.Name, r.Commit})
	}
	rs.table(runs, "")
	p.Sections = []*section{v, st, ss, rs}
	return p
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func lastOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// drawTrend draws a series over the runs.
func drawTrend(ch TrendChart, dates []string) (template.HTML, error) {
	p := newPlot(ch.Cell+" · "+results.MetricFor(ch.Metric).Name, "run", metricLabel(ch.Metric))
	var pts plotter.XYs
	eb := &xyErr{}
	for _, pt := range ch.Points {
		pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
		if dl, dh, ok := bounded(pt.Y, pt.Low, pt.High); ok {
			eb.add(pt.X, pt.Y, dl, dh)
		}
	}
	l, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return "", err
	}
	l.LineStyle = lineStyle(colorAt(0), 1, false)
	sc.GlyphStyle = draw.GlyphStyle{Color: colorAt(0), Radius: 2.5, Shape: draw.CircleGlyph{}}
	p.Add(l, sc)
	p.Legend.Add("median", l, sc)
	if eb.Len() > 0 {
		e, err := plotter.NewYErrorBars(eb)
		if err != nil {
			return "", err
		}
		e.LineStyle, e.CapWidth = lineStyle(colorAt(0), 0.8, false), 4
		p.Add(e)
	}
	for i, lv := range ch.Levels {
		if lv.To < lv.From {
			continue
		}
		seg, err := plotter.NewLine(plotter.XYs{{X: float64(lv.From) - 0.3, Y: lv.Level}, {X: float64(lv.To) + 0.3, Y: lv.Level}})
		if err != nil {
			return "", err
		}
		seg.LineStyle = lineStyle(color.Black, 1, true)
		p.Add(seg)
		if i == 0 {
			p.Legend.Add("level", seg)
		}
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, pt := range ch.Points {
		ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
	}
	for _, x := range ch.Steps {
		c := pick[color.Color](x.Regression, bad, pick[color.Color](x.Improvement, good, neutral))
		mark, err := plotter.NewLine(plotter.XYs{{X: float64(x.Run) - 0.5, Y: math.Min(x.Before, x.After)}, {X: float64(x.Run) - 0.5, Y: math.Max(x.Before, x.After)}})
		if err != nil {
			return "", err
		}
		mark.LineStyle = lineStyle(c, 2, false)
		p.Add(mark)
	}
	// Ticks at the runs, by date, at most a dozen labelled.
	every := max(1, (len(dates)+11)/12)
	var ticks plot.ConstantTicks
	for i, d := range dates {
		t := plot.Tick{Value: float64(i)}
		if i%every == 0 {
			t.Label = d
		}
		ticks = append(ticks, t)
	}
	p.X.Tick.Marker = ticks
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.X.Min, p.X.Max = -0.5, float64(len(dates))-0.5
	headroom(p, 2)
	return renderPlot(p, chartWidth, 2.8*vg.Inch)
}

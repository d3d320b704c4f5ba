package htmlreport

import (
	"cmp"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/xrun-dev/xrun/results"
)

// Serving curves: a study whose cells are load points (a request_rate or
// concurrency axis, with the latency percentiles serving users read)
// gets its latency percentiles and goodput against the load, a line per
// combination of the other axes, with the SLO's targets and the SLO
// search's frontier marked. The throughput-latency chart beside them
// (ThroughputLatency) already draws per-user against total throughput
// with the Pareto front.

// ServingPoint is one load point of a series.
type ServingPoint struct {
	Cell string `json:"cell"`
	// X is the load: the axis value (requests per second, or users).
	X float64 `json:"x"`
	// Metrics are the medians drawn, by key (absent where not measured).
	Metrics map[string]float64 `json:"metrics"`
}

// ServingSeries is one combination of the other axes along the load.
type ServingSeries struct {
	Label  string         `json:"label"`
	Points []ServingPoint `json:"points"`
	// Best is the SLO frontier of the series' group, where the search
	// found one (the highest load meeting the SLO); Status the search's.
	Best   *float64 `json:"best,omitempty"`
	Status string   `json:"status,omitempty"`
}

// ServingChart is the latency-against-load and goodput curves.
type ServingChart struct {
	Name string `json:"name"`
	// Axis is request_rate or concurrency.
	Axis    string          `json:"axis"`
	Latency []string        `json:"latency"`
	Series  []ServingSeries `json:"series"`
	SLO     *results.SLO    `json:"slo,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
}

// servingLatency are the latency percentiles drawn against the load, in
// legend order.
var servingLatency = []string{"ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "itl_p99_ms"}

const goodputKey = "goodput_req_s"

// ServingCurves is the serving chart's data; nil when no load axis varies
// or the cells measured no TTFT (offline engines' reports).
func ServingCurves(r *results.Results) *ServingChart {
	s := newStudy(r)
	axis := ""
	for _, a := range s.numericAxes() {
		if a.Name == "request_rate" || a.Name == "concurrency" {
			axis = a.Name
			break
		}
	}
	if axis == "" || !s.has("ttft_p99_ms") {
		return nil
	}
	ch := &ServingChart{Name: "serving-" + axis, Axis: axis, SLO: r.SLO}
	for _, k := range servingLatency {
		if s.has(k) {
			ch.Latency = append(ch.Latency, k)
		}
	}
	byLabel := map[string]int{}
	for _, c := range s.cells {
		if c.Status != results.StatusOK {
			continue
		}
		// Rate inf (stored as 0) and concurrency none: every request at
		// once, no point on a load axis.
		x, ok := axisNumber(results.ParamString(c, axis))
		if !ok || x <= 0 {
			continue
		}
		pt := ServingPoint{Cell: c.ID, X: x, Metrics: map[string]float64{}}
		for _, k := range append(slices.Clone(ch.Latency), goodputKey) {
			if m, ok := c.Summary[k]; ok && m.N > 0 {
				pt.Metrics[k] = m.Median
			}
		}
		l := s.label(c, axis)
		i, ok := byLabel[l]
		if !ok {
			i = len(ch.Series)
			byLabel[l] = i
			ch.Series = append(ch.Series, ServingSeries{Label: l})
		}
		ch.Series[i].Points = append(ch.Series[i].Points, pt)
	}
	if len(ch.Series) == 0 {
		return nil
	}
	for i := range ch.Series {
		slices.SortStableFunc(ch.Series[i].Points, func(a, b ServingPoint) int { return cmp.Compare(a.X, b.X) })
	}
	if r.Search != nil && r.Search.Axis == axis {
		for _, f := range r.Search.Frontier {
			if i, ok := byLabel[f.Label]; ok {
				ch.Series[i].Best, ch.Series[i].Status = f.Best, f.Status
			}
		}
	}
	if n := len(ch.Series) - maxSeries; n > 0 {
		ch.Series = ch.Series[:maxSeries]
		ch.Notes = append(ch.Notes, plural(n, "more series")+" not drawn")
	}
	return ch
}

// drawServing draws latency percentiles against the load (log scales:
// loads and latencies span decades) with the SLO's targets, and goodput
// against the load with the frontier of each series.
func drawServing(ch *ServingChart) (template.HTML, error) {
	unit := pick(ch.Axis == "concurrency", "concurrency (users)", "request rate (req/s)")
	lat := newPlot("Latency against load", unit, "latency (ms)")
	good := newPlot("Goodput against load", unit, metricLabel(goodputKey))
	lat.X.Scale, lat.Y.Scale = plot.LogScale{}, plot.LogScale{}
	lat.X.Tick.Marker, lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	good.X.Scale, good.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	hasGoodput := false
	entries := 0 // the latency panel's legend entries, for its headroom
	dashes := [][]vg.Length{nil, {5, 3}, {2, 2}, {6, 2, 2, 2}}
	for i, s := range ch.Series {
		c := colorAt(i)
		for ki, k := range ch.Latency {
			var pts plotter.XYs
			for _, p := range s.Points {
				if v, ok := p.Metrics[k]; ok && v > 0 {
					pts = append(pts, plotter.XY{X: p.X, Y: v})
					ymin, ymax = min(ymin, v), max(ymax, v)
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return "", err
			}
			l.LineStyle = draw.LineStyle{Color: c, Width: 1, Dashes: dashes[ki%len(dashes)]}
			sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: 2, Shape: shapes[ki%len(shapes)]}
			lat.Add(l, sc)
			name := metricLabel(k)
			if len(ch.Series) > 1 {
				name = s.Label + ": " + name
			}
			if i < 4 {
				lat.Legend.Add(name, l, sc)
				entries++
			}
		}
		var gp plotter.XYs
		for _, p := range s.Points {
			xmin, xmax = min(xmin, p.X), max(xmax, p.X)
			if v, ok := p.Metrics[goodputKey]; ok {
				gp = append(gp, plotter.XY{X: p.X, Y: v})
				hasGoodput = true
			}
		}
		if len(gp) > 0 {
			l, sc, err := plotter.NewLinePoints(gp)
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(c, 1.2, false)
			sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: 2.5, Shape: shapes[i%len(shapes)]}
			good.Add(l, sc)
			good.Legend.Add(s.Label, l, sc)
		}
		if s.Best != nil {
			// The frontier: the highest load the search found meeting
			// the SLO, a dashed vertical in the series' colour.
			v, err := vline(*s.Best, c)
			if err != nil {
				return "", err
			}
			good.Add(v)
			good.Legend.Add(fmt.Sprintf("%s: SLO frontier %s (%s)", s.Label, strconv.FormatFloat(*s.Best, 'g', 4, 64), s.Status), v)
		}
	}
	if math.IsInf(xmin, 1) || math.IsInf(ymin, 1) {
		return "", fmt.Errorf("no load point with a latency to draw")
	}
	if slo := ch.SLO; slo != nil {
		for _, t := range []struct {
			name string
			v    float64
		}{{"TTFT target", slo.TTFTms}, {"TPOT target", slo.TPOTms}} {
			if t.v <= 0 {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: t.v}, {X: xmax, Y: t.v}})
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(bad, 1, true)
			lat.Add(l)
			lat.Legend.Add(fmt.Sprintf("%s %s ms", t.name, strconv.FormatFloat(t.v, 'g', 4, 64)), l)
			entries++
			ymin, ymax = min(ymin, t.v), max(ymax, t.v)
		}
	}
	if ch.Axis == "request_rate" && hasGoodput {
		// Goodput can reach the offered rate and no further.
		l, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: xmin}, {X: xmax, Y: xmax}})
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(color.Gray{Y: 150}, 1, true)
		good.Add(l)
		good.Legend.Add("offered rate", l)
	}
	lat.X.Min, lat.X.Max = xmin/1.2, xmax*1.2
	// Room above the curves for the legend: a decade per few entries.
	lat.Y.Min, lat.Y.Max = ymin/1.5, ymax*math.Pow(10, 0.3+0.12*float64(min(entries, 12)))
	good.X.Min, good.X.Max = xmin/1.2, xmax*1.2
	good.Y.Min = 0
	headroom(good, len(ch.Series)*2+1)
	plots := [][]*plot.Plot{{lat}}
	if hasGoodput {
		plots = append(plots, []*plot.Plot{good})
	}
	h := vg.Length(len(plots)) * 4 * vg.Inch
	return render(chartWidth, h, func(dc draw.Canvas) {
		t := draw.Tiles{Rows: len(plots), Cols: 1, PadY: 8, PadTop: 2, PadBottom: 2}
		cs := plot.Align(plots, t, dc)
		for i := range plots {
			plots[i][0].Draw(cs[i][0])
		}
	})
}

// vlineAt is a vertical line at X over the whole plot's height; it is no
// DataRanger, so it never stretches the axes.
type vlineAt struct {
	x     float64
	style draw.LineStyle
}

func vline(x float64, c color.Color) (vlineAt, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
		return vlineAt{}, fmt.Errorf("frontier %v cannot be drawn on a log axis", x)
	}
	return vlineAt{x: x, style: lineStyle(c, 1.4, true)}, nil
}

func (v vlineAt) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(v.x)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(v.style, x, c.Min.Y, x, c.Max.Y)
}

func (v vlineAt) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(v.style, c.Min.X, y, c.Max.X, y)
}

// servingCharts adds the serving curves and the SLO frontier's table to
// the latency section, where the study has load points.
func servingCharts(s *section, ch *ServingChart) *section {
	if ch == nil {
		return s
	}
	svg, err := drawServing(ch)
	caption := "Medians over the repeats, a line per combination of the other axes, both axes logarithmic in the upper panel. " +
		"Upper: latency percentiles against the load" + pick(ch.SLO != nil, ", the SLO's targets dashed in red", "") + ". " +
		"Lower: goodput, the requests per second meeting the SLO" + pick(ch.Axis == "request_rate", " (at most the offered rate, dashed grey)", "") +
		", with each series' SLO frontier, where a search found one, as a dashed vertical."
	s.chart(ch.Name, caption, svg, err)
	s.list(ch.Notes, "notes")
	return s
}

package htmlreport

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/xrun-dev/xrun/results"
)

// Drawing: gonum/plot plots rendered as SVG. Nothing here decides what is
// drawn; the data types of data.go, kernels.go and cells.go do.

// palette is Okabe and Ito's, told apart by the colour-blind too.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{240, 228, 66, 255},  // yellow
	color.RGBA{0, 0, 0, 255},       // black
}

func colorAt(i int) color.Color { return palette[i%len(palette)] }

var (
	good    = color.RGBA{0, 158, 115, 255}
	bad     = color.RGBA{213, 94, 0, 255}
	neutral = color.RGBA{120, 120, 120, 255}
	shadeA  = color.NRGBA{0, 114, 178, 40}
	shadeB  = color.NRGBA{230, 159, 0, 90}
	gridCol = color.RGBA{220, 220, 220, 255}
)

// shapes tell series apart where colour means something else.
var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}}

const (
	chartWidth = 7 * vg.Inch
	rowHeight  = 0.26 * vg.Inch
)

// sans is the page's font: gonum measures text with its embedded
// Liberation Sans, and the stylesheet asks the browser for a metrically
// compatible face, so labels fit.
func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// newPlot is a plot in the page's style: sans text, a light grid.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(11)
	p.Title.Padding = 6
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(10)
		a.Tick.Label.Font = sans(9)
	}
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.Legend.TextStyle.Font = sans(9)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = 6, -4
	p.Legend.ThumbnailWidth = 18
	// gonum spaces entries by their text height alone; a little air
	// keeps the rows of a legend from touching.
	p.Legend.Padding = 3
	p.X.Tick.Marker, p.Y.Tick.Marker = readableTicks{}, readableTicks{}
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridCol, gridCol
	p.Add(g)
	return p
}

// render draws p as an SVG element for inlining in the page: the XML
// prolog and comment vgsvg writes go, they have no place inside HTML. A
// plot gonum cannot draw (it panics on some degenerate ranges) becomes an
// error, shown in the chart's place.
func render(w, h vg.Length, drawTo func(dc draw.Canvas)) (out template.HTML, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the chart could not be drawn: %v", r)
		}
	}()
	c := vgsvg.New(w, h)
	drawTo(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	s := b.String()
	i := strings.Index(s, "<svg")
	if i < 0 {
		return "", fmt.Errorf("the chart could not be drawn: no <svg> in gonum's output")
	}
	// Inline SVG scales with the page (the stylesheet sets the width).
	s = strings.Replace(s[i:], "<svg ", `<svg role="img" preserveAspectRatio="xMinYMin meet" `, 1)
	return template.HTML(s), nil
}

func renderPlot(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	return render(w, h, func(dc draw.Canvas) { p.Draw(dc) })
}

// xyErr is a set of points with asymmetric errors in X or Y, as gonum's
// error bar plotters take them (distances from the point).
type xyErr struct {
	pts    plotter.XYs
	lo, hi []float64
}

func (e *xyErr) Len() int                        { return len(e.pts) }
func (e *xyErr) XY(i int) (float64, float64)     { return e.pts[i].X, e.pts[i].Y }
func (e *xyErr) YError(i int) (float64, float64) { return e.lo[i], e.hi[i] }
func (e *xyErr) XError(i int) (float64, float64) { return e.lo[i], e.hi[i] }

func (e *xyErr) add(x, y float64, lo, hi float64) {
	e.pts = append(e.pts, plotter.XY{X: x, Y: y})
	e.lo = append(e.lo, lo)
	e.hi = append(e.hi, hi)
}

// bounded reports a point's interval as distances from its value; ok is
// false where it is unbounded.
func bounded(v float64, lo, hi *float64) (dl, dh float64, ok bool) {
	if lo == nil || hi == nil {
		return 0, 0, false
	}
	return math.Max(v-*lo, 0), math.Max(*hi-v, 0), true
}

func lineStyle(c color.Color, width vg.Length, dashed bool) draw.LineStyle {
	ls := draw.LineStyle{Color: c, Width: width}
	if dashed {
		ls.Dashes = []vg.Length{5, 3}
	}
	return ls
}

// headroom raises the Y axis so that a legend in the top corner does not
// cover the data.
func headroom(p *plot.Plot, entries int) {
	if entries == 0 {
		return
	}
	p.Y.Max += (p.Y.Max - math.Min(p.Y.Min, 0)) * (0.04 + 0.06*float64(min(entries, 12)))
}

// readableTicks are gonum's default ticks labelled with the fewest
// decimals that show each major tick exactly and tell them apart: gonum's
// own labels round 1.025 and 1.05 alike to "1" and print 7500 as
// "7500.00".
type readableTicks struct{}

func (readableTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []float64
	for _, t := range ticks {
		if t.Label != "" {
			major = append(major, t.Value)
		}
	}
	dec := 0
	for ; dec < 9; dec++ {
		seen := map[string]bool{}
		ok := true
		for _, v := range major {
			s := strconv.FormatFloat(v, 'f', dec, 64)
			back, _ := strconv.ParseFloat(s, 64)
			if seen[s] || math.Abs(back-v) > 1e-9*math.Max(1, math.Abs(v)) {
				ok = false
				break
			}
			seen[s] = true
		}
		if ok {
			break
		}
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', dec, 64)
		}
	}
	return ticks
}

// integerTicks label whole numbers only (experts, layers): every one when
// there are few, else every 2, 5, 10, 20, ...
func integerTicks(lo, hi float64) plot.ConstantTicks {
	a, b := math.Ceil(lo), math.Floor(hi)
	step := 1.0
	for i := 1; (b-a)/step > 16; i++ {
		step = []float64{1, 2, 5}[i%3] * math.Pow(10, float64(i/3))
	}
	var t plot.ConstantTicks
	for v := a; v <= b; v += step {
		t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return t
}

// valueTicks marks exactly the given values: an axis of batch sizes reads
// 1, 16, 64, 256, not 1, 10, 100.
func valueTicks(values []float64) plot.ConstantTicks {
	var t plot.ConstantTicks
	for _, v := range values {
		t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	return t
}

// drawAxisChart draws throughput against a numeric axis, or every cell's
// throughput when the chart has categories.
func drawAxisChart(ch AxisChart) (template.HTML, error) {
	name := metricLabel(ch.Metric)
	if ch.Axis == "" {
		series := []catSeries{{label: "", color: colorAt(0), points: catPoints(ch.Series[0].Points)}}
		if len(ch.Roofline) > 0 {
			series[0].label = "measured (median, 95% CI)"
			series = append(series, catSeries{label: "roofline", color: colorAt(5), points: catPoints(ch.Roofline[0].Points)})
		}
		return drawCategories(fmt.Sprintf("%s per cell (median, 95%% CI)", name), name, ch.Categories, series, nil, nil)
	}
	p := newPlot(fmt.Sprintf("%s against %s (median, 95%% CI)", name, ch.Axis), ch.Axis+pick(ch.LogX, " (log scale)", ""), name)
	var xs []float64
	for i, s := range ch.Series {
		c := colorAt(i)
		var pts plotter.XYs
		eb := &xyErr{}
		for _, pt := range s.Points {
			pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
			if !slices.Contains(xs, pt.X) {
				xs = append(xs, pt.X)
			}
			if dl, dh, ok := bounded(pt.Y, pt.Low, pt.High); ok {
				eb.add(pt.X, pt.Y, dl, dh)
			}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(c, 1.5, false)
		sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: 2.5, Shape: shapes[i%len(shapes)]}
		p.Add(l, sc)
		if eb.Len() > 0 {
			e, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return "", err
			}
			e.LineStyle = lineStyle(c, 1, false)
			e.CapWidth = 5
			p.Add(e)
		}
		p.Legend.Add(s.Label, l, sc)
	}
	for _, s := range ch.Roofline {
		i := slices.IndexFunc(ch.Series, func(x Series) bool { return x.Label+" roofline" == s.Label })
		var pts plotter.XYs
		for _, pt := range s.Points {
			pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(colorAt(max(i, 0)), 1, true)
		p.Add(l)
	}
	if len(ch.Roofline) > 0 {
		l, _ := plotter.NewLine(plotter.XYs{{X: xs[0], Y: 0}})
		l.LineStyle = lineStyle(color.Black, 1, true)
		p.Legend.Add("roofline (dashed, in the series' colour)", l)
	}
	slices.Sort(xs)
	if ch.LogX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = valueTicks(xs)
	p.Y.Min = 0
	headroom(p, len(ch.Series)+min(len(ch.Roofline), 1))
	return renderPlot(p, chartWidth, 3.6*vg.Inch)
}

func metricLabel(key string) string {
	m := results.MetricFor(key)
	if m.Unit != "" && !strings.Contains(m.Name, "(") {
		return m.Name + " (" + m.Unit + ")"
	}
	return m.Name
}

// catPoint is a value of one category of a horizontal chart.
type catPoint struct {
	cat       int
	x         float64
	lo, hi    *float64
	highlight color.Color // nil: the series' colour
	// note is written above the point's row, at the left (a verdict).
	note string
}

type catSeries struct {
	label  string
	color  color.Color
	points []catPoint
}

func catPoints(pts []Point) []catPoint {
	var out []catPoint
	for _, p := range pts {
		out = append(out, catPoint{cat: int(p.X), x: p.Y, lo: p.Low, hi: p.High})
	}
	return out
}

// drawCategories draws values with their intervals against categories,
// one row each, the first at the top (so that long cell labels stay
// readable); ref draws a vertical reference line (a ratio of 1), band
// shades a stretch of X (the regression threshold).
func drawCategories(title, xlabel string, cats []string, series []catSeries, ref *float64, band *[2]float64) (template.HTML, error) {
	p := newPlot(title, xlabel, "")
	n, k := len(cats), len(series)
	notes := false
	lo, hi := math.Inf(1), math.Inf(-1)
	widen := func(v float64) { lo, hi = math.Min(lo, v), math.Max(hi, v) }
	for _, s := range series {
		for _, pt := range s.points {
			widen(pt.x)
			if pt.lo != nil && pt.hi != nil {
				widen(*pt.lo)
				widen(*pt.hi)
			}
			notes = notes || pt.note != ""
		}
	}
	if ref != nil {
		widen(*ref)
	}
	if band != nil {
		widen(band[0])
		widen(band[1])
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	pad := (hi - lo) * 0.06
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.05, 0.05)
	}
	lo, hi = lo-pad, hi+pad
	// A row is one unit of Y; series sit side by side within it, and a
	// note takes the upper part of its series' slot.
	gap := pick(notes, 1/float64(k), 0.3)
	rowY := func(cat, si int) float64 {
		return float64(n-1-cat) + gap*(float64(k-1)/2-float64(si)) - pick(notes && k > 1, gap*0.2, 0)
	}
	rev := make([]string, n)
	for i, c := range cats {
		rev[n-1-i] = clip(c, 60)
	}
	if band != nil {
		pg, err := plotter.NewPolygon(plotter.XYs{{X: band[0], Y: -0.5}, {X: band[1], Y: -0.5}, {X: band[1], Y: float64(n) - 0.5}, {X: band[0], Y: float64(n) - 0.5}})
		if err != nil {
			return "", err
		}
		pg.Color = color.NRGBA{0, 0, 0, 18}
		pg.LineStyle.Width = 0
		p.Add(pg)
	}
	if ref != nil {
		l, err := plotter.NewLine(plotter.XYs{{X: *ref, Y: -0.5}, {X: *ref, Y: float64(n) - 0.5}})
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(color.Black, 1, true)
		p.Add(l)
	}
	var labels plotter.XYLabels
	for si, s := range series {
		eb := &xyErr{}
		for _, pt := range s.points {
			y := rowY(pt.cat, si)
			c := s.color
			if pt.highlight != nil {
				c = pt.highlight
			}
			if dl, dh, ok := bounded(pt.x, pt.lo, pt.hi); ok {
				eb.add(pt.x, y, dl, dh)
			}
			sc, err := plotter.NewScatter(plotter.XYs{{X: pt.x, Y: y}})
			if err != nil {
				return "", err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: 3, Shape: shapes[si%len(shapes)]}
			p.Add(sc)
			if pt.note != "" {
				labels.XYs = append(labels.XYs, plotter.XY{X: lo, Y: y + gap*pick(k > 1, 0.45, 0.38)})
				labels.Labels = append(labels.Labels, pt.note)
			}
		}
		if eb.Len() > 0 {
			e, err := plotter.NewXErrorBars(eb)
			if err != nil {
				return "", err
			}
			e.LineStyle = lineStyle(s.color, 1, false)
			e.CapWidth = 4
			p.Add(e)
		}
		if s.label != "" {
			sc, _ := plotter.NewScatter(plotter.XYs{{}})
			sc.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: 3, Shape: shapes[si%len(shapes)]}
			p.Legend.Add(s.label, sc)
		}
	}
	if len(labels.Labels) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return "", err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font = sans(8)
			l.TextStyle[i].Color = color.RGBA{60, 60, 60, 255}
			l.TextStyle[i].YAlign = draw.YCenter
		}
		l.Offset = vg.Point{X: 3}
		p.Add(l)
	}
	p.NominalY(rev...)
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = -0.55, float64(n)-0.45
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = 0
	row := rowHeight * vg.Length(max(1, k)) * pick(notes, vg.Length(1.6), 1)
	h := vg.Length(n)*row + 1.1*vg.Inch
	if k > 1 && series[0].label != "" {
		// Room below the rows for the legend in the bottom corner.
		extra := (float64(k)*0.18 + 0.1) * float64(vg.Inch) / float64(row)
		h += vg.Length(extra) * row
		p.Y.Min -= extra
	}
	return renderPlot(p, chartWidth, h)
}

// drawLatency draws per-user against total throughput, a line per
// combination of the other axes along the first numeric one, and the
// Pareto front.
func drawLatency(ch *LatencyChart) (template.HTML, error) {
	p := newPlot("Throughput-latency: per-user against total output throughput", metricLabel(ch.X), metricLabel(ch.Y))
	for i, s := range ch.Series {
		c := colorAt(i)
		var pts plotter.XYs
		xe, ye := &xyErr{}, &xyErr{}
		for _, pt := range s.Points {
			pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
			if dl, dh, ok := bounded(pt.X, pt.XLow, pt.XHigh); ok {
				xe.add(pt.X, pt.Y, dl, dh)
			}
			if dl, dh, ok := bounded(pt.Y, pt.YLow, pt.YHigh); ok {
				ye.add(pt.X, pt.Y, dl, dh)
			}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: 2.5, Shape: shapes[i%len(shapes)]}
		p.Add(sc)
		thumbs := []plot.Thumbnailer{sc}
		if ch.Along != "" && len(pts) > 1 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(c, 1, false)
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		for _, e := range []*xyErr{xe, ye} {
			if e.Len() == 0 {
				continue
			}
			var pl plot.Plotter
			if e == xe {
				b, err := plotter.NewXErrorBars(e)
				if err != nil {
					return "", err
				}
				b.LineStyle, b.CapWidth = lineStyle(c, 0.8, false), 3
				pl = b
			} else {
				b, err := plotter.NewYErrorBars(e)
				if err != nil {
					return "", err
				}
				b.LineStyle, b.CapWidth = lineStyle(c, 0.8, false), 3
				pl = b
			}
			p.Add(pl)
		}
		p.Legend.Add(s.Label, thumbs...)
	}
	if len(ch.Front) > 0 {
		var pts plotter.XYs
		for _, pt := range ch.Front {
			pts = append(pts, plotter.XY{X: pt.X, Y: pt.Y})
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(color.Black, 1.2, true)
		sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: 5, Shape: draw.RingGlyph{}}
		p.Add(l, sc)
		p.Legend.Add("Pareto front", l, sc)
	}
	p.X.Min, p.Y.Min = 0, 0
	headroom(p, len(ch.Series)+1)
	return renderPlot(p, chartWidth, 4*vg.Inch)
}

// verdictColor colours a comparison's point by its verdict.
func verdictColor(v string) color.Color {
	switch v {
	case "faster":
		return good
	case "slower":
		return bad
	}
	return neutral
}

// drawCompare draws a comparison's ratios with their bounds, coloured by
// verdict, against the line of no change.
func drawCompare(ch CompareChart) (template.HTML, error) {
	var series []catSeries
	compared := make([]bool, len(ch.Rows))
	for i, v := range ch.Values {
		s := catSeries{label: pick(len(ch.Values) > 1, v.Value+"/"+ch.Baseline, ""), color: colorAt(i)}
		for _, pt := range v.Points {
			row := slices.Index(ch.Rows, pt.Where)
			compared[row] = true
			note := strconv.FormatFloat(pt.Ratio, 'f', 3, 64) + "x " + pt.Text
			if len(ch.Values) > 1 {
				note = v.Value + ": " + note
			}
			s.points = append(s.points, catPoint{cat: row, x: pt.Ratio, lo: pt.Low, hi: pt.High, highlight: verdictColor(pt.Verdict), note: note})
		}
		series = append(series, s)
	}
	rows := slices.Clone(ch.Rows)
	for i := range rows {
		if !compared[i] {
			rows[i] += " (not compared)"
		}
	}
	one := 1.0
	title := fmt.Sprintf("%s: %s / %s (baseline)", metricLabel(ch.Metric), strings.Join(valueNames(ch.Values), ", "), ch.Baseline)
	return drawCategories(title, "ratio to "+ch.Baseline+pick(ch.Better == "lower", " (lower is better)", pick(ch.Better == "higher", " (higher is better)", "")),
		rows, series, &one, nil)
}

func valueNames(v []RatioSeries) []string {
	var out []string
	for _, s := range v {
		out = append(out, s.Value)
	}
	return out
}

// drawBars draws bars against categories, largest at the top.
func drawBars(title, unit string, bars []Bar, c color.Color) (template.HTML, error) {
	return drawGroupedBars(title, unit, labelsOf(bars), [][]float64{valuesOf(bars)}, []string{""}, []color.Color{c})
}

func labelsOf(b []Bar) []string {
	var out []string
	for _, x := range b {
		out = append(out, x.Label)
	}
	return out
}

func valuesOf(b []Bar) []float64 {
	var out []float64
	for _, x := range b {
		out = append(out, x.Value)
	}
	return out
}

// drawGroupedBars draws one horizontal bar per category and group.
func drawGroupedBars(title, unit string, cats []string, groups [][]float64, names []string, colors []color.Color) (template.HTML, error) {
	n := len(cats)
	p := newPlot(title, unit, "")
	rev := make([]string, n)
	for i, c := range cats {
		rev[n-1-i] = clip(c, 60)
	}
	k := len(groups)
	width := rowHeight * 0.8 / vg.Length(k)
	for g, vals := range groups {
		v := make(plotter.Values, n)
		for i, x := range vals {
			v[n-1-i] = x
		}
		b, err := plotter.NewBarChart(v, width)
		if err != nil {
			return "", err
		}
		b.Horizontal = true
		b.Color = colors[g]
		b.LineStyle.Width = 0
		b.Offset = width * (vg.Length(k-1)/2 - vg.Length(g))
		p.Add(b)
		if names[g] != "" {
			p.Legend.Add(names[g], b)
		}
	}
	p.NominalY(rev...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.X.Min = 0
	p.X.Max *= 1.05
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = 0
	h := vg.Length(n)*rowHeight + 1.1*vg.Inch
	if k > 1 {
		h += vg.Length(n)*rowHeight*0.4 + vg.Length(k)*0.16*vg.Inch
		p.Y.Min -= float64(k) * 0.6
	}
	return renderPlot(p, chartWidth, h)
}

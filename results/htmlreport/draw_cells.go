package htmlreport

import (
	"fmt"
	"html/template"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// shade fills stretches of X over the whole height of a plot: the timed
// repeats and the profile window behind the telemetry lines. It is no
// DataRanger, so it never stretches the axes by itself.
type shade struct {
	spans []Span
	color color.Color
}

func (s shade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	c.SetColor(s.color)
	for _, sp := range s.spans {
		x0, x1 := max(trX(sp.From), c.Min.X), min(trX(sp.To), c.Max.X)
		if x1 <= x0 {
			continue
		}
		var pa vg.Path
		pa.Move(vg.Point{X: x0, Y: c.Min.Y})
		pa.Line(vg.Point{X: x1, Y: c.Min.Y})
		pa.Line(vg.Point{X: x1, Y: c.Max.Y})
		pa.Line(vg.Point{X: x0, Y: c.Max.Y})
		pa.Close()
		c.Fill(pa)
	}
}

// Thumbnail draws the legend's swatch.
func (s shade) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.color)
	c.Fill(c.Rectangle.Path())
}

// drawTelemetry draws a cell's SM clock, power and temperature over time
// in three panels sharing the time axis, the timed repeats and the
// profile window shaded, the throttle threshold dashed.
func drawTelemetry(ch TelemetryChart) (template.HTML, error) {
	type panel struct {
		title string
		get   func(g TelemetryGPU) [][2]float64
	}
	panels := []panel{
		{"SM clock (MHz)", func(g TelemetryGPU) [][2]float64 { return g.SMClockMHz }},
		{"power (W)", func(g TelemetryGPU) [][2]float64 { return g.PowerW }},
		{"temperature (°C)", func(g TelemetryGPU) [][2]float64 { return g.TempC }},
	}
	tmin, tmax := math.Inf(1), math.Inf(-1)
	for _, g := range ch.GPUs {
		for _, pn := range panels {
			for _, pt := range pn.get(g) {
				tmin, tmax = min(tmin, pt[0]), max(tmax, pt[0])
			}
		}
	}
	spans := append([]Span(nil), ch.Repeats...)
	if ch.Profiled != nil {
		spans = append(spans, *ch.Profiled)
	}
	for _, sp := range spans {
		tmin, tmax = min(tmin, sp.From), max(tmax, sp.To)
	}
	if math.IsInf(tmin, 1) {
		return "", fmt.Errorf("no telemetry sample to draw")
	}
	var plots [][]*plot.Plot
	for i, pn := range panels {
		p := newPlot("", pick(i == len(panels)-1, "time since the cell's worker started (s)", ""), pn.title)
		if i == 0 {
			p.Title.Text = "GPU telemetry: " + ch.Label
		}
		if len(ch.Repeats) > 0 {
			s := shade{spans: ch.Repeats, color: shadeA}
			p.Add(s)
			if i == 0 {
				p.Legend.Add("timed repeats (with warm-up)", s)
			}
		}
		if ch.Window != nil {
			s := shade{spans: []Span{*ch.Window}, color: shadeB}
			p.Add(s)
			if i == 0 {
				p.Legend.Add("profile window", s)
			}
		} else if ch.Profiled != nil {
			s := shade{spans: []Span{*ch.Profiled}, color: shadeB}
			p.Add(s)
			if i == 0 {
				p.Legend.Add("profiled pass", s)
			}
		}
		drawn := false
		for gi, g := range ch.GPUs {
			pts := pn.get(g)
			if len(pts) == 0 {
				continue
			}
			xy := make(plotter.XYs, len(pts))
			for j, pt := range pts {
				xy[j] = plotter.XY{X: pt[0], Y: pt[1]}
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(colorAt(gi), 1, false)
			p.Add(l)
			drawn = true
			if i == 0 && len(ch.GPUs) > 1 {
				p.Legend.Add(fmt.Sprintf("GPU %d", g.GPU), l)
			}
		}
		if i == 0 && ch.ThresholdMHz > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: tmin, Y: ch.ThresholdMHz}, {X: tmax, Y: ch.ThresholdMHz}})
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(bad, 1, true)
			p.Add(l)
			p.Legend.Add("throttle threshold", l)
		}
		if !drawn {
			p.Y.Min, p.Y.Max = 0, 1
			p.Title.Text += " (not reported)"
		}
		if i == 0 && p.Legend.Left {
			// Room above the clock line for the legend.
			span := math.Max(p.Y.Max-p.Y.Min, 1)
			p.Y.Min -= span * 0.05
			p.Y.Max += span * (0.15 + 0.12*float64(3+len(ch.GPUs)))
		}
		p.X.Min, p.X.Max = tmin, tmax
		plots = append(plots, []*plot.Plot{p})
	}
	h := 6 * vg.Inch
	return render(chartWidth, h, func(dc draw.Canvas) {
		t := draw.Tiles{Rows: len(plots), Cols: 1, PadY: 4, PadTop: 2, PadBottom: 2}
		cs := plot.Align(plots, t, dc)
		for i := range plots {
			plots[i][0].Draw(cs[i][0])
		}
	})
}

// drawExperts draws a MoE cell's tokens per expert and, where known, each
// layer's imbalance.
func drawExperts(ch ExpertChart) (template.HTML, error) {
	hist := newPlot(fmt.Sprintf("Tokens per expert: %s (max/mean %s)", ch.Label, fmtFloat(ch.MaxOverMean)), "expert", "tokens (summed over layers)")
	v := make(plotter.Values, len(ch.Histogram))
	for i, n := range ch.Histogram {
		v[i] = float64(n)
	}
	w := max(vg.Length(1), min(vg.Length(14), 5*vg.Inch/vg.Length(max(len(v), 1))))
	b, err := plotter.NewBarChart(v, w)
	if err != nil {
		return "", err
	}
	b.Color = colorAt(0)
	b.LineStyle.Width = 0
	hist.Add(b)
	hist.Y.Min = 0
	hist.X.Tick.Marker = integerTicks(0, float64(len(v)-1))
	if len(v) > 0 {
		var mean float64
		for _, x := range v {
			mean += x
		}
		mean /= float64(len(v))
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: mean}, {X: float64(len(v)) - 0.5, Y: mean}})
		if err != nil {
			return "", err
		}
		l.LineStyle = lineStyle(color.Black, 1, true)
		hist.Add(l)
		hist.Legend.Add("mean (perfect balance)", l)
		hist.Legend.Top, hist.Legend.Left = true, false
		headroom(hist, 1)
	}
	plots := [][]*plot.Plot{{hist}}
	if len(ch.Layers) > 0 {
		lp := newPlot("Imbalance per MoE layer over the timed iterations", "layer", "max/mean tokens per expert")
		var mean, top plotter.XYs
		for _, l := range ch.Layers {
			mean = append(mean, plotter.XY{X: float64(l.Layer), Y: l.Mean})
			top = append(top, plotter.XY{X: float64(l.Layer), Y: l.Max})
		}
		for i, s := range []struct {
			name string
			xy   plotter.XYs
		}{{"mean over iterations", mean}, {"worst iteration", top}} {
			l, sc, err := plotter.NewLinePoints(s.xy)
			if err != nil {
				return "", err
			}
			l.LineStyle = lineStyle(colorAt(i), 1.2, i == 1)
			sc.GlyphStyle = draw.GlyphStyle{Color: colorAt(i), Radius: 2, Shape: shapes[i]}
			lp.Add(l, sc)
			lp.Legend.Add(s.name, l, sc)
		}
		one, _ := plotter.NewLine(plotter.XYs{{X: mean[0].X, Y: 1}, {X: mean[len(mean)-1].X, Y: 1}})
		one.LineStyle = lineStyle(neutral, 1, true)
		lp.Add(one)
		lp.Y.Min = 0
		lp.X.Tick.Marker = integerTicks(mean[0].X, mean[len(mean)-1].X)
		lp.Legend.Top, lp.Legend.Left = true, false
		headroom(lp, 2)
		plots = append(plots, []*plot.Plot{lp})
	}
	h := 3 * vg.Inch * vg.Length(len(plots))
	return render(chartWidth, h, func(dc draw.Canvas) {
		cs := plot.Align(plots, draw.Tiles{Rows: len(plots), Cols: 1, PadY: 12}, dc)
		for i := range plots {
			plots[i][0].Draw(cs[i][0])
		}
	})
}

// drawKernelPair draws two cells' kernel time by category side by side.
func drawKernelPair(ch KernelPairChart) (template.HTML, error) {
	title := "Kernel time by kind: " + ch.Base + " → " + ch.Value
	if ch.Where != "" {
		title = ch.Where + ": " + ch.Base + " → " + ch.Value
	}
	return drawGroupedBars(title, ch.Unit, ch.Categories, [][]float64{ch.A, ch.B}, []string{ch.Base, ch.Value}, []color.Color{colorAt(0), colorAt(1)})
}

// drawEnergy draws an energy metric per cell with its interval.
func drawEnergy(ch EnergyChart) (template.HTML, error) {
	name := metricLabel(ch.Metric)
	return drawCategories(name+" per cell (median, 95% CI)", name, ch.Categories,
		[]catSeries{{color: colorAt(2), points: catPoints(ch.Points)}}, nil, nil)
}

func fmtFloat(v float64) string { return fmt.Sprintf("%.2f", v) }

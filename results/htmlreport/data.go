package htmlreport

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/results"
)

// Metric keys the charts read.
const (
	outputTokS    = "system_output_throughput_tok_s"
	requestsS     = "request_throughput_req_s"
	perUserTokS   = "output_throughput_per_user_tok_s"
	perUserSpeedS = "per_user_output_speed_tok_s"
	// EnergyPerTokenMetric and TokensPerWattMetric are the per-repeat
	// energy metrics from the NVML energy counter over the timed
	// iterations; the energy section shows whichever the results carry.
	EnergyPerTokenMetric = results.EnergyPerTokenKey
	TokensPerWattMetric  = results.TokSPerWattKey
)

// maxSeries caps the lines of one chart: past a dozen, colours no longer
// tell them apart, and the tables hold every cell anyway.
const maxSeries = 10

// Point is one value of a chart with its 95 % confidence interval; Low and
// High are nil where the interval is unbounded (fewer than 6 repeats).
type Point struct {
	X    float64  `json:"x"`
	Y    float64  `json:"y"`
	Low  *float64 `json:"low,omitempty"`
	High *float64 `json:"high,omitempty"`
	Cell string   `json:"cell,omitempty"`
}

// Series is one line of a chart.
type Series struct {
	Label  string  `json:"label"`
	Points []Point `json:"points"`
}

// AxisChart is a throughput metric against one numeric axis: a series
// per combination of the other axes, and the cells' rooflines. Without a
// numeric axis, Axis is "" and Categories name the cells, one point each
// (X is the category's index).
type AxisChart struct {
	Name       string   `json:"name"`
	Axis       string   `json:"axis"`
	Metric     string   `json:"metric"`
	LogX       bool     `json:"log_x,omitempty"`
	Categories []string `json:"categories,omitempty"`
	Series     []Series `json:"series"`
	// Roofline holds, per series that has any, the cells' roofline
	// output throughput (results' cells[].roofline.output_tok_s).
	Roofline []Series `json:"roofline,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// study is the results with what every chart needs: the varying axes and
// the cells in table order with their labels.
type study struct {
	r      *results.Results
	axes   []results.AxisValues
	cells  []*results.Cell
	labels map[string]string
}

func newStudy(r *results.Results) *study {
	s := &study{r: r, axes: results.VaryingAxes(r), cells: results.TableOrder(r), labels: map[string]string{}}
	for _, c := range s.cells {
		s.labels[c.ID] = s.label(c, "")
	}
	return s
}

// label names a cell by its axis values ("batch_size=64 gemm_plugin=auto"),
// leaving out the axis skip; the id when no axis varies.
func (s *study) label(c *results.Cell, skip string) string {
	var parts []string
	for _, a := range s.axes {
		if a.Name != skip {
			parts = append(parts, a.Name+"="+results.ParamString(c, a.Name))
		}
	}
	if len(parts) == 0 {
		if skip != "" {
			return "all cells"
		}
		return c.ID
	}
	return strings.Join(parts, " ")
}

// has reports whether some ok cell measured metric.
func (s *study) has(metric string) bool {
	return slices.ContainsFunc(s.cells, func(c *results.Cell) bool { return okWith(c, metric) })
}

func okWith(c *results.Cell, metric string) bool {
	if c.Status != results.StatusOK {
		return false
	}
	_, ok := c.Summary[metric]
	return ok
}

// throughputMetric is the metric drawn against the axes: output tokens
// per second, else requests per second (an engine that reports no token
// counts); "" when the cells have neither.
func (s *study) throughputMetric() string {
	for _, m := range []string{outputTokS, requestsS} {
		if s.has(m) {
			return m
		}
	}
	return ""
}

// axisNumber is an axis value as a point on a numeric axis: finite
// numbers only (request_rate inf is a value, but no point).
func axisNumber(s string) (float64, bool) {
	x, err := strconv.ParseFloat(s, 64)
	return x, err == nil && !math.IsInf(x, 0) && !math.IsNaN(x)
}

// numericAxes are the axes whose every value is a number, batch_size
// first, then in axis order.
func (s *study) numericAxes() []results.AxisValues {
	var out []results.AxisValues
	for _, a := range s.axes {
		numeric := 0
		for _, v := range a.Values {
			if _, ok := axisNumber(v); ok {
				numeric++
			} else if v != "-" && !results.IsZeroWord(a.Name, v) {
				numeric = -1
				break
			}
		}
		if numeric >= 2 {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b results.AxisValues) int {
		return cmp.Compare(pick(a.Name == "batch_size", 0, 1), pick(b.Name == "batch_size", 0, 1))
	})
	return out
}

// summaryPoint is a cell's metric as a point at x.
func summaryPoint(c *results.Cell, metric string, x float64) Point {
	s := c.Summary[metric]
	return Point{X: x, Y: s.Median, Low: s.CILow, High: s.CIHigh, Cell: c.ID}
}

// ThroughputCharts draws the throughput against each numeric axis (batch
// size first), a series per combination of the other axes, with the
// cells' rooflines where the metric is output throughput. Without a
// numeric axis it is one chart of every cell's throughput.
func ThroughputCharts(r *results.Results) []AxisChart {
	s := newStudy(r)
	metric := s.throughputMetric()
	if metric == "" {
		return nil
	}
	var out []AxisChart
	for _, a := range s.numericAxes() {
		ch := AxisChart{Name: "throughput-" + a.Name, Axis: a.Name, Metric: metric}
		byLabel := map[string]int{}
		var roof []Series
		left := 0
		xmin, xmax := math.Inf(1), math.Inf(-1)
		for _, c := range s.cells {
			x, ok := axisNumber(results.ParamString(c, a.Name))
			if !ok {
				continue
			}
			if !okWith(c, metric) {
				left++
				continue
			}
			xmin, xmax = min(xmin, x), max(xmax, x)
			l := s.label(c, a.Name)
			i, ok := byLabel[l]
			if !ok {
				i = len(ch.Series)
				byLabel[l] = i
				ch.Series = append(ch.Series, Series{Label: l})
				roof = append(roof, Series{Label: l + " roofline"})
			}
			ch.Series[i].Points = append(ch.Series[i].Points, summaryPoint(c, metric, x))
			if metric == outputTokS && c.Roofline != nil && c.Roofline.OutputTokS > 0 {
				roof[i].Points = append(roof[i].Points, Point{X: x, Y: c.Roofline.OutputTokS, Cell: c.ID})
			}
		}
		if len(ch.Series) == 0 {
			continue
		}
		ch.LogX = xmin > 0 && xmax/xmin >= 8
		if n := len(ch.Series) - maxSeries; n > 0 {
			ch.Series, roof = ch.Series[:maxSeries], roof[:maxSeries]
			ch.Notes = append(ch.Notes, plural(n, "more combination")+" of the other axes not drawn (the summary table has every cell)")
		}
		for i := range ch.Series {
			sortPoints(ch.Series[i].Points)
			if len(roof[i].Points) > 0 {
				sortPoints(roof[i].Points)
				ch.Roofline = append(ch.Roofline, roof[i])
			}
		}
		if left > 0 {
			ch.Notes = append(ch.Notes, plural(left, "cell")+" not drawn: not ok or without the metric")
		}
		out = append(out, ch)
	}
	if out != nil {
		return out
	}
	// No numeric axis: every cell's throughput side by side.
	ch := AxisChart{Name: "throughput-cells", Metric: metric, Series: []Series{{Label: "median ±95% CI"}}}
	roof := Series{Label: "roofline"}
	for _, c := range s.cells {
		if okWith(c, metric) {
			x := float64(len(ch.Categories))
			ch.Series[0].Points = append(ch.Series[0].Points, summaryPoint(c, metric, x))
			ch.Categories = append(ch.Categories, s.labels[c.ID])
			if metric == outputTokS && c.Roofline != nil && c.Roofline.OutputTokS > 0 {
				roof.Points = append(roof.Points, Point{X: x, Y: c.Roofline.OutputTokS, Cell: c.ID})
			}
		}
	}
	if len(ch.Categories) == 0 {
		return nil
	}
	if len(roof.Points) > 0 {
		ch.Roofline = []Series{roof}
	}
	return []AxisChart{ch}
}

func sortPoints(p []Point) {
	slices.SortStableFunc(p, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
}

// LatencyPoint is a cell on the throughput-latency chart: total output
// throughput (X) against per-user output throughput (Y), each with its
// interval.
type LatencyPoint struct {
	Cell  string   `json:"cell"`
	Label string   `json:"label"`
	X     float64  `json:"x"`
	XLow  *float64 `json:"x_low,omitempty"`
	XHigh *float64 `json:"x_high,omitempty"`
	Y     float64  `json:"y"`
	YLow  *float64 `json:"y_low,omitempty"`
	YHigh *float64 `json:"y_high,omitempty"`
}

// LatencySeries are the cells of one combination of the axes other than
// the first numeric one, in that axis's order, so that a line follows
// the batch size.
type LatencySeries struct {
	Label  string         `json:"label"`
	Points []LatencyPoint `json:"points"`
}

// LatencyChart is the throughput-latency view users ask for: what a user
// gets against what the GPU delivers, per cell, and the Pareto front of
// the cells no other cell beats on both.
type LatencyChart struct {
	Name   string          `json:"name"`
	X      string          `json:"x"`
	Y      string          `json:"y"`
	Along  string          `json:"along,omitempty"`
	Series []LatencySeries `json:"series"`
	// Front is the Pareto front, by total throughput ascending.
	Front []LatencyPoint `json:"front"`
	Notes []string       `json:"notes,omitempty"`
}

// ThroughputLatency is the throughput-latency chart; nil when the cells
// lack either metric.
func ThroughputLatency(r *results.Results) *LatencyChart {
	s := newStudy(r)
	y := perUserTokS
	if !s.has(y) {
		y = perUserSpeedS
	}
	if !s.has(outputTokS) || !s.has(y) {
		return nil
	}
	ch := &LatencyChart{Name: "throughput-latency", X: outputTokS, Y: y}
	if num := s.numericAxes(); len(num) > 0 {
		ch.Along = num[0].Name
	}
	byLabel := map[string]int{}
	var all []LatencyPoint
	var along [][]float64
	for _, c := range s.cells {
		if !okWith(c, outputTokS) || !okWith(c, y) {
			continue
		}
		xs, ys := c.Summary[outputTokS], c.Summary[y]
		p := LatencyPoint{Cell: c.ID, Label: s.labels[c.ID], X: xs.Median, XLow: xs.CILow, XHigh: xs.CIHigh, Y: ys.Median, YLow: ys.CILow, YHigh: ys.CIHigh}
		all = append(all, p)
		l := "cells"
		if ch.Along != "" {
			l = s.label(c, ch.Along)
		}
		i, ok := byLabel[l]
		if !ok {
			i = len(ch.Series)
			byLabel[l] = i
			ch.Series = append(ch.Series, LatencySeries{Label: l})
			along = append(along, nil)
		}
		v, _ := strconv.ParseFloat(results.ParamString(c, ch.Along), 64)
		ch.Series[i].Points = append(ch.Series[i].Points, p)
		along[i] = append(along[i], v)
	}
	if len(all) == 0 {
		return nil
	}
	for i := range ch.Series {
		idx := make([]int, len(along[i]))
		for j := range idx {
			idx[j] = j
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(along[i][a], along[i][b]) })
		pts := make([]LatencyPoint, len(idx))
		for j, k := range idx {
			pts[j] = ch.Series[i].Points[k]
		}
		ch.Series[i].Points = pts
	}
	if n := len(ch.Series) - maxSeries; n > 0 {
		ch.Series = ch.Series[:maxSeries]
		ch.Notes = append(ch.Notes, plural(n, "more series")+" not drawn; the front is over every cell")
	}
	xy := make([][2]float64, len(all))
	for i, p := range all {
		xy[i] = [2]float64{p.X, p.Y}
	}
	for _, i := range ParetoFront(xy) {
		ch.Front = append(ch.Front, all[i])
	}
	return ch
}

// ParetoFront returns the indices of the points no other point beats on
// both coordinates (higher is better on both): a point is dominated when
// another is at least as high on both and higher on one. Duplicates stay
// together. The indices are ordered by X ascending, then Y descending.
func ParetoFront(pts [][2]float64) []int {
	idx := make([]int, len(pts))
	for i := range idx {
		idx[i] = i
	}
	// Highest X first; among equal X, highest Y first: a point is on the
	// front when its Y beats every point with more X (or equal X and
	// more Y) seen before it.
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(pts[b][0], pts[a][0]), cmp.Compare(pts[b][1], pts[a][1]))
	})
	var front []int
	best := math.Inf(-1)
	var last [2]float64
	for _, i := range idx {
		p := pts[i]
		switch {
		case math.IsNaN(p[0]) || math.IsNaN(p[1]):
		case p[1] > best:
			front = append(front, i)
			best, last = p[1], p
		case len(front) > 0 && p == last:
			front = append(front, i) // the same point twice: both on the front
		}
	}
	slices.Reverse(front)
	return front
}

// RatioPoint is one row of a comparison: the candidate's median over the
// baseline's, and the verdict of the U test.
type RatioPoint struct {
	Where string  `json:"where"`
	Ratio float64 `json:"ratio"`
	// Low and High bound the ratio by the two medians' 95 % intervals:
	// the candidate's lowest over the baseline's highest, and the
	// reverse. Conservative (wider than an interval of the ratio itself);
	// nil where either interval is unbounded (fewer than 6 repeats).
	Low      *float64 `json:"low,omitempty"`
	High     *float64 `json:"high,omitempty"`
	Verdict  string   `json:"verdict"`
	Text     string   `json:"text"`
	P        float64  `json:"p"`
	BaseCell string   `json:"base_cell"`
	Cell     string   `json:"cell"`
}

// RatioSeries is one compared value's rows.
type RatioSeries struct {
	Value  string       `json:"value"`
	Points []RatioPoint `json:"points"`
}

// CompareChart is one comparison and metric: every row's ratio to the
// baseline with its interval and verdict.
type CompareChart struct {
	Name     string        `json:"name"`
	Axis     string        `json:"axis"`
	Baseline string        `json:"baseline"`
	Metric   string        `json:"metric"`
	Better   string        `json:"better"`
	Rows     []string      `json:"rows"`
	Values   []RatioSeries `json:"values"`
	Notes    []string      `json:"notes,omitempty"`
}

// CompareCharts is a chart per comparison (the report's, paired as its
// pivot tables pair cells) and metric shown.
func CompareCharts(r *results.Results, opts results.RenderOptions) []CompareChart {
	axes, _ := results.Comparisons(r)
	metrics := results.ShownMetrics(r, opts)
	var out []CompareChart
	for _, ca := range axes {
		for _, m := range metrics {
			ch := CompareChart{Name: "compare-" + ca.Axis + "-" + m, Axis: ca.Axis, Baseline: ca.Baseline, Metric: m,
				Better: results.MetricFor(m).Better.String()}
			for _, row := range ca.Rows {
				ch.Rows = append(ch.Rows, row.Where)
			}
			missing := 0
			for _, v := range ca.Values {
				rs := RatioSeries{Value: v}
				for _, row := range ca.Rows {
					base, cell := row.Cells[ca.Baseline], row.Cells[v]
					c, ok := results.CompareCells(base, cell, m)
					if !ok || math.IsNaN(c.Ratio) {
						if cell != nil || base != nil {
							missing++
						}
						continue
					}
					p := RatioPoint{Where: row.Where, Ratio: round6(c.Ratio), Verdict: string(c.Verdict), Text: c.VerdictText(),
						P: round6(c.P), BaseCell: base.ID, Cell: cell.ID}
					p.Low, p.High = ratioBounds(c.Base, c.New)
					rs.Points = append(rs.Points, p)
				}
				ch.Values = append(ch.Values, rs)
			}
			if missing > 0 {
				ch.Notes = append(ch.Notes, plural(missing, "pair")+" not compared: a cell missing, not ok, or without the metric (the table shows which)")
			}
			out = append(out, ch)
		}
	}
	return out
}

// ratioBounds bounds new/old by their intervals; nil, nil where either is
// unbounded or the bound would divide by zero.
func ratioBounds(old, new results.Summary) (lo, hi *float64) {
	if old.CILow == nil || old.CIHigh == nil || new.CILow == nil || new.CIHigh == nil || *old.CILow <= 0 || *old.CIHigh <= 0 {
		return nil, nil
	}
	l, h := round6(*new.CILow / *old.CIHigh), round6(*new.CIHigh / *old.CILow)
	return &l, &h
}

// EnergyChart is one energy metric per cell, with its interval.
// Estimated marks the chart of cells whose results did not measure
// energy per repeat, estimated from their mean power
// (results.EstimateEnergy): points without an interval.
type EnergyChart struct {
	Name       string   `json:"name"`
	Metric     string   `json:"metric"`
	Categories []string `json:"categories"`
	Points     []Point  `json:"points"`
	Estimated  bool     `json:"estimated,omitempty"`
}

// EnergyCharts are the energy metrics (joules per output token, output
// tokens per second per watt) of the cells that carry them; none when no
// cell does (the CPU backend, GPUs without NVML's energy counter, results
// written before xrun measured energy).
func EnergyCharts(r *results.Results) []EnergyChart {
	s := newStudy(r)
	var out []EnergyChart
	for _, m := range []string{EnergyPerTokenMetric, TokensPerWattMetric} {
		ch := EnergyChart{Name: "energy-" + m, Metric: m}
		est := EnergyChart{Name: "energy-" + m + "-estimated", Metric: m, Estimated: true}
		for _, c := range s.cells {
			if okWith(c, m) {
				ch.Points = append(ch.Points, summaryPoint(c, m, float64(len(ch.Categories))))
				ch.Categories = append(ch.Categories, s.labels[c.ID])
			} else if v, ok := results.EstimateEnergy(c, m); ok {
				est.Points = append(est.Points, Point{X: float64(len(est.Categories)), Y: v, Cell: c.ID})
				est.Categories = append(est.Categories, s.labels[c.ID])
			}
		}
		for _, c := range []EnergyChart{ch, est} {
			if len(c.Points) > 0 {
				out = append(out, c)
			}
		}
	}
	return out
}

// round6 keeps 6 significant digits, as results.json does, so that the
// charts' data is stable across platforms.
func round6(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "series") {
		return strconv.Itoa(n) + " " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

package results

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SLO is the study's latency target (its spec's slo block): a request
// meets it when its TTFT is at most TTFTms and its TPOT at most TPOTms (0:
// not checked). Percentile is in percent: the share of requests a load
// point must have meet it (search metric goodput), or the percentile of
// TTFT and TPOT that must be within the targets (metric slo_percentile).
type SLO struct {
	TTFTms     float64 `json:"ttft_ms,omitempty"`
	TPOTms     float64 `json:"tpot_ms,omitempty"`
	Percentile float64 `json:"percentile"`
}

// String writes the SLO as people read it.
func (s *SLO) String() string {
	var parts []string
	if s.TTFTms > 0 {
		parts = append(parts, "TTFT <= "+num(s.TTFTms)+" ms")
	}
	if s.TPOTms > 0 {
		parts = append(parts, "TPOT <= "+num(s.TPOTms)+" ms")
	}
	return strings.Join(parts, " and ")
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Search metrics: what decides whether a load point meets the SLO.
const (
	// SearchGoodput: at least Percentile % of the point's requests meet
	// the SLO (its slo_attainment).
	SearchGoodput = "goodput"
	// SearchPercentile: the point's TTFT and TPOT at Percentile (p50,
	// p90, p95 or p99) are within the targets.
	SearchPercentile = "slo_percentile"
)

// Search is a study's SLO search (its spec's search block): for every
// combination of the other parameters, the highest Axis value (a request
// rate or a number of users) whose load point meets the SLO, found by
// bisection between Low and High over measured points, each a cell of its
// own. Frontier is computed from the cells whenever results are written
// (SearchFrontier); callers leave it nil.
type Search struct {
	Axis      string  `json:"axis"`
	Low       float64 `json:"low"`
	High      float64 `json:"high"`
	Metric    string  `json:"metric"`
	Tolerance float64 `json:"tolerance"`
	// MaxPoints bounds the points measured per group.
	MaxPoints int           `json:"max_points"`
	Frontier  []FrontierRow `json:"frontier"`
}

// Frontier statuses.
const (
	FrontierFound     = "found"      // bracketed within the tolerance
	FrontierBelowLow  = "below_low"  // even low misses the SLO
	FrontierAboveHigh = "above_high" // even high meets it
	FrontierSearching = "searching"  // more points to measure (Next)
	FrontierCapped    = "capped"     // max_points measured before converging
	// A search that could not go on in the run that wrote the results:
	// its next point's cell was left out by --only, or was not measured
	// (the time limit, an interrupt). Why says which; --resume goes on.
	FrontierNotSearched = "not_searched"
	FrontierUnfinished  = "unfinished"
)

// Errors of skipped cells that the frontier reads: a cell --only left
// out, and one still waiting for its turn (a run in progress).
const (
	NotSelected = "not selected by --only"
	NotRunYet   = "not run yet"
)

// FrontierRow is one group's search: its points, the highest value that
// met the SLO and the lowest above it that did not.
type FrontierRow struct {
	// Group are the group's other varying parameters; Label says them.
	Group  Params `json:"group"`
	Label  string `json:"label"`
	Status string `json:"status"`
	// Best is the highest value meeting the SLO below every failing one
	// (nil: none), BestCell its cell; FailAbove the lowest failing value
	// (nil: none failed).
	Best      *float64 `json:"best"`
	BestCell  string   `json:"best_cell,omitempty"`
	FailAbove *float64 `json:"fail_above"`
	// Goodput and Attainment are the best point's medians.
	Goodput    *float64 `json:"goodput_req_s,omitempty"`
	Attainment *float64 `json:"slo_attainment,omitempty"`
	// Next is the value to measure next (Status searching, unfinished or
	// not_searched); Why says why an unfinished search stopped.
	Next   *float64      `json:"next,omitempty"`
	Why    string        `json:"why,omitempty"`
	Points []SearchPoint `json:"points"`
}

// SearchPoint is one measured load point.
type SearchPoint struct {
	Value float64 `json:"value"`
	Cell  string  `json:"cell"`
	Meets bool    `json:"meets"`
	// Why says what decided: the metric against its target, or the cell's
	// failure.
	Why string `json:"why"`
}

// meets judges a cell against the SLO; ok is false for a cell that was
// not measured (skipped): no point yet.
func (s *Search) meets(c *Cell, slo *SLO) (meets bool, why string, ok bool) {
	switch c.Status {
	case StatusSkipped:
		return false, "", false
	case StatusFailed:
		return false, "the cell failed", true
	}
	med := func(k string) (float64, bool) {
		v, ok := c.Summary[k]
		return v.Median, ok && v.N > 0
	}
	p := num(slo.Percentile)
	if s.Metric == SearchGoodput {
		a, ok := med("slo_attainment")
		if !ok {
			return false, "no slo_attainment measured", true
		}
		need := slo.Percentile / 100
		return a >= need, fmt.Sprintf("%s of requests met the SLO (%s%% needed)", pct(a), p), true
	}
	var parts []string
	meets = true
	for _, t := range []struct {
		key    string
		target float64
	}{{"ttft_p" + p + "_ms", slo.TTFTms}, {"tpot_p" + p + "_ms", slo.TPOTms}} {
		if t.target <= 0 {
			continue
		}
		v, ok := med(t.key)
		if !ok {
			return false, "no " + t.key + " measured", true
		}
		op := "<="
		if v > t.target {
			op, meets = ">", false
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %s", t.key, num(roundValue(v)), op, num(t.target)))
	}
	return meets, strings.Join(parts, ", "), true
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// pointValue is a cell's value of the searched axis: a number from a
// results file (int64, float64) or from a run (int); a rate of 0 (inf,
// every request at once) is no load point.
func pointValue(v any) (float64, bool) {
	if i, ok := v.(int); ok {
		v = int64(i)
	}
	x, ok := asFloat(v)
	return x, ok && x > 0
}

// integral reports whether the search axis takes whole numbers.
func (s *Search) integral() bool { return s.Axis == "concurrency" }

// SearchFrontier is the search's state over r's cells: a row per group of
// cells with the search axis, in table order. It is a pure function of
// the cells' statuses, errors (a next point not measured: stalled) and
// summaries, the SLO and the search.
func SearchFrontier(r *Results) []FrontierRow {
	s, slo := r.Search, r.SLO
	if s == nil || slo == nil {
		return nil
	}
	others := []string{}
	for _, a := range axes(r) {
		if a.Name != s.Axis {
			others = append(others, a.Name)
		}
	}
	cells := cellPtrs(r)
	sortCells(cells, axes(r))
	var rows []FrontierRow
	byKey := map[string]int{}
	// at are each row's cells by axis value, to find its next point's.
	var at []map[float64]*Cell
	for _, c := range cells {
		x, ok := pointValue(c.Params[s.Axis])
		if !ok {
			continue
		}
		var label []string
		group := Params{}
		for _, k := range others {
			label = append(label, k+"="+paramString(c, k))
			if v, ok := c.Params[k]; ok {
				group[k] = v
			}
		}
		key := strings.Join(label, " ")
		i, seen := byKey[key]
		if !seen {
			i = len(rows)
			byKey[key] = i
			l := key
			if l == "" {
				l = "all cells"
			}
			rows = append(rows, FrontierRow{Group: group, Label: l, Points: []SearchPoint{}})
			at = append(at, map[float64]*Cell{})
		}
		at[i][x] = c
		meets, why, ok := s.meets(c, slo)
		if !ok {
			continue
		}
		rows[i].Points = append(rows[i].Points, SearchPoint{Value: x, Cell: c.ID, Meets: meets, Why: why})
	}
	for i := range rows {
		s.judge(&rows[i], r)
		stalled(&rows[i], at[i])
	}
	return rows
}

// stalled marks a searching row whose next point is a cell that will not
// be measured by the run that wrote the results (--only left it out, the
// time limit or an interrupt stopped the run): the search did not end, and
// the frontier must not read as if it were still going on or had ended.
func stalled(row *FrontierRow, at map[float64]*Cell) {
	if row.Status != FrontierSearching || row.Next == nil {
		return
	}
	c := at[*row.Next]
	if c == nil || c.Status != StatusSkipped || strings.HasPrefix(c.Error, NotRunYet) {
		return
	}
	if c.Error == NotSelected {
		row.Status, row.Why = FrontierNotSearched, "its next point, cell "+c.ID+", is left out by --only"
		return
	}
	row.Status, row.Why = FrontierUnfinished, "its next point, cell "+c.ID+", was not measured: "+c.Error
}

// judge brackets the frontier of a row from its points and picks the next
// point: low and high first, then the midpoint (geometric: the tolerance
// is relative) of the highest meeting value and the lowest failing one
// above it.
func (s *Search) judge(row *FrontierRow, r *Results) {
	pts := row.Points
	slices.SortStableFunc(pts, func(a, b SearchPoint) int { return cmp.Compare(a.Value, b.Value) })
	var fail, best *SearchPoint
	// Other values of the matrix axis may lie outside [low, high]: they
	// are sweep points, not the search's, and bracket nothing.
	in := func(p SearchPoint) bool { return p.Value >= s.Low && p.Value <= s.High }
	for i := range pts {
		if !pts[i].Meets && fail == nil && in(pts[i]) {
			fail = &pts[i]
		}
	}
	for i := range pts {
		if pts[i].Meets && in(pts[i]) && (fail == nil || pts[i].Value < fail.Value) {
			best = &pts[i]
		}
	}
	if best != nil {
		v := best.Value
		row.Best, row.BestCell = &v, best.Cell
		for _, c := range r.Cells {
			if c.ID == best.Cell {
				if m, ok := c.Summary["goodput_req_s"]; ok && m.N > 0 {
					g := m.Median
					row.Goodput = &g
				}
				if m, ok := c.Summary["slo_attainment"]; ok && m.N > 0 {
					a := m.Median
					row.Attainment = &a
				}
			}
		}
	}
	if fail != nil {
		v := fail.Value
		row.FailAbove = &v
	}
	has := func(v float64) bool {
		return slices.ContainsFunc(pts, func(p SearchPoint) bool { return p.Value == v })
	}
	next := func(v float64) {
		if len(pts) >= s.maxPoints() {
			row.Status = FrontierCapped
			return
		}
		row.Status, row.Next = FrontierSearching, &v
	}
	switch {
	case !has(s.Low):
		next(s.Low)
	case fail != nil && fail.Value == s.Low:
		row.Status = FrontierBelowLow
	case fail == nil && !has(s.High):
		next(s.High)
	case fail == nil:
		row.Status = FrontierAboveHigh
	case best == nil:
		// Low met the SLO only above a failing point below it: cannot
		// happen, since low is the lowest value measured.
		row.Status = FrontierBelowLow
	default:
		lo, hi := best.Value, fail.Value
		if m, ok := s.midpoint(lo, hi); ok {
			next(m)
		} else {
			row.Status = FrontierFound
		}
	}
}

func (s *Search) maxPoints() int {
	if s.MaxPoints > 0 {
		return s.MaxPoints
	}
	return DefaultSearchMaxPoints
}

// DefaultSearchMaxPoints bounds a group's points when the search says
// nothing: low, high and enough bisections to narrow 1 to 1000 down to
// 10 %.
const DefaultSearchMaxPoints = 12

// midpoint is the next value between lo (meets) and hi (fails), or false
// when they are within the tolerance: hi - lo <= tolerance·lo, or
// adjacent integers for a number of users. Rates are rounded to 3
// significant digits, so that cell ids stay readable.
func (s *Search) midpoint(lo, hi float64) (float64, bool) {
	if hi-lo <= s.Tolerance*lo {
		return 0, false
	}
	m := math.Sqrt(lo * hi)
	if s.integral() {
		m = math.Round(m)
		m = math.Max(m, lo+1)
		m = math.Min(m, hi-1)
		return m, m > lo && m < hi
	}
	if r, err := strconv.ParseFloat(strconv.FormatFloat(m, 'g', 3, 64), 64); err == nil && r > lo && r < hi {
		m = r
	}
	return m, m > lo && m < hi
}

// frontierTable is results.md's frontier table.
func frontierTable(r *Results) *Table {
	s := r.Search
	if s == nil || len(s.Frontier) == 0 {
		return nil
	}
	unit := "req/s"
	if s.integral() {
		unit = "users"
	}
	t := &Table{Title: "SLO frontier", Columns: []Column{{Name: "group"}, {Name: "highest " + s.Axis + " meeting the SLO", Right: true},
		{Name: "lowest failing", Right: true}, {Name: MetricFor("goodput_req_s").Name, Right: true}, {Name: "met", Right: true},
		{Name: "status"}, {Name: "points", Right: true}, {Name: "cell"}}}
	opt := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return num(*p)
	}
	var whys []string
	for _, f := range s.Frontier {
		status := f.Status
		if status == FrontierNotSearched {
			status = "not searched"
		}
		if f.Next != nil {
			status += " (next " + num(*f.Next) + ")"
		}
		if f.Why != "" {
			whys = append(whys, f.Label+": "+status+": "+f.Why+".")
		}
		met := "-"
		if f.Attainment != nil {
			met = pct(*f.Attainment)
		}
		goodput := "-"
		if f.Goodput != nil {
			goodput = num(roundValue(*f.Goodput))
		}
		t.Rows = append(t.Rows, []string{f.Label, opt(f.Best), opt(f.FailAbove), goodput, met, status, strconv.Itoa(len(f.Points)), cmp.Or(f.BestCell, "-")})
	}
	crit := fmt.Sprintf("at least %s%% of its requests meet it", num(r.SLO.Percentile))
	if s.Metric == SearchPercentile {
		crit = fmt.Sprintf("its p%s TTFT and TPOT are within the targets", num(r.SLO.Percentile))
	}
	tol := "relative tolerance " + num(s.Tolerance)
	if s.integral() && s.Tolerance == 0 {
		tol = "down to adjacent values"
	}
	t.Notes = append(t.Notes,
		fmt.Sprintf("SLO: %s per request; a load point meets it when %s.", r.SLO.String(), crit),
		fmt.Sprintf("Bisection over %s in %s from %s to %s (%s), every point a cell with its repeats (medians).", s.Axis, unit, num(s.Low), num(s.High), tol))
	if len(whys) > 0 {
		// The bracket of such a group is what was measured so far, not
		// its frontier.
		t.Notes = append(t.Notes, "Searches that did not end (their columns are the bracket so far; xrun run --resume goes on with them, without --only for those it left out):")
		t.Notes = append(t.Notes, whys...)
	}
	return t
}

package results

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RenderOptions tune every renderer.
type RenderOptions struct {
	// Metrics are the metric keys shown in tables and pivots, in order;
	// empty means the headline metrics present in the results.
	Metrics []string
}

// Report is a results file laid out as tables: the summary table, then
// one pivot table per comparison and metric. Renderers draw it.
type Report struct {
	Title       string
	Description string
	// Environment lines describe where the numbers came from.
	Environment []string
	Summary     *Table
	// Frontier is the SLO search's table; nil without a search.
	Frontier *Table
	// Reference is the cells against the spec's reference; nil without
	// one.
	Reference *Table
	// RooflineByKind splits the GPU cells' roofline share between their
	// memory-bound and compute-bound iterations; nil where no cell has
	// the split.
	RooflineByKind *Table
	Comparisons    []ComparisonTables
	// Notes apply to the whole report (a compare entry that cannot be
	// honoured, for instance).
	Notes []string
	// Profiles are the profiled cells' kernel tables and diagnoses.
	Profiles []ProfileSection
}

// ComparisonTables are the pivots of one compared axis.
type ComparisonTables struct {
	Axis     string
	Baseline string
	Title    string
	Tables   []*Table
	// Notes are the statistical caveats of all the tables, said once.
	Notes []string
	// Kernels say, for each compared pair of profiled cells, what changed
	// in their kernels.
	Kernels []KernelPair
}

// KernelPair is a compared cell and its baseline, both profiled, and what
// changed in their kernels (KernelDiff.Changes).
type KernelPair struct {
	// Where is the pivot row: the other axes' values, "batch_size=64".
	Where          string
	Base, Value    string
	BaseID, CellID string
	Changes        []string
}

// axisInfo is one varying parameter and its values in display order.
type axisInfo struct {
	Name   string
	Values []string
}

// axes lists the parameters that vary between cells: the declared axes in
// their order first, then any other varying key in lexical order. Values
// follow the declaration, then sort numerically or lexically. Parameters
// that follow another axis are left out (dropDependent).
func axes(r *Results) []axisInfo {
	present := map[string]map[string]any{}
	for _, c := range r.Cells {
		for k, v := range c.Params {
			if present[k] == nil {
				present[k] = map[string]any{}
			}
			present[k][formatParam(k, v)] = v
		}
	}
	for _, c := range r.Cells {
		for k := range present {
			if _, ok := c.Params[k]; !ok {
				present[k][missingParam] = nil // a key some cells lack varies too
			}
		}
	}
	var out []axisInfo
	done := map[string]bool{}
	add := func(name string, declared []any) {
		vals := present[name]
		if done[name] || len(vals) < 2 {
			return
		}
		done[name] = true
		a := axisInfo{Name: name}
		for _, v := range declared {
			s := formatParam(name, v)
			if _, ok := vals[s]; ok && !slices.Contains(a.Values, s) {
				a.Values = append(a.Values, s)
			}
		}
		rest := slices.Collect(maps.Keys(vals))
		slices.SortFunc(rest, func(x, y string) int { return compareScalars(vals[x], vals[y], x, y) })
		for _, s := range rest {
			if !slices.Contains(a.Values, s) {
				a.Values = append(a.Values, s)
			}
		}
		out = append(out, a)
	}
	for _, a := range r.Axes {
		add(a.Name, a.Values)
	}
	for _, k := range slices.Sorted(maps.Keys(present)) {
		add(k, nil)
	}
	return dropDependent(r, out)
}

// dropDependent leaves out the varying parameters that are functions of
// an axis: the dataset's vocabulary and EOS id follow the model, a dense
// model's routing mode is "-" and an MoE's "learned". Shown as axes of
// their own they would add columns and comparisons that say nothing and
// split the model's pivots so that no two cells pair up.
//
// When results.json records the matrix axes, a parameter goes when one
// of them determines it (each of the axis's values goes with one value
// of the parameter in every cell). Without them, a parameter goes when
// another varying one determines it and is not determined back; of two
// that determine each other the first in column order stays. Declared
// axes and explicitly compared parameters always stay.
func dropDependent(r *Results, ax []axisInfo) []axisInfo {
	declared, compared := map[string]bool{}, map[string]bool{}
	for _, a := range r.Axes {
		declared[a.Name] = true
	}
	for _, c := range r.Compare {
		compared[c.Axis] = true
	}
	var determiners []axisInfo
	for _, a := range ax {
		if declared[a.Name] {
			determiners = append(determiners, a)
		}
	}
	infer := len(determiners) == 0
	if infer {
		determiners = ax
	}
	cells := cellPtrs(r)
	dependent := func(i int, p axisInfo) bool {
		for j, a := range determiners {
			if a.Name == p.Name || !determines(cells, a.Name, p.Name) {
				continue
			}
			// Declared axes win outright; inferred ones only when strictly
			// finer, or, tied, when compared or earlier.
			if !infer || compared[a.Name] || j < i || !determines(cells, p.Name, a.Name) {
				return true
			}
		}
		return false
	}
	out := make([]axisInfo, 0, len(ax))
	for i, p := range ax {
		if declared[p.Name] || compared[p.Name] || !dependent(i, p) {
			out = append(out, p)
		}
	}
	return out
}

// determines reports whether every value of parameter a goes with one
// value of parameter p across cells (a missing value counts as a value).
func determines(cells []*Cell, a, p string) bool {
	seen := map[string]string{}
	for _, c := range cells {
		av, pv := paramString(c, a), paramString(c, p)
		if old, ok := seen[av]; ok && old != pv {
			return false
		}
		seen[av] = pv
	}
	return true
}

const missingParam = "-"

// compareScalars orders numbers numerically before anything else, then
// by their printed form, missing values last.
func compareScalars(a, b any, sa, sb string) int {
	fa, na := asFloat(a)
	fb, nb := asFloat(b)
	switch {
	case na && nb:
		return cmp.Compare(fa, fb)
	case na != nb:
		return pick(na, -1, 1)
	case (sa == missingParam) != (sb == missingParam):
		return pick(sa == missingParam, 1, -1)
	}
	return strings.Compare(sa, sb)
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func paramString(c *Cell, key string) string {
	v, ok := c.Params[key]
	if !ok {
		return missingParam
	}
	return formatParam(key, v)
}

// zeroWords are the parameters whose 0 in results.json stands for a word
// in the spec: request_rate inf (every request at once, offline) and
// concurrency none (no closed loop). Tables show the word, as written.
var zeroWords = map[string]string{"request_rate": "inf", "concurrency": "none"}

// IsZeroWord reports whether s is the word parameter key's 0 is shown as
// (request_rate inf, concurrency none): a value, but not a number on an
// axis.
func IsZeroWord(key, s string) bool { w, ok := zeroWords[key]; return ok && s == w }

// formatParam formats parameter key's value v for a table.
func formatParam(key string, v any) string {
	if w, ok := zeroWords[key]; ok {
		if f, isNum := asFloat(v); isNum && f == 0 {
			return w
		}
	}
	return formatScalar(v)
}

// sortCells orders cells by their axis values (in axis order), then id.
func sortCells(cells []*Cell, ax []axisInfo) {
	slices.SortStableFunc(cells, func(a, b *Cell) int {
		for _, x := range ax {
			ia := slices.Index(x.Values, paramString(a, x.Name))
			ib := slices.Index(x.Values, paramString(b, x.Name))
			if ia != ib {
				return ia - ib
			}
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// shownMetrics returns the metrics to tabulate: the requested ones, or the
// default metrics (headline, then energy) that occur in any cell.
func shownMetrics(r *Results, opts RenderOptions) []string {
	if len(opts.Metrics) > 0 {
		return opts.Metrics
	}
	have := presentMetrics(r)
	var out []string
	for _, k := range DefaultMetricsFor(have) {
		if have[k] {
			out = append(out, k)
		}
	}
	return out
}

func presentMetrics(r *Results) map[string]bool {
	have := map[string]bool{}
	for _, c := range r.Cells {
		for _, rep := range c.Repeats {
			for k := range rep {
				have[k] = true
			}
		}
	}
	return have
}

// BuildReport lays out r as tables. It reads only repeats, parameters,
// status, telemetry, expert loads, rooflines and profiles, so a
// hand-edited summary cannot mislead it (and Render recomputes a
// roofline's fraction from the repeats).
func BuildReport(r *Results, opts RenderOptions) *Report {
	rep := &Report{Title: r.Name, Description: r.Description, Environment: environmentLines(r)}
	ax := axes(r)
	metrics := shownMetrics(r, opts)
	summary := metrics
	if len(opts.Metrics) == 0 {
		// Older GPU results show the energy columns as estimates; the
		// pivots compare repeats, which have none.
		summary = append(slices.Clone(metrics), estimatedEnergyKeys(cellPtrs(r))...)
	}
	rep.Summary = summaryTable(r, ax, summary)
	rep.Frontier = frontierTable(r)
	rep.Reference = referenceTable(r, ax)
	rep.RooflineByKind = rooflineByKindTable(r, ax)
	for _, cs := range comparisons(r, ax, &rep.Notes) {
		rep.Comparisons = append(rep.Comparisons, pivotTables(r, ax, cs, metrics))
	}
	rep.Profiles = profileSections(r, ax)
	return rep
}

// summaryTable has one row per cell: its axis values and the median
// ± confidence interval of each metric.
func summaryTable(r *Results, ax []axisInfo, metrics []string) *Table {
	t := &Table{Title: "Throughput (median ±95% CI)", Columns: cellColumns(ax)}
	t.Columns = append(t.Columns, Column{Name: "n", Right: true})
	for _, m := range metrics {
		t.Columns = append(t.Columns, Column{Name: MetricFor(m).Name, Right: true})
	}
	cells := cellPtrs(r)
	sortCells(cells, ax)
	// MoE studies show the router's balance next to the numbers it explains.
	moe := slices.ContainsFunc(cells, func(c *Cell) bool { return c.ExpertLoad != nil })
	if moe {
		t.Columns = append(t.Columns, Column{Name: "Expert load max/mean", Right: true})
	}
	// GPU cells show how close they came to the roofline.
	roof := hasRoofline(cells)
	if roof {
		t.Columns = append(t.Columns, Column{Name: rooflineColumn, Right: true})
	}
	// GPU cells show the clock their numbers were measured at.
	clock := slices.ContainsFunc(cells, func(c *Cell) bool { return formatClock(c) != "-" })
	if clock {
		t.Columns = append(t.Columns, Column{Name: clockColumn, Right: true})
	}
	var warn []string
	for _, c := range cells {
		row := cellLabel(c, ax)
		row = append(row, fmt.Sprint(len(c.Repeats)))
		for _, m := range metrics {
			if c.Status != StatusOK {
				row = append(row, string(c.Status))
				continue
			}
			s, w := summarize(column(c.Repeats, m))
			if v, ok := EstimateEnergy(c, m); ok && s.N == 0 {
				row = append(row, formatEstimate(v))
				continue
			}
			warn = append(warn, w...)
			row = append(row, formatSummary(s))
		}
		if moe {
			row = append(row, formatExpertLoad(c.ExpertLoad))
		}
		if roof {
			row = append(row, formatRoofline(c))
		}
		if clock {
			row = append(row, formatClock(c))
		}
		t.Rows = append(t.Rows, row)
		t.Notes = append(t.Notes, cellNotes(c)...)
	}
	t.Notes = append(t.Notes, legacyThrottleNote(cells)...)
	if roof {
		t.Notes = append(t.Notes, rooflineNotes(cells)...)
	}
	t.Notes = append(t.Notes, energyNotes(cells, metrics)...)
	t.Notes = append(t.Notes, dedupe(warn)...)
	return t
}

// cellColumns are the leading columns of a table with a row per cell:
// the axes, or the cell's id where the study has none.
func cellColumns(ax []axisInfo) []Column {
	if len(ax) == 0 {
		return []Column{{Name: "cell"}}
	}
	cols := make([]Column, 0, len(ax))
	for _, a := range ax {
		cols = append(cols, Column{Name: a.Name})
	}
	return cols
}

// cellLabel is c's entries under cellColumns(ax).
func cellLabel(c *Cell, ax []axisInfo) []string {
	if len(ax) == 0 {
		return []string{c.ID}
	}
	row := make([]string, 0, len(ax))
	for _, a := range ax {
		row = append(row, paramString(c, a.Name))
	}
	return row
}

// formatExpertLoad gives the per-step imbalance and, in parentheses, the
// imbalance of the tokens summed over the run; "-" for dense cells.
func formatExpertLoad(l *ExpertLoad) string {
	if l == nil {
		return "-"
	}
	if l.TotalMaxOverMean == 0 {
		return fmt.Sprintf("%.2f", l.MaxOverMean)
	}
	return fmt.Sprintf("%.2f (run %.2f)", l.MaxOverMean, l.TotalMaxOverMean)
}

// cellNotes reports a cell's failure and throttling under any table that
// shows it.
func cellNotes(c *Cell) []string {
	var n []string
	switch c.Status {
	case StatusFailed:
		msg := c.Error
		if msg == "" {
			msg = "no error recorded"
		}
		n = append(n, fmt.Sprintf("cell %s failed: %s", c.ID, msg))
	case StatusSkipped:
		if c.Error != "" {
			n = append(n, fmt.Sprintf("cell %s skipped: %s", c.ID, c.Error))
		}
	}
	if note := throttleNote(c.Telemetry); note != "" {
		n = append(n, fmt.Sprintf("cell %s: %s", c.ID, note))
	}
	if note := trendNote(c); note != "" {
		n = append(n, fmt.Sprintf("cell %s: %s", c.ID, note))
	}
	if note := plansNote(c); note != "" {
		n = append(n, fmt.Sprintf("cell %s: %s", c.ID, note))
	}
	if note := heldNote(c); note != "" {
		n = append(n, fmt.Sprintf("cell %s: %s", c.ID, note))
	}
	if note := inFlightNote(c); note != "" {
		n = append(n, fmt.Sprintf("cell %s: %s", c.ID, note))
	}
	return n
}

// MaxInFlightKey is engine.MaxInFlightKey: the most requests a pass could
// hold at once.
const MaxInFlightKey = "max_in_flight"

// KVBlocksKey is engine.KVBlocksKey: the paged KV cache's blocks, 0 where
// a pass kept a fixed slot per request.
const KVBlocksKey = "kv_cache_blocks"

// PeakInFlightKey is engine.PeakInFlightKey: the most requests one timed
// iteration served.
const PeakInFlightKey = "peak_in_flight"

// inFlightNote says when the KV cache held fewer requests at once than the
// cell's batch_size and its requests, which bounds its throughput; ""
// otherwise (and for results without the metric).
func inFlightNote(c *Cell) string {
	if c == nil || c.Status != StatusOK {
		return ""
	}
	held := column(c.Repeats, MaxInFlightKey)
	if len(held) == 0 {
		return ""
	}
	bs, ok1 := asFloat(c.Params["batch_size"])
	reqs := column(c.Repeats, "num_requests")
	bound := bs
	if len(reqs) > 0 {
		bound = min(bs, slices.Min(reqs))
	}
	if !ok1 || slices.Max(held) >= bound {
		return ""
	}
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = strconv.FormatFloat(h, 'f', 0, 64)
	}
	what := "at most " + parts[0] + " requests ran at once"
	if slices.Min(held) != slices.Max(held) {
		what = "at most " + strings.Join(parts, ", ") + " requests ran at once (per repeat)"
	}
	return fmt.Sprintf("%s, fewer than batch_size %s: the KV cache held no more whole (kv_cache_free_gpu_mem_fraction of the memory left by the weights and activations)",
		what, strconv.FormatFloat(bs, 'f', 0, 64))
}

// heldNote says when the load generator held a cell's requests back past
// their scheduled arrival for a free slot of its in-flight bound (engine
// openai's client_held_requests): the server did not keep up with the
// offered rate, and the wait, which the latencies include, sat in the
// client; "" otherwise.
func heldNote(c *Cell) string {
	if c == nil || c.Status != StatusOK {
		return ""
	}
	total, bound := 0.0, 0.0
	parts := make([]string, len(c.Repeats))
	for i, r := range c.Repeats {
		n := r[heldRequestsKey]
		total += n
		bound = max(bound, r[heldBoundKey])
		parts[i] = strconv.FormatFloat(n, 'f', 0, 64)
		if n > 0 {
			parts[i] += fmt.Sprintf(" (up to %s ms)", formatSig(r[heldMaxMsKey], 3))
		}
	}
	if total == 0 {
		return ""
	}
	limit := "openai.max_in_flight"
	if bound > 0 {
		limit += " (" + strconv.FormatFloat(bound, 'f', 0, 64) + ")"
	}
	return fmt.Sprintf("requests waited in the load generator for a free slot of %s after their scheduled arrival (per repeat: %s): the server did not keep up with the offered rate; their latencies count the wait, and the achieved request rate is of the sends",
		limit, strings.Join(parts, ", "))
}

// heldRequestsKey, heldMaxMsKey and heldBoundKey are engine's
// HeldRequestsKey, HeldMaxMsKey and HeldBoundKey.
const (
	heldRequestsKey = "client_held_requests"
	heldMaxMsKey    = "client_held_max_ms"
	heldBoundKey    = "client_max_in_flight"
)

// plansNote says when a cell's timed repeats built GEMM plans (the
// engine's gemm_plans_built): shapes met for the first time inside the
// measurement, whose building its timings include; "" otherwise.
func plansNote(c *Cell) string {
	if c == nil || c.Status != StatusOK {
		return ""
	}
	built, ms := column(c.Repeats, plansBuiltKey), column(c.Repeats, planMsKey)
	total := 0.0
	parts := make([]string, len(built))
	for i, b := range built {
		total += b
		parts[i] = strconv.FormatFloat(b, 'f', 0, 64)
		if i < len(ms) && b > 0 {
			parts[i] += fmt.Sprintf(" (%s ms)", formatSig(ms[i], 3))
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("its timed repeats built GEMM plans inside the measurement (per repeat: %s): shapes met there for the first time, such as a new mix of prompts and decodes, whose building their timings include",
		strings.Join(parts, ", "))
}

// plansBuiltKey and planMsKey are engine.PlansBuiltKey and PlanMsKey (the
// results package does not import the engine).
const (
	plansBuiltKey = "gemm_plans_built"
	planMsKey     = "gemm_plan_ms"
)

// Repeats that move one way, each past the one before, by more than
// trendMin from first to last, are a trend rather than noise: the first
// ones paid for something the later ones did not (building graphs or
// plans the warm-up did not reach, a cold cache, clocks settling).
// Four repeats do that by chance once in 12 (2 orders of 24), and the
// size rules out the rest.
const (
	trendMinRepeats = 4
	trendMin        = 0.10
)

// trendKey is the metric whose repeats are checked for a trend.
const trendKey = "system_output_throughput_tok_s"

// repeatTrend reports whether a cell's output throughput rose or fell
// from every repeat to the next, by more than trendMin first to last: the
// way ("rose" or "fell") and the first and last repeats' values.
func repeatTrend(c *Cell) (way string, first, last float64, ok bool) {
	if c == nil || c.Status != StatusOK {
		return "", 0, 0, false
	}
	v := column(c.Repeats, trendKey)
	if len(v) < trendMinRepeats || len(v) != len(c.Repeats) {
		return "", 0, 0, false
	}
	up, down := true, true
	for i := 1; i < len(v); i++ {
		up = up && v[i] > v[i-1]
		down = down && v[i] < v[i-1]
	}
	first, last = v[0], v[len(v)-1]
	if !(up || down) || !(first > 0) || math.Abs(last/first-1) <= trendMin {
		return "", 0, 0, false
	}
	return map[bool]string{true: "rose", false: "fell"}[up], first, last, true
}

// trendNote says when a cell's output throughput rose or fell from every
// repeat to the next; "" otherwise.
func trendNote(c *Cell) string {
	way, first, last, ok := repeatTrend(c)
	if !ok {
		return ""
	}
	return fmt.Sprintf("its %s %s from every repeat to the next (%s to %s, %+.0f%%): a trend, not noise; the first repeats paid for something the later ones did not (a warm-up that missed part of the work, a cold cache, clocks settling), and its median is of the trend",
		MetricFor(trendKey).Name, way, formatSig(first, 4), formatSig(last, 4), 100*(last/first-1))
}

// clockColumn is the summary table's column for Telemetry.SMClockMHzMean.
const clockColumn = "SM clock MHz (mean)"

// formatClock is a cell's mean SM clock over its timed repeats; "-" for
// cells without GPU telemetry.
func formatClock(c *Cell) string {
	if c.Status != StatusOK || c.Telemetry == nil || c.Telemetry.SMClockMHzMean <= 0 {
		return "-"
	}
	return formatClockMHz(c.Telemetry.SMClockMHzMean)
}

// throttleNote says why a cell counts as throttled, with the figures of
// the throttle rule; "" when it does not, or when its file is from before
// the rule (see legacyThrottleNote).
func throttleNote(t *Telemetry) string {
	if t == nil || !t.Throttled || t.ThrottleThreshold <= 0 || t.BelowThresholdShare == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GPU throttled: %s%% of its timed samples ran below %s%% of the maximum SM clock (%s MHz); SM clock mean %s MHz, min %s MHz",
		formatPercent(*t.BelowThresholdShare), strconv.FormatFloat(100*t.ThrottleThreshold, 'g', 4, 64), formatClockMHz(t.MaxSMClockMHz),
		formatClockMHz(t.SMClockMHzMean), formatClockMHz(t.SMClockMHzMin))
	if t.PowerCappedS > 0 {
		fmt.Fprintf(&b, "; power-capped %s s", formatSig(t.PowerCappedS, 3))
	}
	if len(t.ThrottleReasons) > 0 {
		fmt.Fprintf(&b, "; NVML reasons: %s", strings.Join(t.ThrottleReasons, ", "))
	}
	b.WriteString("; its numbers may not be comparable")
	return b.String()
}

func formatClockMHz(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// legacyThrottleNote names, in one note, the cells of a file written
// before the throttle rule that are marked throttled: then any reason but
// idle marked a cell, and a loaded GPU at its full clock reports
// sw_power_cap all the time, so the mark says little and is not repeated
// cell by cell as a throttled cell's note is.
func legacyThrottleNote(cells []*Cell) []string {
	var ids, why []string
	for _, c := range cells {
		t := c.Telemetry
		if t == nil || !t.Throttled || t.ThrottleThreshold > 0 {
			continue
		}
		ids = append(ids, c.ID)
		for _, r := range t.ThrottleReasons {
			if !slices.Contains(why, r) {
				why = append(why, r)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(why)
	said := ""
	if len(why) > 0 {
		said = " (" + strings.Join(why, ", ") + ")"
	}
	return []string{fmt.Sprintf("%s %s: the GPU reported throttle reasons%s; this file was written before xrun judged throttling by the SM clock, so whether the clock dropped is not known (the table shows the mean SM clock)",
		pick(len(ids) == 1, "cell", "cells"), strings.Join(ids, ", "), said)}
}

func reasons(t *Telemetry) string {
	if len(t.ThrottleReasons) == 0 {
		return ""
	}
	return " (" + strings.Join(t.ThrottleReasons, ", ") + ")"
}

func cellPtrs(r *Results) []*Cell {
	out := make([]*Cell, len(r.Cells))
	for i := range r.Cells {
		out[i] = &r.Cells[i]
	}
	return out
}

// comparisons resolves the spec's compare entries and adds every other
// axis with exactly two values, first value as baseline. Entries that
// cannot be honoured become notes.
func comparisons(r *Results, ax []axisInfo, notes *[]string) []compareAxis {
	var out []compareAxis
	done := map[string]bool{}
	for _, cs := range r.Compare {
		i := slices.IndexFunc(ax, func(a axisInfo) bool { return a.Name == cs.Axis })
		if i < 0 {
			*notes = append(*notes, fmt.Sprintf("compare %s: the parameter does not vary between cells; nothing to compare", cs.Axis))
			continue
		}
		// As the axis' values are shown: inf and none, not 0.
		base := formatParam(cs.Axis, cs.Baseline)
		if !slices.Contains(ax[i].Values, base) {
			*notes = append(*notes, fmt.Sprintf("compare %s: baseline %s is not among its values (%s)", cs.Axis, base, strings.Join(ax[i].Values, ", ")))
			continue
		}
		out = append(out, compareAxis{Axis: cs.Axis, Baseline: base})
		done[cs.Axis] = true
	}
	for _, a := range ax {
		if len(a.Values) == 2 && !done[a.Name] {
			out = append(out, compareAxis{Axis: a.Name, Baseline: a.Values[0]})
		}
	}
	return out
}

// compareAxis is a resolved comparison: the axis and its baseline value
// as printed.
type compareAxis struct{ Axis, Baseline string }

// pivotRow is one combination of the other parameters and the cell for
// each value of the compared axis.
type pivotRow struct {
	label []string
	cells map[string]*Cell
}

// pivotRows groups cells by all parameters except axis; a row's label is
// its values of the other varying axes.
func pivotRows(r *Results, ax []axisInfo, axis string) ([]*pivotRow, []axisInfo) {
	var others []axisInfo
	for _, a := range ax {
		if a.Name != axis {
			others = append(others, a)
		}
	}
	cells := cellPtrs(r)
	sortCells(cells, others)
	byKey := map[string]*pivotRow{}
	var rows []*pivotRow
	for _, c := range cells {
		// Every varying parameter is an axis or a function of one, so the
		// other axes' values name the row; the parameters that follow the
		// compared axis (a model's vocabulary) must not split it.
		var key strings.Builder
		for _, o := range others {
			fmt.Fprintf(&key, "%s=%s\x00", o.Name, paramString(c, o.Name))
		}
		row := byKey[key.String()]
		if row == nil {
			row = &pivotRow{cells: map[string]*Cell{}}
			for _, o := range others {
				row.label = append(row.label, paramString(c, o.Name))
			}
			byKey[key.String()] = row
			rows = append(rows, row)
		}
		row.cells[paramString(c, axis)] = c
	}
	return rows, others
}

// pivotTables builds, for one comparison, a table per metric: rows = the
// other axes, columns = the compared values, with ratio and verdict.
func pivotTables(r *Results, ax []axisInfo, cs compareAxis, metrics []string) ComparisonTables {
	base := cs.Baseline
	i := slices.IndexFunc(ax, func(a axisInfo) bool { return a.Name == cs.Axis })
	var cands []string
	for _, v := range ax[i].Values {
		if v != base {
			cands = append(cands, v)
		}
	}
	ct := ComparisonTables{Axis: cs.Axis, Baseline: base,
		Title: fmt.Sprintf("%s: %s vs %s (baseline)", cs.Axis, strings.Join(cands, ", "), base)}
	rows, others := pivotRows(r, ax, cs.Axis)
	routing := isRoutingAxis(cs.Axis) && slices.Contains(ax[i].Values, "perfect") && slices.Contains(ax[i].Values, "learned")
	readingMetric := routingReadingMetric(metrics)
	var warn []string
	for _, m := range metrics {
		t := &Table{Title: MetricFor(m).Name}
		for _, o := range others {
			t.Columns = append(t.Columns, Column{Name: o.Name})
		}
		t.Columns = append(t.Columns, Column{Name: base + " (baseline)", Right: true})
		for _, v := range cands {
			t.Columns = append(t.Columns, Column{Name: v, Right: true}, Column{Name: v + "/" + base, Right: true},
				Column{Name: pick(len(cands) > 1, v+" verdict", "verdict")})
		}
		var notes []string
		for _, row := range rows {
			line := append([]string(nil), row.label...)
			line = append(line, pivotValue(row.cells[base], m))
			for _, v := range cands {
				line = append(line, pivotValue(row.cells[v], m))
				c, ok := compareCells(row.cells[base], row.cells[v], m)
				if !ok {
					line = append(line, "", "")
					continue
				}
				warn = append(warn, c.Warnings...)
				line = append(line, formatRatio(c.Ratio), verdictString(c))
				if routing && m == readingMetric && (v == "perfect" || base == "perfect") {
					notes = append(notes, routingReading(rowLabel(others, row.label), base, c))
				}
			}
			t.Rows = append(t.Rows, line)
		}
		t.Notes = notes
		ct.Tables = append(ct.Tables, t)
	}
	ct.Notes = dedupe(warn)
	for _, row := range rows {
		for _, v := range cands {
			if p, ok := kernelPair(cs.Axis, row.cells[base], row.cells[v]); ok {
				if len(others) > 0 {
					p.Where = rowLabel(others, row.label)
				}
				ct.Kernels = append(ct.Kernels, p)
			}
		}
	}
	return ct
}

// kernelsNote introduces the kernel changes under a comparison.
const kernelsNote = "From one profiled pass per cell. `xrun kernels DIR BASELINE_CELL CELL` shows every kernel of a pair."

// heading names the pair: "batch_size=64: disable → auto".
func (p KernelPair) heading() string {
	h := p.Base + " → " + p.Value
	if p.Where != "" {
		h = p.Where + ": " + h
	}
	return h
}

// command is the xrun kernels call that shows the pair in full.
func (p KernelPair) command() string { return "xrun kernels DIR " + p.BaseID + " " + p.CellID }

// kernelPair diffs the kernels of two cells of a comparison; ok is false
// unless both ran and were profiled.
func kernelPair(axis string, base, cell *Cell) (KernelPair, bool) {
	if base == nil || cell == nil || base.Status != StatusOK || cell.Status != StatusOK {
		return KernelPair{}, false
	}
	bv, cv := paramString(base, axis), paramString(cell, axis)
	a, okA := ProfileKernels(base, sideLabel(axis, bv))
	b, okB := ProfileKernels(cell, sideLabel(axis, cv))
	if !okA || !okB {
		return KernelPair{}, false
	}
	lines, _ := DiffKernels(a, b).Changes()
	return KernelPair{Base: bv, Value: cv, BaseID: base.ID, CellID: cell.ID, Changes: lines}, true
}

// sideLabel names a compared cell in a sentence by its axis value, with
// the axis where the value alone would read as a quantity ("batch_size=64
// only" rather than "64 only").
func sideLabel(axis, value string) string {
	if _, err := strconv.ParseFloat(value, 64); err == nil {
		return axis + "=" + value
	}
	return value
}

func rowLabel(others []axisInfo, label []string) string {
	var parts []string
	for i, o := range others {
		parts = append(parts, o.Name+"="+label[i])
	}
	if len(parts) == 0 {
		return "all cells"
	}
	return strings.Join(parts, " ")
}

func pivotValue(c *Cell, m string) string {
	switch {
	case c == nil:
		return "-"
	case c.Status != StatusOK:
		return string(c.Status)
	}
	return formatSummary(Summarize(column(c.Repeats, m)))
}

// compareCells compares one metric of two cells; ok is false when either
// cell is missing, not ok, or lacks the metric.
func compareCells(base, cand *Cell, m string) (Comparison, bool) {
	if base == nil || cand == nil || base.Status != StatusOK || cand.Status != StatusOK {
		return Comparison{}, false
	}
	b, c := column(base.Repeats, m), column(cand.Repeats, m)
	if len(b) == 0 || len(c) == 0 {
		return Comparison{}, false
	}
	return CompareSamples(m, b, c), true
}

// verdictString is the verdict with its test: "slower (p=0.002 n=6+6)".
func verdictString(c Comparison) string {
	if t := c.testString(); t != "" {
		return string(c.Verdict) + " (" + t + ")"
	}
	return string(c.Verdict)
}

func isRoutingAxis(name string) bool {
	return name == "routing_mode" || strings.HasSuffix(name, ".routing_mode")
}

// routingReadingMetric picks the throughput TensorRT-LLM's perfect-router
// reading is judged on.
func routingReadingMetric(metrics []string) string {
	for _, k := range []string{"system_output_throughput_tok_s", "request_throughput_req_s"} {
		if slices.Contains(metrics, k) {
			return k
		}
	}
	return ""
}

// routingReading applies TensorRT-LLM's documented reading of a perfect
// router run (trtllm-compat.md §4): more than 10 % faster than learned
// routing means the learned router's imbalance matters.
func routingReading(where, base string, c Comparison) string {
	gain := c.Ratio - 1 // perfect over learned
	if base == "perfect" {
		gain = 1/c.Ratio - 1
	}
	sig := "significant, " + c.testString()
	if !c.Significant {
		sig = "not significant, " + c.testString()
	}
	name := MetricFor(c.Metric).Name
	if math.IsNaN(gain) || math.IsInf(gain, 0) {
		return fmt.Sprintf("routing (%s): perfect vs learned cannot be read: baseline %s is zero", where, name)
	}
	verdict := "within 10%, so the learned router's imbalance does not matter much here"
	if gain > 0.10 {
		verdict = "more than 10%, so the learned router's imbalance matters (TensorRT-LLM's reading)"
	}
	return fmt.Sprintf("routing (%s): perfect routing is %s %s than learned in %s (%s): %s",
		where, formatPct(math.Abs(100*gain)), pick(gain >= 0, "faster", "slower"), name, sig, verdict)
}

// environmentLines summarise the fingerprint in a few lines for headers.
func environmentLines(r *Results) []string {
	e := r.Environment
	var lines []string
	x := "xrun " + cmp.Or(e.Xrun.Version, "unknown")
	if e.Xrun.Commit != "" {
		x += " (" + shortHash(e.Xrun.Commit) + pick(e.Xrun.Modified, ", modified", "") + ")"
	}
	if e.Xrun.GoVersion != "" {
		x += ", " + e.Xrun.GoVersion
	}
	lines = append(lines, x)
	host := cmp.Or(e.Host, "unknown host")
	if e.OS != "" {
		host += ", " + e.OS
	}
	if e.Kernel != "" {
		host += " " + e.Kernel
	}
	if e.CPUModel != "" || e.CPUCount > 0 {
		host += fmt.Sprintf(", %d x %s", e.CPUCount, cmp.Or(e.CPUModel, "CPU"))
	}
	if e.MemoryBytes > 0 {
		host += ", " + formatBytes(e.MemoryBytes)
	}
	lines = append(lines, host)
	if len(e.GPUs) == 0 {
		lines = append(lines, "no GPU")
	}
	for _, g := range e.GPUs {
		// The clocks the GPU can run at are a fact of it; those read at
		// start depend on whether it was idle (older files have only those).
		clocks := fmt.Sprintf("%d/%d MHz SM/mem at start", g.SMClockMHz, g.MemClockMHz)
		if g.MaxSMClockMHz > 0 {
			clocks = fmt.Sprintf("max %d/%d MHz SM/mem", g.MaxSMClockMHz, g.MaxMemClockMHz)
		}
		lines = append(lines, fmt.Sprintf("GPU %d: %s, %s, driver %s, CUDA %s, sm_%s, %s, %gW limit",
			g.Index, g.Name, formatBytes(g.MemoryBytes), g.Driver, g.CUDAVersion, strings.ReplaceAll(g.ComputeCapability, ".", ""), clocks, g.PowerLimitW))
	}
	for _, t := range e.Engines {
		l := "engine " + t.Engine + ": " + t.Tool
		switch {
		case t.Version != "":
			l += " " + t.Version
		case t.Error != "":
			l += " (not found: " + t.Error + ")"
		}
		lines = append(lines, l)
	}
	if len(e.Switches) > 0 {
		var sw []string
		for _, k := range slices.Sorted(maps.Keys(e.Switches)) {
			sw = append(sw, k+"="+e.Switches[k])
		}
		lines = append(lines, "engine switches: "+strings.Join(sw, ", "))
	}
	if e.Repo != nil {
		lines = append(lines, "experiments at "+shortHash(e.Repo.Commit)+pick(e.Repo.Dirty, " (dirty)", ""))
	}
	if !r.Started.IsZero() {
		s := "ran " + r.Started.UTC().Format("2006-01-02 15:04:05") + " UTC"
		if !r.Finished.IsZero() && !r.Finished.Before(r.Started) {
			s += ", took " + r.Finished.Sub(r.Started).Round(time.Second).String()
		}
		lines = append(lines, s)
	}
	if r.OrderSeed != 0 {
		lines = append(lines, fmt.Sprintf("cells in random order, seed %d (xrun run --order-seed %d repeats it)", r.OrderSeed, r.OrderSeed))
	}
	return lines
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func formatBytes(b uint64) string {
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.0f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

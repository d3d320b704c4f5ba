package results

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Reference is a published table a study measures itself against (the
// spec's reference block): a metric's values for the cells its rows
// match, optionally per GPU. results.md shows each matched cell's measured
// median beside the published value, with their ratio; nothing in it
// feeds a verdict.
type Reference struct {
	// Name names the table ("trtllm-perf-overview"), Source where it was
	// published.
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
	// Metric is the registered metric the values are in.
	Metric string         `json:"metric"`
	Rows   []ReferenceRow `json:"rows"`
}

// ReferenceRow is one published value: for the cells whose parameters
// equal every entry of Match and, when GPU is set, that ran on a GPU whose
// name contains it ("H100").
type ReferenceRow struct {
	Match map[string]any `json:"match"`
	GPU   string         `json:"gpu,omitempty"`
	Value float64        `json:"value"`
}

// normalizeReference copies ref with its match values canonical (numbers
// as the cells' parameters are).
func normalizeReference(ref *Reference) (*Reference, error) {
	out := *ref
	out.Rows = make([]ReferenceRow, len(ref.Rows))
	for i, row := range ref.Rows {
		// What the reader refuses is never written (checkReference).
		if !(row.Value > 0) || math.IsInf(row.Value, 0) {
			return nil, fmt.Errorf("reference row %d: value %s: expected the published value, a positive number", i, formatValue(row.Value))
		}
		out.Rows[i] = ReferenceRow{Match: map[string]any{}, GPU: row.GPU, Value: row.Value}
		for k, v := range row.Match {
			c, err := canonicalScalar(v)
			if err != nil {
				return nil, fmt.Errorf("reference row %d, %s: %w", i, k, err)
			}
			out.Rows[i].Match[k] = c
		}
	}
	return &out, nil
}

// checkReference checks a read reference as the spec's is checked (the
// reader's validate): match values scalar (made canonical in place),
// published values positive. It returns the JSON path and message of the
// first problem.
func checkReference(ref *Reference) (path, msg string) {
	if ref == nil {
		return "", ""
	}
	for i := range ref.Rows {
		row := &ref.Rows[i]
		p := fmt.Sprintf("reference.rows[%d]", i)
		for _, k := range slices.Sorted(maps.Keys(row.Match)) {
			c, err := canonicalScalar(row.Match[k])
			if err != nil {
				return p + ".match." + k, "expected a string, number, bool or null"
			}
			row.Match[k] = c
		}
		if !(row.Value > 0) || math.IsInf(row.Value, 0) {
			return p + ".value", formatValue(row.Value) + ": expected the published value, a positive number"
		}
	}
	return "", ""
}

// matches reports whether row r applies to cell c, which ran on gpu.
func (r ReferenceRow) matches(c *Cell, gpu string) bool {
	for k, v := range r.Match {
		cv, ok := c.Params[k]
		if !ok || formatScalar(cv) != formatScalar(v) {
			return false
		}
	}
	return r.GPU == "" || gpu != "" && strings.Contains(gpu, r.GPU)
}

// cellGPU is the name of the GPU a cell ran on: its roofline's device, or
// the environment's GPU when the study had one kind; "" when unknown (the
// CPU backend).
func cellGPU(r *Results, c *Cell) string {
	if c.Roofline != nil && c.Roofline.Device != "" {
		return c.Roofline.Device
	}
	var names []string
	for _, g := range r.Environment.GPUs {
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	if len(names) == 1 && c.Params["engine"] != "cpu" {
		return names[0]
	}
	return ""
}

// referenceTable lays out r's reference against its cells: one row per
// cell a reference row matches (the first matching row counts), with the
// cell's axis values, the GPU, the measured median, the published value
// and measured / published; where the cells recorded it, the requests the
// engine held at once (max_in_flight's median: what the KV cache allowed,
// which explains much of a gap). Reference rows that match no cell, or
// only cells an earlier row took, are noted.
// nil without a reference.
func referenceTable(r *Results, ax []axisInfo) *Table {
	ref := r.Reference
	if ref == nil {
		return nil
	}
	m := MetricFor(ref.Metric)
	t := &Table{Title: "Against " + ref.Name + " (" + m.Name + ")"}
	for _, a := range ax {
		t.Columns = append(t.Columns, Column{Name: a.Name})
	}
	t.Columns = append(t.Columns, Column{Name: "GPU"}, Column{Name: "xrun (median)", Right: true},
		Column{Name: ref.Name, Right: true}, Column{Name: "xrun / " + ref.Name, Right: true})
	inFlight := slices.ContainsFunc(r.Cells, func(c Cell) bool { return len(column(c.Repeats, MaxInFlightKey)) > 0 })
	if inFlight {
		t.Columns = append(t.Columns, Column{Name: "requests at once", Right: true})
	}
	used := make([]bool, len(ref.Rows))
	// shadow[j] is the row that took the cells row j also matches, so
	// that j is not said to match nothing; -1: none.
	shadow := make([]int, len(ref.Rows))
	for j := range shadow {
		shadow[j] = -1
	}
	cells := cellPtrs(r)
	sortCells(cells, ax)
	var gpus []string // the GPUs the cells ran on
	for _, c := range cells {
		gpu := cellGPU(r, c)
		if gpu != "" && !slices.Contains(gpus, gpu) {
			gpus = append(gpus, gpu)
		}
		ri := slices.IndexFunc(ref.Rows, func(row ReferenceRow) bool { return row.matches(c, gpu) })
		if ri < 0 {
			continue
		}
		used[ri] = true
		for j := ri + 1; j < len(ref.Rows); j++ {
			if shadow[j] < 0 && ref.Rows[j].matches(c, gpu) {
				shadow[j] = ri
			}
		}
		var row []string
		for _, a := range ax {
			row = append(row, paramString(c, a.Name))
		}
		if gpu == "" {
			gpu = "-"
		}
		want := ref.Rows[ri].Value
		measured, ratio := string(c.Status), "-"
		if c.Status == StatusOK {
			s, _ := summarize(column(c.Repeats, ref.Metric))
			measured = formatSummary(s)
			if s.N > 0 && want > 0 {
				ratio = fmt.Sprintf("%.2fx", s.Median/want)
			}
		}
		row = append(row, gpu, measured, formatNumber(want), ratio)
		if inFlight {
			// What ran at once (peak_in_flight) where the cell recorded it:
			// under a paged cache max_in_flight only bounds the block tables.
			held, key := "-", MaxInFlightKey
			if len(column(c.Repeats, PeakInFlightKey)) > 0 {
				key = PeakInFlightKey
			}
			if s, _ := summarize(column(c.Repeats, key)); c.Status == StatusOK && s.N > 0 {
				held = strconv.FormatFloat(s.Median, 'f', -1, 64)
			}
			row = append(row, held)
		}
		t.Rows = append(t.Rows, row)
	}
	if ref.Source != "" {
		t.Notes = append(t.Notes, ref.Name+": "+ref.Source)
	}
	// Rows for a GPU the run did not use are expected to match nothing:
	// counted, not listed.
	var other []string
	for i, row := range ref.Rows {
		switch {
		case used[i]:
		case shadow[i] >= 0:
			t.Notes = append(t.Notes, fmt.Sprintf("%s row %d (%s) matches only cells that row %d, which comes first, already matched", ref.Name, i, row.describe(), shadow[i]))
		case row.GPU != "" && !slices.ContainsFunc(gpus, func(g string) bool { return strings.Contains(g, row.GPU) }):
			other = append(other, row.GPU)
		default:
			t.Notes = append(t.Notes, fmt.Sprintf("%s row %d (%s) matches no cell of this run", ref.Name, i, row.describe()))
		}
	}
	if len(other) > 0 {
		kinds := slices.Compact(slices.Sorted(slices.Values(other)))
		t.Notes = append(t.Notes, fmt.Sprintf("%d %s rows are for GPUs this run did not use (%s)", len(other), ref.Name, strings.Join(kinds, ", ")))
	}
	return t
}

// describe is a row's match and GPU for notes: "dataset.input_mean=128,
// gpu H200".
func (r ReferenceRow) describe() string {
	var parts []string
	for k, v := range r.Match {
		parts = append(parts, k+"="+formatParam(k, v))
	}
	slices.Sort(parts)
	if r.GPU != "" {
		parts = append(parts, "gpu "+r.GPU)
	}
	return strings.Join(parts, ", ")
}

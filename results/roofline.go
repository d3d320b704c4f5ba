package results

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/results/numfmt"
)

// rooflineMetric is the measured throughput a roofline is read against:
// the roofline's own throughput counts output tokens.
const rooflineMetric = "system_output_throughput_tok_s"

// rooflineColumn is the summary table's column for Roofline.Fraction.
const rooflineColumn = "% roofline"

// normalizeRoofline rounds a roofline's figures and computes its Fraction
// from the cell's summary, so that it always agrees with the repeats.
func normalizeRoofline(rf Roofline, sum map[string]Summary) (Roofline, error) {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"floor_s", &rf.FloorS}, {"output_tok_s", &rf.OutputTokS}, {"memory_bound_s", &rf.MemoryBoundS},
		{"measured_s", &rf.MeasuredS}, {"memory_bound_measured_s", &rf.MemoryBoundMeasuredS}, {"bytes", &rf.Bytes},
		{"flops", &rf.FLOPs}, {"peak_bytes_per_s", &rf.PeakBytesPerS}, {"peak_flop_per_s", &rf.PeakFLOPS},
		{"peak_fp8_flop_per_s", &rf.PeakFP8FLOPS}} {
		if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v < 0 {
			return rf, fmt.Errorf("%s: %v cannot be stored; expected a finite number >= 0", f.name, *f.v)
		}
		*f.v = roundValue(*f.v)
	}
	if rf.MemoryBoundIterations < 0 || rf.MemoryBoundIterations > rf.Iterations {
		return rf, fmt.Errorf("memory_bound_iterations: %d; expected 0 to iterations (%d)", rf.MemoryBoundIterations, rf.Iterations)
	}
	if rf.MemoryBoundMeasuredS > rf.MeasuredS {
		return rf, fmt.Errorf("memory_bound_measured_s: %v; expected at most measured_s (%v)", rf.MemoryBoundMeasuredS, rf.MeasuredS)
	}
	rf.Fraction = 0
	if s, ok := sum[rooflineMetric]; ok && s.N > 0 && rf.OutputTokS > 0 {
		rf.Fraction = roundValue(s.Median / rf.OutputTokS)
	}
	return rf, nil
}

// formatRoofline is a cell's "% roofline" entry: the share of the
// roofline reached and the roofline's output throughput, "47.3% of 2964";
// "-" where the cell has none.
func formatRoofline(c *Cell) string {
	rf := c.Roofline
	if c.Status != StatusOK || rf == nil || rf.OutputTokS <= 0 || rf.Fraction <= 0 {
		return "-"
	}
	return formatShare(rf.Fraction, rf.OutputTokS)
}

// formatShare prints a share of a roofline and the roofline's output
// throughput: "47.3% of 2964".
func formatShare(fraction, outputTokS float64) string {
	return formatPercent(fraction) + "% of " + formatNumber(outputTokS)
}

// formatPercent prints a fraction as a percentage with one decimal,
// without the sign: "47.3".
func formatPercent(fraction float64) string {
	return strconv.FormatFloat(100*fraction, 'f', 1, 64)
}

// hasRoofline reports whether any cell of the table can fill the column.
func hasRoofline(cells []*Cell) bool {
	for _, c := range cells {
		if formatRoofline(c) != "-" {
			return true
		}
	}
	return false
}

// rooflineNotes say, once per set of ceilings, what the column measures
// against.
func rooflineNotes(cells []*Cell) []string {
	var out []string
	for _, c := range cells {
		rf := c.Roofline
		if formatRoofline(c) == "-" {
			continue
		}
		flops := "FLOPs / " + FormatRate(rf.PeakFLOPS, "FLOP/s")
		if rf.PeakFP8FLOPS > 0 {
			flops = "FLOPs at " + FormatRate(rf.PeakFLOPS, "FLOP/s") + ", the FP8 linear layers' at " + FormatRate(rf.PeakFP8FLOPS, "FLOP/s")
		}
		out = append(out, fmt.Sprintf("%s: median %s over the roofline's (output tokens over the sum, across the timed iterations, of max(bytes / %s, %s): weights read once per iteration, on MoE models only the experts its tokens reached, plus the KV cache); %s, %s",
			rooflineColumn, MetricFor(rooflineMetric).Name, FormatRate(rf.PeakBytesPerS, "B/s"), flops, rf.Device, rf.PeakSource))
	}
	return dedupe(out)
}

// FormatRate prints a rate with an SI prefix and three significant
// digits: "4.30 TB/s", "790 TFLOP/s".
func FormatRate(v float64, unit string) string { return formatRateSig(v, unit, 3) }

// formatRateSig is FormatRate to the given number of significant digits.
func formatRateSig(v float64, unit string, digits int) string { return numfmt.Rate(v, unit, digits) }

// RooflineDiff is a compared cell's share of its roofline reached
// (Roofline.Fraction), old and new. It is context for the metrics, not a
// finding: the fraction moves with the measured output throughput, which
// the U test already judges, so it never makes a regression.
type RooflineDiff struct {
	// OldFraction and NewFraction are the two sides' Roofline.Fraction,
	// OldOutputTokS and NewOutputTokS their rooflines' output throughput;
	// null on a side without a roofline.
	OldFraction   *float64 `json:"old_fraction"`
	NewFraction   *float64 `json:"new_fraction"`
	OldOutputTokS *float64 `json:"old_output_tok_s"`
	NewOutputTokS *float64 `json:"new_output_tok_s"`
	// Delta is NewFraction - OldFraction (0.037 is 3.7 points of the
	// roofline); null unless both sides have a roofline against the same
	// ceilings, the only case where the two fractions are like for like.
	Delta *float64 `json:"delta"`
	// Note says why Delta is null: "only new has a roofline", or which
	// ceilings differ.
	Note string `json:"note,omitempty"`
}

// diffRoofline compares two ok cells' rooflines; nil when neither side
// has one to show.
func diffRoofline(oc, nc *Cell) *RooflineDiff {
	oldOK, newOK := formatRoofline(oc) != "-", formatRoofline(nc) != "-"
	if !oldOK && !newOK {
		return nil
	}
	// Copies, so that the report does not alias the results it came from.
	ptr := func(v float64) *float64 { return &v }
	d := &RooflineDiff{}
	if oldOK {
		d.OldFraction, d.OldOutputTokS = ptr(oc.Roofline.Fraction), ptr(oc.Roofline.OutputTokS)
	}
	if newOK {
		d.NewFraction, d.NewOutputTokS = ptr(nc.Roofline.Fraction), ptr(nc.Roofline.OutputTokS)
	}
	switch {
	case !oldOK:
		d.Note = "only new has a roofline"
	case !newOK:
		d.Note = "only old has a roofline"
	case !sameCeilings(oc.Roofline, nc.Roofline):
		o, n := ceilings(oc.Roofline, 3), ceilings(nc.Roofline, 3)
		if o == n { // they differ below three digits
			o, n = ceilings(oc.Roofline, 6), ceilings(nc.Roofline, 6)
		}
		d.Note = "ceilings differ: " + o + " -> " + n + "; the fractions are not like for like"
	default:
		delta := roundValue(nc.Roofline.Fraction - oc.Roofline.Fraction)
		d.Delta = &delta
	}
	return d
}

// sameCeilings reports whether two rooflines were drawn against the same
// GPU and ceilings, the fields that set a roofline's scale. The work
// (bytes, FLOPs) is the cell's own on each side and may differ.
func sameCeilings(a, b *Roofline) bool {
	// Records before the FP8 rate was kept leave it 0: compared only
	// where both sides have it.
	fp8 := a.PeakFP8FLOPS == b.PeakFP8FLOPS || a.PeakFP8FLOPS == 0 || b.PeakFP8FLOPS == 0
	return a.Device == b.Device && a.PeakBytesPerS == b.PeakBytesPerS && a.PeakFLOPS == b.PeakFLOPS && fp8
}

// ceilings names a roofline's GPU and ceilings: "NVIDIA H200 (4.30 TB/s,
// 790 TFLOP/s)", and the FP8 GEMMs' rate where kept: "..., FP8 1.58
// PFLOP/s)".
func ceilings(rf *Roofline, digits int) string {
	fp8 := ""
	if rf.PeakFP8FLOPS > 0 {
		fp8 = ", FP8 " + formatRateSig(rf.PeakFP8FLOPS, "FLOP/s", digits)
	}
	return fmt.Sprintf("%s (%s, %s%s)", rf.Device, formatRateSig(rf.PeakBytesPerS, "B/s", digits), formatRateSig(rf.PeakFLOPS, "FLOP/s", digits), fp8)
}

// rooflineDiffNote qualifies the roofline section of a diff.
const rooflineDiffNote = "the share of the roofline reached, median output throughput over the roofline's; informational, never a regression"

// rooflines tabulates the compared cells' RooflineDiffs; the ceilings
// that differ are noted once under the table, not once per cell.
func (d *DiffReport) rooflines() *Table {
	t := &Table{Columns: []Column{{Name: "cell"}, {Name: "old", Right: true}, {Name: "new", Right: true}, {Name: "change", Right: true}}}
	side := func(f, tokS *float64) string {
		if f == nil {
			return "-"
		}
		return formatShare(*f, *tokS)
	}
	for _, c := range d.Cells {
		rd := c.Roofline
		if rd == nil {
			continue
		}
		var change string
		switch {
		case rd.Delta != nil:
			change = formatPoints(*rd.OldFraction, *rd.NewFraction)
		case rd.OldFraction == nil:
			change = "n/a (old has none)"
		case rd.NewFraction == nil:
			change = "n/a (new has none)"
		default:
			change = "n/a (ceilings differ)"
			t.Notes = append(t.Notes, rd.Note)
		}
		t.Rows = append(t.Rows, []string{diffCellName(c), side(rd.OldFraction, rd.OldOutputTokS), side(rd.NewFraction, rd.NewOutputTokS), change})
	}
	t.Notes = dedupe(t.Notes)
	return t
}

// formatPoints prints the change between two fractions in percentage
// points, from the rounded percentages the table shows so that the three
// numbers agree: 0.473 -> 0.510 is "+3.7 pts".
func formatPoints(old, new float64) string {
	pct := func(f float64) float64 {
		v, _ := strconv.ParseFloat(formatPercent(f), 64)
		return v
	}
	s := strconv.FormatFloat(pct(new)-pct(old), 'f', 1, 64)
	if s == "-0.0" {
		s = "0.0"
	}
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s + " pts"
}

// rooflineByKindTable says, per GPU cell whose roofline has the measured
// spans (Roofline.MeasuredS), where the time to the floor went: the first
// repeat's memory-bound iterations (decode steps, mostly) and its
// compute-bound ones (prompt chunks) with their time, their floor and the
// share of it reached. A cell at 50 % of its roofline may be at 40 % in
// its decode steps and 70 % in its prompts; the summary's one figure
// cannot say which to work on. nil when no cell has the split.
func rooflineByKindTable(r *Results, ax []axisInfo) *Table {
	cells := cellPtrs(r)
	sortCells(cells, ax)
	t := &Table{Title: "Against the roofline, by kind of iteration", Columns: cellColumns(ax)}
	for _, kind := range []string{"memory-bound", "compute-bound"} {
		t.Columns = append(t.Columns, Column{Name: kind + " iterations", Right: true}, Column{Name: "time (s)", Right: true},
			Column{Name: "floor (s)", Right: true}, Column{Name: rooflineColumn, Right: true})
	}
	for _, c := range cells {
		rf := c.Roofline
		if formatRoofline(c) == "-" || rf.MeasuredS <= 0 {
			continue
		}
		row := cellLabel(c, ax)
		row = append(row, kindCells(rf.MemoryBoundIterations, rf.MemoryBoundMeasuredS, rf.MemoryBoundS)...)
		row = append(row, kindCells(rf.Iterations-rf.MemoryBoundIterations, rf.MeasuredS-rf.MemoryBoundMeasuredS, rf.FloorS-rf.MemoryBoundS)...)
		t.Rows = append(t.Rows, row)
	}
	if len(t.Rows) == 0 {
		return nil
	}
	t.Notes = []string{"the first repeat's timed iterations (those the roofline sums), split by what sets each one's floor: " +
		"its bytes at the bandwidth ceiling (memory-bound: decode steps, mostly) or its FLOPs at the arithmetic one " +
		"(compute-bound: iterations that carry prompt chunks); time (s): their spans in iterations.csv summed (duration_ns, " +
		"from when the device could start an iteration to when its tokens reached the host); floor (s): their part of the " +
		"roofline's; % roofline: floor over time"}
	return t
}

// kindCells are one kind's columns of rooflineByKindTable: "-" for the
// figures of a kind with no iteration.
func kindCells(n int, measured, floor float64) []string {
	if n <= 0 {
		return []string{"0", "-", "-", "-"}
	}
	share := "-"
	if measured > 0 {
		share = formatPercent(floor/measured) + "%"
	}
	return []string{strconv.Itoa(n), formatSig(measured, 4), formatSig(floor, 4), share}
}

package results

import (
	"fmt"

	"github.com/xrun-dev/xrun/results/atomicfile"
)

// This file exposes, for renderers outside the package (results/htmlreport
// draws charts), the structure the tables are built from: the axes, the
// comparisons' pairing and the diff's verdict lines. They are the very
// functions the tables use, so a chart never pairs cells or words a
// verdict otherwise than the tables beside it.

// AxisValues is a parameter that varies between cells, with its values as
// the tables print them, in table order.
type AxisValues struct {
	Name   string
	Values []string
}

// VaryingAxes lists the parameters that vary between cells as the tables
// show them: the declared axes in their order, then the others; values in
// declaration order, then sorted; parameters that follow another axis
// (a model's vocabulary) left out.
func VaryingAxes(r *Results) []AxisValues {
	var out []AxisValues
	for _, a := range axes(r) {
		out = append(out, AxisValues{Name: a.Name, Values: a.Values})
	}
	return out
}

// ParamString is a cell's parameter as the tables print it; "-" when the
// cell lacks it.
func ParamString(c *Cell, key string) string { return paramString(c, key) }

// ShownMetrics are the metrics the tables show: opts.Metrics, or the
// headline metrics some cell measured.
func ShownMetrics(r *Results, opts RenderOptions) []string { return shownMetrics(r, opts) }

// ComparedAxis is one comparison of the report (a compare entry, or an
// axis with exactly two values) with its rows, as the pivot tables pair
// them.
type ComparedAxis struct {
	Axis     string
	Baseline string
	// Values are the axis's other values, compared with Baseline, in axis
	// order.
	Values []string
	Rows   []ComparedRow
}

// ComparedRow is one combination of the other axes: Where names it
// ("batch_size=64", "all cells"), Cells holds its cell for each value of
// the compared axis (the baseline's included; a value without a cell is
// absent).
type ComparedRow struct {
	Where string
	Cells map[string]*Cell
}

// Comparisons resolves the report's comparisons as BuildReport does; the
// notes say which compare entries cannot be honoured.
func Comparisons(r *Results) ([]ComparedAxis, []string) {
	ax := axes(r)
	var notes []string
	var out []ComparedAxis
	for _, cs := range comparisons(r, ax, &notes) {
		ca := ComparedAxis{Axis: cs.Axis, Baseline: cs.Baseline}
		for _, a := range ax {
			if a.Name != cs.Axis {
				continue
			}
			for _, v := range a.Values {
				if v != cs.Baseline {
					ca.Values = append(ca.Values, v)
				}
			}
		}
		rows, others := pivotRows(r, ax, cs.Axis)
		for _, row := range rows {
			ca.Rows = append(ca.Rows, ComparedRow{Where: rowLabel(others, row.label), Cells: row.cells})
		}
		out = append(out, ca)
	}
	return out, notes
}

// CompareCells compares one metric of two cells as the pivot tables do;
// ok is false when either cell is missing, not ok, or lacks the metric.
func CompareCells(base, cand *Cell, metric string) (Comparison, bool) {
	return compareCells(base, cand, metric)
}

// VerdictText is the verdict with its test, as the tables print it:
// "slower (p=0.002 n=6+6)".
func (c Comparison) VerdictText() string { return verdictString(c) }

// Label is the diff's verdict in capitals, as its first line prints it
// ("REGRESSION", "OK", "NOTHING COMPARED", ...).
func (d *DiffReport) Label() string { return d.label() }

// Headline is the one-line verdict that follows the label.
func (d *DiffReport) Headline() string { return d.headline() }

// Scope says what was compared: cells, comparisons, study, metrics.
func (d *DiffReport) Scope() string { return d.scope() }

// Rule says what counts as a regression and how many comparisons alpha
// alone would make significant; "" when nothing was tested.
func (d *DiffReport) Rule() string {
	if d.Tests.Comparisons == 0 {
		return ""
	}
	return d.rule()
}

// CellList is one of the diff's lists of cells (newly failed, missing,
// throttled, ...) with its title.
type CellList struct {
	Title string
	Items []string
}

// CellLists are the diff's lists of cells in the order its text prints
// them.
func (d *DiffReport) CellLists() []CellList {
	var out []CellList
	for _, l := range d.cellLists() {
		out = append(out, CellList{Title: l.title, Items: l.items})
	}
	return out
}

// KernelsUnchangedText sums up, for a renderer, the cells profiled in both
// runs whose kernels did not change; "" when there are none. listed is how
// many cells with changes were listed before it.
func (d *DiffReport) KernelsUnchangedText(listed int) string {
	if d.KernelsUnchanged == 0 {
		return ""
	}
	return d.unchangedKernels(listed)
}

// KernelsDiffNote qualifies a diff's kernel changes.
const KernelsDiffNote = kernelsDiffNote

// KernelsNote introduces the kernel changes under a comparison.
const KernelsNote = kernelsNote

// FormatSummary prints a median with its confidence interval as the
// tables do: "141.3 ±0.4%".
func FormatSummary(s Summary) string { return formatSummary(s) }

// FormatDelta prints a ratio as a signed change: "+2.4%".
func FormatDelta(ratio float64) string { return formatDelta(ratio) }

// FormatSig prints v with digits significant digits and no exponent.
func FormatSig(v float64, digits int) string { return formatSig(v, digits) }

// WriteFileAtomic writes data to path as results.json is written: a
// temporary file beside it, synced, renamed over it; a reader sees the old
// file or the new one, never a part.
func WriteFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteBytes(path, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// TableOrder lists the cells in the order the tables show them: by their
// axis values, in axis order, then by id.
func TableOrder(r *Results) []*Cell {
	cells := cellPtrs(r)
	sortCells(cells, axes(r))
	return cells
}

// Label is the trend's verdict in capitals, as its first line prints it.
func (t *TrendReport) Label() string { return t.label() }

// Headline is the one-line verdict that follows the label.
func (t *TrendReport) Headline() string { return t.headline() }

// Scope says what the trend followed and what it found.
func (t *TrendReport) Scope() string { return t.scope() }

// Rule says what counts as a step.
func (t *TrendReport) Rule() string { return t.rule() }

// RunDate is run i's start as the trend's tables print it: the date, with
// the time when two runs share a date.
func (t *TrendReport) RunDate(i int) string { return t.runDate(i) }

package results

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Output renders results in one format. The formats are siblings behind
// this one interface (k6's Output pattern), so `xrun report`, the runner's
// results.md and tests treat them alike.
type Output interface {
	// Format is the name --format accepts.
	Format() string
	// Render draws normalized results (see Render) to w.
	Render(w io.Writer, r *Results, opts RenderOptions) error
}

var outputs = []Output{textOutput{}, markdownOutput{}, csvOutput{}, jsonOutput{}, benchOutput{}}

// Formats lists the format names, default first.
func Formats() []string {
	var f []string
	for _, o := range outputs {
		f = append(f, o.Format())
	}
	return f
}

// OutputFor returns the renderer for a format name.
func OutputFor(format string) (Output, error) {
	for _, o := range outputs {
		if o.Format() == format {
			return o, nil
		}
	}
	return nil, fmt.Errorf("unknown format %q; expected one of %s", format, strings.Join(Formats(), ", "))
}

// Render normalizes r (rounding, sorting, summaries) and draws it in the
// named format.
func Render(w io.Writer, format string, r *Results, opts RenderOptions) error {
	o, err := OutputFor(format)
	if err != nil {
		return err
	}
	n, err := normalized(r)
	if err != nil {
		return err
	}
	return o.Render(w, n, opts)
}

type textOutput struct{}

func (textOutput) Format() string { return "text" }

func (textOutput) Render(w io.Writer, r *Results, opts RenderOptions) error {
	rep := BuildReport(r, opts)
	var b strings.Builder
	b.WriteString(rep.Title)
	if rep.Description != "" {
		b.WriteString(": " + rep.Description)
	}
	b.WriteString("\n")
	for _, l := range rep.Environment {
		b.WriteString("  " + l + "\n")
	}
	for _, n := range rep.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	b.WriteString("\n")
	if err := rep.Summary.WriteText(&b); err != nil {
		return err
	}
	if rep.Frontier != nil {
		b.WriteString("\n")
		if err := rep.Frontier.WriteText(&b); err != nil {
			return err
		}
	}
	for _, t := range []*Table{rep.RooflineByKind, rep.Reference} {
		if t == nil {
			continue
		}
		b.WriteString("\n")
		if err := t.WriteText(&b); err != nil {
			return err
		}
	}
	for _, c := range rep.Comparisons {
		for _, t := range c.Tables {
			b.WriteString("\n")
			t := *t
			t.Title = c.Title + ": " + t.Title
			if err := t.WriteText(&b); err != nil {
				return err
			}
		}
		for _, n := range c.Notes {
			b.WriteString("  " + n + "\n")
		}
		if len(c.Kernels) > 0 {
			b.WriteString("\n" + c.Title + ": kernel changes\n  " + strings.ReplaceAll(kernelsNote, "`", "") + "\n")
		}
		for _, p := range c.Kernels {
			b.WriteString("  " + p.heading() + " (" + p.command() + ")\n")
			for _, l := range p.Changes {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type markdownOutput struct{}

func (markdownOutput) Format() string { return "markdown" }

// Render writes results.md: a heading, the environment, the summary table
// and the pivots, readable on GitHub and in a terminal alike.
func (markdownOutput) Render(w io.Writer, r *Results, opts RenderOptions) error {
	rep := BuildReport(r, opts)
	var b strings.Builder
	b.WriteString("# " + mdEscape(rep.Title) + "\n\n")
	if rep.Description != "" {
		b.WriteString(mdEscape(rep.Description) + "\n\n")
	}
	for _, l := range rep.Environment {
		b.WriteString("- " + mdEscape(l) + "\n")
	}
	for _, n := range rep.Notes {
		b.WriteString("- note: " + mdEscape(n) + "\n")
	}
	b.WriteString("\n")
	if err := rep.Summary.WriteMarkdown(&b, 2); err != nil {
		return err
	}
	if rep.Frontier != nil {
		b.WriteString("\n")
		if err := rep.Frontier.WriteMarkdown(&b, 2); err != nil {
			return err
		}
	}
	for _, t := range []*Table{rep.RooflineByKind, rep.Reference} {
		if t == nil {
			continue
		}
		b.WriteString("\n")
		if err := t.WriteMarkdown(&b, 2); err != nil {
			return err
		}
	}
	for _, c := range rep.Comparisons {
		b.WriteString("\n## " + mdEscape(c.Title) + "\n")
		for _, t := range c.Tables {
			b.WriteString("\n")
			if err := t.WriteMarkdown(&b, 3); err != nil {
				return err
			}
		}
		if len(c.Notes) > 0 {
			b.WriteString("\n")
			for _, n := range c.Notes {
				b.WriteString("- " + mdEscape(n) + "\n")
			}
		}
		writeKernelPairsMarkdown(&b, c.Kernels)
	}
	if err := writeProfilesMarkdown(&b, rep.Profiles); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type csvOutput struct{}

func (csvOutput) Format() string { return "csv" }

// Render writes one row per cell with every parameter and, per metric,
// the median and interval bounds at full stored precision: a table for
// spreadsheets and pandas rather than for eyes.
func (csvOutput) Render(w io.Writer, r *Results, opts RenderOptions) error {
	ax := axes(r)
	params := map[string]bool{}
	for _, c := range r.Cells {
		for k := range c.Params {
			params[k] = true
		}
	}
	var keys []string
	for _, a := range ax {
		keys = append(keys, a.Name)
		delete(params, a.Name)
	}
	keys = append(keys, slices.Sorted(maps.Keys(params))...)
	cells := cellPtrs(r)
	sortCells(cells, ax)
	metrics := opts.Metrics
	if len(metrics) == 0 {
		metrics = slices.Collect(maps.Keys(presentMetrics(r)))
		// Older GPU results get the energy columns as estimates.
		metrics = append(metrics, estimatedEnergyKeys(cells)...)
		sortMetricKeys(metrics)
	}
	t := &Table{Columns: []Column{{Name: "cell"}, {Name: "status"}}}
	for _, k := range keys {
		t.Columns = append(t.Columns, Column{Name: k})
	}
	t.Columns = append(t.Columns, Column{Name: "repeats"})
	for _, m := range metrics {
		name := MetricFor(m).Name
		t.Columns = append(t.Columns, Column{Name: name}, Column{Name: name + " ci_low"}, Column{Name: name + " ci_high"})
	}
	// Where energy is shown, a column says whether each cell's was
	// measured or estimated (EstimateEnergy); the estimates have no
	// interval.
	energy := slices.ContainsFunc(cells, func(c *Cell) bool { return energySource(c, metrics) != "" })
	if energy {
		t.Columns = append(t.Columns, Column{Name: csvEnergySource})
	}
	// As in the tables, the roofline columns come only where some cell
	// has a roofline, so CPU-only studies keep their columns.
	roofline := hasRoofline(cells)
	if roofline {
		t.Columns = append(t.Columns, Column{Name: csvRooflineTokS}, Column{Name: csvRooflineFraction})
	}
	for _, c := range cells {
		row := []string{c.ID, string(c.Status)}
		for _, k := range keys {
			v, ok := c.Params[k]
			row = append(row, pick(ok, formatParam(k, v), ""))
		}
		row = append(row, fmt.Sprint(len(c.Repeats)))
		for _, m := range metrics {
			vals := column(c.Repeats, m)
			if v, ok := EstimateEnergy(c, m); ok && len(vals) == 0 {
				row = append(row, formatFloat(v), "", "")
				continue
			}
			if len(vals) == 0 {
				row = append(row, "", "", "")
				continue
			}
			s := Summarize(vals)
			row = append(row, formatFloat(s.Median), formatBound(s.CILow), formatBound(s.CIHigh))
		}
		if energy {
			row = append(row, energySource(c, metrics))
		}
		if roofline {
			row = append(row, csvRoofline(c)...)
		}
		t.Rows = append(t.Rows, row)
	}
	return t.WriteCSV(w)
}

// The CSV's roofline columns, named like the metric columns: the
// roofline's output throughput and Roofline.Fraction, the share of it
// reached (0.473, where the tables print "47.3% of 2964").
const (
	csvRooflineTokS     = "Roofline Output Throughput (tokens/sec)"
	csvRooflineFraction = "Roofline Fraction"
)

// csvEnergySource is the CSV's column saying where a cell's energy
// metrics came from: "measured", EnergyEstimated, or empty without any.
const csvEnergySource = "Energy Source"

// energySource is a cell's entry in the csvEnergySource column, for the
// metrics shown.
func energySource(c *Cell, metrics []string) string {
	for _, m := range metrics {
		if !isEnergyMetric(m) {
			continue
		}
		if len(column(c.Repeats, m)) > 0 {
			return "measured"
		}
		if _, ok := EstimateEnergy(c, m); ok {
			return EnergyEstimated
		}
	}
	return ""
}

// csvRoofline is a cell's two roofline columns, empty where the tables
// show "-" (no roofline, or no throughput to set against it).
func csvRoofline(c *Cell) []string {
	if formatRoofline(c) == "-" {
		return []string{"", ""}
	}
	return []string{formatFloat(c.Roofline.OutputTokS), formatFloat(c.Roofline.Fraction)}
}

func formatBound(p *float64) string {
	if p == nil {
		return ""
	}
	return formatFloat(*p)
}

type jsonOutput struct{}

func (jsonOutput) Format() string { return "json" }

// Render writes the canonical results.json bytes.
func (jsonOutput) Render(w io.Writer, r *Results, _ RenderOptions) error {
	data, err := encode(r)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

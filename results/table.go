package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xrun-dev/xrun/results/numfmt"
)

// Table is a rendered-agnostic table: every renderer (terminal, Markdown,
// CSV) draws the same rows, so the three never disagree.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]string
	// Notes are printed under the table: statistical caveats, failed
	// cells, readings. They are data, not failures.
	Notes []string
}

// Column is a table header; numeric columns align right.
type Column struct {
	Name  string
	Right bool
}

// WriteText draws the table for a terminal: aligned columns separated by
// two spaces, a title line and the notes below.
func (t *Table) WriteText(w io.Writer) error {
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c.Name)
	}
	for _, r := range t.Rows {
		for i, v := range r {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		for i, v := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if i > 0 {
				l.WriteString("  ")
			}
			if t.Columns[i].Right {
				l.WriteString(pad + v)
			} else {
				l.WriteString(v + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	names := make([]string, len(t.Columns))
	rules := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
		rules[i] = strings.Repeat("-", width[i])
	}
	line(names)
	line(rules)
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		b.WriteString("  " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown draws a GitHub-flavoured Markdown table, the title as a
// heading at the given level and the notes as a list.
func (t *Table) WriteMarkdown(w io.Writer, level int) error {
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(strings.Repeat("#", level) + " " + mdEscape(t.Title) + "\n\n")
	}
	b.WriteString("|")
	for _, c := range t.Columns {
		b.WriteString(" " + mdEscape(c.Name) + " |")
	}
	b.WriteString("\n|")
	for _, c := range t.Columns {
		b.WriteString(pick(c.Right, "---:|", "---|"))
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("|")
		for _, v := range r {
			b.WriteString(" " + mdEscape(v) + " |")
		}
		b.WriteString("\n")
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes the header and rows (RFC 4180); title and notes have no
// place in CSV.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	if err := cw.Write(names); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil {
		return err
	}
	return cw.Error()
}

// mdEscape keeps cell text from breaking the table or turning into markup.
func mdEscape(s string) string {
	// "<" could open an HTML tag; "~" alone is a verdict, but GitHub
	// strikes through text between tildes. "_" is left alone because
	// GitHub ignores it inside words, and ">" only matters at a line start.
	r := strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", "*", `\*`, "~", `\~`)
	return r.Replace(s)
}

// formatNumber prints 4 significant digits without an exponent
// ("141.3", "18086", "0.8123"), enough to read a table; the files keep 6.
func formatNumber(v float64) string { return formatSig(v, 4) }

// formatSig prints v with the given number of significant digits and
// never an exponent (999.96 to 3 digits prints as 1000, not 1e+03).
func formatSig(v float64, digits int) string { return numfmt.Sig(v, digits) }

// formatSummary prints a median with the half-width of its confidence
// interval in percent, like benchstat: "141.3 ±0.4%", "141.3 ±∞" when the
// interval is unbounded.
func formatSummary(s Summary) string {
	if s.N == 0 {
		return "-"
	}
	return formatNumber(s.Median) + " " + formatCI(s)
}

func formatCI(s Summary) string {
	if s.CILow == nil || s.CIHigh == nil {
		return "±∞"
	}
	if s.Median == 0 {
		return "±0%"
	}
	pct := 100 * max(*s.CIHigh-s.Median, s.Median-*s.CILow) / math.Abs(s.Median)
	return "±" + formatPct(pct)
}

// formatPct prints a percentage with one decimal below 10 %, none above.
func formatPct(p float64) string {
	if math.Abs(p) < 10 {
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// formatDelta prints a relative change with its sign: "+2.4%", "-10.3%".
func formatDelta(ratio float64) string {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		return "n/a"
	}
	d := 100 * (ratio - 1)
	s := formatPct(d)
	if d >= 0 && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	if s == "-0.0%" {
		s = "+0.0%"
	}
	return s
}

// formatRatio prints a ratio to the baseline: "0.983x".
func formatRatio(ratio float64) string {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.3fx", ratio)
}

package profile

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/results"
)

// CellKernels is one cell's kernel summary and how many iterations it
// covers (0 when unknown: times are then compared as totals).
type CellKernels struct {
	ID         string
	Iterations int
	Stats      []KernelStat
}

// DiffRow is one kernel of either cell; A or B is nil when the kernel ran
// in only one of them.
type DiffRow struct {
	Name string
	A, B *KernelStat
}

// Replacement is a kind of kernel (GEMM, attention, ...) whose kernels
// differ between the cells: Old ran only in A, New only in B. For
// gemm_plugin auto vs disable it says which GEMM kernels replaced which.
type Replacement struct {
	Category string
	Old, New []string
}

// KernelDiff is what changed in the kernels between two cells.
type KernelDiff struct {
	A, B     CellKernels
	Rows     []DiffRow
	Replaced []Replacement
	// perIter is true when both cells know their iteration count, so times
	// are per iteration; otherwise they are window totals.
	perIter bool
}

// categories classify kernels for pairing replacements; the first match
// wins, anything else is "other".
var categories = []struct {
	name string
	re   *regexp.Regexp
}{
	{"GEMM", gemmRE},
	{"attention", regexp.MustCompile(`(?i)attn|attention|fmha|flash|sdpa`)},
	{"norm", regexp.MustCompile(`(?i)norm`)},
	{"rope", regexp.MustCompile(`(?i)rope|rotary`)},
	{"MoE", regexp.MustCompile(`(?i)moe|expert|route|topk`)},
	{"copy", regexp.MustCompile(`(?i)copy|memcpy|memset|fill|gather|embed`)},
}

// Category names the kind of a kernel.
func Category(name string) string {
	for _, c := range categories {
		if c.re.MatchString(name) {
			return c.name
		}
	}
	return "other"
}

// DiffKernels compares the kernel summaries of two cells.
func DiffKernels(a, b CellKernels) *KernelDiff {
	d := &KernelDiff{A: a, B: b, perIter: a.Iterations > 0 && b.Iterations > 0}
	idx := map[string]int{}
	for i := range a.Stats {
		idx[a.Stats[i].Name] = len(d.Rows)
		d.Rows = append(d.Rows, DiffRow{Name: a.Stats[i].Name, A: &a.Stats[i]})
	}
	for i := range b.Stats {
		if j, ok := idx[b.Stats[i].Name]; ok {
			d.Rows[j].B = &b.Stats[i]
			continue
		}
		d.Rows = append(d.Rows, DiffRow{Name: b.Stats[i].Name, B: &b.Stats[i]})
	}
	slices.SortStableFunc(d.Rows, func(x, y DiffRow) int {
		return cmp.Or(cmp.Compare(max(d.time(y.A, &d.A), d.time(y.B, &d.B)), max(d.time(x.A, &d.A), d.time(x.B, &d.B))),
			strings.Compare(x.Name, y.Name))
	})
	only := map[string]*Replacement{}
	var order []string
	for _, r := range d.Rows {
		if r.A != nil && r.B != nil {
			continue
		}
		c := Category(r.Name)
		if only[c] == nil {
			only[c] = &Replacement{Category: c}
			order = append(order, c)
		}
		if r.A != nil {
			only[c].Old = append(only[c].Old, r.Name)
		} else {
			only[c].New = append(only[c].New, r.Name)
		}
	}
	for _, c := range order {
		d.Replaced = append(d.Replaced, *only[c])
	}
	return d
}

// time is a kernel's time in the unit the diff compares: nanoseconds per
// iteration, or the window total; -1 when the kernel did not run.
func (d *KernelDiff) time(s *KernelStat, c *CellKernels) float64 {
	if s == nil {
		return -1
	}
	if d.perIter {
		return float64(s.TotalNs) / float64(c.Iterations)
	}
	return float64(s.TotalNs)
}

func (d *KernelDiff) launches(s *KernelStat, c *CellKernels) string {
	if s == nil {
		return "-"
	}
	if d.perIter {
		return sig3(float64(s.Instances) / float64(c.Iterations))
	}
	return fmt.Sprint(s.Instances)
}

// Table lays the diff out: a row per kernel, A's and B's time side by
// side with their ratio, launches, and whether the kernel ran in only one
// cell; a total row last. Notes say which kernels replaced which.
func (d *KernelDiff) Table() *results.Table {
	unit := "time/iter"
	calls := "launches/iter"
	if !d.perIter {
		unit, calls = "total time", "launches"
	}
	t := &results.Table{
		Title: fmt.Sprintf("Kernels: A = %s (%s) vs B = %s (%s)", d.A.ID, iterText(d.A.Iterations), d.B.ID, iterText(d.B.Iterations)),
		Columns: []results.Column{{Name: "kernel"}, {Name: "A " + unit, Right: true}, {Name: "B " + unit, Right: true},
			{Name: "B/A", Right: true}, {Name: "A " + calls, Right: true}, {Name: "B " + calls, Right: true}, {Name: "in"}},
	}
	show := func(v float64) string {
		if v < 0 {
			return "-"
		}
		return fmtDur(v)
	}
	display := displayNames(d.Rows)
	var ta, tb float64
	for _, r := range d.Rows {
		a, b := d.time(r.A, &d.A), d.time(r.B, &d.B)
		ta, tb = ta+max(a, 0), tb+max(b, 0)
		in := "both"
		switch {
		case r.B == nil:
			in = "only A"
		case r.A == nil:
			in = "only B"
		}
		t.Rows = append(t.Rows, []string{display[r.Name], show(a), show(b), ratio(a, b), d.launches(r.A, &d.A), d.launches(r.B, &d.B), in})
	}
	t.Rows = append(t.Rows, []string{"total", show(ta), show(tb), ratio(ta, tb), "", "", ""})
	for _, rp := range d.Replaced {
		switch {
		case len(rp.Old) > 0 && len(rp.New) > 0:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: %s (A) replaced by %s (B)", rp.Category, joinDisplay(rp.Old, display), joinDisplay(rp.New, display)))
		case len(rp.Old) > 0:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: only in A: %s", rp.Category, joinDisplay(rp.Old, display)))
		default:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: only in B: %s", rp.Category, joinDisplay(rp.New, display)))
		}
	}
	if !d.perIter {
		t.Notes = append(t.Notes, "times are window totals: the number of profiled iterations is not known for both cells")
	}
	return t
}

// displayNames shortens kernel names for the table (ShortName), keeping
// the full name where two kernels would otherwise look the same.
func displayNames(rows []DiffRow) map[string]string {
	count := map[string]int{}
	for _, r := range rows {
		count[ShortName(r.Name)]++
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.Name
		if s := ShortName(r.Name); count[s] == 1 {
			out[r.Name] = s
		}
	}
	return out
}

func joinDisplay(names []string, display map[string]string) string {
	var out []string
	for _, n := range names {
		out = append(out, display[n])
	}
	return strings.Join(out, ", ")
}

func iterText(n int) string {
	if n <= 0 {
		return "iterations unknown"
	}
	return fmt.Sprintf("%d iteration%s", n, plural(n))
}

func ratio(a, b float64) string {
	if a <= 0 || b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", b/a)
}

// Render writes the diff as "text" or "markdown".
func (d *KernelDiff) Render(w io.Writer, format string) error {
	switch format {
	case "text":
		return d.Table().WriteText(w)
	case "markdown":
		return d.Table().WriteMarkdown(w, 2)
	}
	return fmt.Errorf("unknown format %q; expected text or markdown", format)
}

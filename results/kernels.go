package results

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/results/kernelname"
)

// KernelCategory names the kind of a kernel: GEMM, attention, norm, rope,
// MoE, copy or other (kernelname.Category, the kinds a kernel diff pairs
// replacements by).
func KernelCategory(name string) string { return kernelname.Category(name) }

// ShortKernelName is a kernel's name for tables and sentences
// (kernelname.Short): "cublasLt::splitKreduce_kernel<…>". Files keep the
// full name.
func ShortKernelName(name string) string { return kernelname.Short(name) }

// KernelCell is one cell's kernel summary as a kernel diff reads it.
type KernelCell struct {
	ID string
	// Label names the cell in sentences: the compared axis value ("auto"),
	// "old" or "new". Default "A" and "B".
	Label string
	// Iterations is how many iterations the window covered; 0 when
	// unknown, and times are then compared as window totals.
	Iterations int
	// Kernels are the summary's rows, largest total first.
	Kernels []Kernel
	// Complete is true when Kernels holds every kernel of the window (a
	// kernels.csv), false when it may hold only the top ones (results.json
	// keeps the top 10 and, since distinct_kernels, the others too): a
	// kernel missing from an incomplete list may have run less than the
	// last one listed, or not at all.
	Complete bool
}

// ProfileKernels returns a cell's kernel summary as results.json keeps
// it, the top list followed by the other kernels; ok is false when the
// cell has none. The list is complete when profile.distinct_kernels says
// it holds every kernel (files written before that field existed do not
// say, so their lists count as top kernels only).
func ProfileKernels(c *Cell, label string) (k KernelCell, ok bool) {
	p := c.Profile
	if p == nil || len(p.Kernels) == 0 {
		return KernelCell{}, false
	}
	all := slices.Clone(p.Kernels)
	for _, o := range p.OtherKernels {
		all = append(all, Kernel{Name: o.Name, TotalNs: o.TotalNs, Instances: o.Instances, ExclusiveNs: o.ExclusiveNs})
	}
	return KernelCell{ID: c.ID, Label: label, Iterations: p.Iterations, Kernels: all,
		Complete: p.DistinctKernels > 0 && p.DistinctKernels <= len(all)}, true
}

// KernelDiffRow is one kernel of either cell; A or B is nil where it is
// not listed.
type KernelDiffRow struct {
	Name string
	A, B *Kernel
}

// KernelReplacement is a kind of kernel (GEMM, attention, ...) whose
// kernels differ between the cells: Old ran only in A, New only in B. For
// gemm_plugin auto vs disable it says which GEMM kernels replaced which.
// Kernels that are merely missing from a cell's top list are not
// counted: they may have run there too.
type KernelReplacement struct {
	Category string
	Old, New []string
}

// KernelDiff is what changed in the kernels between two cells.
type KernelDiff struct {
	A, B     KernelCell
	Rows     []KernelDiffRow
	Replaced []KernelReplacement
	// perIter is true when both cells know their iteration count, so times
	// are per iteration; otherwise they are window totals.
	perIter bool
	// exclusive is true when both cells list every kernel with its
	// exclusive time (Kernel.ExclusiveNs, xrun's engine's profiles), which
	// the diff then compares: Nsight's totals count a kernel that waited
	// for its predecessor under programmatic dependent launch in both.
	exclusive bool
}

// allExclusive reports whether c lists every kernel it ran, each with its
// exclusive time.
func allExclusive(c KernelCell) bool {
	return c.Complete && !slices.ContainsFunc(c.Kernels, func(k Kernel) bool { return k.ExclusiveNs <= 0 })
}

// DiffKernels compares the kernel summaries of two cells: rows sorted by
// the larger of the two times, then name; replacements by category, in
// the order of their largest kernel.
func DiffKernels(a, b KernelCell) *KernelDiff {
	a.Label, b.Label = cmp.Or(a.Label, "A"), cmp.Or(b.Label, "B")
	d := &KernelDiff{A: a, B: b, perIter: a.Iterations > 0 && b.Iterations > 0, exclusive: allExclusive(a) && allExclusive(b)}
	idx := map[string]int{}
	for i := range a.Kernels {
		idx[a.Kernels[i].Name] = len(d.Rows)
		d.Rows = append(d.Rows, KernelDiffRow{Name: a.Kernels[i].Name, A: &a.Kernels[i]})
	}
	for i := range b.Kernels {
		if j, ok := idx[b.Kernels[i].Name]; ok {
			d.Rows[j].B = &b.Kernels[i]
			continue
		}
		d.Rows = append(d.Rows, KernelDiffRow{Name: b.Kernels[i].Name, B: &b.Kernels[i]})
	}
	slices.SortStableFunc(d.Rows, func(x, y KernelDiffRow) int {
		return cmp.Or(cmp.Compare(max(d.timeA(y), d.timeB(y)), max(d.timeA(x), d.timeB(x))), strings.Compare(x.Name, y.Name))
	})
	only := map[string]*KernelReplacement{}
	var order []string
	for _, r := range d.Rows {
		oldOnly, newOnly := r.B == nil && d.B.Complete, r.A == nil && d.A.Complete
		if !oldOnly && !newOnly {
			continue
		}
		c := kernelname.Category(r.Name)
		if only[c] == nil {
			only[c] = &KernelReplacement{Category: c}
			order = append(order, c)
		}
		if oldOnly {
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
// iteration, or the window total, exclusive where the diff is; -1 when
// the kernel is not listed.
func (d *KernelDiff) time(k *Kernel, c *KernelCell) float64 {
	if k == nil {
		return -1
	}
	ns := k.TotalNs
	if d.exclusive {
		ns = k.ExclusiveNs
	}
	if d.perIter {
		return float64(ns) / float64(c.Iterations)
	}
	return float64(ns)
}

func (d *KernelDiff) timeA(r KernelDiffRow) float64 { return d.time(r.A, &d.A) }
func (d *KernelDiff) timeB(r KernelDiffRow) float64 { return d.time(r.B, &d.B) }

// bound is the most an unlisted kernel of an incomplete cell can have
// taken: the time of the smallest kernel listed.
func (d *KernelDiff) bound(c *KernelCell) float64 {
	b := math.Inf(1)
	for i := range c.Kernels {
		b = min(b, d.time(&c.Kernels[i], c))
	}
	return b
}

// total is all kernel time of a cell in the diff's unit: the sum of a
// complete list, else the largest kernel's time over its share (the
// share is of all kernels, listed or not); ok is false when neither is
// known.
func (d *KernelDiff) total(c *KernelCell) (float64, bool) {
	var sum float64
	var top *Kernel
	for i := range c.Kernels {
		k := &c.Kernels[i]
		sum += d.time(k, c)
		if top == nil || k.TimePct > top.TimePct {
			top = k
		}
	}
	switch {
	case c.Complete:
		return sum, true
	case top != nil && top.TimePct > 0:
		return d.time(top, c) * 100 / top.TimePct, true
	}
	return 0, false
}

// where says in which cells a row's kernel ran: "both", "only A", "only
// B", or, where a cell lists only its top kernels, "A; B: below top 10".
func (d *KernelDiff) where(r KernelDiffRow) string {
	switch {
	case r.A != nil && r.B != nil:
		return "both"
	case r.B == nil && d.B.Complete:
		return "only A"
	case r.A == nil && d.A.Complete:
		return "only B"
	case r.B == nil:
		return fmt.Sprintf("A; B: below top %d", len(d.B.Kernels))
	}
	return fmt.Sprintf("B; A: below top %d", len(d.A.Kernels))
}

func (d *KernelDiff) launches(k *Kernel, c *KernelCell) string {
	if k == nil {
		return "-"
	}
	if d.perIter {
		return formatSig(float64(k.Instances)/float64(c.Iterations), 3)
	}
	return fmt.Sprint(k.Instances)
}

// Table lays the diff out: a row per kernel, A's and B's time side by
// side with their ratio, launches, and whether the kernel ran in only one
// cell; a total row last. Notes say which kernels replaced which.
func (d *KernelDiff) Table() *Table {
	unit := "time/iter"
	calls := "launches/iter"
	if !d.perIter {
		unit, calls = "total time", "launches"
	}
	t := &Table{
		Title: fmt.Sprintf("Kernels: A = %s (%s) vs B = %s (%s)", d.A.ID, iterText(d.A.Iterations), d.B.ID, iterText(d.B.Iterations)),
		Columns: []Column{{Name: "kernel"}, {Name: "A " + unit, Right: true}, {Name: "B " + unit, Right: true},
			{Name: "B/A", Right: true}, {Name: "A " + calls, Right: true}, {Name: "B " + calls, Right: true}, {Name: "in"}},
	}
	show := func(v float64, k *Kernel, c *KernelCell) string {
		switch {
		case k != nil:
			return formatDuration(v)
		case c.Complete:
			return "-"
		}
		return "≤ " + formatDuration(d.bound(c))
	}
	display := displayNames(d.Rows)
	for _, r := range d.Rows {
		a, b := d.timeA(r), d.timeB(r)
		t.Rows = append(t.Rows, []string{display[r.Name], show(a, r.A, &d.A), show(b, r.B, &d.B), kernelRatio(a, b),
			d.launches(r.A, &d.A), d.launches(r.B, &d.B), d.where(r)})
	}
	ta, okA := d.total(&d.A)
	tb, okB := d.total(&d.B)
	total := func(v float64, ok bool) string { return pick(ok, formatDuration(v), "?") }
	t.Rows = append(t.Rows, []string{"total", total(ta, okA), total(tb, okB), kernelRatio(pick(okA, ta, -1), pick(okB, tb, -1)), "", "", ""})
	for _, rp := range d.Replaced {
		switch {
		case len(rp.Old) > 0 && len(rp.New) > 0:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: %s (A) replaced by %s (B)", rp.Category, joinNames(rp.Old, display), joinNames(rp.New, display)))
		case len(rp.Old) > 0:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: only in A: %s", rp.Category, joinNames(rp.Old, display)))
		default:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: only in B: %s", rp.Category, joinNames(rp.New, display)))
		}
	}
	for _, c := range []*KernelCell{&d.A, &d.B} {
		if !c.Complete {
			t.Notes = append(t.Notes, fmt.Sprintf("%s (%s) lists only its top %d kernels: one missing there ran less than the last listed, or not at all; the total is from the top kernel's share",
				pick(c == &d.A, "A", "B"), c.ID, len(c.Kernels)))
		}
	}
	if !d.perIter {
		t.Notes = append(t.Notes, "times are window totals: the number of profiled iterations is not known for both cells")
	}
	overlapped := func(c *KernelCell) bool {
		return slices.ContainsFunc(c.Kernels, func(k Kernel) bool { return k.ExclusiveNs < k.TotalNs })
	}
	if d.exclusive && (overlapped(&d.A) || overlapped(&d.B)) {
		t.Notes = append(t.Notes, "times are exclusive (kernels.csv's Exclusive Time): a kernel that started before the one ahead of it on its stream ended (programmatic dependent launch) counts from that one's end")
	}
	return t
}

// Render writes the diff's table as "text" or "markdown".
func (d *KernelDiff) Render(w io.Writer, format string) error {
	switch format {
	case "text":
		return d.Table().WriteText(w)
	case "markdown":
		return d.Table().WriteMarkdown(w, 2)
	}
	return fmt.Errorf("unknown format %q; expected text or markdown", format)
}

// How much of a kernel diff Changes tells: the few largest changes, and of
// kernels that ran in both cells only those that moved by at least 5 % of
// their time and 1 % of all kernel time, so that noise in small kernels
// does not crowd out what matters.
const (
	maxKernelChanges   = 3
	minKernelChange    = 0.05
	minKernelTimeShare = 0.01
)

// Changes says in a few lines what changed, for a comparison table or a
// diff: all kernel time first, then the largest changes by time per
// iteration, each once: kernels of one kind that ran in only one cell as
// a replacement ("GEMM: x (auto only, 41.0 µs/iter) replaced y (disable
// only, 57.0 µs/iter)"), and kernels whose time moved ("attention_f16:
// 50.2 µs → 43.8 µs per iteration (0.87x)"). The cells' Labels name them.
// changed is false when there was nothing to tell beyond all kernel time:
// the last line then says so.
func (d *KernelDiff) Changes() (lines []string, changed bool) {
	short, long := "/iter", "per iteration"
	if !d.perIter {
		short, long = " in the window", "in the window"
	}
	var out []string
	ta, okA := d.total(&d.A)
	tb, okB := d.total(&d.B)
	if okA && okB {
		out = append(out, fmt.Sprintf("kernel time: %s → %s %s (%s)", formatDuration(ta), formatDuration(tb), long, kernelRatio(ta, tb)))
	}
	scale := max(ta, tb)
	if !okA || !okB {
		scale = 0
	}
	display := displayNames(d.Rows)
	type change struct {
		size float64
		text string
	}
	var changes []change
	// timeOf is a kernel's time in the cell that ran it.
	timeOf := func(name string) float64 {
		i := slices.IndexFunc(d.Rows, func(r KernelDiffRow) bool { return r.Name == name })
		return max(d.timeA(d.Rows[i]), d.timeB(d.Rows[i]))
	}
	size := func(names []string) (s float64) {
		for _, n := range names {
			s += timeOf(n)
		}
		return s
	}
	// side names kernels that ran in one cell, each with its time when
	// there are several: "a 198 µs + b 30.2 µs (auto only, 228 µs/iter)".
	side := func(names []string, label string) string {
		var parts []string
		for i, n := range names {
			if i == maxKernelChanges {
				parts = append(parts, fmt.Sprintf("%d more", len(names)-i))
				break
			}
			parts = append(parts, display[n]+pick(len(names) > 1, " "+formatDuration(timeOf(n)), ""))
		}
		return fmt.Sprintf("%s (%s only, %s%s)", strings.Join(parts, " + "), label, formatDuration(size(names)), short)
	}
	for _, rp := range d.Replaced {
		var text string
		switch {
		case len(rp.Old) > 0 && len(rp.New) > 0:
			text = fmt.Sprintf("%s: %s replaced %s", rp.Category, side(rp.New, d.B.Label), side(rp.Old, d.A.Label))
		case len(rp.Old) > 0:
			text = rp.Category + ": " + side(rp.Old, d.A.Label)
		default:
			text = rp.Category + ": " + side(rp.New, d.B.Label)
		}
		changes = append(changes, change{size(rp.Old) + size(rp.New), text})
	}
	for _, r := range d.Rows {
		a, b := d.timeA(r), d.timeB(r)
		delta := math.Abs(b - a)
		var text string
		switch {
		case r.A != nil && r.B != nil:
			text = fmt.Sprintf("%s: %s → %s %s (%s)", display[r.Name], formatDuration(a), formatDuration(b), long, kernelRatio(a, b))
		// A kernel missing from a cell's top list took at most the last
		// listed kernel's time there: its change is counted as the least
		// it can be, so never overstated.
		case r.B == nil && !d.B.Complete:
			b = d.bound(&d.B)
			delta = max(a-b, 0)
			text = fmt.Sprintf("%s: %s → below %s's top %d (≤ %s) %s", display[r.Name], formatDuration(a), d.B.Label, len(d.B.Kernels), formatDuration(b), long)
		case r.A == nil && !d.A.Complete:
			a = d.bound(&d.A)
			delta = max(b-a, 0)
			text = fmt.Sprintf("%s: below %s's top %d (≤ %s) → %s %s", display[r.Name], d.A.Label, len(d.A.Kernels), formatDuration(a), formatDuration(b), long)
		default:
			continue // ran in only one cell: a replacement above
		}
		if delta > 0 && delta >= minKernelTimeShare*scale && delta >= minKernelChange*max(a, b) {
			changes = append(changes, change{delta, text})
		}
	}
	slices.SortStableFunc(changes, func(x, y change) int { return cmp.Compare(y.size, x.size) })
	for i, c := range changes {
		if i == maxKernelChanges {
			out = append(out, fmt.Sprintf("and %d more change%s", len(changes)-i, pick(len(changes)-i == 1, "", "s")))
			break
		}
		out = append(out, c.text)
	}
	if len(changes) == 0 {
		out = append(out, unchangedKernels)
	}
	return out, len(changes) > 0
}

// unchangedKernels says that a kernel diff found nothing to tell.
var unchangedKernels = fmt.Sprintf("no kernel ran in only one of them or moved by %.0f%% or more (and %.0f%% of kernel time)", 100*minKernelChange, 100*minKernelTimeShare)

// displayNames shortens kernel names for tables and sentences
// (kernelname.Short), keeping the full name where two kernels would
// otherwise look the same.
func displayNames(rows []KernelDiffRow) map[string]string {
	count := map[string]int{}
	for _, r := range rows {
		count[kernelname.Short(r.Name)]++
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.Name
		if s := kernelname.Short(r.Name); count[s] == 1 {
			out[r.Name] = s
		}
	}
	return out
}

// joinNames lists names as displayed.
func joinNames(names []string, display map[string]string) string {
	var out []string
	for _, name := range names {
		out = append(out, display[name])
	}
	return strings.Join(out, ", ")
}

func iterText(n int) string {
	if n <= 0 {
		return "iterations unknown"
	}
	return plural(n, "iteration")
}

// kernelRatio is B's time over A's: "0.87x", "-" when either is unknown.
func kernelRatio(a, b float64) string {
	if a <= 0 || b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", b/a)
}

// formatDuration prints nanoseconds with three significant digits in the
// unit that fits: "41.0 µs".
func formatDuration(ns float64) string {
	for _, u := range []struct {
		ns   float64
		unit string
	}{{1e9, " s"}, {1e6, " ms"}, {1e3, " µs"}} {
		if math.Abs(ns) >= u.ns {
			return formatSig(ns/u.ns, 3) + u.unit
		}
	}
	return formatSig(ns, 3) + " ns"
}

package htmlreport

import (
	"cmp"
	"slices"

	"github.com/xrun-dev/xrun/results"
)

// Bar is one bar of a chart: a kernel or a kind of kernel and its time.
type Bar struct {
	Label string `json:"label"`
	// Name is the kernel's full name where Label shortens it.
	Name  string  `json:"name,omitempty"`
	Value float64 `json:"value"`
	// Share is Value's share of all kernel time, where that is known.
	Share float64 `json:"share,omitempty"`
}

// KernelTimes are a profiled cell's kernels in one unit: per iteration
// when the window's iteration count is known, else window totals.
type KernelTimes struct {
	// Unit is "µs/iter" or "µs in the window".
	Unit string `json:"unit"`
	// Top are the top kernels (results.json keeps 10), largest first.
	Top []Bar `json:"top"`
	// Categories are the time by kind of kernel, largest first; kernels
	// below the top list that results.json does not name make an
	// "unlisted" bar when the top kernels' shares tell their time.
	Categories []Bar `json:"categories"`
	// Complete is whether the cell's list holds every kernel it ran.
	Complete bool `json:"complete"`
}

// KernelStage names the MoE stage of a kernel (router, grouping, expert
// GEMM, combine) or "" for a kernel outside MoE layers; the engine's
// profiler knows the names (engine/profile.MoEStage).
type KernelStage func(name string) string

// Category is the kind of kernel a chart files a kernel under: its MoE
// stage ("MoE router", ...) where stage knows one, else results'
// KernelCategory (GEMM, attention, norm, rope, MoE, other), copies and
// fills as "memory".
func Category(name string, stage KernelStage) string {
	if stage != nil {
		if st := stage(name); st != "" {
			return "MoE " + st
		}
	}
	if c := results.KernelCategory(name); c != "copy" {
		return c
	}
	return "memory"
}

// unlistedCategory files the kernel time of a cell whose list holds only
// its top kernels that no listed kernel accounts for.
const unlistedCategory = "unlisted (below the top kernels)"

// CellKernels lays out a cell's kernel summary for the charts; ok is false
// when the cell has none.
func CellKernels(c *results.Cell, stage KernelStage) (KernelTimes, bool) {
	k, ok := results.ProfileKernels(c, "")
	if !ok {
		return KernelTimes{}, false
	}
	return kernelTimes(k, stage), true
}

func kernelTimes(k results.KernelCell, stage KernelStage) KernelTimes {
	per := func(ns int64) float64 {
		if k.Iterations > 0 {
			return round6(float64(ns) / float64(k.Iterations) / 1e3)
		}
		return round6(float64(ns) / 1e3)
	}
	kt := KernelTimes{Unit: pick(k.Iterations > 0, "µs/iter", "µs in the window"), Complete: k.Complete}
	var sum int64
	var top *results.Kernel
	for i := range k.Kernels {
		sum += k.Kernels[i].TotalNs
		if top == nil || k.Kernels[i].TimePct > top.TimePct {
			top = &k.Kernels[i]
		}
	}
	// All kernel time: the sum of a complete list, else from the top
	// kernel's share of it (results.KernelDiff does the same).
	total := float64(sum)
	if !k.Complete && top != nil && top.TimePct > 0 {
		total = max(total, float64(top.TotalNs)*100/top.TimePct)
	}
	share := func(ns float64) float64 {
		if total <= 0 {
			return 0
		}
		return round6(ns / total)
	}
	ranked := slices.Clone(k.Kernels)
	slices.SortStableFunc(ranked, func(a, b results.Kernel) int { return cmp.Compare(b.TotalNs, a.TotalNs) })
	for i, kr := range ranked {
		if i == 10 {
			break
		}
		kt.Top = append(kt.Top, Bar{Label: clip(results.ShortKernelName(kr.Name), 48), Name: kr.Name, Value: per(kr.TotalNs), Share: share(float64(kr.TotalNs))})
	}
	byCat := map[string]int64{}
	for _, kr := range k.Kernels {
		byCat[Category(kr.Name, stage)] += kr.TotalNs
	}
	if rest := int64(total) - sum; !k.Complete && rest > 0 {
		byCat[unlistedCategory] += rest
	}
	for name, ns := range byCat {
		kt.Categories = append(kt.Categories, Bar{Label: name, Value: per(ns), Share: share(float64(ns))})
	}
	sortBars(kt.Categories)
	for i := range kt.Top {
		if kt.Top[i].Name == kt.Top[i].Label {
			kt.Top[i].Name = ""
		}
	}
	return kt
}

// sortBars orders bars by value, largest first, then by label.
func sortBars(b []Bar) {
	slices.SortFunc(b, func(x, y Bar) int { return cmp.Or(cmp.Compare(y.Value, x.Value), cmp.Compare(x.Label, y.Label)) })
}

// KernelPairChart is a compared pair of profiled cells: time by kind of
// kernel side by side, and what results' kernel diff says changed.
type KernelPairChart struct {
	Name       string    `json:"name"`
	Where      string    `json:"where,omitempty"`
	Base       string    `json:"base"`
	Value      string    `json:"value"`
	BaseCell   string    `json:"base_cell"`
	Cell       string    `json:"cell"`
	Unit       string    `json:"unit"`
	Categories []string  `json:"categories"`
	A          []float64 `json:"a"`
	B          []float64 `json:"b"`
	Changes    []string  `json:"changes"`
}

// kernelPair sets two cells' kernel time by category side by side, with
// the changes results' kernel diff found in them (the caller has them:
// the report's comparisons and the diff pair the cells); the unit is per
// iteration only when both cells know their iteration count.
func kernelPair(name string, a, b *results.Cell, la, lb string, changes []string, stage KernelStage) (KernelPairChart, bool) {
	ka, okA := results.ProfileKernels(a, la)
	kb, okB := results.ProfileKernels(b, lb)
	if !okA || !okB {
		return KernelPairChart{}, false
	}
	if ka.Iterations <= 0 || kb.Iterations <= 0 {
		ka.Iterations, kb.Iterations = 0, 0
	}
	ta, tb := kernelTimes(ka, stage), kernelTimes(kb, stage)
	ch := KernelPairChart{Name: name, Base: la, Value: lb, BaseCell: a.ID, Cell: b.ID, Unit: ta.Unit, Changes: changes}
	va, vb := map[string]float64{}, map[string]float64{}
	for _, c := range ta.Categories {
		va[c.Label] = c.Value
	}
	for _, c := range tb.Categories {
		vb[c.Label] = c.Value
	}
	var cats []Bar
	for _, c := range append(slices.Clone(ta.Categories), tb.Categories...) {
		if !slices.ContainsFunc(cats, func(x Bar) bool { return x.Label == c.Label }) {
			cats = append(cats, Bar{Label: c.Label, Value: max(va[c.Label], vb[c.Label])})
		}
	}
	sortBars(cats)
	for _, c := range cats {
		ch.Categories = append(ch.Categories, c.Label)
		ch.A = append(ch.A, va[c.Label])
		ch.B = append(ch.B, vb[c.Label])
	}
	return ch, true
}

// clip shortens a label for a chart's axis; the tables keep it whole.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

package results

import (
	"bytes"
	"cmp"
	"errors"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// synthKernel is one kernel of a synthetic GPU profile: its time and
// launches per iteration.
type synthKernel struct {
	name      string
	nsPerIter float64
	launches  int
}

// synthProfile builds a profile as the runner stores it: the top 10
// kernels of a window of iters iterations, how many there were in all,
// shares of all kernel time. Each kernel's time wobbles by up to ±2 %
// with the cell, as measured times do.
func synthProfile(cell string, iters int, ks []synthKernel) *Profile {
	var all float64
	for _, k := range ks {
		all += k.nsPerIter
	}
	var kernels []Kernel
	for _, k := range ks {
		h := fnv.New32a()
		h.Write([]byte(cell + "/" + k.name))
		wobble := 1 + 0.04*(float64(h.Sum32()%1000)/1000-0.5)
		total := int64(math.Round(k.nsPerIter * wobble * float64(iters)))
		n := int64(k.launches * iters)
		avg := float64(total) / float64(n)
		kernels = append(kernels, Kernel{Name: k.name, TimePct: 100 * k.nsPerIter * wobble / all, TotalNs: total, Instances: n,
			AvgNs: avg, MedNs: avg * 0.98, MinNs: int64(avg * 0.9), MaxNs: int64(avg * 1.3), StdDevNs: avg * 0.05})
	}
	slices.SortFunc(kernels, func(a, b Kernel) int {
		return cmp.Or(cmp.Compare(b.TotalNs, a.TotalNs), strings.Compare(a.Name, b.Name))
	})
	p := &Profile{Window: "40-49", Iterations: iters, Kernels: kernels[:min(10, len(kernels))], DistinctKernels: len(kernels)}
	for _, k := range kernels[len(p.Kernels):] {
		p.OtherKernels = append(p.OtherKernels, KernelTime{Name: k.Name, TotalNs: k.TotalNs, Instances: k.Instances})
	}
	return p
}

// gpuKernels are a TinyLlama decode iteration's kernels on an H100 at a
// batch size: the engine's own GEMMs (a GEMV at batch 1) for gemm_plugin
// disable, cuBLASLt's for auto. newAttention swaps in a faster attention
// kernel, as a code change would.
func gpuKernels(bs int, plugin string, newAttention bool) []synthKernel {
	b := float64(bs)
	ks := []synthKernel{
		{"attention_f16_d64_r8", 20e3 + 500*b, 22},
		{"add_rmsnorm_f16", 8e3 + 50*b, 43},
		{"rope_f16", 3e3 + 10*b, 22},
		{"silu_mul_f16", 4e3 + 40*b, 22},
		{"kv_cache_append_f16", 2.5e3 + 5*b, 22},
		{"add_f16", 1.5e3 + 2*b, 22},
		{"argmax_f16", 2e3 + 20*b, 1},
		{"embedding_f16", 1e3, 1},
		{"rmsnorm_f16", 500, 1},
		{"fill_f16", 300, 1},
	}
	if newAttention {
		ks[0] = synthKernel{"attention_tc_f16_d64", (20e3 + 500*b) * 0.7, 22}
	}
	switch {
	case plugin == "auto":
		ks = append(ks, synthKernel{"nvjet_sm90_hsh_112x64_64x9_4x1_v_bz_TNN", 30e3 + 200*b, 22},
			synthKernel{"nvjet_sm90_hsh_64x32_64x16_2x1_v_bz_splitK_TNT", 180e3 + 900*b, 67},
			synthKernel{"void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false, float, __half, __half, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*)", 4e3 + 10*b, 67})
	case bs == 1:
		ks = append(ks, synthKernel{"gemv_f16", 190e3, 89})
	default:
		ks = append(ks, synthKernel{"gemm_m_f16", 150e3 + 1000*b, 89}, synthKernel{"gemm_reduce_f16", 100e3 + 900*b, 88})
	}
	return ks
}

// gemmProfiledStudy is gemmStudy with every cell profiled (iterations
// 40-49) and a GPU kernel summary per cell that ran. newAttention is the
// next run of the same study after a change to the attention kernel.
func gemmProfiledStudy(seed uint64, newAttention bool) *Results {
	s := gemmStudy()
	s.seed = seed
	for _, c := range s.cells {
		c.params["profile_window"] = "40-49"
	}
	if newAttention {
		s.cells[2].throttled = []string{"hw_slowdown"} // bs16 auto
	}
	r := s.build()
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Status != StatusOK {
			continue
		}
		c.Profile = synthProfile(c.ID, 10, gpuKernels(c.Params["batch_size"].(int), c.Params["gemm_plugin"].(string), newAttention))
	}
	return r
}

// replacedGEMM is the line saying which GEMM kernels auto ran instead of
// disable's: cuBLASLt's three, each with its time, then the own ones.
var replacedGEMM = regexp.MustCompile(`^GEMM: nvjet_sm90_hsh_64x32_64x16_2x1_v_bz_splitK_TNT \S+ µs \+ nvjet_sm90_hsh_112x64_64x9_4x1_v_bz_TNN \S+ µs \+ ` +
	`cublasLt::splitKreduce_kernel<…> \S+ µs \(auto only, \S+ µs/iter\) replaced (gemv_f16|gemm_m_f16 \S+ µs \+ gemm_reduce_f16 \S+ µs) \(disable only, \S+ µs/iter\)$`)

// TestKernelChangesReport renders the profiled gemm study's report: under
// the gemm_plugin comparison, per batch size, which GEMM kernels replaced
// which and all kernel time, in the text report as in results.md.
func TestKernelChangesReport(t *testing.T) {
	r := loadFixture(t, "gemm-profiled")
	// The markdown is the fixture's results.md, which TestFixtures checks.
	var b bytes.Buffer
	if err := Render(&b, "text", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "report-gemm-profiled.text.golden", b.Bytes())
	rep := BuildReport(r, RenderOptions{})
	var where []string
	for _, p := range rep.Comparisons[0].Kernels {
		where = append(where, p.Where)
		if len(p.Changes) < 2 || !replacedGEMM.MatchString(p.Changes[1]) {
			t.Errorf("%s: %q; want the GEMM replacement second", p.Where, p.Changes)
		}
	}
	// Batch 256 has no pair: its auto cell failed.
	if want := []string{"batch_size=1", "batch_size=16", "batch_size=64"}; !slices.Equal(where, want) {
		t.Errorf("kernel pairs at %v, want %v", where, want)
	}
}

// TestKernelChangesDiff: a new attention kernel shows in every profiled
// cell of xrun diff, which still exits 0 (kernels never make a
// regression), and the throttled cell is still flagged.
func TestKernelChangesDiff(t *testing.T) {
	d := diffFixtures(t, "gemm-profiled", "gemm-profiled-new", DiffOptions{})
	if d.Regression || d.Err() != nil {
		t.Errorf("regression claimed for a kernel change: %+v", d.Counts)
	}
	if d.Counts.Throttled != 1 {
		t.Errorf("throttled = %d, want 1", d.Counts.Throttled)
	}
	n := 0
	for _, c := range d.Cells {
		if len(c.KernelChanges) == 0 {
			continue
		}
		n++
		if !slices.ContainsFunc(c.KernelChanges, func(l string) bool {
			return strings.HasPrefix(l, "attention: attention_tc_f16_d64 (new only, ") && strings.Contains(l, " replaced attention_f16_d64_r8 (old only, ")
		}) {
			t.Errorf("%s: %q; want the attention kernel replaced", c.ID, c.KernelChanges)
		}
	}
	if n != 7 {
		t.Errorf("%d cells with kernel changes, want the 7 that ran", n)
	}
	for _, format := range DiffFormats {
		var b bytes.Buffer
		if err := d.Render(&b, format); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, "diff-kernels."+format+".golden", b.Bytes())
	}
	if err := d.Render(&bytes.Buffer{}, "html"); err == nil {
		t.Error("diff format html accepted")
	}
	// Two runs with the same kernels: the cells are counted, not listed.
	same := diffFixtures(t, "gemm-profiled", "gemm-profiled", DiffOptions{})
	var b bytes.Buffer
	same.WriteText(&b)
	if same.KernelsUnchanged != 7 || !strings.Contains(b.String(), "\n  7 profiled cells: no kernel ran in only one of them or moved by 5% or more (and 1% of kernel time)\n") {
		t.Errorf("unchanged kernels: %d cells\n%s", same.KernelsUnchanged, b.String())
	}
	// A slowdown on top of the kernel change is still a regression.
	slow := loadFixture(t, "gemm-profiled-new")
	for i := range slow.Cells {
		for _, rep := range slow.Cells[i].Repeats {
			rep["request_throughput_req_s"] *= 0.8
		}
	}
	d = Diff(loadFixture(t, "gemm-profiled"), slow, DiffOptions{Threshold: DefaultThreshold, Metrics: []string{"request_throughput_req_s"}})
	if !errors.Is(d.Err(), ErrRegression) {
		t.Errorf("a 20%% slowdown is not a regression: %+v", d.Counts)
	}
}

func kernel(name string, total, n int64, pct float64) Kernel {
	return Kernel{Name: name, TotalNs: total, Instances: n, TimePct: pct}
}

// TestDiffKernels covers what the diff may conclude from lists that are
// complete (kernels.csv, or distinct_kernels recorded) and from top lists.
func TestDiffKernels(t *testing.T) {
	a := KernelCell{ID: "a", Label: "disable", Iterations: 10, Complete: true, Kernels: []Kernel{
		kernel("gemm_m_f16", 2e6, 890, 50), kernel("attention_f16", 1e6, 220, 25), kernel("rmsnorm_f16", 6e5, 430, 15), kernel("rope_f16", 4e5, 220, 10)}}
	b := KernelCell{ID: "b", Label: "auto", Iterations: 10, Complete: true, Kernels: []Kernel{
		kernel("nvjet_tst_128x64", 1e6, 220, 40), kernel("attention_f16", 9e5, 220, 36), kernel("rmsnorm_f16", 6.1e5, 430, 24)}}
	for _, tc := range []struct {
		name       string
		a, b       KernelCell
		replaced   string
		changes    []string
		tableNotes int
	}{
		{"complete", a, b, "GEMM: [gemm_m_f16] -> [nvjet_tst_128x64]; rope: [rope_f16] -> []", []string{
			"kernel time: 400 µs → 251 µs per iteration (0.63x)",
			"GEMM: nvjet_tst_128x64 (auto only, 100 µs/iter) replaced gemm_m_f16 (disable only, 200 µs/iter)",
			"rope: rope_f16 (disable only, 40.0 µs/iter)",
			"attention_f16: 100 µs → 90.0 µs per iteration (0.90x)",
		}, 2},
		// gemm_m_f16 may have run in b below its top 3, nvjet did not
		// run in a; rope_f16 took less in a than b's third kernel, so
		// nothing is known of its change.
		{"b lists its top kernels only", a, func() KernelCell { c := b; c.Complete = false; return c }(), "GEMM: [] -> [nvjet_tst_128x64]",
			[]string{
				"kernel time: 400 µs → 250 µs per iteration (0.62x)",
				"gemm_m_f16: 200 µs → below auto's top 3 (≤ 61.0 µs) per iteration",
				"GEMM: nvjet_tst_128x64 (auto only, 100 µs/iter)",
				"attention_f16: 100 µs → 90.0 µs per iteration (0.90x)",
			}, 2},
		{"neither complete", func() KernelCell { c := a; c.Complete = false; return c }(), func() KernelCell { c := b; c.Complete = false; return c }(), "",
			[]string{
				"kernel time: 400 µs → 250 µs per iteration (0.62x)",
				"gemm_m_f16: 200 µs → below auto's top 3 (≤ 61.0 µs) per iteration",
				"nvjet_tst_128x64: below disable's top 4 (≤ 40.0 µs) → 100 µs per iteration",
				"attention_f16: 100 µs → 90.0 µs per iteration (0.90x)",
			}, 2},
		{"iterations unknown", func() KernelCell { c := a; c.Iterations = 0; return c }(), b, "GEMM: [gemm_m_f16] -> [nvjet_tst_128x64]; rope: [rope_f16] -> []", []string{
			"kernel time: 4.00 ms → 2.51 ms in the window (0.63x)",
			"GEMM: nvjet_tst_128x64 (auto only, 1.00 ms in the window) replaced gemm_m_f16 (disable only, 2.00 ms in the window)",
			"rope: rope_f16 (disable only, 400 µs in the window)",
			"attention_f16: 1.00 ms → 900 µs in the window (0.90x)",
		}, 3},
		{"unchanged", a, a, "", []string{
			"kernel time: 400 µs → 400 µs per iteration (1.00x)",
			"no kernel ran in only one of them or moved by 5% or more (and 1% of kernel time)",
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DiffKernels(tc.a, tc.b)
			var rp []string
			for _, r := range d.Replaced {
				rp = append(rp, r.Category+": ["+strings.Join(r.Old, " ")+"] -> ["+strings.Join(r.New, " ")+"]")
			}
			if got := strings.Join(rp, "; "); got != tc.replaced {
				t.Errorf("replaced %q, want %q", got, tc.replaced)
			}
			got, changed := d.Changes()
			if changed != (tc.name != "unchanged") {
				t.Errorf("changed = %v", changed)
			}
			if !slices.Equal(got, tc.changes) {
				t.Errorf("changes:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.changes, "\n  "))
			}
			if n := len(d.Table().Notes); n != tc.tableNotes {
				t.Errorf("table notes %q, want %d", d.Table().Notes, tc.tableNotes)
			}
		})
	}
}

// TestKernelTableTopLists: where a cell lists only its top kernels, the
// table bounds what it cannot know and says why.
func TestKernelTableTopLists(t *testing.T) {
	a := KernelCell{ID: "a", Iterations: 2, Kernels: []Kernel{kernel("x", 400, 2, 40), kernel("y", 200, 2, 20)}}
	b := KernelCell{ID: "b", Iterations: 2, Complete: true, Kernels: []Kernel{kernel("x", 300, 2, 60), kernel("z", 200, 2, 40)}}
	var buf bytes.Buffer
	if err := DiffKernels(a, b).Render(&buf, "text"); err != nil {
		t.Fatal(err)
	}
	want := `Kernels: A = a (2 iterations) vs B = b (2 iterations)
kernel  A time/iter  B time/iter    B/A  A launches/iter  B launches/iter  in
------  -----------  -----------  -----  ---------------  ---------------  -----------------
x            200 ns       150 ns  0.75x             1.00             1.00  both
y            100 ns            -      -             1.00                -  only A
z          ≤ 100 ns       100 ns      -                -             1.00  B; A: below top 2
total        500 ns       250 ns  0.50x
  other: only in A: y
  A (a) lists only its top 2 kernels: one missing there ran less than the last listed, or not at all; the total is from the top kernel's share
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestDistinctKernelsChecked: a count below the kernels listed is refused
// by the writer and by the reader (with its position); a file without
// the count, as written before it existed, reads.
func TestDistinctKernelsChecked(t *testing.T) {
	r := gemmProfiledStudy(1, false)
	p := r.Cells[0].Profile
	p.DistinctKernels = 3
	if _, err := Marshal(r); err == nil || !strings.Contains(err.Error(), "profile.distinct_kernels: 3; expected at least the 13 kernels listed in kernels and other_kernels") {
		t.Errorf("writer: %v", err)
	}
	p.DistinctKernels = 13
	data, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte(`"distinct_kernels": 13`), []byte(`"distinct_kernels": 12`), 1)
	if _, err := Parse(bad, "bad.json"); err == nil || !strings.Contains(err.Error(), "bad.json:") ||
		!strings.Contains(err.Error(), "cells[0].profile.distinct_kernels: 12; expected at least the 13 kernels listed") {
		t.Errorf("reader: %v", err)
	}
	p.DistinctKernels, p.OtherKernels = 0, nil
	data, err = Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	old, err := Parse(data, "old.json")
	if err != nil {
		t.Fatalf("a file without distinct_kernels: %v", err)
	}
	if k, ok := ProfileKernels(&old.Cells[0], ""); !ok || k.Complete || len(k.Kernels) != 10 {
		t.Errorf("an old file's kernels: complete %v, %d kernels; want its top 10, not complete", k.Complete, len(k.Kernels))
	}
	if k, ok := ProfileKernels(&r.Cells[3], ""); !ok || !k.Complete || len(k.Kernels) != 12 {
		t.Errorf("a new file's kernels: complete %v, %d kernels; want all 12", k.Complete, len(k.Kernels))
	}
}

// TestDiffKernelsExclusive: where both cells list every kernel with its
// exclusive time, the diff compares those (a SwiGLU that waited 17 us for
// its GEMM under programmatic dependent launch shows its own 3 us) and
// says so; where one cell lacks them, Nsight's totals, as before.
func TestDiffKernelsExclusive(t *testing.T) {
	cell := func(id string, swiglu, swigluExcl int64, withExcl bool) KernelCell {
		ks := []Kernel{{Name: "gemm", TimePct: 50, TotalNs: 20000, Instances: 1, ExclusiveNs: 20000}, {Name: "swiglu", TimePct: 50, TotalNs: swiglu, Instances: 1, ExclusiveNs: swigluExcl}}
		if !withExcl {
			for i := range ks {
				ks[i].ExclusiveNs = 0
			}
		}
		return KernelCell{ID: id, Iterations: 1, Kernels: ks, Complete: true}
	}
	d := DiffKernels(cell("a", 20000, 3000, true), cell("b", 4000, 3500, true))
	var b bytes.Buffer
	if err := d.Render(&b, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3.00 µs", "3.50 µs", "times are exclusive"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exclusive diff does not say %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := DiffKernels(cell("a", 20000, 3000, true), cell("b", 4000, 0, false)).Render(&b, "text"); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "20.0 µs") || strings.Contains(s, "exclusive") {
		t.Errorf("one cell without exclusive times: want Nsight's totals and no note:\n%s", s)
	}
}

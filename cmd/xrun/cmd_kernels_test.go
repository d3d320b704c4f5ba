package main

import (
	"cmp"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// kernelsDir builds a results directory with two profiled cells (gemm
// disable and auto), their kernels.csv, and results.json saying how many
// iterations each window covered; plus an unprofiled cell.
func kernelsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(id string, stats []profile.KernelStat) {
		cdir := layout.CellDir(dir, id)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if stats == nil {
			return
		}
		f, err := os.Create(filepath.Join(cdir, layout.KernelsFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := profile.WriteKernelsCSV(f, stats); err != nil {
			t.Fatal(err)
		}
	}
	k := func(name string, total, n int64) profile.KernelStat {
		return profile.KernelStat{Name: name, TotalNs: total, Instances: n, AvgNs: float64(total) / float64(n), MedNs: float64(total) / float64(n),
			MinNs: total / n, MaxNs: total / n}
	}
	write("bs64-disable-1a741378", []profile.KernelStat{
		k("gemm_m_f16", 21037495, 890), k("gemm_reduce_f16", 15800101, 880), k("attention_f16_d64_r8", 5020434, 220), k("add_rmsnorm_f16", 1205541, 430)})
	write("bs64-auto-e58f5eab", []profile.KernelStat{
		k("attention_f16_d64_r8", 4379501, 220), k("nvjet_sm90_hsh_112x64_64x9_4x1_v_bz_TNN", 3527029, 220),
		k("void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false, float, __half, __half, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*)", 494000, 220),
		k("add_rmsnorm_f16", 1018986, 430)})
	write("bs64-none-00c0ffee", nil)
	rep := []results.Metrics{{"num_requests": 64}} // an ok cell has a timed repeat
	r := &results.Results{Name: "gemm", Cells: []results.Cell{
		{ID: "bs64-disable-1a741378", Status: results.StatusOK, Repeats: rep, Profile: &results.Profile{Window: "40-49", Iterations: 10}},
		{ID: "bs64-auto-e58f5eab", Status: results.StatusOK, Repeats: rep, Profile: &results.Profile{Window: "40-49", Iterations: 10}},
		{ID: "bs64-none-00c0ffee", Status: results.StatusOK, Repeats: rep},
	}}
	if err := results.WriteFile(filepath.Join(dir, layout.JSONFile), r); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestKernels(t *testing.T) {
	dir := kernelsDir(t)
	for _, format := range []string{"text", "markdown"} {
		r := runCLI(t, nil, "kernels", dir, "bs64-disable", "bs64-auto-e58f5eab", "--format", format)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		golden.Check(t, "cmd_kernels/gemm."+format, r.stdout)
	}
	// Without results.json (a run still going) the cells' cell.json say
	// how many iterations; without either, totals are compared.
	os.Remove(filepath.Join(dir, layout.JSONFile))
	os.WriteFile(filepath.Join(layout.CellDir(dir, "bs64-auto-e58f5eab"), layout.CellFile), []byte(`{"id":"bs64-auto-e58f5eab","profile":{"window":"40-49","iterations":10}}`), 0o644)
	r := runCLI(t, nil, "kernels", dir, "bs64-d", "bs64-a")
	if r.code != 0 || !strings.Contains(r.stdout, "A = bs64-disable-1a741378 (iterations unknown) vs B = bs64-auto-e58f5eab (10 iterations)") ||
		!strings.Contains(r.stdout, "window totals") {
		t.Errorf("exit %d without results.json:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestKernelsFromResults: where kernels.csv is gone (results copied
// without their cells' artifacts), the kernels results.json keeps for the
// cell serve, the top list and the others alike, and the diff is the one
// the files give; the debug log says which source each cell came from.
func TestKernelsFromResults(t *testing.T) {
	dir := kernelsDir(t)
	r, _, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		path := filepath.Join(layout.CellDir(dir, c.ID), layout.KernelsFile)
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		stats, err := profile.ReadKernelsCSV(f, path)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The worker's split: two kernels in full, the others by name,
		// time and launches.
		for j, s := range stats {
			if j < 2 {
				c.Profile.Kernels = append(c.Profile.Kernels, results.Kernel(s))
			} else {
				c.Profile.OtherKernels = append(c.Profile.OtherKernels, results.KernelTime{Name: s.Name, TotalNs: s.TotalNs, Instances: s.Instances})
			}
		}
		c.Profile.DistinctKernels = len(stats)
		if c.ID == "bs64-auto-e58f5eab" {
			continue // this one keeps its kernels.csv
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if err := results.WriteFile(filepath.Join(dir, layout.JSONFile), r); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "cmd_kernels", "gemm.text"))
	if err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, nil, "kernels", dir, "bs64-disable", "bs64-auto", "--log-level", "debug", "--log-format", "json")
	if res.code != 0 || res.stdout != string(want) {
		t.Errorf("exit %d; stdout differs from testdata/cmd_kernels/gemm.text:\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, l := range []string{`"cell":"bs64-disable-1a741378","source":"recorded profile (kernels.csv missing)"`,
		`"cell":"bs64-auto-e58f5eab","source":"` + filepath.Join(layout.CellDir(dir, "bs64-auto-e58f5eab"), layout.KernelsFile) + `"`} {
		if !strings.Contains(res.stderr, l) {
			t.Errorf("debug log lacks %s:\n%s", l, res.stderr)
		}
	}
	// At the default level the source is not mentioned.
	if res := runCLI(t, nil, "kernels", dir, "bs64-disable", "bs64-auto"); res.code != 0 || strings.Contains(res.stderr, "source") {
		t.Errorf("exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestKernelsErrors(t *testing.T) {
	dir := kernelsDir(t)
	bad := filepath.Join(layout.CellDir(dir, "bs64-auto-e58f5eab"), layout.KernelsFile)
	for _, tc := range []struct {
		name string
		args []string
		want string
		prep func()
	}{
		{"no cells", []string{t.TempDir(), "a", "b"}, "not a results directory with a cells/ folder", nil},
		{"unknown cell", []string{dir, "bs128", "bs64-auto"}, `no cell "bs128"; cells: bs64-auto-e58f5eab, bs64-disable-1a741378, bs64-none-00c0ffee`, nil},
		{"ambiguous", []string{dir, "bs64", "bs64-auto"}, `"bs64" names 3 cells`, nil},
		{"unprofiled", []string{dir, "bs64-none", "bs64-auto"}, "cell bs64-none-00c0ffee has no kernels.csv and no kernels recorded in results.json: it was not profiled", nil},
		{"format", []string{dir, "bs64-disable", "bs64-auto", "--format", "html"}, `--format: "html"; expected text or markdown`, nil},
		{"args", []string{dir, "bs64-disable"}, "accepts 3 arg(s)", nil},
		{"malformed", []string{dir, "bs64-disable", "bs64-auto"}, bad + `:2: column "Total Time (ns)": "x" is not a non-negative integer`, func() {
			os.WriteFile(bad, []byte("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n1,x,1,1,1,1,1,0,k\n"), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep()
			}
			r := runCLI(t, nil, append([]string{"kernels"}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("printed %q before failing", r.stdout)
			}
		})
	}
}

// TestKernelsReadmeExample keeps the README's example output in step with
// the golden file it was copied from.
func TestKernelsReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "cmd_kernels", "gemm.text"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "$ xrun kernels results/profile bs64-disable bs64-auto\n"+string(want)+"```") {
		t.Error("README.md's xrun kernels example differs from testdata/cmd_kernels/gemm.text")
	}
}

// normaliseKernels rewrites the kernel summaries in a real run's
// results.json so that they depend only on the kernels' names and
// launches, as engine/profile's golden tests do with the ops: each launch
// takes a time derived from the kernel's name, and the CPU GEMM's name
// drops the instruction set it was built for. Then results.md is written
// again from them.
func normaliseKernels(t *testing.T, dir string) {
	t.Helper()
	r, _, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Cells {
		p := r.Cells[i].Profile
		if p == nil {
			continue
		}
		all := p.Kernels
		for _, o := range p.OtherKernels {
			all = append(all, results.Kernel{Name: o.Name, TotalNs: o.TotalNs, Instances: o.Instances})
		}
		if len(all) != p.DistinctKernels {
			t.Fatalf("cell %s: %d kernels stored of %d", r.Cells[i].ID, len(all), p.DistinctKernels)
		}
		var sum int64
		for j := range all {
			k := &all[j]
			if strings.HasPrefix(k.Name, "cpu_gemm_blocked") {
				k.Name = "cpu_gemm_blocked_6x16"
			}
			h := fnv.New32a()
			h.Write([]byte(k.Name))
			ns := int64(500 + h.Sum32()%4000)
			*k = results.Kernel{Name: k.Name, TotalNs: ns * k.Instances, Instances: k.Instances, AvgNs: float64(ns), MedNs: float64(ns), MinNs: ns, MaxNs: ns}
			sum += k.TotalNs
		}
		slices.SortFunc(all, func(a, b results.Kernel) int {
			return cmp.Or(cmp.Compare(b.TotalNs, a.TotalNs), strings.Compare(a.Name, b.Name))
		})
		p.OtherKernels = nil
		for j := range all {
			all[j].TimePct = 100 * float64(all[j].TotalNs) / float64(sum)
			if j >= profile.DefaultTopKernels {
				p.OtherKernels = append(p.OtherKernels, results.KernelTime{Name: all[j].Name, TotalNs: all[j].TotalNs, Instances: all[j].Instances})
			}
		}
		p.Kernels = all[:min(len(all), profile.DefaultTopKernels)]
	}
	if err := results.WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
}

// section cuts text from the line starting with start to the next line
// starting with end (or the end of text).
func section(text, start, end string) string {
	i := strings.Index(text, "\n"+start)
	if i < 0 {
		return ""
	}
	s := text[i+1:]
	if j := strings.Index(s[len(start):], "\n"+end); j >= 0 {
		s = s[:len(start)+j+1]
	}
	return s
}

// TestKernelChangesCPU runs gemm_plugin auto vs disable on the CPU
// backend, profiled: results.md says under the comparison that the
// blocked GEMM replaced the plain one, in both models (tiny-moe runs 11
// kernels, one more than results.json lists in full); xrun kernels says
// the same from kernels.csv; and xrun diff against a run whose GEMM
// changed reports it, exiting 0.
func TestKernelChangesCPU(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if r := runStudy(t, studyEnv(t), "run", "testdata/cmd_kernels/profile.yaml", "--out", dir); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	var disable, auto string
	_, cells := loadResults(t, dir)
	for id, c := range cells {
		if c.Params["model"] == "tiny-llama" {
			disable, auto = pick(c.Params["gemm_plugin"] == "disable", id, disable), pick(c.Params["gemm_plugin"] == "auto", id, auto)
		}
	}
	r := runCLI(t, nil, "kernels", dir, disable, auto)
	if r.code != 0 || !regexp.MustCompile(`GEMM: cpu_gemm_plain \(A\) replaced by cpu_gemm_blocked_\w+ \(B\)`).MatchString(r.stdout) {
		t.Errorf("xrun kernels: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	normaliseKernels(t, dir)
	md, err := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "cmd_kernels/cpu-report.markdown", section(string(md), "### Kernel changes", "## "))
	r = runCLI(t, nil, "report", dir, "--format", "text")
	golden.Check(t, "cmd_kernels/cpu-report.text", section(r.stdout, "gemm_plugin: auto vs disable (baseline): kernel changes", "\n"))

	// The next run: the blocked GEMM of tiny-llama's auto cell replaced
	// by one twice as slow.
	next, _, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range next.Cells {
		if c := &next.Cells[i]; c.ID == auto {
			for j := range c.Profile.Kernels {
				if k := &c.Profile.Kernels[j]; k.Name == "cpu_gemm_blocked_6x16" {
					k.Name, k.TotalNs = "cpu_gemm_blocked_4x8", 2*k.TotalNs
				}
			}
		}
	}
	newDir := filepath.Join(t.TempDir(), "next")
	if err := results.WriteDir(newDir, next); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "markdown"} {
		r = runCLI(t, nil, "diff", dir, newDir, "--format", format)
		if r.code != exitOK {
			t.Fatalf("diff: exit %d, want 0: kernels never make a regression\n%s", r.code, r.stderr)
		}
		start := pick(format == "text", "Kernel changes, old → new", "### Kernel changes")
		golden.Check(t, "cmd_kernels/cpu-diff."+format, section(r.stdout, start, pick(format == "text", "\n", "<details>")))
	}
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

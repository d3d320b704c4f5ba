package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/runner"
)

// kernelsDir builds a results directory with two profiled cells (gemm
// disable and auto), their kernels.csv, and results.json saying how many
// iterations each window covered; plus an unprofiled cell.
func kernelsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(id string, stats []profile.KernelStat) {
		cdir := runner.CellDir(dir, id)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if stats == nil {
			return
		}
		f, err := os.Create(filepath.Join(cdir, profile.KernelsFile))
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
	r := &results.Results{Name: "gemm", Cells: []results.Cell{
		{ID: "bs64-disable-1a741378", Status: results.StatusOK, Profile: &results.Profile{Window: "40-49", Iterations: 10}},
		{ID: "bs64-auto-e58f5eab", Status: results.StatusOK, Profile: &results.Profile{Window: "40-49", Iterations: 10}},
		{ID: "bs64-none-00c0ffee", Status: results.StatusOK},
	}}
	if err := results.WriteFile(filepath.Join(dir, results.JSONFile), r); err != nil {
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
		goldenCLI(t, "cmd_kernels/gemm."+format, r.stdout)
	}
	// Without results.json (a run still going) the cells' cell.json say
	// how many iterations; without either, totals are compared.
	os.Remove(filepath.Join(dir, results.JSONFile))
	os.WriteFile(filepath.Join(runner.CellDir(dir, "bs64-auto-e58f5eab"), runner.CellFile), []byte(`{"id":"bs64-auto-e58f5eab","profile":{"window":"40-49","iterations":10}}`), 0o644)
	r := runCLI(t, nil, "kernels", dir, "bs64-d", "bs64-a")
	if r.code != 0 || !strings.Contains(r.stdout, "A = bs64-disable-1a741378 (iterations unknown) vs B = bs64-auto-e58f5eab (10 iterations)") ||
		!strings.Contains(r.stdout, "window totals") {
		t.Errorf("exit %d without results.json:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestKernelsErrors(t *testing.T) {
	dir := kernelsDir(t)
	bad := filepath.Join(runner.CellDir(dir, "bs64-auto-e58f5eab"), profile.KernelsFile)
	for _, tc := range []struct {
		name string
		args []string
		want string
		prep func()
	}{
		{"no cells", []string{t.TempDir(), "a", "b"}, "not a results directory with a cells/ folder", nil},
		{"unknown cell", []string{dir, "bs128", "bs64-auto"}, `no cell "bs128"; cells: bs64-auto-e58f5eab, bs64-disable-1a741378, bs64-none-00c0ffee`, nil},
		{"ambiguous", []string{dir, "bs64", "bs64-auto"}, `"bs64" names 3 cells`, nil},
		{"unprofiled", []string{dir, "bs64-none", "bs64-auto"}, "cell bs64-none-00c0ffee has no kernels.csv: it was not profiled", nil},
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

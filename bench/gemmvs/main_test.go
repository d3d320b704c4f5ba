package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestGolden: the table and counts for a small log, in which the own GEMM
// is inside the margin at one shape, outside at two (GPT-OSS-20B's o, and
// Llama-3.1-8B's down in FP8), with one sample a side at a third (too few
// for a verdict); forced tiles, cuBLASLt's bf16, a shape without its
// reference and M = 1 (below -from's 64) are left out. The plans logged
// under -test.v show in a column: the own GEMM's at each shape, "-" where
// none was logged.
func TestGolden(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"testdata/sample.log"}, &out, &errb)
	if code != 1 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 1 (shapes outside) and nothing", code, errb.String())
	}
	checkGolden(t, "sample.golden", out.Bytes())
	// A wider margin: every counted shape within, exit 0.
	out.Reset()
	if code := run([]string{"-within", "40", "testdata/sample.log"}, &out, &errb); code != 0 {
		t.Errorf("-within 40: exit %d, want 0\n%s", code, out.String())
	}
	// ns/op, which benchfmt keeps as sec/op: every ns/op in the log is the
	// same, so every counted shape is within.
	out.Reset()
	if code := run([]string{"-unit", "ns/op", "testdata/sample.log"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "10500") {
		t.Errorf("-unit ns/op: exit %d, want 0 and the times in ns\n%s", code, out.String())
	}
	// -from 1 counts M = 1 too, where the own GEMM is outside.
	out.Reset()
	run([]string{"-from", "1", "-within", "40", "testdata/sample.log"}, &out, &errb)
	if !strings.Contains(out.String(), "16-bit M=1: 0 of 1 shapes within 40 % of cuBLASLt\n") {
		t.Errorf("-from 1:\n%s", out.String())
	}
	// -min 1 gives the one-sample shape a verdict.
	out.Reset()
	run([]string{"-min", "1", "testdata/sample.log"}, &out, &errb)
	if !strings.Contains(out.String(), "16-bit M=256: 1 of 2 shapes within 15 % of cuBLASLt\n") {
		t.Errorf("-min 1:\n%s", out.String())
	}
}

// checkGolden compares got with testdata/name (-update rewrites it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("output differs from %s (-want +got; go test ./bench/gemmvs -update rewrites it):\n%s", golden, d)
	}
}

// TestHeadroom: -headroom lists the shapes where a forced implementation
// ran the given share under the plan (GPT-OSS-20B's o on 128 x 128,
// 0.817x; not own-hot, whose weight stays in L2, nor the one-sample
// forced tile of qkv); FP8 Llama-3.1-8B's down, 1.8 % under, only from
// -headroom 1; the exit status stays the comparison's with cuBLASLt.
func TestHeadroom(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-headroom", "5", "testdata/sample.log"}, &out, &errb); code != 1 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 1 and nothing", code, errb.String())
	}
	checkGolden(t, "sample-headroom.golden", out.Bytes())
	out.Reset()
	run([]string{"-headroom", "1", "testdata/sample.log"}, &out, &errb)
	// Listed, with the plan's tile and the forced tile's two logged plans.
	if !regexp.MustCompile(`(?m)^fp8 +64 +down +.*own-fp8-tma-wg1m .* wg1d/3 +varies$`).MatchString(out.String()) {
		t.Errorf("-headroom 1: FP8 down's 1.8 %% not listed with its plans:\n%s", out.String())
	}
	out.Reset()
	run([]string{"-headroom", "50", "testdata/sample.log"}, &out, &errb)
	if !strings.Contains(out.String(), "headroom: no own implementation 50 % or more under the plan's us/gemm\n") {
		t.Errorf("-headroom 50:\n%s", out.String())
	}
}

// TestEach: -each lists every own implementation at each shape with
// cuBLASLt's samples, the plan first: the forced tiles of one sample too,
// with their logged plans ("varies" where two samples logged two), not
// own-hot (its weight in L2), not cuBLASLt's bf16 under FP8, and nothing
// at a shape without cuBLASLt's samples; the exit status stays the
// comparison's.
func TestEach(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-each", "testdata/sample.log"}, &out, &errb); code != 1 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 1 and nothing", code, errb.String())
	}
	checkGolden(t, "sample-each.golden", out.Bytes())
	_, each, _ := strings.Cut(out.String(), "each own implementation")
	for _, bad := range []string{"own-hot", "cublaslt-bf16"} {
		if strings.Contains(each, bad) {
			t.Errorf("-each lists %s:\n%s", bad, each)
		}
	}
}

// TestEachForcedOnly: a sweep of forced tiles without the plan's samples
// gets -each's table alone, exit status 0; without -each it is refused.
func TestEachForcedOnly(t *testing.T) {
	log := filepath.Join(t.TempDir(), "forced.log")
	body := "BenchmarkGemm/cublaslt/lm/M=216/N=32000/K=2048-16 100 53438 ns/op 51.2 us/gemm\n" +
		"BenchmarkGemm/own-tma-s2x224/lm/M=216/N=32000/K=2048-16 100 55000 ns/op 52.0 us/gemm\n" +
		"BenchmarkGemm/own-tma-s2x224-unpersist/lm/M=216/N=32000/K=2048-16 100 60000 ns/op 58.4 us/gemm\n"
	if err := os.WriteFile(log, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-each", "-min", "1", log}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{"own-tma-s2x224 ", "1.016", "own-tma-s2x224-unpersist", "1.141"} {
		if !strings.Contains(got, want) {
			t.Errorf("-each on forced tiles only: %q missing from\n%s", want, got)
		}
	}
	if strings.Contains(got, "within") || strings.Contains(got, "OUTSIDE") {
		t.Errorf("-each on forced tiles only gave a verdict:\n%s", got)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{log}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "no shape with both") {
		t.Errorf("without -each: exit %d, stderr %q; want 2", code, errb.String())
	}
}

// TestTwins: -twins lists the forced implementations whose logged plan is
// the plan's own at a shape, before or after it in the order they ran, and
// sums up those after; a forced tile on another plan is no twin.
func TestTwins(t *testing.T) {
	log := filepath.Join(t.TempDir(), "twins.log")
	var b strings.Builder
	for range 3 {
		for _, l := range []string{
			"BenchmarkGemm/own/o/M=216/N=2880/K=4096\n    gemm_bench_test.go:1: plan p1x112c21\n",
			"BenchmarkGemm/own/o/M=216/N=2880/K=4096-16 100 1 ns/op 14.0 us/gemm\n",
			"BenchmarkGemm/cublaslt/o/M=216/N=2880/K=4096-16 100 1 ns/op 12.8 us/gemm\n",
			"BenchmarkGemm/own-tma-p1x112c21/o/M=216/N=2880/K=4096\n    gemm_bench_test.go:1: plan p1x112c21\n",
			"BenchmarkGemm/own-tma-p1x112c21/o/M=216/N=2880/K=4096-16 100 1 ns/op 14.7 us/gemm\n",
			"BenchmarkGemm/own-tma-p1mc42/o/M=216/N=2880/K=4096\n    gemm_bench_test.go:1: plan p1mc42\n",
			"BenchmarkGemm/own-tma-p1mc42/o/M=216/N=2880/K=4096-16 100 1 ns/op 15.0 us/gemm\n",
		} {
			b.WriteString(l)
		}
	}
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-twins", log}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errb.String())
	}
	_, twins, ok := strings.Cut(out.String(), "twins:")
	if !ok {
		t.Fatalf("no twins table:\n%s", out.String())
	}
	for _, want := range []string{"own-tma-p1x112c21", "1.050", "after", "1 twins timed after the plan: twin / plan median 1.0500"} {
		if !strings.Contains(twins, want) {
			t.Errorf("-twins: %q missing from\n%s", want, twins)
		}
	}
	if strings.Contains(twins, "p1mc42 ") || strings.Contains(twins, "own-tma-p1mc42") {
		t.Errorf("-twins lists a forced tile on another plan:\n%s", twins)
	}
	// Without cuBLASLt's samples: the twins' table alone.
	var lines []string
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if !strings.Contains(l, "/cublaslt/") {
			lines = append(lines, l)
		}
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"-twins", log}, &out, &errb); code != 0 || errb.Len() != 0 || !strings.Contains(out.String(), "1 twins timed after the plan") {
		t.Errorf("-twins without cuBLASLt: exit %d, stderr %q, stdout\n%s", code, errb.String(), out.String())
	}
}

// TestPlans: the plan column comes from the logged plan lines alone; a
// log without them (go test -bench without -test.v) gets no column, and
// the same verdicts.
func TestPlans(t *testing.T) {
	b, err := os.ReadFile("testdata/sample.log")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !planLine.MatchString(l) {
			kept = append(kept, l)
		}
	}
	p := filepath.Join(t.TempDir(), "noplans.log")
	if err := os.WriteFile(p, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	var with, without, errb bytes.Buffer
	run([]string{"-headroom", "5", "testdata/sample.log"}, &with, &errb)
	if code := run([]string{"-headroom", "5", p}, &without, &errb); code != 1 || errb.Len() != 0 {
		t.Fatalf("without plans: exit %d, stderr %q; want 1 and nothing", code, errb.String())
	}
	if strings.Contains(without.String(), "plan\n") || strings.Contains(without.String(), "tile") {
		t.Errorf("without plans, a plan column:\n%s", without.String())
	}
	// The main table without its plan column is the table without plans
	// (spacing aside), and the counts after it the same.
	table := func(s string) string { t, _, _ := strings.Cut(s, "\n\n"); return t }
	counts := func(s string) string { _, c, _ := strings.Cut(s, "\n\n"); c, _, _ = strings.Cut(c, "\n\n"); return c }
	got := regexp.MustCompile(`(?m) +(verdict|within|OUTSIDE|too few) +\S+$`).ReplaceAllString(table(with.String()), " $1")
	got = regexp.MustCompile(` +`).ReplaceAllString(got, " ")
	want := regexp.MustCompile(` +`).ReplaceAllString(table(without.String()), " ")
	if d := cmp.Diff(want, got); d != "" || counts(with.String()) != counts(without.String()) {
		t.Errorf("with plans, less the column, differs from without (-without +with):\n%s", d)
	}
}

// TestBadInput: each refusal exits 2 and says what was wrong, and where.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("bad.log", "goos: linux\nBenchmarkGemm/own/qkv/M=128-32 20 9.0\n")
	negative := write("neg.log", "BenchmarkGemm/own/qkv/M=128-32 20 -9.0 us/gemm\n")
	empty := write("empty.log", "PASS\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no benchmark files given"},
		{[]string{filepath.Join(dir, "none.log")}, "none.log: no such file"},
		{[]string{malformed}, "bad.log:2: "},
		{[]string{negative}, "neg.log:1: Gemm/own/qkv/M=128-32 -9 us/gemm: a time must be positive"},
		{[]string{empty}, "empty.log: no shape with both the own GEMM's and cuBLASLt's us/gemm"},
		{[]string{"-within", "-5", empty}, "-within -5: a margin in per cent"},
		{[]string{"-min", "0", empty}, "-min 0: at least 1"},
		{[]string{"-from", "0", empty}, "-from 0: a row count"},
		{[]string{"-frob", empty}, "flag provided but not defined: -frob"},
		{[]string{"-unit", "TFLOP/s", empty}, `-unit "TFLOP/s": a time per operation`},
		{[]string{"-headroom", "100", empty}, "-headroom 100: a share of the plan's time"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: wrote %q to stdout", c.args, out.String())
		}
	}
}

// TestParseGemmName: the names the GEMM benchmarks write, and others.
func TestParseGemmName(t *testing.T) {
	for name, want := range map[string]gemmName{
		"BenchmarkGemm/own/qkv/M=128/N=2560/K=2048-32":             {key{"Gemm", "qkv", 128}, "own"},
		"BenchmarkGemm/own/qkv/M=128/N=2560/K=2048":                {key{"Gemm", "qkv", 128}, "own"},
		"BenchmarkGemmFP8/cublaslt-fp8/gpt-oss-20b-o/M=64/N=1/K=1": {key{"GemmFP8", "gpt-oss-20b-o", 64}, "cublaslt-fp8"},
		"BenchmarkGemm/own/qkv/M=256-16":                           {key{"Gemm", "qkv", 256}, "own"},
	} {
		if got, ok := parseGemmName(name); !ok || got != want {
			t.Errorf("parseGemmName(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "BenchmarkGemm", "BenchmarkGemm/own/qkv", "BenchmarkGemm/own/qkv/N=5",
		"BenchmarkGemm/own/qkv/M=0", "BenchmarkGemm/own/qkv/M=x", "BenchmarkAttention/a/b/M=1", "BenchmarkGemm//qkv/M=1"} {
		if got, ok := parseGemmName(name); ok {
			t.Errorf("parseGemmName(%q) = %+v; want not a GEMM benchmark", name, got)
		}
	}
}

// FuzzParseGemmName: any name is refused or gives a known family, a named
// implementation and shape, and positive rows; never a panic.
func FuzzParseGemmName(f *testing.F) {
	for _, s := range []string{"BenchmarkGemm/own/qkv/M=128/N=2560/K=2048-32", "BenchmarkGemmFP8/a/b/M=1-", "BenchmarkGemm/a/b/M=-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseGemmName(s)
		if !ok {
			return
		}
		if _, known := families[n.family]; !known || n.impl == "" || n.shape == "" || n.m < 1 {
			t.Fatalf("parseGemmName(%q) = %+v", s, n)
		}
	})
}

// FuzzReadPlans: whatever a log holds, readPlans files plans only under
// GEMM benchmarks' names, each a non-empty plan; never a panic.
func FuzzReadPlans(f *testing.F) {
	for _, s := range []string{
		"BenchmarkGemm/own/qkv/M=128/N=1/K=1\n    gemm_bench_test.go:146: plan wg1s\n",
		"--- BENCH: BenchmarkGemmFP8/own-fp8/o/M=64-16\n\tx.go:1: plan wg1d/3\n    x.go:2: plan  \n",
		"    a.go:1: plan orphan\nBenchmarkAttention/x-2\n    a.go:2: plan no\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		plans, order := map[key]map[string]string{}, map[key][]string{}
		if err := readPlans("log", []byte(s), plans, order); err != nil {
			return // a line longer than the scanner takes
		}
		for k, impls := range plans {
			if _, known := families[k.family]; !known || k.m < 1 {
				t.Fatalf("plan under %+v", k)
			}
			for impl, plan := range impls {
				if impl == "" || strings.TrimSpace(plan) == "" {
					t.Fatalf("%+v %q: plan %q", k, impl, plan)
				}
			}
		}
		for k, impls := range order {
			seen := map[string]bool{}
			for _, impl := range impls {
				if _, known := families[k.family]; !known || impl == "" || seen[impl] {
					t.Fatalf("order under %+v: %q", k, impls)
				}
				seen[impl] = true
			}
		}
	})
}

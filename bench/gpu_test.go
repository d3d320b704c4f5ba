// Package bench holds the tools that check and measure xrun on a GPU
// machine: gpu.sh (build, check, study, resume, collect; see GPU.md), the
// A/A tool (aa), the benchmark specs (specs/) and the results kept from
// GPU runs (results/). The tests here drive gpu.sh against fake GPU tools
// (nvidia-smi, xrun, the test binaries) written into a temporary folder,
// so that its plumbing — timeouts, logs, the table, packing, collecting and
// resuming — is checked on machines without a GPU.
package bench

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/runner"
)

type result struct {
	stdout, stderr string
	code           int
}

// gpuSh runs bash gpu.sh args with env added to the test's environment.
func gpuSh(t *testing.T, env []string, args ...string) result {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash:", err)
	}
	cmd := exec.Command("bash", append([]string{"gpu.sh"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r
}

func writeExec(t *testing.T, path, script string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/usr/bin/env bash\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeGPU is a machine as gpu.sh sees it: nvidia-smi on PATH and a
// GPU_DIR whose xrun and test binaries are scripts.
type fakeGPU struct {
	dir, gpuDir, out string
	env              []string
}

// fakeXrun answers plan --json with the study's name, devices after
// XRUN_FAKE_SLEEP seconds, and run by writing a results tree: a fresh run
// finishes cell a and leaves b with one repeat (exit 130, as at a time
// limit); a resumed one lists what it found and finishes b.
const fakeXrun = `echo "$*" >>"$FAKE/argv"
case $1 in
plan) printf '{\n  "schema_version": 1,\n  "name": "s",\n  "spec": "%s"\n}\n' "$2" ;;
devices) exec sleep "${XRUN_FAKE_SLEEP:-0}" ;;
run)
	while [ $# -gt 0 ] && [ "$1" != --out ]; do shift; done
	d=$2
	if [[ " $* " == *" --resume "* ]]; then
		(cd "$d" && find . -type f | sort) >"$FAKE/seen"
		printf '{"status": "ok"}\n' >"$d/cells/b/cell.json"
		head -c 3000 /dev/urandom >"$d/cells/b/requests.jsonl"
		rm -r "$d/cells/b/repeats"
		exit 0
	fi
	mkdir -p "$d/cells/a" "$d/cells/b/repeats" "$d/.xrun" "$d/datasets"
	head -c 9000 /dev/urandom >"$d/results.json"
	echo '| table |' >"$d/results.md"
	echo '{}' >"$d/.xrun/plan.json"
	echo data >"$d/datasets/ds.jsonl"
	printf '{"status": "ok"}\n' >"$d/cells/a/cell.json"
	echo log >"$d/cells/a/log.jsonl"
	head -c 20000 /dev/urandom >"$d/cells/a/requests.jsonl"
	head -c 100 /dev/urandom >"$d/cells/a/iterations.csv"
	head -c 100 /dev/urandom >"$d/cells/a/telemetry.csv"
	echo log >"$d/cells/b/log.jsonl"
	echo '{}' >"$d/cells/b/repeats/1.json"
	head -c 100 /dev/urandom >"$d/cells/b/repeats/1.requests.jsonl"
	exit 130
	;;
esac
`

func newFakeGPU(t *testing.T) *fakeGPU {
	dir := t.TempDir()
	f := &fakeGPU{dir: dir, gpuDir: filepath.Join(dir, "gpu"), out: filepath.Join(dir, "out")}
	writeExec(t, filepath.Join(dir, "bin", "nvidia-smi"), `[ "$1" = -L ] && echo "GPU 0: Fake GPU (UUID: GPU-0)"; exit 0`+"\n")
	writeExec(t, filepath.Join(f.gpuDir, "xrun"), fakeXrun)
	f.env = []string{
		"PATH=" + filepath.Join(dir, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"FAKE=" + dir, "GPU_DIR=" + f.gpuDir, "OUT=" + f.out, "PART_SIZE=4k",
	}
	return f
}

func (f *fakeGPU) with(env ...string) []string { return append(append([]string{}, f.env...), env...) }

// files lists the files under dir, relative, with their contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func parts(t *testing.T, dir, glob string) []string {
	t.Helper()
	p, _ := filepath.Glob(filepath.Join(dir, glob))
	sort.Strings(p)
	return p
}

// TestStudyCollectResume follows a study over two calls: packed in parts,
// merged on the build machine, resumed on a machine that kept nothing.
func TestStudyCollectResume(t *testing.T) {
	f := newFakeGPU(t)
	res1 := filepath.Join(f.dir, "res1")
	r := gpuSh(t, f.with("RESULTS="+res1), "study", "--time-limit", "60", "--gpus", "0,1", "specs/x.yaml", "--set", "repeats=2")
	if r.code != 2 || !strings.Contains(r.stderr, "specs/x.yaml: no such file") {
		t.Fatalf("a missing spec: exit %d, stderr %q", r.code, r.stderr)
	}
	r = gpuSh(t, f.with("RESULTS="+res1), "study", "--time-limit", "60", "--gpus", "0,1", "bench/specs/gemm-quick.yaml", "--set", "repeats=2")
	if r.code != 130 || !strings.Contains(r.stdout, "stopped at the time limit") || !strings.Contains(r.stdout, "| table |") {
		t.Fatalf("study: exit %d, want 130 with the table and the hint\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	argv, _ := os.ReadFile(filepath.Join(f.dir, "argv"))
	want := "run bench/specs/gemm-quick.yaml --out " + res1 + "/s --fresh --log-format json --gpus 0,1 --time-limit 60s --set repeats=2"
	if !strings.Contains(string(argv), want) {
		t.Errorf("xrun's arguments:\n%s\nwant the line %q", argv, want)
	}
	measured := files(t, filepath.Join(res1, "s"))
	if n := len(parts(t, f.out, "s-data.tgz.*")); n < 4 {
		t.Errorf("%d data parts of 4k for 20 kB of data, want 4 or more", n)
	}
	if n := len(parts(t, f.out, "s-core.tgz.*")); n < 2 {
		t.Errorf("%d core parts of 4k for 9 kB of results.json, want 2 or more", n)
	}
	for _, name := range []string{"s.md", "s.log"} {
		if _, err := os.Stat(filepath.Join(f.out, name)); err != nil {
			t.Error(err)
		}
	}
	back := filepath.Join(f.dir, "back1")
	if err := os.CopyFS(back, os.DirFS(f.out)); err != nil {
		t.Fatal(err)
	}

	tree := filepath.Join(f.dir, "tree")
	r = gpuSh(t, f.env, "collect", back, tree)
	if r.code != 0 || !strings.Contains(r.stdout, "1 cells complete of 2 begun") {
		t.Fatalf("collect: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	got := files(t, filepath.Join(tree, "s"))
	for name, content := range measured {
		if strings.HasPrefix(name, "datasets/") {
			if _, ok := got[name]; ok {
				t.Errorf("%s came back: datasets stay on the GPU machine", name)
			}
			continue
		}
		if got[name] != content {
			t.Errorf("%s: merged %d bytes, measured %d", name, len(got[name]), len(content))
		}
	}
	staged := filepath.Join(f.gpuDir, "resume", "s.tgz")
	if _, err := os.Stat(staged); err != nil {
		t.Fatal("collect staged nothing for resume:", err)
	}

	// A machine that kept nothing resumes from the staged core.
	res2 := filepath.Join(f.dir, "res2")
	r = gpuSh(t, f.with("RESULTS="+res2), "resume", "bench/specs/gemm-quick.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "every cell ok") {
		t.Fatalf("resume: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	seen, _ := os.ReadFile(filepath.Join(f.dir, "seen"))
	wantSeen := strings.Join([]string{
		"./.xrun/plan.json", "./cells/a/cell.json", "./cells/a/log.jsonl", "./cells/b/log.jsonl",
		"./cells/b/repeats/1.json", "./cells/b/repeats/1.requests.jsonl", "./results.json", "./results.md",
	}, "\n") + "\n"
	if string(seen) != wantSeen {
		t.Errorf("resume gave xrun run --resume\n%s\nwant what --resume reads, without the finished cells' data:\n%s", seen, wantSeen)
	}

	r = gpuSh(t, f.env, "collect", f.out, tree)
	if r.code != 0 || !strings.Contains(r.stdout, "2 cells complete of 2 begun") {
		t.Fatalf("second collect: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	got = files(t, filepath.Join(tree, "s"))
	if got["cells/a/requests.jsonl"] != measured["cells/a/requests.jsonl"] {
		t.Error("the first call's data was lost when the second came back")
	}
	for _, name := range []string{"cells/b/repeats/1.json", "cells/b/repeats/1.requests.jsonl"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s kept after cell b finished", name)
		}
	}
	if _, ok := got["cells/b/requests.jsonl"]; !ok {
		t.Errorf("cell b's data missing: %v", keys(got))
	}
}

// TestCollectIncomplete: a lost data part costs the file it cut, nothing
// else; a lost core part merges nothing.
func TestCollectIncomplete(t *testing.T) {
	f := newFakeGPU(t)
	res := filepath.Join(f.dir, "res")
	if r := gpuSh(t, f.with("RESULTS="+res), "study", "bench/specs/gemm-quick.yaml"); r.code != 130 {
		t.Fatalf("study: exit %d\n%s", r.code, r.stderr)
	}
	measured := files(t, filepath.Join(res, "s"))

	data := parts(t, f.out, "s-data.tgz.*")
	lost := t.TempDir()
	for _, p := range data {
		if p == data[len(data)/2] {
			continue
		}
		b, _ := os.ReadFile(p)
		os.WriteFile(filepath.Join(lost, filepath.Base(p)), b, 0o644)
	}
	for _, p := range parts(t, f.out, "s-core.tgz.*") {
		b, _ := os.ReadFile(p)
		os.WriteFile(filepath.Join(lost, filepath.Base(p)), b, 0o644)
	}
	tree := filepath.Join(f.dir, "tree")
	r := gpuSh(t, f.env, "collect", lost, tree)
	if r.code != 1 || !strings.Contains(r.stderr, "the data came back incomplete") {
		t.Fatalf("collect without a data part: exit %d, stderr %q", r.code, r.stderr)
	}
	got := files(t, filepath.Join(tree, "s"))
	for name, content := range got {
		if content != measured[name] {
			t.Errorf("%s merged unlike the measured file (%d and %d bytes): a cut file must go", name, len(content), len(measured[name]))
		}
	}
	if _, ok := got["cells/a/requests.jsonl"]; ok {
		t.Error("the file the lost part cut was kept")
	}
	if _, ok := got["results.json"]; !ok {
		t.Errorf("the core was not merged: %v", keys(got))
	}

	core := parts(t, lost, "s-core.tgz.*")
	os.Remove(core[len(core)-1])
	tree2 := filepath.Join(f.dir, "tree2")
	r = gpuSh(t, f.env, "collect", lost, tree2)
	if r.code != 1 || !strings.Contains(r.stderr, "the core is incomplete") {
		t.Fatalf("collect without a core part: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tree2, "s")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a partial core was merged (%v)", err)
	}
}

// TestStudyBadInput: xrun refusing the spec (exit 2) leaves no pack of
// older results behind.
func TestStudyBadInput(t *testing.T) {
	f := newFakeGPU(t)
	res := filepath.Join(f.dir, "res")
	if r := gpuSh(t, f.with("RESULTS="+res), "study", "bench/specs/gemm-quick.yaml"); r.code != 130 {
		t.Fatalf("study: exit %d\n%s", r.code, r.stderr)
	}
	writeExec(t, filepath.Join(f.gpuDir, "xrun"), `[ "$1" = plan ] && { printf '  "name": "s",\n'; exit 0; }
echo "xrun: --set repeats=0: repeats: expected an integer in [1, 1000], got integer 0" >&2; exit 2
`)
	r := gpuSh(t, f.with("RESULTS="+res), "study", "bench/specs/gemm-quick.yaml", "--set", "repeats=0")
	if r.code != 1 || !strings.Contains(r.stdout, "expected an integer") {
		t.Fatalf("exit %d, want 1 with xrun's message\nstdout %s", r.code, r.stdout)
	}
	if left := append(parts(t, f.out, "s-*.tgz.*"), parts(t, f.out, "s.md")...); len(left) != 0 {
		t.Errorf("packs of the earlier run left in OUT: %v", left)
	}
}

// TestCheck runs check over fake test binaries: each in its package's
// folder under its timeout, counted in the table, failures and the whole
// model's worst errors shown, a step past its timeout stopped and named.
func TestCheck(t *testing.T) {
	f := newFakeGPU(t)
	writeExec(t, filepath.Join(f.gpuDir, "cuda.test"), `echo "pwd $PWD args $*"
printf '=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- SKIP: TestB (0.00s)\nPASS\n'
`)
	writeExec(t, filepath.Join(f.gpuDir, "backend.test"), `echo "pwd $PWD args $*"
printf '=== RUN   TestGolden\n    x_test.go:1: logits relative error 7.4e-04\n    x_test.go:2: logits relative error 2.5e-03\n--- PASS: TestGolden (0.00s)\n'
printf '=== RUN   TestMoE\n    moe_test.go:9: logits relative error 0.0926\n--- FAIL: TestMoE (0.00s)\nFAIL\n'
exit 1
`)
	r := gpuSh(t, f.with("XRUN_FAKE_SLEEP=30"), "check", "--run", "TestA|TestB", "--timeout", "devices=1")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (a failed test)\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^nvidia-smi +0 +- +- +- +\d+  nvidia-smi\.log$`),
		regexp.MustCompile(`(?m)^devices +124 +- +- +- +\d+  devices\.log \(stopped after the 1s timeout\)$`),
		regexp.MustCompile(`(?m)^cuda +0 +1 +0 +1 +\d+  cuda\.log$`),
		regexp.MustCompile(`(?m)^backend +1 +1 +1 +0 +\d+  backend\.log$`),
		regexp.MustCompile(`(?m)^== backend failures \(backend\.log\)\n.*--- FAIL: TestMoE`),
		regexp.MustCompile(`(?m)^  TestGolden +PASS +0\.0025$`),
		regexp.MustCompile(`(?m)^  TestMoE +FAIL +0\.0926$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("stdout lacks %s:\n%s", want, r.stdout)
		}
	}
	logs := files(t, f.out)
	if want := "pwd " + filepath.Join(repoRoot(t), "engine/cuda") + " args -test.v -test.timeout 1190s -test.run TestA|TestB"; !strings.Contains(logs["cuda.log"], want) {
		t.Errorf("cuda.log %q, want %q", logs["cuda.log"], want)
	}
	if want := "pwd " + filepath.Join(repoRoot(t), "engine/cuda/backend") + " args -test.v -test.timeout 190s\n"; !strings.Contains(logs["backend.log"], want) {
		t.Errorf("backend.log %q, want %q", logs["backend.log"], want)
	}
	if !strings.Contains(logs["devices.log"], "gpu.sh: devices stopped after 1s") {
		t.Errorf("devices.log %q does not say it was stopped", logs["devices.log"])
	}
}

// fakeBench is a test binary for ab: it notes the GPU and its arguments in
// $FAKE/order, compiles nothing, and prints one benchmark line a count
// whose kernel time is its own $US microseconds, each with the plan lines
// BenchmarkGemm logs under -test.v ($PLAN for qkv; o's the same in both).
const fakeBench = `echo "$(basename "$0") gpu=${CUDA_VISIBLE_DEVICES:-none} $*" >>"$FAKE/order"
case " $* " in *" -test.bench "*) ;; *) printf '=== RUN   TestMemory\n--- PASS: TestMemory (0.00s)\nPASS\n'; exit 0 ;; esac
while [ $# -gt 0 ] && [ "$1" != -test.count ]; do shift; done
printf 'goos: linux\npkg: github.com/xrun-dev/xrun/engine/cuda\n'
printf 'BenchmarkGemm/own/qkv/M=128\n    gemm_bench_test.go:146: plan %s\n' "$PLAN"
for i in $(seq "$2"); do
	printf 'BenchmarkGemm/own/qkv/M=128-16\t      20\t     %d ns/op\t  %s us/gemm\n' $((US * 1000 + 500)) "$US"
	printf '    gemm_bench_test.go:146: plan %s\n' "$PLAN"
done
printf -- '--- BENCH: BenchmarkGemm/own/o/M=128-16\n    gemm_bench_test.go:146: plan wg1s\n'
printf 'PASS\n'
`

// runsByGPU reads the runs the fake test binaries noted in $FAKE/order,
// per GPU in order, each as name says (the binary's name without .test,
// and the line); a line neither timed (-test.bench) nor warm (-test.run
// ^TestMemory$) is an error.
func runsByGPU(t *testing.T, f *fakeGPU, name func(bin, line string) string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "order"))
	if err != nil {
		t.Fatal(err)
	}
	seq := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fs := strings.Fields(l)
		if !strings.Contains(l, "-test.bench ") && !strings.Contains(l, "-test.run ^TestMemory$") {
			t.Errorf("a run neither warm nor timed: %q", l)
		}
		seq[fs[1]] = append(seq[fs[1]], name(strings.TrimSuffix(fs[0], ".test"), l))
	}
	return seq
}

// TestAB: two builds' benchmarks in crossed order on two GPUs at once,
// each build warmed first; the logs pooled a side and compared.
func TestAB(t *testing.T) {
	f := newFakeGPU(t)
	writeExec(t, filepath.Join(f.dir, "old.test"), "US=10 PLAN=wg1s\n"+fakeBench)
	writeExec(t, filepath.Join(f.dir, "new.test"), "US=8 PLAN='s2x160/2'\n"+fakeBench)
	r := gpuSh(t, f.env, "ab", "--bench", "BenchmarkGemm/^own$", "--gpus", "0,1", "--count", "2", "--rows", "128,192",
		filepath.Join(f.dir, "old.test"), filepath.Join(f.dir, "new.test"))
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	// Per GPU, in order: the warm runs on the first GPU, then the rounds,
	// the second GPU starting the other way.
	seq := runsByGPU(t, f, func(bin, l string) string {
		if strings.Contains(l, "-test.bench BenchmarkGemm/^own$ -test.benchtime 100x -test.count 2 -gemm.rows 128,192") {
			return bin + " bench"
		}
		return bin + " warm"
	})
	want := map[string][]string{
		"gpu=0": {"old warm", "new warm", "old bench", "new bench", "new bench", "old bench"},
		"gpu=1": {"new bench", "old bench", "old bench", "new bench"},
	}
	if !reflect.DeepEqual(seq, want) {
		t.Errorf("runs %v, want %v", seq, want)
	}
	logs := files(t, f.out)
	for side, us := range map[string]string{"old": "10", "new": "8"} {
		if n := strings.Count(logs["ab-"+side+".txt"], "us/gemm"); n != 8 {
			t.Errorf("ab-%s.txt holds %d results, want 8 (2 GPUs x 2 rounds x count 2)", side, n)
		}
		if !strings.Contains(logs["ab-"+side+".txt"], " "+us+" us/gemm") {
			t.Errorf("ab-%s.txt lacks its own timings:\n%s", side, logs["ab-"+side+".txt"])
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ab-warm-old +0 +1 +0 +0 +\d+  ab-warm-old\.log$`),
		regexp.MustCompile(`(?m)^ab-new-1-0 +0 +- +- +- +\d+  ab-new-1-0\.log$`),
		regexp.MustCompile(`(?m)^BenchmarkGemm/own/qkv/M=128-16 +us/gemm +10 +8 +0\.800$`),
		regexp.MustCompile(`(?m)^BenchmarkGemm/own/qkv/M=128-16 +ns/op +1\.05e\+04 +8500 +0\.810$`),
		regexp.MustCompile(`(?m)^geomean \(1\) +us/gemm +0\.800$`),
		// The plan that moved, and not the one that did not.
		regexp.MustCompile(`(?m)^== ab: plans that differ \(1 of 2 benchmarks\)\n.*\nBenchmarkGemm/own/qkv/M=128 +wg1s +s2x160/2 *$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("stdout lacks %s:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(f.out, "ab-old-0-0.rc")); err == nil {
		t.Error("ab left its .rc files behind")
	}

	// A build whose benchmark fails: exit 1, its runs' status in the table.
	writeExec(t, filepath.Join(f.dir, "bad.test"), `case " $* " in *" -test.bench "*) echo "--- FAIL: BenchmarkGemm"; exit 1 ;; esac`+"\n")
	r = gpuSh(t, f.env, "ab", "--bench", "X", "--rounds", "1", filepath.Join(f.dir, "old.test"), filepath.Join(f.dir, "bad.test"))
	if r.code != 1 || !regexp.MustCompile(`(?m)^ab-new-0-0 +1 `).MatchString(r.stdout) {
		t.Errorf("a failing build: exit %d, want 1 and its run's exit in the table:\n%s", r.code, r.stdout)
	}

	// One that Go's own -test.timeout stops: the table says so, and names
	// ab's flag.
	writeExec(t, filepath.Join(f.dir, "slow.test"), `case " $* " in *" -test.bench "*) echo "panic: test timed out after 290s"; exit 2 ;; esac`+"\n")
	r = gpuSh(t, f.env, "ab", "--bench", "X", "--rounds", "1", filepath.Join(f.dir, "old.test"), filepath.Join(f.dir, "slow.test"))
	if want := "ab-new-0-0.log (stopped by -test.timeout 290s; --timeout SECONDS)"; r.code != 1 || !strings.Contains(r.stdout, want) {
		t.Errorf("a stopped build: exit %d, want 1 and %q in the table:\n%s", r.code, want, r.stdout)
	}
}

// fakeZoo is a test binary for zoo: it notes the GPU and its arguments in
// $FAKE/order and prints, for each M of -gemm.rows, an own and a cuBLASLt
// timing of qkv as BenchmarkGemm does.
const fakeZoo = `echo "$(basename "$0") gpu=${CUDA_VISIBLE_DEVICES:-none} $*" >>"$FAKE/order"
case " $* " in *" -test.bench "*) ;; *) printf '=== RUN   TestMemory\n--- PASS: TestMemory (0.00s)\nPASS\n'; exit 0 ;; esac
rows=
while [ $# -gt 0 ]; do [ "$1" = -gemm.rows ] && rows=$2; shift; done
for m in ${rows//,/ }; do
	printf 'BenchmarkGemm/own/qkv/M=%d/N=2560/K=2048-16\t     100\t     10500 ns/op\t        10.0 us/gemm\n' "$m"
	printf 'BenchmarkGemm/cublaslt/qkv/M=%d/N=2560/K=2048-16\t     100\t      9500 ns/op\t         9.0 us/gemm\n' "$m"
done
printf 'PASS\n'
`

// TestZoo: the M values dealt in turn over two GPUs at once after a warm
// run on the first, three samples each, the second reversed, every
// sample's timings pooled in zoo.txt and a table of the runs.
func TestZoo(t *testing.T) {
	f := newFakeGPU(t)
	bin := filepath.Join(f.dir, "cuda.test")
	writeExec(t, bin, fakeZoo)
	// build's gemmvs, faked: it notes its arguments and answers a verdict.
	writeExec(t, filepath.Join(f.gpuDir, "gemmvs"), `echo "$*" >"$FAKE/gemmvs"
printf 'family  M   shape  own us/gemm  cuBLASLt  own / cuBLASLt  samples  verdict  plan\n16-bit  64  qkv    10.0         9.0       1.111           3+3      within\n\n16-bit M=64: 1 of 1 shapes within 15 %% of cuBLASLt\n'
exit 1
`)
	r := gpuSh(t, f.env, "zoo", "--rows", "64,128,256", "--gpus", "0,1", bin)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	bench := "-test.bench ^BenchmarkGemm(FP8)?$/^(own|cublaslt|own-fp8|cublaslt-fp8)$/./ -test.benchtime 100x -test.count 1"
	seq := runsByGPU(t, f, func(_, l string) string {
		if _, rows, ok := strings.Cut(l, "-gemm.rows "); ok && strings.Contains(l, bench) {
			return rows
		}
		return "warm"
	})
	want := map[string][]string{
		"gpu=0": {"warm", "64,256", "64,256 -gemm.reverse", "64,256"},
		"gpu=1": {"128", "128 -gemm.reverse", "128"},
	}
	if !reflect.DeepEqual(seq, want) {
		t.Errorf("runs %v, want %v", seq, want)
	}
	logs := files(t, f.out)
	if n := strings.Count(logs["zoo.txt"], "us/gemm"); n != 18 {
		t.Errorf("zoo.txt holds %d timings, want 18 (3 M x 3 samples x own and cuBLASLt)", n)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^zoo-warm +0 +1 +0 +0 +\d+  zoo-warm\.log$`),
		regexp.MustCompile(`(?m)^zoo-1-2 +0 +- +- +- +\d+  zoo-1-2\.log$`),
		regexp.MustCompile(`(?m)^== zoo: 18 timings in zoo\.txt$`),
		// The verdicts' tallies, gemmvs's exit 1 (a shape outside) not zoo's.
		regexp.MustCompile(`(?m)^== zoo: within 15 % of cuBLASLt \(zoo-verdicts\.txt\)\nfamily .*\n16-bit M=64: 1 of 1 shapes within 15 % of cuBLASLt$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("stdout lacks %s:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(f.out, "zoo-0-1.rc")); err == nil {
		t.Error("zoo left its .rc files behind")
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "gemmvs")); err != nil || strings.TrimSpace(string(b)) != "-within 15 -min 3 "+filepath.Join(f.out, "zoo.txt") {
		t.Errorf("gemmvs ran with %q (%v), want -within 15 -min 3 and zoo.txt", b, err)
	}

	// Fewer samples than gemmvs's 3 ask a verdict of as many; without
	// gemmvs, zoo says where it comes from.
	if r = gpuSh(t, f.env, "zoo", "--rows", "64", "--samples", "2", "--within", "10", bin); r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "gemmvs")); !strings.HasPrefix(string(b), "-within 10 -min 2 ") {
		t.Errorf("gemmvs ran with %q, want -within 10 -min 2", b)
	}
	if err := os.Remove(filepath.Join(f.gpuDir, "gemmvs")); err != nil {
		t.Fatal(err)
	}
	r = gpuSh(t, f.env, "zoo", "--rows", "64", "--samples", "1", bin)
	if r.code != 0 || !strings.Contains(r.stdout, "gemmvs ('bash bench/gpu.sh build' makes it)") {
		t.Errorf("without gemmvs: exit %d, want 0 and where it comes from:\n%s", r.code, r.stdout)
	}

	// A binary whose benchmarks fail: exit 1, the runs' status in the table.
	writeExec(t, bin, `case " $* " in *" -test.bench "*) echo "--- FAIL: BenchmarkGemm"; exit 1 ;; esac`+"\n")
	r = gpuSh(t, f.env, "zoo", "--rows", "64", "--samples", "1", bin)
	if r.code != 1 || !regexp.MustCompile(`(?m)^zoo-0-1 +1 `).MatchString(r.stdout) {
		t.Errorf("a failing binary: exit %d, want 1 and its run's exit in the table:\n%s", r.code, r.stdout)
	}
}

// TestWithoutXrun: a build folder of test binaries only still checks, the
// devices probe skipped and saying why; a study refuses.
func TestWithoutXrun(t *testing.T) {
	f := newFakeGPU(t)
	os.Remove(filepath.Join(f.gpuDir, "xrun"))
	writeExec(t, filepath.Join(f.gpuDir, "cuda.test"), `printf '=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n'`+"\n")
	r := gpuSh(t, f.env, "check", "--tests", "cuda")
	want := regexp.MustCompile(`(?m)^devices +skip +- +- +- +0  - \(no .*/gpu/xrun\)$`)
	if r.code != 0 || !want.MatchString(r.stdout) {
		t.Errorf("check: exit %d, want 0 and a row matching %s\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "devices.log") {
		t.Errorf("check: the skipped devices probe's log is reported:\n%s%s", r.stdout, r.stderr)
	}
	r = gpuSh(t, f.env, "study", "bench/specs/gemm-quick.yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "/gpu/xrun missing: run 'bash bench/gpu.sh build'") {
		t.Errorf("study: exit %d, stderr %q", r.code, r.stderr)
	}
}

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// TestNoGPU: where no driver is installed the GPU commands stop at once,
// saying where they run.
func TestNoGPU(t *testing.T) {
	if p, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("a driver is installed here:", p)
	}
	for _, args := range [][]string{{"check"}, {"study", "bench/specs/gemm-quick.yaml"}, {"resume", "bench/specs/gemm-quick.yaml"}, {"ab", "--bench", "X", "/bin/true", "/bin/false"}} {
		r := gpuSh(t, []string{"GPU_DIR=" + t.TempDir()}, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "no NVIDIA driver here (nvidia-smi not found): '"+args[0]+"' runs on the GPU machine") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// TestUsage: mistakes in the command line are refused before anything
// runs, with exit 2.
func TestUsage(t *testing.T) {
	f := newFakeGPU(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "unknown command frobnicate"},
		{[]string{"check", "--tests", "cuda,kernels"}, "--tests: unknown test kernels"},
		{[]string{"check", "--timeout", "cuda=5"}, "a test binary needs more than 20 s"},
		{[]string{"check", "--timeout", "kernels=50"}, "--timeout kernels=50: no step kernels"},
		{[]string{"check", "--timeout", "cuda=5m"}, "SECONDS must be a whole number"},
		{[]string{"check", "--verbose"}, "check: unknown option --verbose"},
		{[]string{"check", "--tests", "cuda,cupti"}, "/gpu/cuda.test missing: 'bash bench/gpu.sh build' builds it"},
		{[]string{"check", "--tests", "none", "--bench", "MoE"}, "/gpu/cuda.test missing"},
		{[]string{"study"}, "study: no SPEC"},
		{[]string{"study", "--repeats", "3", "bench/specs/gemm-quick.yaml"}, "unknown option --repeats before SPEC"},
		{[]string{"study", "--time-limit", "9m", "bench/specs/gemm-quick.yaml"}, "--time-limit 9m: SECONDS must be a whole number"},
		{[]string{"study", "--as", "../x", "bench/specs/gemm-quick.yaml"}, "--as ../x: letters, digits"},
		{[]string{"resume", "bench/specs/gemm-quick.yaml"}, "resume: nothing to continue"},
		{[]string{"collect"}, "usage: bash bench/gpu.sh collect FROM [TREE]"},
		{[]string{"collect", f.dir}, "collect: no NAME-core.tgz.000 in"},
		{[]string{"ab", "--bench", "X", f.gpuDir + "/xrun"}, "ab: needs two test binaries, OLD and NEW"},
		{[]string{"ab", f.gpuDir + "/xrun", f.dir + "/none.test", "--bench", "X"}, "/none.test: not an executable test binary"},
		{[]string{"ab", f.gpuDir + "/xrun", f.gpuDir + "/xrun"}, "ab: --bench PATTERN is required"},
		{[]string{"ab", "--bench", "X", "--count", "0", f.gpuDir + "/xrun", f.dir + "/bin/nvidia-smi"}, "ab: --count 0: a whole number of at least 1"},
		{[]string{"ab", "--bench", "X", "--gpus", "0;1", f.gpuDir + "/xrun", f.dir + "/bin/nvidia-smi"}, "ab: --gpus 0;1: GPU numbers"},
		{[]string{"ab", "--bench", "X", "--timeout", "5", f.gpuDir + "/xrun", f.dir + "/bin/nvidia-smi"}, "ab: --timeout 5: SECONDS"},
		{[]string{"ab", "--bench", "X", "--rows", "0,64", f.gpuDir + "/xrun", f.dir + "/bin/nvidia-smi"}, "ab: --rows 0,64: row counts (M)"},
		{[]string{"ab", "--bench", "X", f.gpuDir + "/xrun", f.gpuDir + "/xrun"}, "ab: OLD and NEW are the same file"},
		{[]string{"ab", "--bench", "X", "--frob", f.gpuDir + "/xrun", f.gpuDir + "/xrun"}, "ab: unknown option --frob"},
		{[]string{"zoo", "--rows", "64"}, "zoo: needs engine/cuda's test binary"},
		{[]string{"zoo", f.gpuDir + "/xrun"}, "zoo: --rows LIST is required"},
		{[]string{"zoo", "--rows", "64,,128", f.gpuDir + "/xrun"}, "zoo: --rows 64,,128: row counts (M)"},
		{[]string{"zoo", "--rows", "64", "--samples", "0", f.gpuDir + "/xrun"}, "zoo: --samples 0: a whole number of at least 1"},
		{[]string{"zoo", "--rows", "64", "--gpus", "a", f.gpuDir + "/xrun"}, "zoo: --gpus a: GPU numbers"},
		{[]string{"zoo", "--rows", "64", "--timeout", "9", f.gpuDir + "/xrun"}, "zoo: --timeout 9: SECONDS"},
		{[]string{"zoo", "--rows", "64", f.dir + "/none.test"}, "/none.test: not an executable test binary"},
		{[]string{"zoo", "--rows", "64", f.gpuDir + "/xrun", f.gpuDir + "/xrun"}, "zoo: a second binary"},
		{[]string{"zoo", "--frob", f.gpuDir + "/xrun"}, "zoo: unknown option --frob"},
		{[]string{"zoo", "--rows", "64", "--within", "15%", f.gpuDir + "/xrun"}, "zoo: --within 15%: a margin in per cent"},
	} {
		r := gpuSh(t, f.with("RESULTS="+filepath.Join(f.dir, "res")), tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "argv")); err == nil {
		b, _ := os.ReadFile(filepath.Join(f.dir, "argv"))
		if strings.Contains(string(b), "run ") {
			t.Errorf("a refused command ran xrun: %s", b)
		}
	}
}

// TestSpecs: every spec in specs/ plans.
func TestSpecs(t *testing.T) {
	specs, _ := filepath.Glob("specs/*.yaml")
	if len(specs) == 0 {
		t.Fatal("no specs")
	}
	for _, p := range specs {
		s, err := runner.LoadSpec(p, runner.LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if len(s.Plan.Cells) == 0 {
			t.Errorf("%s: no cells", p)
		}
	}
}

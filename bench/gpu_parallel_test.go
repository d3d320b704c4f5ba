package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCheckParallel: --tests parallel runs the NCCL checks of engine/cuda
// (step nccl) and the split models of engine/cuda/backend (step parallel),
// each in its package with its own timeout, both in the table; it needs
// both test binaries.
func TestCheckParallel(t *testing.T) {
	f := newFakeGPU(t)
	bin := `echo "pwd $PWD args $*"; printf '=== RUN   TestParallelX\n--- SKIP: TestParallelX (0.00s)\nPASS\n'` + "\n"
	writeExec(t, filepath.Join(f.gpuDir, "cuda.test"), bin)
	r := gpuSh(t, f.env, "check", "--tests", "parallel")
	if r.code != 2 || !strings.Contains(r.stderr, "/gpu/backend.test missing") {
		t.Fatalf("without backend.test: exit %d, stderr %q; want 2 and backend.test missing", r.code, r.stderr)
	}
	writeExec(t, filepath.Join(f.gpuDir, "backend.test"), bin)
	r = gpuSh(t, f.env, "check", "--tests", "parallel", "--timeout", "parallel=300")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^nccl +0 +0 +0 +1 +\d+  nccl\.log$`),
		regexp.MustCompile(`(?m)^parallel +0 +0 +0 +1 +\d+  parallel\.log$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("stdout lacks %s:\n%s", want, r.stdout)
		}
	}
	if regexp.MustCompile(`(?m)^(cuda|backend) `).MatchString(r.stdout) {
		t.Errorf("--tests parallel ran the whole cuda or backend step:\n%s", r.stdout)
	}
	logs := files(t, f.out)
	if want := "pwd " + filepath.Join(repoRoot(t), "engine/cuda") + " args -test.v -test.timeout 190s -test.run TestParallel|TestNCCL|TestGatherBlocks|TestMoEShardIDs"; !strings.Contains(logs["nccl.log"], want) {
		t.Errorf("nccl.log %q, want %q", logs["nccl.log"], want)
	}
	if want := "pwd " + filepath.Join(repoRoot(t), "engine/cuda/backend") + " args -test.v -test.timeout 290s -test.run TestParallel"; !strings.Contains(logs["parallel.log"], want) {
		t.Errorf("parallel.log %q, want %q", logs["parallel.log"], want)
	}
	if _, err := os.Stat(filepath.Join(f.out, "cuda.log")); err == nil {
		t.Error("a cuda.log was written")
	}
}

// fakeCudaTest lists four tests (-test.list) and runs those its -test.run
// matches, each taking the seconds its name says in its log; where
// XRUN_FAKE_STUCK names one of them, it stops there as Go's -test.timeout
// does: a panic, exit 2.
const fakeCudaTest = `all="TestA TestB TestC TestD"
declare -A secs=([TestA]=50.00 [TestB]=10.00 [TestC]=10.00 [TestD]=30.00 [TestMemory]=0.50)
if [ "$1" = -test.list ]; then
	for n in $all BenchmarkX; do grep -E -- "$2" <<<"$n"; done
	exit 0
fi
echo "gpu $CUDA_VISIBLE_DEVICES args $*"
run=.
while [ $# -gt 0 ]; do [ "$1" = -test.run ] && run=$2; shift; done
for n in $all TestMemory; do
	grep -qE -- "$run" <<<"$n" || continue
	if [ "$n" = "${XRUN_FAKE_STUCK:-}" ]; then
		printf '=== RUN   %s\npanic: test timed out after 4m40s\n\trunning tests:\n\t\t%s (4m0s)\n' "$n" "$n"
		exit 2
	fi
	printf '=== RUN   %s\n--- PASS: %s (%ss)\n' "$n" "$n" "${secs[$n]}"
done
echo PASS
`

// TestCheckGPUs: --gpus deals engine/cuda's tests over the GPUs listed,
// in turn the first time and by the last check's times after, each share
// in its own process on its GPU after one warm-up on the first; every
// share counted in the table, the logs also joined as cuda.log; the other
// steps see every GPU listed.
func TestCheckGPUs(t *testing.T) {
	f := newFakeGPU(t)
	writeExec(t, filepath.Join(f.gpuDir, "cuda.test"), fakeCudaTest)
	writeExec(t, filepath.Join(f.gpuDir, "backend.test"), `echo "gpu $CUDA_VISIBLE_DEVICES"; printf '=== RUN   TestX\n--- PASS: TestX (0.00s)\nPASS\n'`+"\n")
	for _, round := range []struct {
		shares []string // -test.run of cuda.0, cuda.1
		counts []string // passed in cuda.0, cuda.1
	}{
		{[]string{"^(TestA|TestC)$", "^(TestB|TestD)$"}, []string{"2", "2"}}, // no times: in turn
		{[]string{"^(TestA)$", "^(TestD|TestB|TestC)$"}, []string{"1", "3"}}, // 50 s against 30 + 10 + 10
	} {
		r := gpuSh(t, f.env, "check", "--gpus", "3,1")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		for i, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^cuda-warm +0 +1 +0 +0 +\d+  cuda-warm\.log$`),
			regexp.MustCompile(`(?m)^cuda\.0 +0 +` + round.counts[0] + ` +0 +0 +\d+  cuda\.0\.log$`),
			regexp.MustCompile(`(?m)^cuda\.1 +0 +` + round.counts[1] + ` +0 +0 +\d+  cuda\.1\.log$`),
			regexp.MustCompile(`(?m)^backend +0 +1 +0 +0 +\d+  backend\.log$`),
		} {
			if !want.MatchString(r.stdout) {
				t.Errorf("round %d: stdout lacks %s:\n%s", i, want, r.stdout)
			}
		}
		logs := files(t, f.out)
		for i, gpu := range []string{"3", "1"} {
			want := "gpu " + gpu + " args -test.v -test.timeout 1190s -test.run " + round.shares[i] + "\n"
			if !strings.HasPrefix(logs[fmt.Sprintf("cuda.%d.log", i)], want) {
				t.Errorf("cuda.%d.log %q, want it to begin %q", i, logs[fmt.Sprintf("cuda.%d.log", i)], want)
			}
		}
		if want := "gpu 3 args -test.v -test.timeout 590s -test.run ^TestMemory$\n"; !strings.HasPrefix(logs["cuda-warm.log"], want) {
			t.Errorf("cuda-warm.log %q, want it to begin %q", logs["cuda-warm.log"], want)
		}
		if logs["cuda.log"] != logs["cuda.0.log"]+logs["cuda.1.log"] {
			t.Errorf("cuda.log is not the shares' logs joined:\n%s", logs["cuda.log"])
		}
		if !strings.HasPrefix(logs["backend.log"], "gpu 3,1\n") {
			t.Errorf("backend.log %q: the backend should see every GPU listed", logs["backend.log"])
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--gpu", "0", "--gpus", "0,1"}, "--gpu 0 and --gpus 0,1: one or the other"},
		{[]string{"check", "--gpus", "0,x"}, "--gpus 0,x: GPU indices separated by commas"},
		{[]string{"check", "--gpus", "0,1", "--run", "TestA/sub"}, "--gpus 0,1 deals whole tests: --run TestA/sub names subtests"},
		{[]string{"check", "--gpus", "0,1", "--run", "TestZ"}, "--run TestZ: no engine/cuda test matches"},
	} {
		os.RemoveAll(f.out)
		r := gpuSh(t, f.env, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if _, err := os.Stat(f.out); err == nil {
			if left := files(t, f.out); len(left) != 0 {
				t.Errorf("%v: left %v in OUT", tc.args, keys(left))
			}
		}
	}
}

// TestCheckGoTimeout: a test binary stopped by its own -test.timeout (a
// panic, exit 2, before the step's timeout kills it) is a step that ran
// out of time, and the table says so and which --timeout gives it more,
// for the one cuda step and for a share of --gpus alike.
func TestCheckGoTimeout(t *testing.T) {
	f := newFakeGPU(t)
	writeExec(t, filepath.Join(f.gpuDir, "cuda.test"), fakeCudaTest)
	for _, tc := range []struct {
		args []string
		row  string
		done string // a step that finished: no note
	}{
		{[]string{"check", "--tests", "cuda", "--timeout", "cuda=300"}, `cuda +2 +1 +0 +0 +\d+  cuda\.log \(stopped by -test\.timeout 290s; --timeout cuda=SECONDS\)`, `nvidia-smi`},
		{[]string{"check", "--tests", "cuda", "--gpus", "0,1", "--timeout", "cuda=300"}, `cuda\.1 +2 +0 +0 +0 +\d+  cuda\.1\.log \(stopped by -test\.timeout 290s; --timeout cuda=SECONDS\)`, `cuda\.0`},
	} {
		os.RemoveAll(f.out)
		r := gpuSh(t, f.with("XRUN_FAKE_STUCK=TestB"), tc.args...)
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1\nstdout %s\nstderr %s", tc.args, r.code, r.stdout, r.stderr)
		}
		if want := regexp.MustCompile(`(?m)^` + tc.row + `$`); !want.MatchString(r.stdout) {
			t.Errorf("%v: stdout lacks %s:\n%s", tc.args, want, r.stdout)
		}
		if want := regexp.MustCompile(`(?m)^` + tc.done + ` +0 .*\.log$`); !want.MatchString(r.stdout) {
			t.Errorf("%v: stdout lacks %s (a step that finished, unmarked):\n%s", tc.args, want, r.stdout)
		}
	}
}

package bench

import (
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

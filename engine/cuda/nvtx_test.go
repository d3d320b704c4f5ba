//go:build cgo && linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The NVTX tool is attached once per process, so every case with a tool
// runs in a re-executed test binary (TestNVTXChild) with its own
// environment; the parent builds the fake tool and checks what the child
// printed and what the tool logged.
const (
	nvtxChildEnv = "XRUN_NVTX_TEST_CHILD" // set: this process is a child
	nvtxLibEnv   = "XRUN_NVTX_TEST_LIB"   // the fake tool, to look for in /proc/self/maps
	nvtxLogEnv   = "XRUN_NVTX_FAKE_LOG"   // the fake tool's log (testdata/nvtx_fake_injection.c)
	nvtxRefuse   = "XRUN_NVTX_FAKE_REFUSE"
	nvtxIterName = "iteration 120: 2 ctx reqs, 64 ctx tokens, 62 gen reqs"
)

// TestNVTXChild is the child's half: attach (or not) as the environment
// says, push and pop nested ranges on one thread, print the outcome.
func TestNVTXChild(t *testing.T) {
	if os.Getenv(nvtxChildEnv) == "" {
		t.Skip("runs only when re-executed by TestNVTXInjection")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	on := NVTXEnabled()
	err := NVTXError()
	RangePush(nvtxIterName)
	RangePush(strings.Repeat("x", 600)) // longer than the C side's stack copy
	RangePop()
	RangePush("")
	RangePop()
	RangePop()
	again := NVTXEnabled() == on && NVTXError() == err // attached once, not retried
	maps, rerr := os.ReadFile("/proc/self/maps")
	if rerr != nil {
		t.Fatal(rerr)
	}
	lib := os.Getenv(nvtxLibEnv)
	fmt.Printf("NVTXCHILD enabled=%v stable=%v mapped=%v\n", on, again, lib != "" && strings.Contains(string(maps), lib))
	fmt.Printf("NVTXCHILD err=%v\n", err)
}

// buildFakeTool compiles testdata/nvtx_fake_injection.c into dir.
func buildFakeTool(t *testing.T, dir, name string, defines ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the fake NVTX tool cannot be built")
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", out}, defines...)
	args = append(args, filepath.Join("testdata", "nvtx_fake_injection.c"))
	if msg, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out
}

// runNVTXChild re-executes the test binary with env added to a copy of
// this process's environment cleared of anything NVTX (the tests may
// themselves run under a profiler) and returns the child's NVTXCHILD lines.
func runNVTXChild(t *testing.T, env ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNVTXChild$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NVTX_INJECTION") && !strings.HasPrefix(kv, "XRUN_NVTX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, nvtxChildEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var lines []string
	for l := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), "NVTXCHILD "); ok {
			lines = append(lines, rest)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("child printed %d NVTXCHILD lines, want 2:\n%s", len(lines), out)
	}
	return lines
}

func TestNVTXInjection(t *testing.T) {
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d // as the loader lists it in /proc/self/maps
	}
	lib := buildFakeTool(t, dir, "libfake_nvtx.so")
	noEntry := buildFakeTool(t, dir, "libfake_nvtx_noentry.so", "-DXR_FAKE_NO_ENTRY")
	missing := filepath.Join(dir, "absent.so")

	// What the fake tool logs when attached: the export tables it found,
	// every module's table (ids counted with the invalid 0; 7 is no
	// module), then the child's ranges.
	attachLog := []string{
		"attach callbacks=16 version=24:3 etid2=nil",
		"module 1 ids=16 ends=nil holes=0",
		"module 2 ids=9 ends=nil holes=0",
		"module 3 ids=15 ends=nil holes=0",
		"module 4 ids=7 ends=nil holes=0",
		"module 5 ids=16 ends=nil holes=0",
		"module 6 ids=7 ends=nil holes=0",
		"module 7 none",
		"push 0 " + nvtxIterName,
		"push 1 " + strings.Repeat("x", 600),
		"pop 1",
		"push 1 ",
		"pop 1",
		"pop 0",
	}
	tests := []struct {
		name    string
		env     []string
		want    string // the child's first line
		wantErr string // in the child's error line; "" for none
		wantLog []string
	}{
		{"attached", []string{NVTXInjectionEnv + "=" + lib}, "enabled=true stable=true mapped=true", "", attachLog},
		// Only the 64-bit variable counts; with it unset nothing is loaded.
		{"unset", []string{"NVTX_INJECTION32_PATH=" + lib}, "enabled=false stable=true mapped=false", "", nil},
		{"missing library", []string{NVTXInjectionEnv + "=" + missing}, "enabled=false stable=true mapped=false",
			"NVTX off: loading the tool library " + NVTXInjectionEnv + "=" + missing + ": ", nil},
		{"no entry point", []string{NVTXInjectionEnv + "=" + noEntry}, "enabled=false stable=true mapped=false",
			"NVTX off: the tool library " + NVTXInjectionEnv + "=" + noEntry + " has no InitializeInjectionNvtx2", nil},
		// A refusing tool is unloaded again.
		{"refused", []string{NVTXInjectionEnv + "=" + lib, nvtxRefuse + "=1"}, "enabled=false stable=true mapped=false",
			"refused to attach (InitializeInjectionNvtx2 returned 0)", []string{"refuse"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(dir, fmt.Sprintf("log%d.txt", i))
			env := append([]string{nvtxLogEnv + "=" + logPath, nvtxLibEnv + "=" + lib}, tc.env...)
			if tc.name == "no entry point" {
				env[1] = nvtxLibEnv + "=" + noEntry
			}
			lines := runNVTXChild(t, env...)
			if lines[0] != tc.want {
				t.Errorf("child: %s, want %s", lines[0], tc.want)
			}
			switch {
			case tc.wantErr == "" && lines[1] != "err=<nil>":
				t.Errorf("child: %s, want no error", lines[1])
			case tc.wantErr != "" && !strings.Contains(lines[1], tc.wantErr):
				t.Errorf("child: %s, want an error containing %q", lines[1], tc.wantErr)
			}
			data, err := os.ReadFile(logPath)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			var got []string
			for l := range strings.Lines(string(data)) {
				got = append(got, strings.TrimSuffix(l, "\n"))
			}
			if diff := cmp.Diff(tc.wantLog, got); diff != "" {
				t.Errorf("tool log (-want +got):\n%s", diff)
			}
		})
	}
}

// Without a tool, a range costs one atomic load and allocates nothing.
func TestNVTXOffAllocatesNothing(t *testing.T) {
	if os.Getenv(NVTXInjectionEnv) != "" {
		t.Skipf("%s is set: this process runs under an NVTX tool", NVTXInjectionEnv)
	}
	if NVTXEnabled() || NVTXError() != nil {
		t.Fatalf("NVTX on (%v) or failed (%v) with no tool named", NVTXEnabled(), NVTXError())
	}
	name := nvtxIterName
	if n := testing.AllocsPerRun(100, func() { RangePush(name); RangePop() }); n != 0 {
		t.Errorf("push+pop without a tool: %v allocations, want 0", n)
	}
}

// BenchmarkNVTXRangeNoTool is what every engine iteration of a profiled
// pass pays for its range when no profiler is attached.
func BenchmarkNVTXRangeNoTool(b *testing.B) {
	if NVTXEnabled() {
		b.Skip("an NVTX tool is attached")
	}
	b.ReportAllocs()
	for b.Loop() {
		RangePush(nvtxIterName)
		RangePop()
	}
}

// Package trtllmtest installs test fakes of the programs the TensorRT-LLM
// driver runs: TensorRT-LLM's trtllm-bench and trtllm-build, Nsight
// Systems' nsys, and a python3 that answers for TensorRT-LLM's version and
// runs checkpoint conversion scripts. They are one program
// (engine/trtllm/testdata/fake) that plays the role of the name it is run
// under, and they write what the real tools write, in the real formats:
//
//   - python3 -c "...importlib.metadata...tensorrt_llm..." prints the
//     version; python3 SCRIPT.py --model_dir M --output_dir D [--dtype DT]
//     [--tp_size T] [--pp_size P] [--moe_ep_size E] writes a TensorRT-LLM
//     checkpoint: D/config.json and D/rank<i>.safetensors for i < T*P.
//   - trtllm-build --checkpoint_dir C --output_dir E ... writes
//     E/config.json (version, pretrained_config, build_config) and
//     E/rank<i>.engine.
//   - trtllm-bench --model M [--model_path P] throughput ... simulates
//     in-flight batching and writes --report_json, --request_json (1.0+),
//     --output_json and --iteration_log, the text report on stderr, and,
//     under the fake nsys, the kernels of the TLLM_PROFILE_START_STOP
//     window; TLLM_TORCH_PROFILE_TRACE=PATH writes a Chrome trace to PATH
//     (before 1.2) or to PATH's base + "-rank-0" + ext (1.2 on).
//   - nsys profile [-o OUT] ... CMD writes OUT.nsys-rep; nsys stats
//     --report cuda_gpu_kern_sum --format csv --output PREFIX REPORT writes
//     PREFIX_cuda_gpu_kern_sum.csv (and REPORT's .sqlite beside it).
//
// The simulated iteration takes 1.5 ms + 0.004 ms a token, 15 % more with
// an engine built with --gemm_plugin disable (or none), with a jitter of at
// most ±0.5 % drawn from EnvSeed; timestamps count from
// time.perf_counter_ns() = 8e12. The environment variables below steer the
// fakes; Environ builds an environment for them.
package trtllmtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Environment variables the fakes read.
const (
	// EnvVersion is the TensorRT-LLM version every role reports and
	// behaves as (default "1.0.0"): 0.17-0.21 take --backend
	// {pytorch,autodeploy} (none: the TensorRT engine flow, --engine_dir
	// required) and have no --request_json; 1.0 on default to --backend
	// pytorch and add tensorrt, _autodeploy, --request_json and --eos_id;
	// 1.1.0 on print "TensorRT LLM" without the hyphen; 1.2 on report the
	// machine and indent --request_json; 1.3 on drop tensorrt and
	// trtllm-build (which then exits 1).
	EnvVersion = "XRUN_FAKE_TRTLLM_VERSION"
	// EnvMissing=1 makes python3 fail as without the tensorrt_llm
	// package (PackageNotFoundError, ModuleNotFoundError).
	EnvMissing = "XRUN_FAKE_TRTLLM_MISSING"
	// EnvFault makes trtllm-bench fail: FaultOOM, FaultError, FaultHang or
	// FaultNoReport.
	EnvFault = "XRUN_FAKE_TRTLLM_FAULT"
	// EnvSeed (an unsigned integer, default 1) seeds trtllm-bench's
	// latency jitter: runs with different seeds differ by under ±0.5 %,
	// runs with the same seed are identical.
	EnvSeed = "XRUN_FAKE_SEED"
	// EnvNsysCapture is set by nsys profile for the program it runs: the
	// file where the program appends what the capture collects. Tests do
	// not set it.
	EnvNsysCapture = "XRUN_FAKE_NSYS_CAPTURE"
	// EnvNsysOld=1 makes nsys an old release (2021.3): its kernel summary
	// is the report gpukernsum, with the header
	// "Time(%)","Total Time (ns)","Instances","Average","Minimum","Maximum","Name".
	EnvNsysOld = "XRUN_FAKE_NSYS_OLD"
	// EnvNsysStrict=1 makes nsys profile behave as the real one when a
	// cudaProfilerApi capture range never starts: "No reports were
	// generated" and no .nsys-rep. By default it warns and writes a report
	// without kernels (nsys stats then prints SKIPPED).
	EnvNsysStrict = "XRUN_FAKE_NSYS_STRICT"
)

// Values of EnvFault.
const (
	// FaultOOM: a Python traceback ending in torch.OutOfMemoryError on
	// stderr, exit status 1.
	FaultOOM = "oom"
	// FaultError: a traceback ending in "RuntimeError: Executor failed:
	// [TensorRT-LLM][ERROR] Assertion failed: mMaxNumTokens > 0", exit 1.
	FaultError = "error"
	// FaultHang: after "Starting benchmark...", start `sleep 1000` in the
	// same process group (its pid logged as "Started executor worker
	// process (pid N).") and never exit.
	FaultHang = "hang"
	// FaultNoReport: run, then exit 0 without the text report or any
	// report file.
	FaultNoReport = "noreport"
)

// Names are the programs Install links to the fake.
var Names = []string{"trtllm-bench", "trtllm-build", "nsys", "python3"}

var (
	once     sync.Once
	fakeDir  string
	buildErr error
)

// Install builds the fake once per test process and returns a directory
// holding trtllm-bench, trtllm-build, nsys and python3, each a symbolic
// link to it. Put the directory first on PATH (Environ does).
func Install(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { fakeDir, buildErr = build() })
	if buildErr != nil {
		tb.Fatalf("trtllmtest: %v", buildErr)
	}
	return fakeDir
}

func build() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the trtllmtest source")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("module root %s: %w", root, err)
	}
	// Shared by every test of the process, so not tb.TempDir; left behind.
	dir, err := os.MkdirTemp("", "xrun-trtllm-fake-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "fake")
	cmd := exec.Command("go", "build", "-o", bin, "./engine/trtllm/testdata/fake")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./engine/trtllm/testdata/fake: %v\n%s", err, out)
	}
	for _, name := range Names {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Environ is the process environment with dir first on PATH, without the
// fakes' variables and TensorRT-LLM's profiling variables
// (TLLM_PROFILE_START_STOP, TLLM_TORCH_PROFILE_TRACE,
// ENABLE_PERFECT_ROUTER), plus kv ("KEY=VALUE" each).
func Environ(dir string, kv ...string) []string {
	var env []string
	path := dir
	for _, e := range os.Environ() {
		k, v, _ := strings.Cut(e, "=")
		switch {
		case k == "PATH":
			if v != "" {
				path += string(os.PathListSeparator) + v
			}
			continue
		case strings.HasPrefix(k, "XRUN_FAKE_"), k == "TLLM_PROFILE_START_STOP", k == "TLLM_TORCH_PROFILE_TRACE", k == "ENABLE_PERFECT_ROUTER":
			continue
		}
		env = append(env, e)
	}
	env = append(env, "PATH="+path)
	return append(env, kv...)
}

//go:build unix

package trtllm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/trtllm/trtllmtest"
	"github.com/xrun-dev/xrun/results/layout"
)

// testCell is a TinyLlama cell over a small generated dataset, its tools
// the fakes of trtllmtest (env: extra variables for them).
func testCell(t *testing.T, backend string, params driver.Params, env ...string) (*driver.Cell, []datasets.Request) {
	t.Helper()
	fakes := trtllmtest.Install(t)
	dir := t.TempDir()
	dp := datasets.Params{Dist: "token-norm-dist", NumRequests: 12, InputMean: 16, OutputMean: 8, Seed: 420, VocabSize: 32000, EOSID: 2}
	e, err := datasets.Cache{Dir: filepath.Join(dir, "cache")}.Ensure(dp)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := datasets.ReadFile(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	p := driver.Params{"engine": "trtllm", "model": "tinyllama-1.1b", "trtllm_backend": backend, "dtype": "float16",
		"batch_size": 4, "max_num_tokens": 8192, "gemm_plugin": "auto", "kv_cache_free_gpu_mem_fraction": 0.9, "tp": 1, "pp": 1, "ep": 1,
		"routing_mode": "learned", "profile_window": "none", "warmup": 2, "extra_llm_api_options": "none", "gpus_per_cell": 1}
	for k, v := range params {
		p[k] = v
	}
	cfg := engine.Config{Model: "tinyllama-1.1b", Backend: Name, BatchSize: 4, Warmup: 2, NumGPUs: 1, ProfileWindow: p.String("profile_window")}
	c := &driver.Cell{ID: "cell", Dir: filepath.Join(dir, "cells", "cell"), Params: p, Engine: cfg, Model: mc,
		ModelName: engine.HFName("tinyllama-1.1b"), Dataset: e.Path, CacheDir: filepath.Join(dir, "cache"), Env: trtllmtest.Environ(fakes, env...),
		MaxInputLen: 16, MaxSeqLen: 24}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return c, reqs
}

// fakeOptions point the driver at the fakes by name (they lead PATH).
var fakeOptions = Options{}

func TestPyTorchPass(t *testing.T) {
	c, reqs := testCell(t, BackendPyTorch, nil)
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	if e.Tool().Version != "1.0.0" {
		t.Errorf("version %q", e.Tool().Version)
	}
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != len(reqs) || res.Metrics["num_requests"] != 12 || res.Metrics["total_output_tokens"] != 96 || res.Metrics["system_output_throughput_tok_s"] <= 0 {
		t.Errorf("records %d, metrics %v", len(res.Requests), res.Metrics)
	}
	if _, ok := res.Metrics["ttft_avg_ms"]; ok {
		t.Error("TTFT reported without --streaming")
	}
	if len(res.Iterations) == 0 || res.Backend != "trtllm/pytorch" {
		t.Errorf("iterations %d, backend %q", len(res.Iterations), res.Backend)
	}
	// The report's own figure agrees with xrun's from the records.
	rep, err := ReadReport(filepath.Join(c.Dir, "tool", "pass-0", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Metrics["request_throughput_req_s"], rep.Metrics()["request_throughput_req_s"]; abs(got-want) > 1e-3*want {
		t.Errorf("xrun computes %v req/s from the records, trtllm-bench reported %v", got, want)
	}
	cmds := e.Commands()
	if len(cmds) != 2 || cmds[0].Stage != driver.StageVersion || cmds[1].Stage != driver.StageBench {
		t.Fatalf("commands %v", cmds)
	}
	line := cmds[1].String()
	for _, want := range []string{"trtllm-bench --model TinyLlama/TinyLlama-1.1B-Chat-v1.0 --workspace", "throughput --dataset", "--backend pytorch",
		"--max_batch_size 4", "--warmup 2", "--tp 1 --pp 1", "--report_json", "--iteration_log", "--request_json"} {
		if !strings.Contains(line, want) {
			t.Errorf("bench command lacks %q: %s", want, line)
		}
	}
	// A second pass gets a directory of its own.
	if _, err := e.Run(context.Background(), reqs, engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "tool", "pass-1", "report.json")); err != nil {
		t.Error(err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestTensorRTBuildIsCached(t *testing.T) {
	c, reqs := testCell(t, BackendTensorRT, driver.Params{"gemm_plugin": "disable"})
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	if e.Build()["gemm_plugin"] != "disable" || e.Build()["key"] == "" {
		t.Errorf("build %v", e.Build())
	}
	if _, err := e.Run(context.Background(), reqs, engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, cmd := range e.Commands() {
		stages = append(stages, cmd.Stage)
	}
	if strings.Join(stages, ",") != "version,convert,build,bench" {
		t.Errorf("stages %v", stages)
	}
	bench := e.Commands()[3].String()
	if !strings.Contains(bench, "--backend tensorrt --engine_dir "+e.engineDir) || strings.Contains(bench, "--tp") {
		t.Errorf("bench %s", bench)
	}
	build := e.Commands()[2].String()
	for _, want := range []string{"--gemm_plugin disable", "--max_batch_size 4", "--max_input_len 16", "--max_seq_len 24"} {
		if !strings.Contains(build, want) {
			t.Errorf("build lacks %q: %s", want, build)
		}
	}
	// Another cell with the same build finds the engine; one with
	// another plugin builds its own.
	c2 := *c
	c2.Dir = filepath.Join(filepath.Dir(c.Dir), "cell2")
	os.MkdirAll(c2.Dir, 0o755)
	e2, err := Open(context.Background(), fakeOptions, &c2)
	if err != nil {
		t.Fatal(err)
	}
	if e2.engineDir != e.engineDir {
		t.Errorf("the same build went to %s and %s", e.engineDir, e2.engineDir)
	}
	audit, _ := os.ReadFile(filepath.Join(c2.Dir, layout.CommandsFile))
	if strings.Contains(string(audit), `"stage":"build"`) {
		t.Errorf("the cached engine was built again:\n%s", audit)
	}
	c3 := c2
	c3.Params = driver.Params{}
	for k, v := range c.Params {
		c3.Params[k] = v
	}
	c3.Params["gemm_plugin"] = "auto"
	e3, err := Open(context.Background(), fakeOptions, &c3)
	if err != nil {
		t.Fatal(err)
	}
	if e3.engineDir == e.engineDir {
		t.Error("gemm_plugin auto reused the disable engine")
	}
}

func TestOlderRelease(t *testing.T) {
	c, reqs := testCell(t, BackendTensorRT, nil, trtllmtest.EnvVersion+"=0.21.0")
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bench := e.Commands()[len(e.Commands())-1].String()
	if strings.Contains(bench, "--backend") || strings.Contains(bench, "--request_json") {
		t.Errorf("0.21 has neither --backend tensorrt nor --request_json: %s", bench)
	}
	// Without per-request records the report's metrics are taken.
	if len(res.Requests) != 0 || res.Metrics["request_throughput_req_s"] <= 0 || res.Metrics["total_output_tokens"] != 96 {
		t.Errorf("records %d, metrics %v", len(res.Requests), res.Metrics)
	}
}

func TestRefusedReleases(t *testing.T) {
	c, _ := testCell(t, BackendTensorRT, nil, trtllmtest.EnvVersion+"=1.3.0")
	if _, err := Open(context.Background(), fakeOptions, c); err == nil || !strings.Contains(err.Error(), "TensorRT-LLM 1.3.0 removed the TensorRT engine backend") {
		t.Errorf("got %v", err)
	}
	c, _ = testCell(t, BackendPyTorch, nil, trtllmtest.EnvMissing+"=1")
	_, err := Open(context.Background(), fakeOptions, c)
	var te *driver.ToolError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "is TensorRT-LLM installed for python3?") || !strings.Contains(err.Error(), "No package metadata was found for tensorrt_llm") {
		t.Errorf("got %v", err)
	}
}

func TestToolFailures(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{trtllmtest.FaultOOM, "out of GPU memory"},
		{trtllmtest.FaultError, "RuntimeError: Executor failed"},
		{trtllmtest.FaultNoReport, "trtllm-bench wrote no report"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			c, reqs := testCell(t, BackendPyTorch, nil, trtllmtest.EnvFault+"="+tc.fault)
			e, err := Open(context.Background(), fakeOptions, c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Run(context.Background(), reqs, engine.RunOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestHangIsKilled(t *testing.T) {
	c, reqs := testCell(t, BackendPyTorch, nil, trtllmtest.EnvFault+"="+trtllmtest.FaultHang)
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = e.Run(ctx, reqs, engine.RunOptions{})
	var te *driver.ToolError
	if !errors.As(err, &te) || te.Reason != "stopped" {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(t0); d > driver.DefaultGrace+5*time.Second {
		t.Errorf("took %v to stop", d)
	}
}

func TestProfiledPass(t *testing.T) {
	for _, backend := range []string{BackendPyTorch, BackendTensorRT} {
		t.Run(backend, func(t *testing.T) {
			c, reqs := testCell(t, backend, driver.Params{"profile_window": "12-14"})
			e, err := Open(context.Background(), fakeOptions, c)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Run(context.Background(), reqs, engine.RunOptions{Profile: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.KernelSummary != filepath.Join(c.Dir, layout.KernelsFile) {
				t.Errorf("kernel summary %q", res.KernelSummary)
			}
			want := []string{layout.NsysReportFile, layout.KernelsFile}
			if backend == BackendPyTorch {
				want = append(want, layout.TraceFile)
			}
			if strings.Join(res.Files, ",") != strings.Join(want, ",") {
				t.Errorf("files %v, want %v", res.Files, want)
			}
			for _, f := range want {
				if _, err := os.Stat(filepath.Join(c.Dir, f)); err != nil {
					t.Error(err)
				}
			}
			profiled := 0
			for _, it := range res.Iterations {
				if it.Profiled {
					profiled++
				}
			}
			if profiled == 0 {
				t.Errorf("no iteration marked inside the window 12-14 of %d", len(res.Iterations))
			}
			prof := e.Commands()[len(e.Commands())-2].String()
			if !strings.Contains(prof, "TLLM_PROFILE_START_STOP=12-14 ") || !strings.Contains(prof, "nsys profile") || !strings.Contains(prof, "--capture-range cudaProfilerApi") {
				t.Errorf("profiled command %s", prof)
			}
		})
	}
}

func TestProfiledPassOldNsys(t *testing.T) {
	c, reqs := testCell(t, BackendPyTorch, driver.Params{"profile_window": "12-14"}, trtllmtest.EnvNsysOld+"=1")
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.KernelSummary == "" {
		t.Error("no kernel summary from an nsys that names it gpukernsum")
	}
}

func TestPerfectRouter(t *testing.T) {
	c, reqs := testCell(t, BackendPyTorch, driver.Params{"routing_mode": "perfect"})
	e, err := Open(context.Background(), fakeOptions, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), reqs, engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if cmd := e.Commands()[1]; !strings.Contains(cmd.String(), PerfectRouterEnv+"=1 ") {
		t.Errorf("perfect routing without %s: %s", PerfectRouterEnv, cmd)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/runner"
)

const memorySpec = "../../runner/testdata/plan/memory.yaml"

// xrun plan shows each cell's GPU memory and marks those that cannot fit,
// in the text and in the JSON.
func TestPlanMemory(t *testing.T) {
	r := runCLI(t, nil, "plan", memorySpec)
	for _, want := range []string{
		"MEMORY", "89.6 GiB (too large)", "GPU memory on an H100 (--gpu): 79.2 GiB", "1 cell cannot fit it:",
		"mixtral-8x7b_layers-all_eng-auto_norm-57306f99  needs 89.6 GiB, an H100 (--gpu) has 79.2 GiB",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, stderr %q; the plan lacks %q:\n%s", r.code, r.stderr, want, r.stdout)
		}
	}
	r = runCLI(t, nil, "plan", "--json", memorySpec, "--gpu", "H200")
	var p struct {
		Memory struct {
			GPU       struct{ Name string } `json:"gpu"`
			CannotFit []string              `json:"cannot_fit"`
		} `json:"memory"`
		Cells []struct {
			Memory *struct {
				Fits      bool  `json:"fits"`
				NeedBytes int64 `json:"need_bytes"`
			} `json:"memory"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 {
		t.Fatalf("--json: exit %d, %v", r.code, err)
	}
	if p.Memory.GPU.Name != "H200" || len(p.Memory.CannotFit) != 0 || p.Cells[0].Memory == nil || !p.Cells[0].Memory.Fits {
		t.Errorf("on an H200: %+v, first cell %+v", p.Memory, p.Cells[0].Memory)
	}
	if p.Cells[4].Memory != nil {
		t.Errorf("the cpu cell has a memory: %+v", p.Cells[4].Memory)
	}
}

// fakeProbe writes a program that answers the device probe as the CUDA
// backend's probe worker does, with an H100 and an H200, and touches
// marker when it runs.
func fakeProbe(t *testing.T) (exe, marker string) {
	t.Helper()
	if !cuda.Compiled {
		t.Skip("the device probe re-executes a program only where the CUDA backend is compiled in")
	}
	dir := t.TempDir()
	marker = filepath.Join(dir, "probed")
	exe = filepath.Join(dir, "probe")
	reply := `{"devices":{"driver_version":"580.0","gpus":[` +
		`{"index":0,"name":"NVIDIA H200","uuid":"GPU-0","memory_bytes":150109880320,"compute_major":9},` +
		`{"index":1,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-1","memory_bytes":85017493504,"compute_major":9}]}}`
	script := "#!/bin/sh\ntouch '" + marker + "'\necho '" + reply + "'\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, marker
}

// With --probe yes the plan checks the cells against this machine's GPUs,
// the smallest of them; --probe no, --gpu under auto and a study of cpu
// cells never probe.
func TestPlanProbe(t *testing.T) {
	exe, marker := fakeProbe(t)
	probed := func() bool {
		_, err := os.Stat(marker)
		os.Remove(marker)
		return err == nil
	}
	r := runCLIExe(t, exe, nil, "plan", memorySpec, "--probe", "yes")
	for _, want := range []string{
		"GPU memory on GPU 1 (NVIDIA H100 80GB HBM3): 79.2 GiB, the smallest of the 2 GPUs here",
		"needs 89.6 GiB, GPU 1 (NVIDIA H100 80GB HBM3) has 79.2 GiB",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, stderr %q; the plan lacks %q:\n%s", r.code, r.stderr, want, r.stdout)
		}
	}
	if !probed() {
		t.Error("--probe yes did not probe")
	}
	for _, args := range [][]string{
		{"plan", memorySpec, "--probe", "no"},
		{"plan", memorySpec, "--gpu", "H200"},
		{"plan", "../../runner/testdata/plan/collapse.yaml", "--set", "matrix.engine=[cpu]", "--probe", "yes"},
	} {
		if r := runCLIExe(t, exe, nil, args...); r.code != 0 || probed() {
			t.Errorf("%v: exit %d (stderr %q), probed %v", args, r.code, r.stderr, !probed())
		}
	}
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		// No NVIDIA driver here: auto leaves the machine alone.
		if r := runCLIExe(t, exe, nil, "plan", memorySpec); r.code != 0 || probed() || !strings.Contains(r.stdout, "on an H100 (--gpu)") {
			t.Errorf("--probe auto without a driver: exit %d, probed; stdout:\n%s", r.code, r.stdout)
		}
	}
	// A probe that fails is said when asked for, and the --gpu kind used.
	r = runCLI(t, nil, "plan", memorySpec, "--probe", "yes")
	if r.code != 0 || !strings.Contains(r.stdout, "the GPU probe failed") || !strings.Contains(r.stdout, "the cells are checked against the --gpu kind") ||
		!strings.Contains(r.stdout, "GPU memory on an H100 (--gpu)") {
		t.Errorf("failed probe: exit %d, stderr %q:\n%s", r.code, r.stderr, r.stdout)
	}
}

func TestPlanProbeFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--probe", "maybe"}, "xrun: --probe: expected auto, yes or no, got \"maybe\"\n"},
		{[]string{"--commands", "--probe", "yes"}, "xrun: --probe has no effect with --commands (it is for the plan's time estimates)\n"},
	} {
		r := runCLI(t, nil, append([]string{"plan", memorySpec}, tc.args...)...)
		if r.code != exitBadInput || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, r.code, r.stderr, r.stdout, tc.want)
		}
	}
}

// xrun run refuses, before anything runs, the cells that cannot fit the
// GPUs it found: exit 2, each cell named with its need, nothing written.
func TestRunRefusesCellsThatCannotFit(t *testing.T) {
	exe, _ := fakeProbe(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "fit.yaml")
	os.WriteFile(spec, []byte("name: fit\nparams: {engine: cuda, model: mixtral-8x7b, dtype: bfloat16}\n"), 0o644)
	out := filepath.Join(dir, "out")
	r := runCLIExe(t, exe, []string{runner.CacheDirEnv + "=" + filepath.Join(dir, "cache")}, "run", spec, "--out", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "cells that cannot fit the GPUs here") ||
		!strings.Contains(r.stderr, "cell-") || !strings.Contains(r.stderr, ": needs 89.0 GiB, GPU 1 (NVIDIA H100 80GB HBM3) has 79.2 GiB") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused run left %s behind (%v)", out, err)
	}
}

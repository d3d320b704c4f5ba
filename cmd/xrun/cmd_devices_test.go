package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
)

// runDevicesCLI runs "xrun devices" in-process with this test binary as the
// probe's worker: it links engine/cuda, which answers the probe when
// re-executed (runCLI's fake executable cannot be started).
func runDevicesCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	gs := &globalState{
		Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: os.Getenv, Environ: os.Environ, Executable: exe,
	}
	code := run(context.Background(), gs, append([]string{"devices"}, args...))
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestDevices(t *testing.T) {
	r := runDevicesCLI(t)
	if r.code == exitOK {
		// A machine with a usable GPU: the listing must name it.
		for _, want := range []string{"driver ", "CUDA ", "GPU", "UUID", "GPU-", "sm_"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("listing lacks %q:\n%s", want, r.stdout)
			}
		}
		return
	}
	// No usable GPU (CI, this build machine): exit 1 with the reason.
	if r.code != exitCellsFailed {
		t.Fatalf("exit %d, want 1 when no GPU is usable; stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	want := []string{"no usable GPU"}
	if cuda.Compiled {
		// No NVIDIA driver on the build machine: name the library and every
		// path tried, with the loader's message.
		want = append(want, "libcuda.so.1", "was not found", "tried libcuda.so.1 (loader search", "cannot open shared object file")
	} else {
		want = append(want, "no CUDA backend compiled in")
	}
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil && cuda.Compiled {
		want = want[:1] // a driver is installed but unusable: any reason will do
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("explanation lacks %q:\n%s", w, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "xrun: no usable GPU") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestDevicesJSON(t *testing.T) {
	r := runDevicesCLI(t, "--json")
	if !strings.Contains(r.stdout, `"usable"`) || (r.code != exitOK && !strings.Contains(r.stdout, `"reason"`)) {
		t.Errorf("exit %d, JSON %s", r.code, r.stdout)
	}
}

func TestDevicesHelpDocumentsExit(t *testing.T) {
	root, _ := newRootCommand(&globalState{})
	c, _, err := root.Find([]string{"devices"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Long, "Exits 0 when at least one GPU is usable and 1 when none is") {
		t.Errorf("devices help does not document its exit status:\n%s", c.Long)
	}
}

// TestDevicesRooflineColumn: the listing says which ceilings each GPU's
// rooflines divide by: the table's for a known kind, those the CUDA
// backend measured and kept for another, or that they will be measured.
func TestDevicesRooflineColumn(t *testing.T) {
	dir := t.TempDir()
	kept := `{"bytes_per_s": 1.6e12, "flop_per_s": 2.9e14, "device": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "dtype": "float16", "measured": "2026-11-21T16:11:43Z"}`
	if err := os.WriteFile(filepath.Join(dir, "ceilings-GPU-a-float16.json"), []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	d := cuda.Devices{DriverVersion: "580.1", GPUs: []cuda.DeviceInfo{
		{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-a", Major: 8},
		{Index: 1, Name: "NVIDIA L40S", UUID: "GPU-b", Major: 8, Minor: 9},
		{Index: 2, Name: "NVIDIA H200", UUID: "GPU-c", Major: 9},
	}}
	var out strings.Builder
	printDevices(&out, d, nil, dir)
	for _, want := range []string{
		"ROOFLINE CEILINGS",
		"1.60 TB/s, 290 TFLOP/s (float16, measured here 2026-11-21)",
		"none known: measured when a cell first runs here",
		"4.30 TB/s, 790 TFLOP/s (measured on an H200)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listing lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDevicesSwitches: the listing ends with every engine switch, its
// default, its value in effect in the environment (with the variable's
// text where that differs) and what it does.
func TestDevicesSwitches(t *testing.T) {
	env := map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_CUDA_GEMV_MAXM": "9", "XRUN_CUDA_MOE_HINTS": "02", "XRUN_CUDA_LT_LOG": "1"}
	var out strings.Builder
	printSwitches(&out, func(k string) string { return env[k] })
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := len(engine.Switches.All()) + 2; len(lines) != want {
		t.Fatalf("%d lines, want %d (a title, a header, a switch each):\n%s", len(lines), want, out.String())
	}
	for i, want := range [][]string{
		{"SWITCH", "DEFAULT", "VALUE", "RECORDED", "WHAT IT DOES"},
		{"XRUN_OVERLAP", "1", "1", "yes", "the overlap scheduler"},
		{"XRUN_CUDA_GRAPHS", "1", "0", "yes", "CUDA graphs for decode; 0 launches decode eagerly too"},
	} {
		if f := strings.Fields(lines[i+1]); len(f) < 4 || !slices.Equal(f[:4], strings.Fields(strings.Join(want[:4], " "))) ||
			!strings.Contains(lines[i+1], want[4]) {
			t.Errorf("line %d: %q, want %q", i+2, lines[i+1], want)
		}
	}
	for _, want := range []string{
		`XRUN_CUDA_GEMV_MAXM +4 +4 \(set to "9"\) +yes `,  // ignored: not in 0..8
		`XRUN_CUDA_MOE_HINTS +3 +2 \(set to "02"\) +yes `, // another spelling of 2
		`XRUN_CUDA_LT_LOG +0 +1 +no `,                     // printing only
	} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(out.String()) {
			t.Errorf("listing lacks a line %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "`") {
		t.Errorf("markdown quotes in the listing:\n%s", out.String())
	}
}

// TestDevicesSwitchesJSON: --json lists the switches too, with or
// without a GPU.
func TestDevicesSwitchesJSON(t *testing.T) {
	t.Setenv("XRUN_CUDA_PDL", "0")
	r := runDevicesCLI(t, "--json")
	var got struct {
		Switches []switchValue `json:"switches"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(got.Switches) != len(engine.Switches.All()) {
		t.Fatalf("%d switches, want %d", len(got.Switches), len(engine.Switches.All()))
	}
	for _, s := range got.Switches {
		if s.Name == "XRUN_CUDA_PDL" && (s.Value != "0" || s.Default != "1" || !s.Recorded || s.Set != "" || s.Meaning == "") {
			t.Errorf("XRUN_CUDA_PDL=0: %+v", s)
		}
	}
}

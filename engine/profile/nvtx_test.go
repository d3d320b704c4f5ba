package profile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestNVTXNote: a GPU pass whose NVTX tool failed to attach says so in
// its diagnosis, which results.md lists under the cell's kernels; a CPU
// pass never asks.
func TestNVTXNote(t *testing.T) {
	old := nvtxError
	defer func() { nvtxError = old }()
	nvtxError = func() error {
		return errors.New("NVTX off: loading the tool library NVTX_INJECTION64_PATH=/opt/nsys/libToolsInjection64.so: cannot open shared object file")
	}
	p, _, err := WriteArtifacts(t.TempDir(), gpuResult(), tinyLlama(t), Options{Device: Device{Name: "NVIDIA H200", ElemBytes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := "note: NVTX ranges not recorded: loading the tool library NVTX_INJECTION64_PATH=/opt/nsys/libToolsInjection64.so: cannot open shared object file; the outside profiler's timeline has no iteration ranges (kernels.csv and trace.json are unaffected)"
	if !slices.Contains(p.Diagnosis, want) {
		t.Errorf("diagnosis %q\nlacks %q", p.Diagnosis, want)
	}
	res, mc := profiledRun(t, "auto")
	if p, _, err = WriteArtifacts(t.TempDir(), res, mc, Options{Device: testDevice}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(p.Diagnosis, func(l string) bool { return strings.Contains(l, "NVTX") }) {
		t.Errorf("CPU pass: %q", p.Diagnosis)
	}
	nvtxError = func() error { return nil }
	if p, _, err = WriteArtifacts(t.TempDir(), gpuResult(), tinyLlama(t), Options{Device: Device{Name: "NVIDIA H200", ElemBytes: 2}}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(p.Diagnosis, func(l string) bool { return strings.Contains(l, "NVTX") }) {
		t.Errorf("attached (or no tool asked for): %q", p.Diagnosis)
	}
}

func tinyLlama(t *testing.T) engine.ModelConfig {
	t.Helper()
	mc, ok := engine.ZooModel("tiny-llama")
	if !ok {
		t.Fatal("no tiny-llama in the zoo")
	}
	return mc
}

package runner

import (
	"context"
	"maps"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// clearSwitches unsets every engine switch for the test, whatever the
// environment it runs in.
func clearSwitches(t *testing.T) {
	t.Helper()
	for _, s := range engine.Switches.All() {
		t.Setenv(s.Name, "")
	}
}

// TestFingerprintSwitches: a recorded engine switch not at its default
// changes the fingerprint; without one the fingerprint is the one results
// recorded before switches were (so they stay resumable).
func TestFingerprintSwitches(t *testing.T) {
	c := &Cell{Hash: "0123abcd"}
	b := BuildInfo{Version: "v1.0.0", Commit: "abc", GoVersion: "go1.26"}
	fp := func(env ...string) string {
		s := &study{o: Options{Env: env}}
		return fingerprint(c, 3, b, "cpu", "cpu X", s.switches())
	}
	// sha256("xrun-fingerprint/1\ncell=0123abcd\nrepeats=3\nxrun=v1.0.0
	// commit=abc modified=false go=go1.26\nbackend=cpu\ndevice=cpu X\n").
	const before = "52e815cb9d0513c6"
	for _, env := range [][]string{
		{},
		{"XRUN_CUDA_GRAPHS=1"},     // the default
		{"XRUN_CUDA_GEMV_MAXM=04"}, // the default, spelled otherwise
		{"XRUN_CUDA_MOE_HINTS=7"},  // not taken: the default
		{"XRUN_CUDA_LT_LOG=1"},     // not recorded
		{"XRUN_CUDA_GRAPHS=0", "XRUN_CUDA_GRAPHS="}, // the last one counts, as for the workers
	} {
		if got := fp(env...); got != before {
			t.Errorf("%q: fingerprint %s, want %s as before switches were recorded", env, got, before)
		}
	}
	graphs, overlap, both := fp("XRUN_CUDA_GRAPHS=0"), fp("XRUN_OVERLAP=0"), fp("XRUN_OVERLAP=0", "XRUN_CUDA_GRAPHS=0")
	if len(map[string]bool{before: true, graphs: true, both: true, overlap: true}) != 4 {
		t.Errorf("fingerprints: none %s, XRUN_CUDA_GRAPHS=0 %s, XRUN_OVERLAP=0 %s, both %s; want all different", before, graphs, overlap, both)
	}
	if again := fp("XRUN_CUDA_GRAPHS=0", "XRUN_OVERLAP=0"); again != both {
		t.Errorf("the order of the environment changes the fingerprint: %s, %s", again, both)
	}
}

// TestStudySwitches: without Options.Env the workers get this process's
// environment, and so do the switches.
func TestStudySwitches(t *testing.T) {
	clearSwitches(t)
	t.Setenv("XRUN_CUDA_SYNC", "1")
	if got := (&study{}).switches(); !maps.Equal(got, map[string]string{"XRUN_CUDA_SYNC": "1"}) {
		t.Errorf("from the process's environment: %v", got)
	}
	if got := (&study{o: Options{Env: []string{"PATH=/bin"}}}).switches(); got != nil {
		t.Errorf("from Options.Env without switches: %v", got)
	}
}

// TestRunWorkerRecordsSwitches: the plan's fingerprints take the switches
// of the environment the plan is built in, and the worker records those of
// its own in cell.json; the cuda backend's switches too, on the cpu
// backend, which ignores them.
func TestRunWorkerRecordsSwitches(t *testing.T) {
	clearSwitches(t)
	plain, _ := plannedStudy(t)
	t.Setenv("XRUN_CUDA_GRAPHS", "0")
	t.Setenv("XRUN_CUDA_MOE_TILE", "l")
	t.Setenv("XRUN_CUDA_LT_LOG", "1")
	s, dir := plannedStudy(t)
	want := map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_CUDA_MOE_TILE": "l"}
	c := s.spec.Plan.Cells[0]
	fp := s.cells[c.Index].wc.Fingerprint
	if fp == plain.cells[c.Index].wc.Fingerprint {
		t.Fatalf("the switches do not change cell %s's fingerprint %s", c.ID, fp)
	}
	if err := RunWorker(context.Background(), dir, c.ID, WorkerOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, err := readCellRecord(dir, c.ID)
	if err != nil || rec == nil {
		t.Fatalf("no record (%v)", err)
	}
	if !maps.Equal(rec.Switches, want) || rec.Fingerprint != fp {
		t.Errorf("cell.json: switches %v, fingerprint %s; want %v, %s", rec.Switches, rec.Fingerprint, want, fp)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/layout"
)

// cellSwitches reads a cell's cell.json: its switches and fingerprint.
func cellSwitches(t *testing.T, dir, id string) (map[string]string, string, []byte) {
	t.Helper()
	b, err := os.ReadFile(cellFile(dir, id, layout.CellFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Switches    map[string]string `json:"switches"`
		Fingerprint string            `json:"fingerprint"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Switches, rec.Fingerprint, b
}

// TestRunRecordsSwitches: engine switches set for a run (on the cpu
// backend, which ignores the cuda ones: still recorded) are in cell.json,
// results.json's environment and results.md; --resume keeps the cell
// under the same switches and measures it again under others.
func TestRunRecordsSwitches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	id := tinyCells[0]
	args := []string{"run", tinySpec, "--out", dir, "--only", "id=" + id}
	// Every switch unset first, whatever the test's environment holds
	// (the later entries win).
	var unset []string
	for _, s := range engine.Switches.All() {
		unset = append(unset, s.Name+"=")
	}
	set := append(slices.Clone(unset), "XRUN_CUDA_GRAPHS=0", "XRUN_OVERLAP=0", "XRUN_CUDA_GEMV_MAXM=4", "XRUN_CUDA_LT_LOG=1")
	want := map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_OVERLAP": "0"}
	if r := runStudy(t, studyEnv(t, set...), args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	sw, fp, first := cellSwitches(t, dir, id)
	if !maps.Equal(sw, want) {
		t.Errorf("cell.json switches %v, want %v", sw, want)
	}
	res, _ := loadResults(t, dir)
	if !maps.Equal(res.Environment.Switches, want) {
		t.Errorf("results.json environment.switches %v, want %v", res.Environment.Switches, want)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile)); !strings.Contains(string(md), "engine switches: XRUN_CUDA_GRAPHS=0, XRUN_OVERLAP=0") {
		t.Errorf("results.md does not name the switches:\n%s", md)
	}

	// The same switches: the cell is kept as it is.
	if r := runStudy(t, studyEnv(t, set...), append(args, "--resume")...); r.code != 0 {
		t.Fatalf("--resume, same switches: exit %d\n%s", r.code, r.stderr)
	}
	if _, _, again := cellSwitches(t, dir, id); !bytes.Equal(again, first) {
		t.Errorf("--resume under the same switches measured the cell again")
	}

	// Unset: measured again, under a new fingerprint, with nothing
	// recorded.
	if r := runStudy(t, studyEnv(t, unset...), append(args, "--resume")...); r.code != 0 {
		t.Fatalf("--resume, switches unset: exit %d\n%s", r.code, r.stderr)
	}
	sw, fp2, _ := cellSwitches(t, dir, id)
	if sw != nil || fp2 == fp {
		t.Errorf("after --resume without switches: cell.json switches %v, fingerprint %s (was %s); want none, another", sw, fp2, fp)
	}
	res, _ = loadResults(t, dir)
	if res.Environment.Switches != nil {
		t.Errorf("results.json environment.switches %v after a run without", res.Environment.Switches)
	}
}

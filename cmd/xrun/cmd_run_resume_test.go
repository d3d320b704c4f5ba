package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// partialCell is the cell the resume tests interrupt: the first of
// tinySpec, run with three repeats.
var partialCell = tinyCells[0]

// cellOrigins reads which worker ran each pass from a cell's cell.json.
type cellOrigins struct {
	Status   results.Status `json:"status"`
	Repeats  []results.Metrics
	Sessions []struct {
		PID int `json:"pid"`
	} `json:"sessions"`
	Passes []struct {
		Repeat         int  `json:"repeat"`
		Session        int  `json:"session"`
		EarlierSession bool `json:"earlier_session"`
	} `json:"passes"`
}

func readOrigins(t *testing.T, dir, id string) cellOrigins {
	t.Helper()
	b, err := os.ReadFile(cellFile(dir, id, layout.CellFile))
	if err != nil {
		t.Fatal(err)
	}
	var o cellOrigins
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkResumed checks that repeats 1..kept of a complete cell came from an
// earlier worker and the rest from the last.
func checkResumed(t *testing.T, dir, id string, kept, repeats int) {
	t.Helper()
	o := readOrigins(t, dir, id)
	sessions := 2
	if kept == 0 {
		sessions = 1
	}
	if o.Status != results.StatusOK || len(o.Repeats) != repeats || len(o.Sessions) != sessions || len(o.Passes) != repeats {
		t.Fatalf("cell %s: %s, %d repeats, %d sessions, %d passes; want ok, %d, %d, %d", id, o.Status, len(o.Repeats), len(o.Sessions), len(o.Passes), repeats, sessions, repeats)
	}
	for i, p := range o.Passes {
		if p.Repeat != i+1 || p.EarlierSession != (i < kept) {
			t.Errorf("cell %s, pass %d: %+v; want earlier_session %t", id, i, p, i < kept)
		}
	}
	if _, err := os.Stat(cellFile(dir, id, layout.RepeatsDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cell %s: the repeats outlived its record (%v)", id, err)
	}
}

// interruptAfterRepeat1 starts tinySpec with three repeats, interrupts it
// (SIGINT) once the first cell has recorded its first repeat, and checks
// what results.json and results.md say.
func interruptAfterRepeat1(t *testing.T, dir string) {
	t.Helper()
	cmd, stderr := startStudy(t, studyEnv(t, runner.FaultEnv+"="+partialCell+":slow@r1"),
		"--log-format", "json", "run", tinySpec, "--out", dir, "--set", "repeats=3", "--kill-grace", "5s")
	waitFor(t, filepath.Join(dir, "cells", partialCell, layout.RepeatsDir, "1.json"))
	interruptStudy(t, cmd, stderr)
	const note = "interrupted after 1 of 3 repeats; xrun run --resume runs the rest"
	_, cells := loadResults(t, dir)
	if c := cells[partialCell]; c.Status != results.StatusSkipped || c.Error != note || len(c.Repeats) != 1 {
		t.Errorf("interrupted cell: %s %q, %d repeats; want skipped %q, 1", c.Status, c.Error, len(c.Repeats), note)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile)); !strings.Contains(string(md), note) {
		t.Errorf("results.md does not say %q:\n%s", note, md)
	}
}

// TestRunResumesRepeats: Ctrl-C in the middle of a cell keeps the repeats
// it recorded; --resume runs only the rest of them.
func TestRunResumesRepeats(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	interruptAfterRepeat1(t, dir)
	r := runStudy(t, studyEnv(t), "--log-format", "json", "run", tinySpec, "--out", dir, "--set", "repeats=3", "--resume")
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	kept := logLines(r.stderr, "repeats recorded by an earlier run are kept; the cell runs the rest")
	if len(kept) != 1 || kept[0]["cell"] != partialCell || kept[0]["repeats_kept"] != 1.0 {
		t.Errorf("the resumed run does not say it keeps repeat 1: %v", kept)
	}
	checkResumed(t, dir, partialCell, 1, 3)
	_, cells := loadResults(t, dir)
	for _, id := range tinyCells {
		if c := cells[id]; c.Status != results.StatusOK || len(c.Repeats) != 3 || c.Summary["request_throughput_req_s"].N != 3 {
			t.Errorf("cell %s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
		}
	}
}

// TestRunFreshDiscardsRepeats: --fresh measures an interrupted cell from
// its first repeat.
func TestRunFreshDiscardsRepeats(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	interruptAfterRepeat1(t, dir)
	r := runStudy(t, studyEnv(t), "run", tinySpec, "--out", dir, "--set", "repeats=3", "--fresh", "--only", "id="+partialCell)
	if r.code != 0 {
		t.Fatalf("--fresh: exit %d\n%s", r.code, r.stderr)
	}
	checkResumed(t, dir, partialCell, 0, 3)
}

// TestRunKilledMidWrite: a worker killed (SIGKILL) half-way through
// writing a repeat's record leaves the repeats before it whole and no
// record of that one; --resume keeps the former and measures the rest.
func TestRunKilledMidWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	only := []string{"--set", "repeats=3", "--only", "id=" + partialCell}
	r := runStudy(t, studyEnv(t, runner.FaultEnv+"="+partialCell+":kill@write-r2"), append([]string{"run", tinySpec, "--out", dir}, only...)...)
	if r.code != exitCellsFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	_, cells := loadResults(t, dir)
	if c := cells[partialCell]; c.Status != results.StatusFailed || !strings.Contains(c.Error, "SIGKILL") ||
		!strings.HasSuffix(c.Error, "; 1 of 3 repeats kept (xrun run --resume runs the rest)") || len(c.Repeats) != 1 {
		t.Errorf("killed cell: %s %q, %d repeats", c.Status, c.Error, len(c.Repeats))
	}
	rdir := filepath.Join(dir, "cells", partialCell, layout.RepeatsDir)
	entries, err := os.ReadDir(rdir)
	if err != nil {
		t.Fatal(err)
	}
	var temp bool
	for _, e := range entries {
		switch {
		case e.Name() == "2.json":
			t.Error("the record of the repeat being written exists")
		case strings.HasPrefix(e.Name(), ".2.json.tmp-"):
			temp = true
		}
	}
	if !temp {
		t.Errorf("no half-written temporary record: the fault did not strike mid-write (%v)", entries)
	}

	r = runStudy(t, studyEnv(t), append([]string{"run", tinySpec, "--out", dir, "--resume"}, only...)...)
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	checkResumed(t, dir, partialCell, 1, 3)
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// TestRunTimeLimit: with --time-limit 9m and repeats of 6 minutes (on the
// worker's clock: the fault took=6m), a cell stops after its first repeat,
// the run exits 130 with everything finished kept; --resume with 5 minutes
// predicts the next repeat from the recorded one and starts nothing;
// --resume without a limit completes the cell.
func TestRunTimeLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"--log-format", "json", "run", tinySpec, "--out", dir, "--set", "repeats=3"}
	r := runStudy(t, studyEnv(t, runner.FaultEnv+"="+partialCell+":took=6m"), append(args, "--time-limit", "9m")...)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want 130\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "xrun: stopped at the time limit (--time-limit 9m0s): 1 of the 6 cells to run did not finish") ||
		!strings.Contains(r.stderr, "xrun run --resume continues") {
		t.Errorf("the final error does not say the run stopped at the time limit:\n%s", r.stderr)
	}
	const held = "not started: it would not finish before the time limit (xrun run --resume runs it)"
	if l := logLines(r.stderr, held); len(l) != 1 || l[0]["cell"] != partialCell || l[0]["step"] != "repeat 2 of 3" ||
		!strings.HasPrefix(l[0]["predicted"].(string), "6m0") || l[0]["limit"] != "--time-limit 9m0s" {
		t.Errorf("the log does not say which step was not started: %v", l)
	}
	const note = "stopped at the time limit after 1 of 3 repeats; xrun run --resume runs the rest"
	_, cells := loadResults(t, dir)
	for _, id := range tinyCells {
		c := cells[id]
		switch {
		case id == partialCell && (c.Status != results.StatusSkipped || c.Error != note || len(c.Repeats) != 1):
			t.Errorf("stopped cell: %s %q, %d repeats; want skipped %q, 1", c.Status, c.Error, len(c.Repeats), note)
		case id != partialCell && (c.Status != results.StatusOK || len(c.Repeats) != 3):
			t.Errorf("cell %s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
		}
	}
	if md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile)); !strings.Contains(string(md), note) {
		t.Errorf("results.md does not say %q:\n%s", note, md)
	}

	// Repeat 1, recorded by the first run, says a repeat takes 6 minutes:
	// with 5 left the cell is not even started (its note is the
	// scheduler's, not a stopped worker's).
	r = runStudy(t, studyEnv(t), append(args, "--resume", "--time-limit", "5m")...)
	if r.code != exitInterrupted {
		t.Fatalf("--resume --time-limit 5m: exit %d, want 130\n%s", r.code, r.stderr)
	}
	if l := logLines(r.stderr, held); len(l) != 1 || l[0]["cell"] != partialCell || !strings.HasPrefix(l[0]["predicted"].(string), "6m0") {
		t.Errorf("the resumed run does not predict from the recorded repeat: %v", l)
	}
	_, cells = loadResults(t, dir)
	if c := cells[partialCell]; c.Status != results.StatusSkipped || len(c.Repeats) != 1 ||
		c.Error != "not run: the study stopped at its time limit (xrun run --resume runs it); 1 of 3 repeats kept" {
		t.Errorf("held cell: %s %q, %d repeats", c.Status, c.Error, len(c.Repeats))
	}

	r = runStudy(t, studyEnv(t), append(args, "--resume")...)
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	checkResumed(t, dir, partialCell, 1, 3)
}

func TestRunTimeLimitBadValue(t *testing.T) {
	for _, v := range []string{"soon", "9", "0", "-1m", "1d"} {
		dir := filepath.Join(t.TempDir(), "out")
		r := runCLI(t, nil, "run", tinySpec, "--out", dir, "--time-limit", v)
		if r.code != exitBadInput || !strings.Contains(r.stderr, "--time-limit") || !strings.Contains(r.stderr, "expected a duration greater than 0") {
			t.Errorf("--time-limit %q: exit %d, want 2 naming the flag and what it expects\n%s", v, r.code, r.stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--time-limit %q: the results directory was created", v)
		}
	}
	if r := runCLI(t, nil, "run", "--help"); !strings.Contains(r.stdout, "--time-limit") {
		t.Error("run --help does not document --time-limit")
	}
}

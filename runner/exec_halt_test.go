package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// failingWrites makes the writes of results numbered in fail (from 1)
// fail as on a full disk; the others write.
func failingWrites(fail func(n int) bool) func(string, *results.Results) error {
	n := 0
	return func(dir string, r *results.Results) error {
		if n++; fail(n) {
			return &fs.PathError{Op: "write", Path: filepath.Join(dir, layout.JSONFile), Err: syscall.ENOSPC}
		}
		return results.WriteDir(dir, r)
	}
}

// TestWriteFailureStopsStudy: when results cannot be written (a full
// disk), no further cell starts, the cells not run are marked so, the run
// fails (exit status 1) saying the disk is full, and "results written" is
// logged only after a write that succeeded.
func TestWriteFailureStopsStudy(t *testing.T) {
	const stopped = "not run: the study stopped: the disk is full: "
	for _, tc := range []struct {
		name string
		fail func(n int) bool // which writes fail
		// outcomes of the cells (by plan index) that do not succeed
		outcomes map[int]outcome
		ran      int  // cells run
		written  bool // the last write succeeds
	}{
		// Write 1 lays the results out, write k+1 follows cell k.
		{"once", func(n int) bool { return n == 3 }, nil, 2, true},
		{"from then on", func(n int) bool { return n >= 3 }, nil, 2, false},
		{"the last", func(n int) bool { return n == 8 }, nil, 6, false},
		{"a worker out of space", func(int) bool { return false },
			map[int]outcome{0: {failure: "worker exited with status 1: cell x: write cells/x/cell.json: no space left on device"}}, 1, true},
		{"a cell directory", func(int) bool { return false },
			map[int]outcome{1: {failure: "cannot create the cell's directory: mkdir x: no space left on device",
				writeErr: &fs.PathError{Op: "mkdir", Path: "x", Err: syscall.ENOSPC}}}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := cpuStudy(t, zerolog.New(&logs))
			s.writeResults = failingWrites(tc.fail)
			s.initResults(context.Background())
			s.write()
			f := &recordingCells{outcomes: map[string]outcome{}}
			for i, o := range tc.outcomes {
				f.outcomes[s.cells[i].cell.ID] = o
			}
			s.exec = f
			res, err := s.execute(context.Background())
			var bi interface{ BadInput() bool }
			notRun := fmt.Sprintf("%d of the 6 cells to run were not run", 6-tc.ran)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrInterrupted) || errors.As(err, &bi) ||
				!strings.Contains(err.Error(), "the disk is full") || strings.Contains(err.Error(), notRun) != (tc.ran < 6) {
				t.Errorf("err = %v; want the disk is full, %d cells not run", err, 6-tc.ran)
			}
			if len(f.ran) != tc.ran {
				t.Errorf("%d cells ran (%v), want %d: no cell starts once the study stops", len(f.ran), f.ran, tc.ran)
			}
			for i, c := range res.Cells[tc.ran:] {
				if c.Status != results.StatusSkipped || !strings.HasPrefix(c.Error, stopped) || !strings.HasSuffix(c.Error, "(xrun run --resume runs it)") {
					t.Errorf("cell %d, not run: %s %q", tc.ran+i, c.Status, c.Error)
				}
			}
			disk, rerr := results.ReadFile(filepath.Join(s.dir, layout.JSONFile))
			if rerr != nil {
				t.Fatal(rerr)
			}
			marked := 0
			for _, c := range disk.Cells {
				if strings.HasPrefix(c.Error, stopped) {
					marked++
				}
			}
			if want := map[bool]int{true: 6 - tc.ran, false: 0}[tc.written]; marked != want {
				t.Errorf("results.json marks %d cells as not run for the full disk, want %d", marked, want)
			}
			logged := logs.String()
			if strings.Contains(logged, `"results written"`) != tc.written || strings.Contains(logged, "results not written") == tc.written {
				t.Errorf("the last write succeeded: %t; the log says:\n%s", tc.written, logged)
			}
		})
	}
}

// TestResultsWriter: the test seam fails from the write it names on.
func TestResultsWriter(t *testing.T) {
	w, err := resultsWriter(func(string) string { return "2" })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &results.Results{Name: "x", Cells: []results.Cell{}}
	for n, wantErr := range []bool{false, true, true} {
		if err := w(dir, r); (err != nil) != wantErr || wantErr && !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("write %d: %v", n+1, err)
		}
	}
	for _, v := range []string{"0", "x", "-1"} {
		if _, err := resultsWriter(func(string) string { return v }); err == nil {
			t.Errorf("%s=%s: no error", WriteFaultEnv, v)
		}
	}
}

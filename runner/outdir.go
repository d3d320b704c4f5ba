package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/results"
)

// The layout of a results directory. Everything a person reads is at the
// top or under cells/; what only xrun reads is under .xrun/.
//
//	DIR/results.json, results.md     the study (rewritten after every cell)
//	DIR/cells/<id>/cell.json         the cell as its worker measured it
//	DIR/cells/<id>/repeats/          each timed repeat, recorded as it finishes,
//	                                 until cell.json holds them (worker_repeats.go)
//	DIR/cells/<id>/requests.jsonl    per-request records of every pass
//	DIR/cells/<id>/iterations.csv    per-iteration records of every pass
//	DIR/cells/<id>/log.jsonl         the worker's own log
//	DIR/cells/<id>/stderr.log        whatever the worker process printed
//	DIR/.xrun/lock                   held (flock) for the whole run
//	DIR/.xrun/plan.json              the cells as the workers read them
const (
	CellsDir       = "cells"
	StateDir       = ".xrun"
	LockFile       = "lock"
	PlanFile       = "plan.json"
	CellFile       = "cell.json"
	RequestsFile   = "requests.jsonl"
	IterationsFile = "iterations.csv"
	ExpertLoadFile = "expert_load.csv"
	LogFile        = "log.jsonl"
	StderrFile     = "stderr.log"
	ProfileFile    = "profile.json"
)

// CellDir is where a cell's artifacts live.
func CellDir(dir, id string) string { return filepath.Join(dir, CellsDir, id) }

// cellArtifact is an artifact's path as results.json lists it: relative
// to the results directory, with forward slashes.
func cellArtifact(id, name string) string { return CellsDir + "/" + id + "/" + name }

// writeJSONAtomic writes v as indented JSON through a temporary file and a
// rename, so a reader (or a resumed run after kill -9) sees the old file or
// the new one, never a part.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	return dsets.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// holdsResults reports whether dir already holds a study's results, and
// which file says so.
func holdsResults(dir string) (bool, string) {
	if _, err := os.Stat(filepath.Join(dir, results.JSONFile)); err == nil {
		return true, filepath.Join(dir, results.JSONFile)
	}
	entries, err := os.ReadDir(filepath.Join(dir, CellsDir))
	if err == nil && len(entries) > 0 {
		return true, filepath.Join(dir, CellsDir)
	}
	return false, ""
}

// clearResults removes what earlier runs wrote into dir (for --fresh), and
// nothing else: dir may be a directory the user keeps other files in.
func clearResults(dir string) error {
	for _, p := range []string{
		filepath.Join(dir, results.JSONFile),
		filepath.Join(dir, results.MarkdownFile),
		filepath.Join(dir, CellsDir),
		filepath.Join(dir, StateDir, PlanFile),
	} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("--fresh: %w", err)
		}
	}
	return nil
}

// readCellRecord reads a cell's cell.json; a missing file is (nil, nil).
func readCellRecord(dir, id string) (*cellRecord, error) {
	path := filepath.Join(CellDir(dir, id), CellFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec cellRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("%s: holds cell %q, expected %q", path, rec.ID, id)
	}
	return &rec, nil
}

// existingArtifacts lists the files of a cell directory as results.json
// artifacts, for a cell whose worker left no cell.json behind.
func existingArtifacts(dir, id string) []string {
	entries, err := os.ReadDir(CellDir(dir, id))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Type().IsRegular() && info.Size() > 0 {
			out = append(out, cellArtifact(id, e.Name()))
		}
	}
	return out
}

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
	"github.com/xrun-dev/xrun/results/layout"
)

// The layout of a results directory is package results/layout's.

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
	if _, err := os.Stat(filepath.Join(dir, layout.JSONFile)); err == nil {
		return true, filepath.Join(dir, layout.JSONFile)
	}
	entries, err := os.ReadDir(filepath.Join(dir, layout.CellsDir))
	if err == nil && len(entries) > 0 {
		return true, filepath.Join(dir, layout.CellsDir)
	}
	return false, ""
}

// clearResults removes what earlier runs wrote into dir (for --fresh), and
// nothing else: dir may be a directory the user keeps other files in.
func clearResults(dir string) error {
	for _, p := range []string{
		filepath.Join(dir, layout.JSONFile),
		filepath.Join(dir, layout.MarkdownFile),
		filepath.Join(dir, layout.CellsDir),
		filepath.Join(dir, layout.StateDir, layout.PlanFile),
	} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("--fresh: %w", err)
		}
	}
	return nil
}

// readCellRecord reads a cell's cell.json; a missing file is (nil, nil).
func readCellRecord(dir, id string) (*cellRecord, error) {
	path := filepath.Join(layout.CellDir(dir, id), layout.CellFile)
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
	entries, err := os.ReadDir(layout.CellDir(dir, id))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Type().IsRegular() && info.Size() > 0 {
			out = append(out, layout.CellArtifact(id, e.Name()))
		}
	}
	return out
}

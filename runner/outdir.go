package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/xrun-dev/xrun/results/atomicfile"
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
	return atomicfile.WriteBytes(path, b)
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

// OutDirError is a results directory that cannot be created, locked or
// written: a read-only directory or filesystem, a file in the way, a path
// under a file (out: /dev/null/x). It names the path and where it was
// chosen (--out, the spec's out: line, or the default results/<name>), so
// the fix is plain. Bad input (exit status 2), but for a full disk or an
// I/O error, which are the machine's.
type OutDirError struct {
	Dir string
	// From is where Dir was chosen: "--out", the spec's "FILE:LINE:COL" or
	// "--set out=DIR", or "" for the default, results/<name>.
	From string
	Err  error
}

func (e *OutDirError) Error() string {
	var where, fix string
	switch {
	case e.From == "--out":
		where, fix = "--out "+e.Dir, "choose another --out"
	case strings.HasPrefix(e.From, "--set "):
		where, fix = e.From, "set another out, or give --out"
	case e.From != "":
		where, fix = e.From+": out: "+e.Dir, "change out: there, or give --out"
	default:
		where, fix = e.Dir+" (the default results directory, results/<name>)", "give --out"
	}
	msg := where + ": cannot use it as the results directory"
	if why := pathProblem(e.Err); why != "" {
		msg += " (" + why + ")"
	}
	return msg + ": " + e.Err.Error() + "; " + fix
}

func (e *OutDirError) Unwrap() error { return e.Err }

func (e *OutDirError) BadInput() bool {
	return !errors.Is(e.Err, syscall.ENOSPC) && !errors.Is(e.Err, syscall.EIO)
}

// pathProblem says in words what a failed file operation ran into, for
// the errors a user fixes by choosing another path; "" for others.
func pathProblem(err error) string {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return "a file is in the way"
	case errors.Is(err, syscall.EROFS):
		return "the filesystem is read-only"
	case errors.Is(err, fs.ErrPermission):
		return "no permission to write there"
	case errors.Is(err, syscall.ENOSPC):
		return "the disk is full"
	}
	return ""
}

// outDirError is err, a failure to create or write the results directory
// before the plan is committed, as an OutDirError; a LockedError and an
// OutDirError stay as they are.
func (s *study) outDirError(err error) error {
	var le *LockedError
	var oe *OutDirError
	if errors.As(err, &le) || errors.As(err, &oe) {
		return err
	}
	from := s.spec.OutAt
	if s.o.Out != "" {
		from = "--out"
	}
	return &OutDirError{Dir: s.dir, From: from, Err: err}
}

// probeWritable checks that files can be created in dir, as the results
// files are (a temporary file, then a rename): a directory made read-only
// after an earlier run still lets its lock be taken.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".xrun-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// firstMissing is the outermost directory of dir (dir itself or one of its
// parents) that does not exist yet, which os.MkdirAll(dir) would create;
// "" when dir exists (or cannot be looked at).
func firstMissing(dir string) string {
	missing := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return missing
		}
		missing = d
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// removeCreated undoes os.MkdirAll(dir) where top (firstMissing's answer
// before it) did not exist: dir and what is in it (the caller's own), then
// its parents up to top while they are empty, since another run may have
// put its own directory beside dir meanwhile.
func removeCreated(dir, top string) {
	if top == "" {
		return
	}
	os.RemoveAll(dir)
	for d := filepath.Dir(filepath.Clean(dir)); ; d = filepath.Dir(d) {
		if !strings.HasPrefix(d, top) || os.Remove(d) != nil || d == top || filepath.Dir(d) == d {
			return
		}
	}
}

// OtherStudyError refuses to run a study into a directory that holds
// another study's results: --resume would replace its results.json and
// orphan its cells, and a plain run would ask for --resume.
type OtherStudyError struct {
	Dir string
	// Name is the study the directory holds, Found the file that says so,
	// and Spec the spec file it was run from, when known.
	Name, Found, Spec string
	// Want is the study being run, from the spec file WantSpec.
	Want, WantSpec string
}

func (e *OtherStudyError) Error() string {
	from := e.Found
	if e.Spec != "" {
		from += "; run from " + e.Spec
	}
	return fmt.Sprintf("%s holds the results of another study, %q (%s), not of %q (%s): write this study elsewhere with --out DIR, or discard the other study's results with --fresh",
		e.Dir, e.Name, from, e.Want, e.WantSpec)
}

func (e *OtherStudyError) BadInput() bool { return true }

// otherStudy returns an OtherStudyError when dir holds the results of a
// study other than s's, by the name in its results.json or, failing that,
// in its plan (.xrun/plan.json); nil when it holds s's, nothing, or files
// that do not say.
func (s *study) otherStudy() *OtherStudyError {
	// results.json's spec is the spec itself; the plan's, its file.
	var res struct {
		Name string `json:"name"`
	}
	var plan struct {
		Name string `json:"name"`
		Spec string `json:"spec"`
	}
	resPath, planPath := filepath.Join(s.dir, layout.JSONFile), filepath.Join(s.dir, layout.StateDir, layout.PlanFile)
	if b, err := os.ReadFile(planPath); err == nil && json.Unmarshal(b, &plan) != nil {
		plan.Name = ""
	}
	if b, err := os.ReadFile(resPath); err == nil && json.Unmarshal(b, &res) != nil {
		res.Name = ""
	}
	e := &OtherStudyError{Dir: s.dir, Name: res.Name, Found: resPath, Want: s.spec.Name, WantSpec: s.spec.File}
	if e.Name == "" {
		e.Name, e.Found = plan.Name, planPath
	}
	if e.Name == "" || e.Name == s.spec.Name {
		return nil
	}
	if plan.Name == e.Name {
		e.Spec = plan.Spec
	}
	return e
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

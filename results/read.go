package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xrun-dev/xrun/results/layout"
)

// FileError is a problem with a results file: malformed JSON, an unknown
// schema version, an unknown field, a value of the wrong type or an
// impossible one. It names the file, the position (when known) and the
// field, and always blames the input.
type FileError struct {
	File string
	// Line and Col are 1-based; 0 when the problem has no position (a
	// missing file).
	Line, Col int
	// Field is the JSON path, e.g. "cells[3].status"; empty for the
	// whole file.
	Field string
	Msg   string
	Err   error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// BadInput marks the error as the user's input, for exit status 2.
func (e *FileError) BadInput() bool { return true }

// Load reads a results file, given either as the file itself or as the
// results directory holding results.json. It returns the results and the
// path of the file it read.
func Load(path string) (*Results, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, path, &FileError{File: path, Msg: "cannot read: " + describeOSError(err), Err: err}
	}
	if st.IsDir() {
		file := filepath.Join(path, layout.JSONFile)
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, file, &FileError{File: path, Msg: "is a directory without " + layout.JSONFile + "; expected a results directory or a results.json file", Err: err}
		}
		path = file
	}
	r, err := ReadFile(path)
	return r, path, err
}

// ReadFile reads and strictly checks one results.json.
func ReadFile(path string) (*Results, error) {
	data, err := readBounded(path, maxFileBytes)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// maxFileBytes bounds what ReadFile reads, so that a mistaken argument (a
// dataset, a disk image, a pipe that never ends) fails at once instead of
// filling memory. A results file takes about 10-25 KB a cell (6-10
// repeats of some 40 metrics, their summaries, telemetry and a profile's
// top kernels), so 256 MiB holds the runner's default limit of 10,000
// cells at 10 repeats with room to spare, and parsing it still fits in a
// few GiB of memory.
const maxFileBytes = 256 << 20

// readBounded reads at most limit bytes of a regular file or a pipe
// (xrun diff <(git show main:results.json) new). Anything else is refused
// before reading: a device such as /dev/zero never ends, a terminal
// waits for typing.
func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &FileError{File: path, Msg: "cannot read: " + describeOSError(err), Err: err}
	}
	tooLarge := func(what string) error {
		return &FileError{File: path, Msg: fmt.Sprintf("%s the %d MiB a results file may have; is this a results.json?", what, limit>>20)}
	}
	switch mode := st.Mode(); {
	case mode.IsRegular():
		if st.Size() > limit {
			return nil, tooLarge(fmt.Sprintf("is %d MiB, more than", st.Size()>>20))
		}
	case mode&fs.ModeNamedPipe != 0:
	default:
		return nil, &FileError{File: path, Msg: fmt.Sprintf("is %s, not a file; expected a results.json file or a results directory", describeMode(mode))}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{File: path, Msg: "cannot read: " + describeOSError(err), Err: err}
	}
	defer f.Close()
	// A regular file may still grow, or be one of /proc's, whose size
	// says 0: the limit holds for what is read, not what Stat said.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &FileError{File: path, Msg: "cannot read: " + describeOSError(err), Err: err}
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("has more than")
	}
	return data, nil
}

// describeMode names a file type that is not a regular file or a pipe.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "a special file"
}

func describeOSError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse decodes results.json bytes; name is used in errors. It is strict:
// the schema version must be one this package knows, every field must be
// known (spelled exactly) and of its type, keys unique, parameters scalars,
// statuses known and cell ids unique. Cells come back sorted by id,
// parameters as string, bool, nil, int64 or float64.
func Parse(data []byte, name string) (*Results, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		var se *json.SyntaxError
		off := int64(len(data))
		if errors.As(err, &se) && se.Offset > 0 && !strings.Contains(se.Error(), "unexpected end") {
			off = se.Offset - 1 // Offset counts the offending byte
		}
		msg := "malformed JSON"
		if err != nil {
			msg += ": " + strings.TrimPrefix(err.Error(), "json: ")
		}
		return nil, newFileError(name, data, off, "", msg, err)
	}
	// The version first: a file from a newer xrun would otherwise fail
	// on its first new field, with a less useful message.
	if err := checkVersion(data, name); err != nil {
		return nil, err
	}
	if err := newWalker(data, name).walk(reflect.TypeFor[Results]()); err != nil {
		return nil, err
	}
	var r Results
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		// The walker checked every type, so this is a value encoding/json
		// rejects for its own reasons; report it without a position.
		return nil, &FileError{File: name, Msg: err.Error(), Err: err}
	}
	if path, msg := validate(&r); msg != "" {
		// Positions are only needed now: walk again, recording them.
		w := newWalker(data, name)
		w.pos = map[string]int64{}
		w.walk(reflect.TypeFor[Results]())
		return nil, w.errAt(path, msg)
	}
	slices.SortStableFunc(r.Cells, func(a, b Cell) int { return strings.Compare(a.ID, b.ID) })
	return &r, nil
}

// checkVersion finds schema_version among the top-level keys of valid
// JSON and insists on SchemaVersion.
func checkVersion(data []byte, name string) error {
	w := newWalker(data, name)
	s := &w.s
	s.ws()
	if s.data[s.off] != '{' {
		return newFileError(name, data, int64(s.off), "", "expected an object, got "+w.kindAt(s.off), nil)
	}
	s.off++
	for s.ws(); s.data[s.off] != '}'; s.ws() {
		key := s.key()
		s.ws()
		if key != "schema_version" {
			s.skip()
			s.comma()
			continue
		}
		off := s.off
		raw := s.scalarOrSkip()
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return newFileError(name, data, int64(off), "schema_version", "expected an integer, got "+w.kindAt(off), nil)
		}
		if v == SchemaVersion {
			return nil
		}
		hint := "it was written by a newer xrun; upgrade xrun to read it"
		if v < SchemaVersion {
			hint = "it is older than any xrun release"
		}
		return newFileError(name, data, int64(off), "schema_version",
			fmt.Sprintf("version %d is not supported: this xrun reads version %d; %s", v, SchemaVersion, hint), nil)
	}
	return newFileError(name, data, 0, "schema_version", "missing; this is not an xrun results file (expected \"schema_version\": 1)", nil)
}

// validate checks what types cannot say and canonicalizes scalars. It
// returns the JSON path and message of the first problem.
func validate(r *Results) (path, msg string) {
	var err error
	const scalar = "expected a string, number, bool or null"
	for i := range r.Axes {
		for j, v := range r.Axes[i].Values {
			if r.Axes[i].Values[j], err = canonicalScalar(v); err != nil {
				return fmt.Sprintf("axes[%d].values[%d]", i, j), scalar
			}
		}
	}
	for i := range r.Compare {
		if r.Compare[i].Baseline, err = canonicalScalar(r.Compare[i].Baseline); err != nil {
			return fmt.Sprintf("compare[%d].baseline", i), scalar
		}
	}
	if path, msg := checkReference(r.Reference); msg != "" {
		return path, msg
	}
	ids := map[string]bool{}
	for i := range r.Cells {
		c := &r.Cells[i]
		p := fmt.Sprintf("cells[%d]", i)
		if c.ID == "" {
			return p + ".id", "missing or empty; every cell needs its id"
		}
		if ids[c.ID] {
			return p + ".id", fmt.Sprintf("duplicate cell id %q", c.ID)
		}
		ids[c.ID] = true
		switch c.Status {
		case StatusOK, StatusFailed, StatusSkipped:
		default:
			return p + ".status", fmt.Sprintf("%q is not a status; expected ok, failed or skipped", c.Status)
		}
		for k, v := range c.Params {
			if c.Params[k], err = canonicalScalar(v); err != nil {
				return p + ".params." + k, scalar + " (parameters are flattened to dotted keys)"
			}
		}
		if msg := checkDistinctKernels(c.Profile); msg != "" {
			return p + ".profile.distinct_kernels", msg
		}
		if path, msg := checkMeasurements(c); msg != "" {
			return p + path, msg
		}
		for j, a := range c.Artifacts {
			if a == "" || filepath.IsAbs(a) || strings.HasPrefix(a, "/") || strings.HasPrefix(a, "../") || a == ".." {
				return fmt.Sprintf("%s.artifacts[%d]", p, j), fmt.Sprintf("%q: expected a path relative to the results directory", a)
			}
		}
	}
	return "", ""
}

// checkDistinctKernels refuses a kernel count below the kernels listed.
func checkDistinctKernels(p *Profile) string {
	if p == nil {
		return ""
	}
	n := len(p.Kernels) + len(p.OtherKernels)
	if p.DistinctKernels >= n || (p.DistinctKernels == 0 && len(p.OtherKernels) == 0) {
		return ""
	}
	return fmt.Sprintf("%d; expected %s the %d kernels listed in kernels and other_kernels", p.DistinctKernels, pick(len(p.OtherKernels) == 0, "0 (not recorded) or at least", "at least"), n)
}

func newFileError(name string, data []byte, off int64, field, msg string, err error) *FileError {
	line, col := lineCol(data, off)
	return &FileError{File: name, Line: line, Col: col, Field: field, Msg: msg, Err: err}
}

// lineCol turns a byte offset into a 1-based line and column, the column
// counted in characters.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, 1 + utf8.RuneCount(before)
}

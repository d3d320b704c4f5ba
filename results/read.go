package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
		file := filepath.Join(path, JSONFile)
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, file, &FileError{File: path, Msg: "is a directory without " + JSONFile + "; expected a results directory or a results.json file", Err: err}
		}
		path = file
	}
	r, err := ReadFile(path)
	return r, path, err
}

// ReadFile reads and strictly checks one results.json.
func ReadFile(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{File: path, Msg: "cannot read: " + describeOSError(err), Err: err}
	}
	return Parse(data, path)
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
// known and of its type, parameters must be scalars, statuses known and
// cell ids unique. Cells come back sorted by id, parameters as string,
// bool, nil, int64 or float64.
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
	var probe struct {
		SchemaVersion *int64 `json:"schema_version"`
	}
	pw := newWalker(data, name, false)
	if err := pw.walk(reflect.TypeOf(probe)); err != nil {
		return nil, err
	}
	_ = json.Unmarshal(data, &probe)
	switch {
	case probe.SchemaVersion == nil:
		return nil, newFileError(name, data, pw.pos[""], "schema_version", "missing; this is not an xrun results file (expected \"schema_version\": 1)", nil)
	case *probe.SchemaVersion != SchemaVersion:
		hint := "it was written by a newer xrun; upgrade xrun to read it"
		if *probe.SchemaVersion < SchemaVersion {
			hint = "it is older than any xrun release"
		}
		return nil, newFileError(name, data, pw.pos["schema_version"], "schema_version",
			fmt.Sprintf("version %d is not supported: this xrun reads version %d; %s", *probe.SchemaVersion, SchemaVersion, hint), nil)
	}

	w := newWalker(data, name, true)
	if err := w.walk(reflect.TypeOf(Results{})); err != nil {
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
	if err := w.validate(&r); err != nil {
		return nil, err
	}
	slices.SortStableFunc(r.Cells, func(a, b Cell) int { return strings.Compare(a.ID, b.ID) })
	return &r, nil
}

// validate checks what types cannot say, citing positions the walker
// recorded, and canonicalizes scalars.
func (w *walker) validate(r *Results) error {
	var err error
	for i := range r.Axes {
		for j, v := range r.Axes[i].Values {
			p := fmt.Sprintf("axes[%d].values[%d]", i, j)
			if r.Axes[i].Values[j], err = canonicalScalar(v); err != nil {
				return w.errAt(p, "expected a string, number, bool or null")
			}
		}
	}
	for i := range r.Compare {
		p := fmt.Sprintf("compare[%d].baseline", i)
		if r.Compare[i].Baseline, err = canonicalScalar(r.Compare[i].Baseline); err != nil {
			return w.errAt(p, "expected a string, number, bool or null")
		}
	}
	ids := map[string]bool{}
	for i := range r.Cells {
		c := &r.Cells[i]
		p := fmt.Sprintf("cells[%d]", i)
		if c.ID == "" {
			return w.errAt(p+".id", "missing or empty; every cell needs its id")
		}
		if ids[c.ID] {
			return w.errAt(p+".id", fmt.Sprintf("duplicate cell id %q", c.ID))
		}
		ids[c.ID] = true
		switch c.Status {
		case StatusOK, StatusFailed, StatusSkipped:
		default:
			return w.errAt(p+".status", fmt.Sprintf("%q is not a status; expected ok, failed or skipped", c.Status))
		}
		for k, v := range c.Params {
			if c.Params[k], err = canonicalScalar(v); err != nil {
				return w.errAt(p+".params."+k, "expected a string, number, bool or null (parameters are flattened to dotted keys)")
			}
		}
		for j, a := range c.Artifacts {
			if a == "" || filepath.IsAbs(a) || strings.HasPrefix(a, "/") || strings.HasPrefix(a, "../") || a == ".." {
				return w.errAt(fmt.Sprintf("%s.artifacts[%d]", p, j), fmt.Sprintf("%q: expected a path relative to the results directory", a))
			}
		}
	}
	return nil
}

// walker checks a JSON document against the Go type it will decode into,
// token by token, so every problem is reported at its own line and
// column (encoding/json reports unknown fields without any position). It
// records where each value starts, by JSON path, for later checks.
type walker struct {
	data   []byte
	name   string
	dec    *json.Decoder
	strict bool // unknown fields are errors
	pos    map[string]int64
	fields map[reflect.Type]map[string]reflect.Type
}

func newWalker(data []byte, name string, strict bool) *walker {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &walker{data: data, name: name, dec: dec, strict: strict, pos: map[string]int64{}, fields: map[reflect.Type]map[string]reflect.Type{}}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
)

func (w *walker) walk(t reflect.Type) error { return w.value("", t) }

// start returns the offset of the next token: InputOffset stops after the
// previous one, before separators and space.
func (w *walker) start() int64 {
	off := w.dec.InputOffset()
	for off < int64(len(w.data)) && strings.IndexByte(" \t\r\n,:", w.data[off]) >= 0 {
		off++
	}
	return off
}

func (w *walker) value(path string, t reflect.Type) error {
	off := w.start()
	w.pos[path] = off
	tok, err := w.dec.Token()
	if err != nil {
		return newFileError(w.name, w.data, off, path, "malformed JSON: "+err.Error(), err)
	}
	return w.check(path, t, tok, off)
}

func (w *walker) check(path string, t reflect.Type, tok json.Token, off int64) error {
	if t == rawMessageType {
		if d, ok := tok.(json.Delim); ok && d == '{' {
			return w.skipRest()
		}
		return w.typeErr(path, off, "an object", tok)
	}
	if t == timeType {
		s, ok := tok.(string)
		if !ok {
			return w.typeErr(path, off, "an RFC 3339 time string", tok)
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return newFileError(w.name, w.data, off, path, fmt.Sprintf("%q is not an RFC 3339 time (e.g. \"2026-01-02T15:04:05Z\")", s), err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if tok == nil {
			return nil
		}
		return w.check(path, t.Elem(), tok, off)
	case reflect.Interface:
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			return w.skipRest()
		}
		return nil
	case reflect.Struct:
		return w.object(path, tok, off, func(key string) (reflect.Type, bool) {
			ft, ok := w.structFields(t)[key]
			return ft, ok
		}, t)
	case reflect.Map:
		if tok == nil {
			return nil
		}
		return w.object(path, tok, off, func(string) (reflect.Type, bool) { return t.Elem(), true }, nil)
	case reflect.Slice:
		if tok == nil {
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return w.typeErr(path, off, "an array", tok)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(fmt.Sprintf("%s[%d]", path, i), t.Elem()); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ']'
		return err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return w.typeErr(path, off, "a string", tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return w.typeErr(path, off, "true or false", tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeErr(path, off, "an integer", tok)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return newFileError(w.name, w.data, off, path, fmt.Sprintf("%s: expected an integer that fits %d bits", n, t.Bits()), err)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeErr(path, off, "a non-negative integer", tok)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return newFileError(w.name, w.data, off, path, fmt.Sprintf("%s: expected a non-negative integer that fits %d bits", n, t.Bits()), err)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeErr(path, off, "a number", tok)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return newFileError(w.name, w.data, off, path, fmt.Sprintf("%s: number out of range", n), err)
		}
	default:
		return fmt.Errorf("results: walker cannot check %v", t) // a schema type this walker does not know
	}
	return nil
}

// object checks an object whose keys map to types through field; st is
// the struct type for messages about unknown fields, nil for a map.
func (w *walker) object(path string, tok json.Token, off int64, field func(string) (reflect.Type, bool), st reflect.Type) error {
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return w.typeErr(path, off, "an object", tok)
	}
	seen := map[string]bool{}
	for w.dec.More() {
		koff := w.start()
		ktok, err := w.dec.Token()
		if err != nil {
			return newFileError(w.name, w.data, koff, path, "malformed JSON: "+err.Error(), err)
		}
		key := ktok.(string)
		kpath := joinPath(path, key)
		if seen[key] {
			return newFileError(w.name, w.data, koff, kpath, "duplicate key", nil)
		}
		seen[key] = true
		ft, ok := field(key)
		if !ok {
			if w.strict {
				return newFileError(w.name, w.data, koff, kpath, "unknown field"+w.suggest(key, st), nil)
			}
			if err := w.skipValue(); err != nil {
				return err
			}
			continue
		}
		if err := w.value(kpath, ft); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return err
}

// suggest names the closest known field of st, or lists them all.
func (w *walker) suggest(key string, st reflect.Type) string {
	var names []string
	for n := range w.structFields(st) {
		names = append(names, n)
	}
	slices.Sort(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return "; expected one of " + strings.Join(names, ", ")
}

// skipValue consumes one whole value.
func (w *walker) skipValue() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return w.skipRest()
	}
	return nil
}

// skipRest consumes the rest of an object or array whose opening delimiter
// was read.
func (w *walker) skipRest() error {
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// structFields maps a struct's JSON names to field types.
func (w *walker) structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := w.fields[t]; ok {
		return f
	}
	f := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f[name] = sf.Type
	}
	w.fields[t] = f
	return f
}

func (w *walker) typeErr(path string, off int64, want string, got json.Token) error {
	return newFileError(w.name, w.data, off, path, "expected "+want+", got "+tokenKind(got), nil)
}

func (w *walker) errAt(path, msg string) error {
	off, ok := w.pos[path]
	if !ok {
		return &FileError{File: w.name, Field: path, Msg: msg}
	}
	return newFileError(w.name, w.data, off, path, msg, nil)
}

func tokenKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return fmt.Sprintf("the string %q", t)
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return "the number " + string(t)
	}
	return fmt.Sprintf("%T", tok)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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

// editDistance is the Levenshtein distance, for "did you mean".
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

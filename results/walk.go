package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/results/editdist"
)

// walker checks a JSON document against the Go type it will decode into,
// so that every problem is reported at its own line and column:
// encoding/json gives no position for unknown fields, matches field names
// case-insensitively and lets a duplicate key win silently. It runs only
// on documents json.Valid accepted, so its scanner need not handle
// malformed input. (json.Decoder.Token would do, at a fifth of the speed.)
type walker struct {
	s    jsonScanner
	name string
	// path is the JSON path of the value being checked, formatted only
	// when an error or a position is recorded.
	path []pathSeg
	// pos, when not nil, records where each value starts, by path.
	pos    map[string]int64
	fields map[reflect.Type]map[string]reflect.Type
}

type pathSeg struct {
	key   string
	index int // used when key is ""
}

func newWalker(data []byte, name string) *walker {
	return &walker{s: jsonScanner{data: data}, name: name, fields: map[reflect.Type]map[string]reflect.Type{}}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
)

func (w *walker) walk(t reflect.Type) error {
	w.s.off = 0
	return w.value(t)
}

func (w *walker) pathString() string {
	var b strings.Builder
	for _, p := range w.path {
		if p.key == "" {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	}
	return b.String()
}

func (w *walker) value(t reflect.Type) error {
	s := &w.s
	s.ws()
	off := s.off
	if w.pos != nil {
		w.pos[w.pathString()] = int64(off)
	}
	c := s.data[off]
	for t.Kind() == reflect.Pointer && t != rawMessageType {
		if c == 'n' {
			s.skip()
			return nil
		}
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		if c != '{' {
			return w.typeErr(off, "an object")
		}
		s.skip()
		return nil
	case t == timeType:
		if c != '"' {
			return w.typeErr(off, "an RFC 3339 time string")
		}
		str := s.str()
		if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
			return w.errAtOff(off, fmt.Sprintf("%q is not an RFC 3339 time (e.g. \"2026-01-02T15:04:05Z\")", str))
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		s.skip()
		return nil
	case reflect.Struct:
		fields := w.structFields(t)
		return w.object(off, func(k string) (reflect.Type, bool) { ft, ok := fields[k]; return ft, ok }, t)
	case reflect.Map:
		if c == 'n' {
			s.skip()
			return nil
		}
		return w.object(off, func(string) (reflect.Type, bool) { return t.Elem(), true }, nil)
	case reflect.Slice:
		if c == 'n' {
			s.skip()
			return nil
		}
		if c != '[' {
			return w.typeErr(off, "an array")
		}
		s.off++
		w.path = append(w.path, pathSeg{})
		for i := 0; ; i++ {
			s.ws()
			if s.data[s.off] == ']' {
				break
			}
			w.path[len(w.path)-1].index = i
			if err := w.value(t.Elem()); err != nil {
				return err
			}
			s.comma()
		}
		s.off++
		w.path = w.path[:len(w.path)-1]
		return nil
	case reflect.String:
		if c != '"' {
			return w.typeErr(off, "a string")
		}
		s.skip()
		return nil
	case reflect.Bool:
		if c != 't' && c != 'f' {
			return w.typeErr(off, "true or false")
		}
		s.skip()
		return nil
	}
	if !(c == '-' || c >= '0' && c <= '9') {
		switch t.Kind() {
		case reflect.Float32, reflect.Float64:
			return w.typeErr(off, "a number")
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return w.typeErr(off, "a non-negative integer")
		}
		return w.typeErr(off, "an integer")
	}
	num := string(s.scalarOrSkip())
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err = strconv.ParseInt(num, 10, t.Bits()); err != nil {
			return w.errAtOff(off, fmt.Sprintf("%s: expected an integer that fits %d bits", num, t.Bits()))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err = strconv.ParseUint(num, 10, t.Bits()); err != nil {
			return w.errAtOff(off, fmt.Sprintf("%s: expected a non-negative integer that fits %d bits", num, t.Bits()))
		}
	case reflect.Float32, reflect.Float64:
		if _, err = strconv.ParseFloat(num, t.Bits()); err != nil {
			return w.errAtOff(off, num+": number out of range")
		}
	default:
		return fmt.Errorf("results: walker cannot check %v", t) // a schema type it does not know
	}
	return nil
}

// object checks an object whose keys map to types through field; st is
// the struct type for messages about unknown fields, nil for a map.
func (w *walker) object(off int, field func(string) (reflect.Type, bool), st reflect.Type) error {
	s := &w.s
	if s.data[off] != '{' {
		return w.typeErr(off, "an object")
	}
	s.off++
	seen := map[string]bool{}
	w.path = append(w.path, pathSeg{})
	for s.ws(); s.data[s.off] != '}'; s.ws() {
		koff := s.off
		key := s.key()
		w.path[len(w.path)-1].key = key
		if seen[key] {
			return w.errAtOff(koff, "duplicate key")
		}
		seen[key] = true
		ft, ok := field(key)
		if !ok {
			return w.errAtOff(koff, "unknown field"+w.suggest(key, st))
		}
		if err := w.value(ft); err != nil {
			return err
		}
		s.comma()
	}
	s.off++
	w.path = w.path[:len(w.path)-1]
	return nil
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
		if d := editdist.Distance(strings.ToLower(key), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return "; expected one of " + strings.Join(names, ", ")
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

func (w *walker) typeErr(off int, want string) error {
	return w.errAtOff(off, "expected "+want+", got "+w.kindAt(off))
}

func (w *walker) errAtOff(off int, msg string) error {
	return newFileError(w.name, w.s.data, int64(off), w.pathString(), msg, nil)
}

// errAt reports msg at a path recorded in pos, or where its nearest
// enclosing value starts when the path itself is absent from the file (a
// missing "summary" is reported at its cell).
func (w *walker) errAt(path, msg string) error {
	for at := path; at != ""; at = at[:max(strings.LastIndexAny(at, ".["), 0)] {
		if off, ok := w.pos[at]; ok {
			return newFileError(w.name, w.s.data, off, path, msg, nil)
		}
	}
	return &FileError{File: w.name, Field: path, Msg: msg}
}

// kindAt describes the value at off for "expected X, got Y".
func (w *walker) kindAt(off int) string {
	sc := jsonScanner{data: w.s.data, off: off}
	switch c := w.s.data[off]; c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return fmt.Sprintf("the string %q", sc.str())
	case 'n':
		return "null"
	case 't', 'f':
		return string(sc.scalarOrSkip())
	}
	return "the number " + string(sc.scalarOrSkip())
}

// jsonScanner moves through valid JSON.
type jsonScanner struct {
	data []byte
	off  int
}

func (s *jsonScanner) ws() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\r', '\n':
			s.off++
		default:
			return
		}
	}
}

// comma consumes the separator after a value, if any.
func (s *jsonScanner) comma() {
	s.ws()
	if s.off < len(s.data) && s.data[s.off] == ',' {
		s.off++
	}
}

// stringEnd returns the offset just past the string starting at off.
func (s *jsonScanner) stringEnd(off int) int {
	for i := off + 1; ; i++ {
		switch s.data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// str consumes a string and returns its value.
func (s *jsonScanner) str() string {
	end := s.stringEnd(s.off)
	raw := s.data[s.off:end]
	s.off = end
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var v string
	json.Unmarshal(raw, &v) // valid JSON: cannot fail
	return v
}

// key consumes an object key and its colon.
func (s *jsonScanner) key() string {
	k := s.str()
	s.ws()
	s.off++ // ':'
	return k
}

// scalarOrSkip consumes a number or literal and returns its text; for
// anything else it skips the value and returns its raw bytes.
func (s *jsonScanner) scalarOrSkip() []byte {
	start := s.off
	s.skip()
	return s.data[start:s.off]
}

// skip consumes one whole value.
func (s *jsonScanner) skip() {
	switch s.data[s.off] {
	case '"':
		s.off = s.stringEnd(s.off)
	case '{', '[':
		depth := 0
		for {
			switch s.data[s.off] {
			case '"':
				s.off = s.stringEnd(s.off)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.off++
			if depth == 0 {
				return
			}
		}
	default:
		for s.off < len(s.data) && !strings.ContainsRune(",]} \t\r\n", rune(s.data[s.off])) {
			s.off++
		}
	}
}

package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// FormatError is a malformed checkpoint file; it blames the user's input.
type FormatError struct {
	File string
	Msg  string
	err  error // a sentinel the problem is an instance of (ErrNoCheckpoint)
}

func (e *FormatError) Error() string  { return e.File + ": " + e.Msg }
func (e *FormatError) BadInput() bool { return true }
func (e *FormatError) Unwrap() error  { return e.err }

// MaxHeader bounds the JSON header (the format's reference reader uses the
// same 100 MB limit), so a corrupt length cannot make us allocate the disk.
const MaxHeader = 100 << 20

// dtypeSizes are the element sizes of the safetensors dtypes.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType string
	Shape []int
	// Offset and Size locate the tensor's bytes in the file.
	Offset, Size int64
}

// File is an open safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	tensors  map[string]Info
	names    []string
	f        *os.File
}

// Open reads and validates path's header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FormatError{File: path, Msg: err.Error()}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &FormatError{File: path, Msg: err.Error()}
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		f.Close()
		return nil, &FormatError{File: path, Msg: fmt.Sprintf("%d bytes is too short for a safetensors file (8-byte header length missing)", st.Size())}
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if string(lenBuf[:]) == "version " && isLFSPointer(f) {
		f.Close()
		return nil, &FormatError{File: path, Msg: "a Git LFS pointer, not the tensors (fetch them: git lfs pull)"}
	}
	if n > MaxHeader || int64(n) > st.Size()-8 {
		f.Close()
		return nil, &FormatError{File: path, Msg: fmt.Sprintf("header length %d does not fit the file (%d bytes, limit %d)", n, st.Size(), MaxHeader)}
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		f.Close()
		return nil, &FormatError{File: path, Msg: "reading header: " + err.Error()}
	}
	file, err := Parse(path, header, st.Size()-8-int64(n))
	if err != nil {
		f.Close()
		return nil, err
	}
	file.f = f
	for name, info := range file.tensors {
		info.Offset += 8 + int64(n)
		file.tensors[name] = info
	}
	return file, nil
}

// isLFSPointer reports whether f, read past its first 8 bytes
// ("version "), goes on as a Git LFS pointer file does: a checkout made
// without git-lfs leaves these in place of the weights.
func isLFSPointer(f *os.File) bool {
	const rest = "https://git-lfs.github.com/spec/"
	var b [len(rest)]byte
	_, err := io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == rest
}

type rawInfo struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets *[]int64 `json:"data_offsets"`
}

// Parse validates a header (the JSON after the length) against a data
// section of dataSize bytes. Offsets in the result are relative to the data
// section. path only names the file in errors.
func Parse(path string, header []byte, dataSize int64) (*File, error) {
	bad := func(f string, a ...any) (*File, error) {
		return nil, &FormatError{File: path, Msg: fmt.Sprintf(f, a...)}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return bad("header is not a JSON object: %v", err)
	}
	if raw == nil {
		return bad("header is not a JSON object")
	}
	// Trailing bytes may only be spaces (writers pad to 8 bytes).
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimRight(rest, " \x00")) > 0 {
		return bad("header has data after its JSON object")
	}
	file := &File{Path: path, tensors: map[string]Info{}}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &file.Metadata); err != nil {
				return bad("__metadata__: expected an object of strings: %v", err)
			}
			continue
		}
		var r rawInfo
		d := json.NewDecoder(bytes.NewReader(msg))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			return bad("tensor %q: expected {dtype, shape, data_offsets}: %v", name, err)
		}
		if r.DType == nil || r.Shape == nil || r.Offsets == nil {
			return bad("tensor %q: dtype, shape and data_offsets are all required", name)
		}
		size, ok := dtypeSizes[*r.DType]
		if !ok {
			return bad("tensor %q: unknown dtype %q", name, *r.DType)
		}
		numel := int64(1)
		shape := make([]int, len(*r.Shape))
		for i, d := range *r.Shape {
			if d < 0 || (d > 0 && numel > math.MaxInt64/int64(size)/d) {
				return bad("tensor %q: shape %v is negative or too large", name, *r.Shape)
			}
			numel *= d
			shape[i] = int(d)
		}
		off := *r.Offsets
		if len(off) != 2 || off[0] < 0 || off[1] < off[0] || off[1] > dataSize {
			if len(off) == 2 && off[0] >= 0 && off[1] >= off[0] {
				// Well formed but past the end: the file is shorter than
				// its header says, the usual mark of a cut-off download.
				return bad("tensor %q: data_offsets %v outside the %d-byte data section (is the file truncated?)", name, off, dataSize)
			}
			return bad("tensor %q: data_offsets %v outside the %d-byte data section", name, off, dataSize)
		}
		if off[1]-off[0] != numel*int64(size) {
			return bad("tensor %q: data_offsets %v hold %d bytes, but %s%v needs %d", name, off, off[1]-off[0], *r.DType, *r.Shape, numel*int64(size))
		}
		file.tensors[name] = Info{Name: name, DType: *r.DType, Shape: shape, Offset: off[0], Size: off[1] - off[0]}
		file.names = append(file.names, name)
	}
	sort.Slice(file.names, func(i, j int) bool {
		a, b := file.tensors[file.names[i]], file.tensors[file.names[j]]
		return a.Offset < b.Offset || (a.Offset == b.Offset && a.Name < b.Name)
	})
	for i := 1; i < len(file.names); i++ {
		prev, cur := file.tensors[file.names[i-1]], file.tensors[file.names[i]]
		if cur.Offset < prev.Offset+prev.Size {
			return bad("tensors %q and %q overlap", prev.Name, cur.Name)
		}
	}
	sort.Strings(file.names)
	return file, nil
}

// Names lists the file's tensors, sorted.
func (f *File) Names() []string { return f.names }

// Info describes a tensor.
func (f *File) Info(name string) (Info, bool) {
	i, ok := f.tensors[name]
	return i, ok
}

// ErrNotFound is a tensor missing from a checkpoint.
var ErrNotFound = errors.New("tensor not found")

// Read returns a tensor's bytes.
func (f *File) Read(name string) (Info, []byte, error) {
	info, ok := f.tensors[name]
	if !ok {
		return Info{}, nil, &FormatError{File: f.Path, Msg: fmt.Sprintf("%v: %q", ErrNotFound, name)}
	}
	buf := make([]byte, info.Size)
	if _, err := f.f.ReadAt(buf, info.Offset); err != nil {
		return Info{}, nil, &FormatError{File: f.Path, Msg: fmt.Sprintf("reading tensor %q: %v", name, err)}
	}
	return info, buf, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

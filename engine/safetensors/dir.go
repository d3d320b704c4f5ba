package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/xrun-dev/xrun/engine/model"
)

// Dir is a model directory's checkpoint: model.safetensors, or the shards
// model.safetensors.index.json lists, or failing both every *.safetensors
// file. It implements model.WeightSource.
type Dir struct {
	files []*File
	where map[string]*File
}

// IndexName is the file naming a sharded checkpoint's shards.
const IndexName = "model.safetensors.index.json"

// OpenDir opens a model directory's checkpoint.
func OpenDir(dir string) (*Dir, error) {
	d := &Dir{where: map[string]*File{}}
	index := filepath.Join(dir, IndexName)
	single := filepath.Join(dir, "model.safetensors")
	switch {
	case exists(index):
		data, err := os.ReadFile(index)
		if err != nil {
			return nil, &FormatError{File: index, Msg: err.Error()}
		}
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, &FormatError{File: index, Msg: "expected {\"weight_map\": {tensor: shard file}}: " + err.Error()}
		}
		if len(idx.WeightMap) == 0 {
			return nil, &FormatError{File: index, Msg: "weight_map is empty"}
		}
		shards := map[string]*File{}
		names := make([]string, 0, len(idx.WeightMap))
		for n := range idx.WeightMap {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			shard := idx.WeightMap[name]
			if filepath.Base(shard) != shard {
				d.Close()
				return nil, &FormatError{File: index, Msg: fmt.Sprintf("tensor %q: shard %q must be a file name in the same directory", name, shard)}
			}
			f, ok := shards[shard]
			if !ok {
				var err error
				if f, err = Open(filepath.Join(dir, shard)); err != nil {
					d.Close()
					return nil, err
				}
				shards[shard] = f
				d.files = append(d.files, f)
			}
			if _, ok := f.Info(name); !ok {
				d.Close()
				return nil, &FormatError{File: index, Msg: fmt.Sprintf("tensor %q is mapped to %s, which does not hold it", name, shard)}
			}
			d.where[name] = f
		}
		return d, nil
	case exists(single):
		if err := d.add(single); err != nil {
			d.Close()
			return nil, err
		}
		return d, nil
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(paths) == 0 {
		return nil, &FormatError{File: dir, Msg: ErrNoCheckpoint.Error(), err: ErrNoCheckpoint}
	}
	for _, p := range paths {
		if err := d.add(p); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// ErrNoCheckpoint is a model directory without any safetensors file (one
// holding only pytorch_model.bin, say); OpenDir and Validate wrap it.
var ErrNoCheckpoint = errors.New("no model.safetensors, " + IndexName + " or *.safetensors file")

// Validate checks a model directory's checkpoint as OpenDir does, reading
// only the index, each file's header and its size: every header parses,
// every tensor's bytes lie within its file (a truncated download fails
// here), the shards the index names exist and hold their tensors. No
// tensor is read, so it is cheap enough to run when planning a study.
func Validate(dir string) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	return d.Close()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

func (d *Dir) add(path string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	d.files = append(d.files, f)
	for _, n := range f.Names() {
		if other, dup := d.where[n]; dup {
			return &FormatError{File: path, Msg: fmt.Sprintf("tensor %q is also in %s", n, other.Path)}
		}
		d.where[n] = f
	}
	return nil
}

// Has reports whether the checkpoint holds a tensor.
func (d *Dir) Has(name string) bool { _, ok := d.where[name]; return ok }

// Where names the file holding a tensor (the first file when none does).
func (d *Dir) Where(name string) string {
	if f, ok := d.where[name]; ok {
		return f.Path
	}
	if len(d.files) > 0 {
		return d.files[0].Path
	}
	return ""
}

// Tensor reads a weight tensor (F32, F16, BF16, or F8_E4M3: an FP8
// checkpoint's codes, whose scales are tensors of their own that the
// model pairs with them).
func (d *Dir) Tensor(name string) (model.HostTensor, error) {
	f, ok := d.where[name]
	if !ok {
		return model.HostTensor{}, &FormatError{File: d.Where(name), Msg: fmt.Sprintf("%v: %q", ErrNotFound, name)}
	}
	info, data, err := f.Read(name)
	if err != nil {
		return model.HostTensor{}, err
	}
	if model.DTypeSize(info.DType) == 0 {
		return model.HostTensor{}, &FormatError{File: f.Path, Msg: fmt.Sprintf("tensor %q has dtype %s; weights must be F32, F16, BF16 or F8_E4M3", name, info.DType)}
	}
	return model.HostTensor{Shape: info.Shape, DType: info.DType, Data: data}, nil
}

// Close closes every file.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.files = nil
	return first
}

var _ model.WeightSource = (*Dir)(nil)

package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

func TestValidate(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "testdata", "hf", "tiny-llama", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	shard := func(dir, name string, tensors map[string]model.HostTensor) {
		t.Helper()
		if err := WriteFile(filepath.Join(dir, name), tensors); err != nil {
			t.Fatal(err)
		}
	}
	a := map[string]model.HostTensor{"a": model.HostF32([]int{2}, []float32{1, 2})}
	cases := []struct {
		name string
		make func(dir string)
		file string // the file the error names; "" when valid
		want string
	}{
		{"whole", func(dir string) { os.WriteFile(filepath.Join(dir, "model.safetensors"), good, 0o644) }, "", ""},
		{"truncated data", func(dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), good[:len(good)-100], 0o644)
		}, "model.safetensors", "is the file truncated?"},
		{"truncated header", func(dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), good[:64], 0o644)
		}, "model.safetensors", "does not fit the file"},
		{"empty file", func(dir string) { os.WriteFile(filepath.Join(dir, "model.safetensors"), nil, 0o644) }, "model.safetensors", "too short"},
		{"garbage header", func(dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), append(header("<html>"), "Not found"...), 0o644)
		}, "model.safetensors", "not a JSON object"},
		{"git lfs pointer", func(dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n"), 0o644)
		}, "model.safetensors", "a Git LFS pointer"},
		{"one bad file of several", func(dir string) {
			shard(dir, "a.safetensors", a)
			os.WriteFile(filepath.Join(dir, "b.safetensors"), good[:len(good)-1], 0o644)
		}, "b.safetensors", "is the file truncated?"},
		{"shard missing", func(dir string) {
			shard(dir, "model-00001-of-00002.safetensors", a)
			os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`), 0o644)
		}, "model-00002-of-00002.safetensors", "no such file"},
		{"sharded", func(dir string) {
			shard(dir, "model-00001-of-00001.safetensors", a)
			os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"weight_map":{"a":"model-00001-of-00001.safetensors"}}`), 0o644)
		}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.make(dir)
			err := Validate(dir)
			if c.file == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !fe.BadInput() {
				t.Fatalf("error %T %v, want a *FormatError", err, err)
			}
			if fe.File != filepath.Join(dir, c.file) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one naming %s and saying %q", err, c.file, c.want)
			}
			if errors.Is(err, ErrNoCheckpoint) {
				t.Error("a malformed checkpoint reads as none")
			}
		})
	}
}

// A directory without safetensors (pytorch_model.bin only) is told apart
// from a broken checkpoint, so a caller may let engines that need none
// take it.
func TestValidateNoCheckpoint(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("x"), 0o644)
	err := Validate(dir)
	var fe *FormatError
	if !errors.Is(err, ErrNoCheckpoint) || !errors.As(err, &fe) || fe.File != dir {
		t.Fatalf("error %v, want ErrNoCheckpoint naming %s", err, dir)
	}
}

// The range check is exact at checkpoint scale: a gigabyte tensor (a
// sparse file, so the test writes nothing) fits, two bytes short does not.
func TestValidateGigabyteTensor(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	h := header(`{"w":{"dtype":"F16","shape":[32768,16384],"data_offsets":[0,1073741824]}}`)
	if err := os.WriteFile(p, h, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(len(h))+1<<30); err != nil {
		t.Skip("no sparse files here:", err)
	}
	if err := Validate(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(len(h))+1<<30-2); err != nil {
		t.Fatal(err)
	}
	if err := Validate(dir); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a gigabyte tensor 2 bytes short: %v", err)
	}
}

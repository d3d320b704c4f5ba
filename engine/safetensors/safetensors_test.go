package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

func TestOpenGolden(t *testing.T) {
	d, err := OpenDir(filepath.Join("..", "testdata", "hf", "tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h, err := d.Tensor("model.layers.1.self_attn.k_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	if h.DType != "F32" || len(h.Shape) != 2 || h.Shape[0] != 32 || h.Shape[1] != 64 || len(h.Data) != 32*64*4 {
		t.Errorf("k_proj: %v %v %d bytes", h.DType, h.Shape, len(h.Data))
	}
	// reference.safetensors sits beside model.safetensors and must not be
	// mistaken for part of the checkpoint.
	if d.Has("case0.logits") {
		t.Error("reference tensors leaked into the checkpoint")
	}
	f, err := Open(filepath.Join("..", "testdata", "hf", "tiny-llama", "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info, ok := f.Info("case0.input_ids"); !ok || info.DType != "I64" || info.Shape[0] != 13 {
		t.Errorf("case0.input_ids: %+v", info)
	}
	if f.Metadata["note"] == "" {
		t.Error("metadata not read")
	}
}

func header(s string) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
	return append(b, s...)
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"length beyond file", binary.LittleEndian.AppendUint64(nil, 1<<40), "header length"},
		{"not json", header("{nope"), "not a JSON object"},
		{"array", header("[1,2]"), "not a JSON object"},
		{"trailing", header(`{} x`), "data after"},
		{"dtype", append(header(`{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "unknown dtype"},
		{"missing field", header(`{"a":{"dtype":"F32","shape":[1]}}`), "required"},
		{"unknown field", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`), "expected {dtype"},
		{"offsets outside", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), "outside"},
		{"size mismatch", append(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "needs 8"},
		{"negative shape", append(header(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "negative"},
		{"overlap", append(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`), make([]byte, 8)...), "overlap"},
		{"metadata", header(`{"__metadata__":{"a":1}}`), "__metadata__"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "model.safetensors")
			os.WriteFile(p, c.data, 0o644)
			_, err := Open(p)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, p, c.want)
			}
			if fe, ok := err.(*FormatError); !ok || !fe.BadInput() {
				t.Errorf("error type %T", err)
			}
		})
	}
}

func TestShardedDir(t *testing.T) {
	dir := t.TempDir()
	a := model.HostF32([]int{2}, []float32{1, 2})
	b := model.HostF32([]int{1, 3}, []float32{3, 4, 5})
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), map[string]model.HostTensor{"a": a}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]model.HostTensor{"b": b}); err != nil {
		t.Fatal(err)
	}
	idx := `{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`
	os.WriteFile(filepath.Join(dir, IndexName), []byte(idx), 0o644)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.Tensor("b")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := h.Float32()
	if len(v) != 3 || v[2] != 5 || !strings.HasSuffix(d.Where("b"), "00002-of-00002.safetensors") {
		t.Errorf("b = %v from %s", v, d.Where("b"))
	}
	if _, err := d.Tensor("c"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("missing tensor: %v", err)
	}
	d.Close()

	// An index pointing at the wrong shard.
	os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"weight_map":{"a":"model-00002-of-00002.safetensors"}}`), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), IndexName) {
		t.Errorf("wrong shard: %v", err)
	}
	os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"weight_map":`), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), IndexName) {
		t.Errorf("bad index: %v", err)
	}
}

func TestDTypeConversion(t *testing.T) {
	// 1.5 in F16 is 0x3e00, in BF16 0x3fc0; -2 is 0xc000 in both.
	f16 := model.HostTensor{Shape: []int{3}, DType: "F16", Data: []byte{0x00, 0x3e, 0x00, 0xc0, 0x01, 0x00}}
	bf16 := model.HostTensor{Shape: []int{2}, DType: "BF16", Data: []byte{0xc0, 0x3f, 0x00, 0xc0}}
	v, err := f16.Float32()
	if err != nil || v[0] != 1.5 || v[1] != -2 || v[2] != 1.0/(1<<24) {
		t.Errorf("F16: %v %v", v, err)
	}
	v, err = bf16.Float32()
	if err != nil || v[0] != 1.5 || v[1] != -2 {
		t.Errorf("BF16: %v %v", v, err)
	}
	if _, err := (model.HostTensor{Shape: []int{1}, DType: "I64", Data: make([]byte, 8)}).Float32(); err == nil {
		t.Error("I64 converted as a weight")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`), int64(8))
	f.Add([]byte(`{"__metadata__":{"format":"pt"}}`), int64(0))
	f.Add([]byte(`{"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"I64","shape":[],"data_offsets":[12,20]}}`), int64(20))
	f.Fuzz(func(t *testing.T, h []byte, size int64) {
		if size < 0 {
			return
		}
		file, err := Parse("fuzz.safetensors", h, size)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.safetensors: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, n := range file.Names() {
			info, _ := file.Info(n)
			if info.Offset < 0 || info.Offset+info.Size > size {
				t.Fatalf("accepted %+v outside %d bytes", info, size)
			}
		}
	})
}

// TestFP8Tensor: an F8_E4M3 tensor reads as its codes; with its scales it
// dequantizes (per tensor or per row), without them it refuses to; F8_E5M2
// is not a weight dtype.
func TestFP8Tensor(t *testing.T) {
	dir := t.TempDir()
	// Codes 0x38 = 1, 0xc0 = -2, 0x7e = 448, 0x01 = 2^-9.
	w := model.HostTensor{Shape: []int{2, 2}, DType: "F8_E4M3", Data: []byte{0x38, 0xc0, 0x7e, 0x01}}
	e5 := model.HostTensor{Shape: []int{1}, DType: "F8_E5M2", Data: []byte{0x3c}}
	if err := WriteFile(filepath.Join(dir, "model.safetensors"), map[string]model.HostTensor{"w": w, "e5": e5}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h, err := d.Tensor("w")
	if err != nil || h.DType != "F8_E4M3" || string(h.Data) != string(w.Data) {
		t.Fatalf("F8_E4M3 tensor: %+v, %v", h, err)
	}
	if _, err := h.Float32(); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Errorf("dequantized without a scale: %v", err)
	}
	h.FP8 = &model.FP8Scales{Weight: []float32{0.5}}
	if v, err := h.Float32(); err != nil || v[0] != 0.5 || v[1] != -1 || v[2] != 224 || v[3] != 1.0/1024 {
		t.Errorf("per tensor: %v %v", v, err)
	}
	h.FP8 = &model.FP8Scales{Weight: []float32{1, 4}}
	if v, err := h.Float32(); err != nil || v[1] != -2 || v[2] != 1792 {
		t.Errorf("per row: %v %v", v, err)
	}
	h.FP8 = &model.FP8Scales{Weight: []float32{1, 2, 3}}
	if _, err := h.Float32(); err == nil || !strings.Contains(err.Error(), "3 weight scales for 2 rows") {
		t.Errorf("3 scales for 2 rows: %v", err)
	}
	if _, err := d.Tensor("e5"); err == nil || !strings.Contains(err.Error(), "F8_E5M2") {
		t.Errorf("F8_E5M2 read as a weight: %v", err)
	}
}

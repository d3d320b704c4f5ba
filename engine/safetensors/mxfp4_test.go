package safetensors

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

func bf16Values(b []byte) []float32 {
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
	return out
}

func TestDequantMXFP4(t *testing.T) {
	// Block 0: codes 0..15 then 15..0 (low nibble first), scale 2^0;
	// block 1: all 0x21 (low nibble 0.5, high nibble 1), scale 2^-3;
	// block 2: scale 255 is E8M0's NaN.
	blocks := make([]byte, 48)
	for i := range 8 {
		blocks[i] = byte(2*i) | byte(2*i+1)<<4
		blocks[8+i] = byte(15-2*i) | byte(14-2*i)<<4
	}
	for i := 16; i < 32; i++ {
		blocks[i] = 0x21
	}
	got := bf16Values(DequantMXFP4(blocks, []byte{127, 124, 255}))
	for i := range 16 {
		if got[i] != fp4Values[i] || got[16+i] != fp4Values[15-i] {
			t.Fatalf("block 0: %v", got[:32])
		}
	}
	for i := 32; i < 64; i += 2 {
		if got[i] != 0.5/8 || got[i+1] != 1.0/8 {
			t.Fatalf("block 1 (scale 2^-3): %v", got[32:64])
		}
	}
	for _, v := range got[64:] {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("block 2 (scale 255): %v", got[64:])
		}
	}
	// The largest and smallest scales stay exact while BF16 holds them.
	if v := bf16Values(DequantMXFP4([]byte{0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{254})); v[0] != 6*float32(math.Ldexp(1, 127)) {
		t.Errorf("6·2^127 = %v", v[0])
	}
	if v := bf16Values(DequantMXFP4([]byte{0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{1})); v[0] != float32(math.Ldexp(1, -126)) {
		t.Errorf("1·2^-126 = %v", v[0])
	}
}

func TestDirMXFP4(t *testing.T) {
	dir := t.TempDir()
	u8 := func(shape []int) model.HostTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7) | 0x11
		}
		return model.HostTensor{Shape: shape, DType: "U8", Data: b}
	}
	scales := u8([]int{2, 3, 2})
	for i := range scales.Data {
		scales.Data[i] = 127
	}
	ts := map[string]model.HostTensor{
		"w_blocks": u8([]int{2, 3, 2, 16}), "w_scales": scales,
		"bad_blocks": u8([]int{2, 3, 2, 16}), "bad_scales": u8([]int{2, 3}),
		"f_blocks": model.HostF32([]int{2, 16}, make([]float32, 32)), "f_scales": u8([]int{2}),
		"odd_blocks": u8([]int{2, 8}), "odd_scales": u8([]int{2}),
	}
	if err := WriteFile(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h, err := d.MXFP4("w_blocks", "w_scales")
	if err != nil {
		t.Fatal(err)
	}
	if h.DType != "BF16" || len(h.Shape) != 3 || h.Shape[0] != 2 || h.Shape[1] != 3 || h.Shape[2] != 64 || len(h.Data) != 2*3*64*2 {
		t.Fatalf("shape %v dtype %s, %d bytes", h.Shape, h.DType, len(h.Data))
	}
	v := bf16Values(h.Data)
	if b := ts["w_blocks"].Data[0]; v[0] != fp4Values[b&15] || v[1] != fp4Values[b>>4] {
		t.Errorf("first values %v from byte %#x", v[:2], b)
	}
	for _, c := range []struct{ blocks, scales, msg string }{
		{"bad_blocks", "bad_scales", `"bad_scales" has shape [2 3]`},
		{"f_blocks", "f_scales", "MXFP4 blocks are U8"},
		{"odd_blocks", "odd_scales", "[..., blocks, 16]"},
		{"w_blocks", "none", `"none"`},
		{"none", "w_scales", `"none"`},
	} {
		_, err := d.MXFP4(c.blocks, c.scales)
		fe, ok := err.(*FormatError)
		if !ok || !fe.BadInput() || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s/%s: %v, want a FormatError saying %s", c.blocks, c.scales, err, c.msg)
		}
	}
}

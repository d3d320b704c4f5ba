package model

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// TestQuantizeMXFP4Block: OCP's rule on blocks whose answer is known: the
// scale from amax's exponent, the nearest E2M1 value with ties to the even
// code, saturation at 6, the sign, and the degenerate blocks.
func TestQuantizeMXFP4Block(t *testing.T) {
	block := func(vals ...float32) []float32 {
		v := make([]float32, 32)
		copy(v, vals)
		return v
	}
	for _, c := range []struct {
		name  string
		in    []float32
		scale byte
		want  []float32 // the dequantized first values; the rest must be 0
	}{
		{"amax 6 keeps scale 1", block(6, 0.5, -1.5, 3), 127, []float32{6, 0.5, -1.5, 3}},
		{"amax 4 is scale 1", block(4, 1), 127, []float32{4, 1}},
		{"amax 7.9 saturates", block(7.9, 1), 127, []float32{6, 1}},
		{"amax 8 is scale 2", block(8, 1, 0.5), 128, []float32{8, 1, 0}},
		{"ties to even", block(4, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5), 127, []float32{4, 0, 1, 1, 2, 2, 4, 4}},
		{"just off the ties", block(4, 0.26, 0.74, 1.26, 1.74, 2.51, 3.49, 5.01), 127, []float32{4, 0.5, 0.5, 1.5, 1.5, 3, 3, 6}},
		{"negative", block(-3, -0.3, -0.1), 126, []float32{-3, -0.25, 0}},
		{"small", block(0.01, -0.005), 127 - 9, []float32{0.01171875, -0.005859375}},
		{"zeros", block(), 0, nil},
		{"subnormal amax", block(1e-40), 0, []float32{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			codes := make([]byte, 16)
			s := QuantizeMXFP4Block(codes, c.in)
			if s != c.scale {
				t.Errorf("scale %d, want %d", s, c.scale)
			}
			got := make([]float32, 32)
			DequantMXFP4Row(got, codes, []byte{s})
			want := make([]float32, 32)
			copy(want, c.want)
			if !slices.Equal(got, want) {
				t.Errorf("dequantized %v, want %v", got[:8], want[:8])
			}
		})
	}
	codes := make([]byte, 16)
	if s := QuantizeMXFP4Block(codes, block(1, float32(math.NaN()))); s != 255 {
		t.Errorf("NaN block: scale %d, want 255", s)
	}
	if s := QuantizeMXFP4Block(codes, block(float32(math.Inf(-1)))); s != 255 {
		t.Errorf("Inf block: scale %d, want 255", s)
	}
}

// TestMXFP4NibbleOrder: value 2i is byte i's low nibble, as in GPT-OSS's
// checkpoints (and engine/safetensors' DequantMXFP4).
func TestMXFP4NibbleOrder(t *testing.T) {
	codes := make([]byte, 16)
	codes[0] = 0x2a // low: 0xa = -1, high: 0x2 = 1
	codes[15] = 0x7f
	got := make([]float32, 32)
	DequantMXFP4Row(got, codes, []byte{128})
	if got[0] != -2 || got[1] != 2 || got[30] != -12 || got[31] != 12 {
		t.Errorf("got %v", got)
	}
	for c := range byte(16) {
		if v := FP4Value(c); float32(math.Abs(float64(v))) != fp4Magnitudes[c&7] || (c >= 8 && c != 8) != (v < 0) {
			t.Errorf("code %d: %v", c, v)
		}
	}
}

// mxfp4RoundTrip checks that quantizing dequantized MXFP4 gives back the
// same values (what lets the loader requantize a checkpoint's experts).
func mxfp4RoundTrip(t *testing.T, codes, scales []byte) {
	t.Helper()
	n := len(scales) * 32
	v := make([]float32, n)
	DequantMXFP4Row(v, codes, scales)
	q, err := QuantizeMXFP4([]int{1, len(scales), 32}, v)
	if err != nil {
		t.Fatal(err)
	}
	back := q.Dequantize()
	for i := range v {
		if v[i] != back[i] && !(v[i] != v[i] && back[i] != back[i]) {
			t.Fatalf("value %d: %v requantizes to %v (scale %d -> %d)", i, v[i], back[i], scales[i/32], q.Scales[i/32])
		}
	}
}

// TestMXFP4RoundTrip: every code in every position, under scales across
// E8M0's range (the extremes included).
func TestMXFP4RoundTrip(t *testing.T) {
	var codes, scales []byte
	for _, s := range []byte{0, 1, 2, 100, 127, 128, 200, 252} {
		for b := range 16 {
			blk := make([]byte, 16)
			for i := range blk {
				blk[i] = byte((b*16+i*7)%256) ^ byte(s)
			}
			codes = append(codes, blk...)
			scales = append(scales, s)
		}
	}
	mxfp4RoundTrip(t, codes, scales)
}

func FuzzMXFP4RoundTrip(f *testing.F) {
	f.Add(make([]byte, 16), byte(127))
	f.Add([]byte{0xff, 0x77, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6}, byte(3))
	f.Fuzz(func(t *testing.T, codes []byte, scale byte) {
		if len(codes) < 16 || scale > 252 {
			return
		}
		mxfp4RoundTrip(t, codes[:16], []byte{scale})
	})
}

// TestRandomMXFP4: the random MXFP4 weight is RandomFill's values
// quantized, whatever the chunking.
func TestRandomMXFP4(t *testing.T) {
	shape := []int{3, 5, 64}
	w, err := RandomMXFP4(shape, 42, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, 3*5*64)
	RandomFill(f, 42, 0, 0.1)
	q, err := QuantizeMXFP4(shape, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Blocks, q.Blocks) || !slices.Equal(w.Scales, q.Scales) || w.Check() != nil {
		t.Error("RandomMXFP4 differs from RandomFill quantized")
	}
	// Quantization error: at most half a step of the block's scale.
	d := w.Dequantize()
	for i, v := range f {
		step := E8M0Scale(w.Scales[i/32]) * 2 // the widest E2M1 gap
		if math.Abs(float64(d[i]-v)) > float64(step) {
			t.Fatalf("value %d: %v quantizes to %v (scale %v)", i, v, d[i], step/2)
		}
	}
	big, err := RandomMXFP4([]int{1, 2*mxfp4Chunk/2 + 3, 64}, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	f = make([]float32, numelOf(big.Shape))
	RandomFill(f, 7, 0, 1)
	if q, _ := QuantizeMXFP4(big.Shape, f); !slices.Equal(big.Blocks, q.Blocks) || !slices.Equal(big.Scales, q.Scales) {
		t.Error("chunked RandomMXFP4 differs")
	}
	for _, bad := range [][]int{{2, 3}, {1, 2, 48}, {1, 0, 32}} {
		if _, err := RandomMXFP4(bad, 1, 1); err == nil {
			t.Errorf("shape %v: no error", bad)
		}
	}
	if _, err := QuantizeMXFP4([]int{1, 1, 32}, make([]float32, 31)); err == nil {
		t.Error("31 values for 32: no error")
	}
	if err := (MXFP4{Shape: []int{1, 1, 32}, Blocks: make([]byte, 16)}).Check(); err == nil {
		t.Error("no scales: no error")
	}
}

// TestHostMXFP4: host tensors of any dtype quantize as their float32
// values do, chunk by chunk.
func TestHostMXFP4(t *testing.T) {
	defer func(v int) { mxfp4HostValues = v }(mxfp4HostValues)
	mxfp4HostValues = 3 * 64 // chunks of three rows over 2·5 rows
	shape := []int{2, 5, 64}
	f := make([]float32, 2*5*64)
	RandomFill(f, 3, 0, 2)
	want, _ := QuantizeMXFP4(shape, f)
	bf := make([]byte, 2*len(f))
	for i, v := range f {
		f[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff) // exact in BF16
		binary.LittleEndian.PutUint16(bf[2*i:], uint16(math.Float32bits(f[i])>>16))
	}
	wantBF, _ := QuantizeMXFP4(shape, f)
	for _, c := range []struct {
		h    HostTensor
		want MXFP4
	}{
		{HostF32(shape, func() []float32 { g := make([]float32, len(f)); RandomFill(g, 3, 0, 2); return g }()), want},
		{HostTensor{Shape: shape, DType: "BF16", Data: bf}, wantBF},
	} {
		got, err := hostMXFP4(c.h)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Blocks, c.want.Blocks) || !slices.Equal(got.Scales, c.want.Scales) {
			t.Errorf("%s: differs from QuantizeMXFP4", c.h.DType)
		}
	}
	if _, err := hostMXFP4(HostTensor{Shape: shape, DType: "I64", Data: make([]byte, 8*len(f))}); err == nil {
		t.Error("I64: no error")
	}
}

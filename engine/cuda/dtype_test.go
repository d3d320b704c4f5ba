package cuda

import (
	"math"
	"testing"
)

func TestF16RoundTripsEveryValue(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if back := F16FromFloat32(f); back&0x7C00 != 0x7C00 || back&0x3FF == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back := F16FromFloat32(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestBF16RoundTripsEveryValue(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := BF16FromFloat32(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestRounding(t *testing.T) {
	cases := []struct {
		dt   DType
		in   float32
		want uint16
	}{
		{F16, 1, 0x3C00},
		{F16, 65504, 0x7BFF},
		{F16, 65520, 0x7C00},                  // halfway to the next binade rounds to infinity
		{F16, 1 + 1.0/2048, 0x3C00},           // tie, even mantissa stays
		{F16, 1 + 3.0/2048, 0x3C02},           // tie, odd mantissa rounds up
		{F16, 5.960464477539063e-08, 0x0001},  // smallest subnormal
		{F16, 2.9802322387695312e-08, 0x0000}, // half of it: tie to even (zero)
		{F16, -2, 0xC000},
		{BF16, 1, 0x3F80},
		{BF16, 1 + 1.0/256, 0x3F80}, // tie to even
		{BF16, 1 + 3.0/256, 0x3F82},
		{BF16, float32(math.Inf(-1)), 0xFF80},
	}
	for _, c := range cases {
		if got := c.dt.FromFloat32(c.in); got != c.want {
			t.Errorf("%s(%g) = %#04x, want %#04x", c.dt, c.in, got, c.want)
		}
	}
	if !math.IsNaN(float64(F16.ToFloat32(F16.NaNBits()))) || !math.IsNaN(float64(BF16.ToFloat32(BF16.NaNBits()))) {
		t.Error("NaNBits is not a NaN")
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory", Detail: "1024 bytes on GPU 0"}
	if got, want := e.Error(), "cuMemAlloc (1024 bytes on GPU 0): CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	log := &Error{Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Detail: "gemm.cu with -x\nline 3: error"}
	if got := log.Error(); got != "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)\ngemm.cu with -x\nline 3: error" {
		t.Errorf("compile error: %q", got)
	}
	d := DeviceInfo{Major: 9, Minor: 0}
	if d.Arch() != "sm_90a" || (DeviceInfo{Major: 8, Minor: 6}).Arch() != "sm_86" {
		t.Error("Arch")
	}
}

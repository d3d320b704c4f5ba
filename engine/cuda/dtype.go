package cuda

import (
	"fmt"
	"math"
)

// DType is the element type of activations and weights on the GPU.
type DType int

const (
	F16  DType = iota // IEEE binary16
	BF16              // bfloat16
)

func (t DType) String() string {
	switch t {
	case F16:
		return "float16"
	case BF16:
		return "bfloat16"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// Size is the element size in bytes.
func (t DType) Size() int { return 2 }

// suffix names a kernel's instantiation for t ("rmsnorm_f16").
func (t DType) suffix() string {
	if t == BF16 {
		return "bf16"
	}
	return "f16"
}

// ParseDType accepts the spec's spellings.
func ParseDType(s string) (DType, error) {
	switch s {
	case "float16", "fp16", "half", "f16":
		return F16, nil
	case "bfloat16", "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("dtype %q: want float16 or bfloat16", s)
}

// NaNBits is a quiet NaN of t, used to poison outputs before a check.
func (t DType) NaNBits() uint16 {
	if t == BF16 {
		return 0x7FC0
	}
	return 0x7E00
}

// FromFloat32 rounds f to t (round to nearest even) and returns its bits.
func (t DType) FromFloat32(f float32) uint16 {
	if t == BF16 {
		return BF16FromFloat32(f)
	}
	return F16FromFloat32(f)
}

// ToFloat32 widens bits of type t.
func (t DType) ToFloat32(h uint16) float32 {
	if t == BF16 {
		return BF16ToFloat32(h)
	}
	return F16ToFloat32(h)
}

// Encode converts a float32 slice to t's bits.
func (t DType) Encode(src []float32) []uint16 {
	out := make([]uint16, len(src))
	for i, v := range src {
		out[i] = t.FromFloat32(v)
	}
	return out
}

// Decode converts t's bits to float32.
func (t DType) Decode(src []uint16) []float32 {
	out := make([]float32, len(src))
	for i, v := range src {
		out[i] = t.ToFloat32(v)
	}
	return out
}

// BF16FromFloat32 rounds to nearest even; NaN stays a quiet NaN.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToFloat32 widens exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromFloat32 rounds to nearest even with overflow to infinity and
// gradual underflow.
func F16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xFF)
	man := b & 0x7FFFFF
	switch {
	case exp == 0xFF:
		if man != 0 {
			return sign | 0x7E00
		}
		return sign | 0x7C00
	case exp > 127+15:
		return sign | 0x7C00
	case exp >= 127-14:
		// Normal half: 10 mantissa bits, round the 13 dropped ones.
		h := uint32(exp-127+15)<<10 | man>>13
		rest := man & 0x1FFF
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, and up to infinity: correct
		}
		return sign | uint16(h)
	case exp >= 127-25:
		// Subnormal half: shift the implicit bit in.
		man |= 0x800000
		shift := uint32(127 - 14 - exp + 13)
		h := man >> shift
		rest := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}

// F16ToFloat32 widens exactly.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = man * 2^-24.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

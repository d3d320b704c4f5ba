package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/xrun-dev/xrun/engine/model"
)

// MXFP4 (OCP Microscaling, as GPT-OSS's checkpoints store their experts):
// a U8 blocks tensor [..., rows, G, 16] packs two FP4 E2M1 values a byte
// (the low nibble first), 32 values a block, and a U8 scales tensor [...,
// rows, G] holds each block's E8M0 scale, 2^(s-127). Value i of block g
// of a row is element g·32 + i.

// fp4Values are the E2M1 codes' values: sign bit 3, then 2 exponent bits
// and 1 mantissa bit.
var fp4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}

// DequantMXFP4 expands blocks (rows·G·16 bytes) with scales (rows·G
// bytes) into rows·G·32 values, BF16 little-endian. Every FP4 value times
// a power of two is exact in BF16 unless it leaves BF16's range; scale
// 255 (E8M0's NaN) gives NaN.
func DequantMXFP4(blocks, scales []byte) []byte {
	out := make([]byte, 4*len(blocks))
	for g, s := range scales {
		mul := float32(math.NaN())
		if s != 255 {
			mul = float32(math.Ldexp(1, int(s)-127))
		}
		for i, b := range blocks[16*g : 16*g+16] {
			lo, hi := fp4Values[b&15]*mul, fp4Values[b>>4]*mul
			o := 64*g + 4*i
			binary.LittleEndian.PutUint16(out[o:], bf16(lo))
			binary.LittleEndian.PutUint16(out[o+2:], bf16(hi))
		}
	}
	return out
}

// bf16 rounds a float32 to BF16, to nearest even (exact for the values
// DequantMXFP4 makes, barring underflow).
func bf16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// MXFP4 reads the MXFP4 tensor stored as blocks and scales and returns it
// dequantized to BF16, shaped [..., rows, G·32] (model.MXFP4Source).
func (d *Dir) MXFP4(blocks, scales string) (model.HostTensor, error) {
	bf, ok := d.where[blocks]
	if !ok {
		return model.HostTensor{}, &FormatError{File: d.Where(blocks), Msg: fmt.Sprintf("%v: %q (MXFP4 weights need their _blocks and _scales)", ErrNotFound, blocks)}
	}
	sf, ok := d.where[scales]
	if !ok {
		return model.HostTensor{}, &FormatError{File: d.Where(scales), Msg: fmt.Sprintf("%v: %q (MXFP4 weights need their _blocks and _scales)", ErrNotFound, scales)}
	}
	bi, bd, err := bf.Read(blocks)
	if err != nil {
		return model.HostTensor{}, err
	}
	si, sd, err := sf.Read(scales)
	if err != nil {
		return model.HostTensor{}, err
	}
	switch {
	case bi.DType != "U8":
		return model.HostTensor{}, &FormatError{File: bf.Path, Msg: fmt.Sprintf("tensor %q has dtype %s; MXFP4 blocks are U8", blocks, bi.DType)}
	case si.DType != "U8":
		return model.HostTensor{}, &FormatError{File: sf.Path, Msg: fmt.Sprintf("tensor %q has dtype %s; MXFP4 scales are U8 (E8M0)", scales, si.DType)}
	case len(bi.Shape) < 2 || bi.Shape[len(bi.Shape)-1] != 16:
		return model.HostTensor{}, &FormatError{File: bf.Path, Msg: fmt.Sprintf("tensor %q has shape %v; MXFP4 blocks are [..., blocks, 16]", blocks, bi.Shape)}
	case !slices.Equal(si.Shape, bi.Shape[:len(bi.Shape)-1]):
		return model.HostTensor{}, &FormatError{File: sf.Path, Msg: fmt.Sprintf("tensor %q has shape %v; %q of shape %v needs %v", scales, si.Shape, blocks, bi.Shape, bi.Shape[:len(bi.Shape)-1])}
	}
	shape := slices.Clone(si.Shape)
	shape[len(shape)-1] *= 32
	return model.HostTensor{Shape: shape, DType: "BF16", Data: DequantMXFP4(bd, sd)}, nil
}

var _ model.MXFP4Source = (*Dir)(nil)

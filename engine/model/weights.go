package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/xrun-dev/xrun/engine/fp8"
)

// WeightSource supplies checkpoint tensors by their Hugging Face names.
// Errors name the file and the problem.
type WeightSource interface {
	Tensor(name string) (HostTensor, error)
	Has(name string) bool
	// Where names the file holding a tensor, for messages.
	Where(name string) string
}

// DTypeSize is the size in bytes of a weight dtype the engine converts.
func DTypeSize(dt string) int {
	switch dt {
	case "F32":
		return 4
	case "F16", "BF16":
		return 2
	case "F8_E4M3":
		return 1
	}
	return 0
}

// Float32 converts a host tensor to float32.
func (h HostTensor) Float32() ([]float32, error) {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	size := DTypeSize(h.DType)
	if size == 0 {
		return nil, fmt.Errorf("dtype %s is not a weight dtype (want F32, F16, BF16 or F8_E4M3)", h.DType)
	}
	if len(h.Data) != n*size {
		return nil, fmt.Errorf("%d bytes for shape %v of %s, want %d", len(h.Data), h.Shape, h.DType, n*size)
	}
	out := make([]float32, n)
	d := h.Data
	switch h.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16)
		}
	case "F16":
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case "F8_E4M3":
		// Dequantized: the values an unquantized GEMM on this checkpoint
		// multiplies.
		if err := h.CheckFP8(); err != nil {
			return nil, err
		}
		cols := n / max(h.rows(), 1)
		for i := range out {
			out[i] = fp8.Decode(d[i]) * h.FP8.RowScale(i/max(cols, 1))
		}
	}
	return out, nil
}

// F16ToF32 converts an IEEE half-precision value exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, nan
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = man * 2^-24.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// HostF32 wraps float32 values as a host tensor.
func HostF32(shape []int, v []float32) HostTensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return HostTensor{Shape: slices.Clone(shape), DType: "F32", Data: b}
}

// concatRows stacks tensors along their first dimension (their trailing
// dimensions must agree). Mixed dtypes are converted to F32. FP8 parts
// keep their codes: their weight scales become one per row (each part's
// rows keep their own, so nothing is requantized), their input scales
// the largest (the parts share the GEMM's input, as vLLM and TensorRT-LLM
// take it for fused QKV and gate/up).
func concatRows(parts ...HostTensor) (HostTensor, error) {
	dt := parts[0].DType
	for _, p := range parts {
		if p.DType != dt {
			dt = "F32"
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	out := HostTensor{DType: dt, Shape: slices.Clone(parts[0].Shape)}
	if dt == "F8_E4M3" {
		out.FP8 = &FP8Scales{PerToken: parts[0].FP8 != nil && parts[0].FP8.PerToken}
		for _, p := range parts {
			if err := p.CheckFP8(); err != nil {
				return HostTensor{}, err
			}
			for r := range p.rows() {
				out.FP8.Weight = append(out.FP8.Weight, p.FP8.RowScale(r))
			}
			out.FP8.Input = max(out.FP8.Input, p.FP8.Input)
		}
	}
	out.Shape[0] = 0
	for _, p := range parts {
		if len(p.Shape) != len(out.Shape) || !slices.Equal(p.Shape[1:], out.Shape[1:]) {
			return HostTensor{}, fmt.Errorf("cannot stack shapes %v and %v", parts[0].Shape, p.Shape)
		}
		out.Shape[0] += p.Shape[0]
		if p.DType == dt {
			out.Data = append(out.Data, p.Data...)
			continue
		}
		f, err := p.Float32()
		if err != nil {
			return HostTensor{}, err
		}
		out.Data = append(out.Data, HostF32(p.Shape, f).Data...)
	}
	return out, nil
}

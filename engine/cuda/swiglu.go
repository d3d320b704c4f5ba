//go:build cgo && linux

package cuda

import "fmt"

// SwiGLU queues out[r, i] = silu(gate[r, i]) * up[r, i] for r < rows,
// i < ffn; out is [rows, ffn], and gate and up rows are ld elements apart
// (ld = 2*ffn for the halves of a fused gate_up projection, ffn otherwise).
func (g *GPU) SwiGLU(s *Stream, dt DType, out, gate, up Buffer, rows, ffn, ld int) error {
	es := dt.Size()
	switch {
	case ffn%8 != 0 || ld%8 != 0 || gate.Ptr%16 != 0 || up.Ptr%16 != 0:
		return fmt.Errorf("cuda: SwiGLU needs ffn and ld multiples of 8 and 16-byte aligned inputs (ffn %d, ld %d)", ffn, ld)
	case rows == 0:
		return nil
	case out.Bytes < rows*ffn*es || gate.Bytes < ((rows-1)*ld+ffn)*es || up.Bytes < ((rows-1)*ld+ffn)*es:
		return fmt.Errorf("cuda: SwiGLU buffers too small for %d x %d (ld %d)", rows, ffn, ld)
	}
	f, err := g.function("swiglu", "swiglu_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(out).Ptr(gate).Ptr(up).I32(rows).I32(ffn).U64(uint64(ld))
	return s.Launch(f, swigluGrid(rows, ffn), Dim3{X: swigluThreads}, 0, a)
}

// swigluThreads is the SwiGLU kernels' block: 16-byte chunks of a row.
const swigluThreads = 256

// swigluGrid is the SwiGLU kernels' grid (swiglu.cu, fp8_fused.cu): x
// across a row's 16-byte chunks, y down the rows, the kernels striding past
// the grid's y limit.
func swigluGrid(rows, ffn int) Dim3 {
	return Dim3{X: ceilDiv(ffn/8, swigluThreads), Y: min(rows, 65535)}
}

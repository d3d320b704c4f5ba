//go:build cgo && linux

package cuda

import "fmt"

// FP8 GEMM inputs quantized by the kernel that produces them
// (kernels/fp8_fused.cu): RMSNorm, the residual add with RMSNorm, and
// SwiGLU write E4M3 codes with a static per-tensor scale instead of their
// fp16/bf16 output, the codes bit for bit those of the plain kernel
// followed by FP8Quantize with that scale (TestFP8Fused*). scale is a
// device float32, so that a calibrated scale never leaves the GPU and
// graphs capture the launches.

// checkFP8Out checks a fused kernel's codes (n, 8-byte stores) and scale.
func checkFP8Out(what string, q, scale Buffer, n int) error {
	switch {
	case q.Bytes < n || q.Ptr%8 != 0:
		return fmt.Errorf("cuda: %s: %d codes into %d bytes at %#x (8-byte aligned)", what, n, q.Bytes, q.Ptr)
	case scale.Bytes < 4:
		return fmt.Errorf("cuda: %s: no static scale", what)
	}
	return nil
}

// FP8RMSNorm queues q = E4M3(x / sqrt(mean(x^2) + eps) * w · (1/s)), row by
// row, s the float32 at scale: RMSNorm then FP8Quantize with that static
// scale, one pass. x is [rows, hidden] in dt, q [rows, hidden] codes.
func (g *GPU) FP8RMSNorm(s *Stream, dt DType, q, x, w, scale Buffer, rows, hidden int, eps float32) error {
	// RMSNorm's block size: the sum of squares in the same order.
	threads, err := rmsnormBlock(dt, rows, hidden, x)
	if err != nil || rows == 0 {
		return err
	}
	if err := checkFP8Out("FP8 RMSNorm", q, scale, rows*hidden); err != nil {
		return err
	}
	f, err := g.function("fp8_fused", "fp8_rmsnorm_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: threads}, 0, g.argsPack().Ptr(q).Ptr(x).Ptr(w).I32(hidden).F32(eps).Ptr(scale))
}

// FP8AddRMSNorm queues residual += x, then q = E4M3(RMSNorm(residual) ·
// (1/s)) as FP8RMSNorm: AddRMSNorm then FP8Quantize, one pass.
func (g *GPU) FP8AddRMSNorm(s *Stream, dt DType, q, residual, x, w, scale Buffer, rows, hidden int, eps float32) error {
	threads, err := rmsnormBlock(dt, rows, hidden, residual, x)
	if err != nil || rows == 0 {
		return err
	}
	if err := checkFP8Out("FP8 AddRMSNorm", q, scale, rows*hidden); err != nil {
		return err
	}
	f, err := g.function("fp8_fused", "fp8_add_rmsnorm_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: threads}, 0,
		g.argsPack().Ptr(q).Ptr(residual).Ptr(x).Ptr(w).I32(hidden).F32(eps).Ptr(scale))
}

// FP8SwiGLU queues q[r, i] = E4M3(silu(gate[r, i]) * up[r, i] · (1/s)) for
// r < rows, i < ffn, q [rows, ffn] codes, gate and up as SwiGLU's (rows ld
// elements apart): SwiGLU then FP8Quantize with the static scale, one pass.
func (g *GPU) FP8SwiGLU(s *Stream, dt DType, q, gate, up, scale Buffer, rows, ffn, ld int) error {
	es := dt.Size()
	switch {
	case ffn%8 != 0 || ld%8 != 0 || gate.Ptr%16 != 0 || up.Ptr%16 != 0:
		return fmt.Errorf("cuda: FP8 SwiGLU needs ffn and ld multiples of 8 and 16-byte aligned inputs (ffn %d, ld %d)", ffn, ld)
	case rows == 0:
		return nil
	case gate.Bytes < ((rows-1)*ld+ffn)*es || up.Bytes < ((rows-1)*ld+ffn)*es:
		return fmt.Errorf("cuda: FP8 SwiGLU inputs too small for %d x %d (ld %d)", rows, ffn, ld)
	}
	if err := checkFP8Out("FP8 SwiGLU", q, scale, rows*ffn); err != nil {
		return err
	}
	f, err := g.function("fp8_fused", "fp8_swiglu_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(q).Ptr(gate).Ptr(up).I32(rows).I32(ffn).U64(uint64(ld)).Ptr(scale)
	return s.Launch(f, swigluGrid(rows, ffn), Dim3{X: swigluThreads}, 0, a)
}

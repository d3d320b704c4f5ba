//go:build cgo && linux

package cuda

import (
	"fmt"
	"os"
)

// GemvMaxM is the largest M the own GEMM serves with the matrix-vector
// kernels (kernels/gemv.cu); larger M goes to the tensor-core tiles.
// GemvSwiGLUMaxM bounds GemmSwiGLU.
const (
	GemvMaxM       = 8
	GemvSwiGLUMaxM = 2
)

// gemvOn is false under XRUN_CUDA_GEMV=0 (an ablation: decode GEMMs on the
// tensor-core tiles instead).
var gemvOn = os.Getenv("XRUN_CUDA_GEMV") != "0"

// gemvWarps is the warps per block of the gemv kernels (__launch_bounds__(128)).
const gemvWarps = 4

// gemvPlan picks the kernel for M = m: mt is m rounded up to a power of two;
// r, the rows of W per warp, is the smallest that keeps all warps within one
// wave (64 resident per multiprocessor), at least 2 from M = 4 and 4 at M = 8
// (each chunk of X then serves more rows of W), and at least 2 for the
// SwiGLU prologue (its exponentials are then shared by two rows).
func gemvPlan(m, n, sms int, swiglu bool) (mt, r int) {
	mt = 1
	for mt < m {
		mt *= 2
	}
	r = 1
	switch {
	case mt >= 8:
		r = 4
	case mt >= 4 || swiglu:
		r = 2
	}
	for r < 4 && ceilDiv(n, r) > 64*sms {
		r *= 2
	}
	return mt, r
}

func (g *GPU) gemv(s *Stream, dt DType, y, x, w Buffer, m, n, k int, swiglu bool) error {
	mt, r := gemvPlan(m, n, g.Info.SMs, swiglu)
	name := fmt.Sprintf("gemv_%s_m%d_r%d", dt.suffix(), mt, r)
	if swiglu {
		name = fmt.Sprintf("gemv_swiglu_%s_m%d_r%d", dt.suffix(), mt, r)
	}
	f, err := g.function("gemv", name)
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(x).Ptr(w).Ptr(y).I32(m).I32(n).I32(k)
	return s.Launch(f, Dim3{X: ceilDiv(n, gemvWarps*r)}, Dim3{X: 32 * gemvWarps}, 0, a)
}

// GemmSwiGLU queues Y[m,n] = A[m,k] W[n,k]^T with A = silu(gate) * up read
// from the fused rows gateUp[m, 2k] (gate first) and rounded as SwiGLU
// writes it: the MLP's down projection with the activation fused into its
// prologue. The own GEMM's decode path; m <= GemvSwiGLUMaxM.
func (g *GPU) GemmSwiGLU(s *Stream, dt DType, y, gateUp, w Buffer, m, n, k int) error {
	es := dt.Size()
	switch {
	case m <= 0 || m > GemvSwiGLUMaxM || n <= 0 || k <= 0 || k%8 != 0:
		return fmt.Errorf("cuda: GemmSwiGLU shape M=%d N=%d K=%d (M 1..%d, K a multiple of 8)", m, n, k, GemvSwiGLUMaxM)
	case gateUp.Bytes < m*2*k*es || w.Bytes < n*k*es || y.Bytes < m*n*es:
		return fmt.Errorf("cuda: GemmSwiGLU buffers too small for M=%d N=%d K=%d", m, n, k)
	case gateUp.Ptr%16 != 0 || w.Ptr%16 != 0:
		return fmt.Errorf("cuda: GemmSwiGLU needs 16-byte aligned operands")
	}
	return g.gemv(s, dt, y, gateUp, w, m, n, k, true)
}

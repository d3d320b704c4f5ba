//go:build cgo && linux

package cuda

import (
	"fmt"
	"os"
	"strconv"
)

// GemvMaxM is the largest M the matrix-vector kernels (kernels/gemv.cu,
// GemmFused) take. GemvRows is the largest the own GEMM sends them: M up
// to it runs there, larger M on the tensor-core tiles. Its default is 4:
// from M = 5 the CUDA-core GEMV is issue-bound (each 16-byte chunk of W
// costs 8 x M FMAs plus the conversions), and on an H200 TinyLlama at batch
// 8 decodes at 5,119 tok/s on the tiles against 2,486 on the GEMV.
// XRUN_CUDA_GEMV_MAXM sets it (0: every M on the tiles, as XRUN_CUDA_GEMV=0).
const (
	GemvMaxM        = 8
	gemvRowsDefault = 4
)

var gemvRows = func() int {
	if os.Getenv("XRUN_CUDA_GEMV") == "0" {
		return 0
	}
	if v, err := strconv.Atoi(os.Getenv("XRUN_CUDA_GEMV_MAXM")); err == nil && v >= 0 && v <= GemvMaxM {
		return v
	}
	return gemvRowsDefault
}()

// GemvRows is the largest M the own GEMM serves with the matrix-vector
// kernels (see GemvMaxM).
func GemvRows() int { return gemvRows }

// gemvWarps is the warps per block of the gemv kernels (__launch_bounds__(128)).
const gemvWarps = 4

// gemvPlan picks the kernel for M = m and n outputs: mt is m rounded up to a
// power of two; r, the outputs per warp, is the smallest that keeps all
// warps within one wave (64 resident per multiprocessor), at least 2 from
// M = 4 and 4 at M = 8 (each chunk of X then serves more rows of W). A GLU
// warp reads two rows of W per output, so r stops at 2 there (4 rows).
func gemvPlan(m, n, sms int, glu bool) (mt, r int) {
	mt = 1
	for mt < m {
		mt *= 2
	}
	rmax := 4
	if glu {
		rmax = 2
	}
	r = 1
	switch {
	case mt >= 4:
		r = min(rmax, mt/2)
	}
	for r < rmax && ceilDiv(n, r) > 64*sms {
		r *= 2
	}
	return mt, r
}

// GemvNorm is an RMSNorm in front of a decode GEMM (GemmFused): the GEMM's
// input rows are RMSNorm(Residual) * Weight, computed in its prologue, and
// also written to Out when Out is set (so the norm's output still exists).
type GemvNorm struct {
	Residual, Weight, Out Buffer
	Eps                   float32
}

// GemvFusion says what a decode GEMM (GemmFused) absorbs: an RMSNorm in
// front (Norm), SwiGLU behind it (GLU: the weight is a fused [2N, K]
// gate_up), or the residual add behind it (Residual: y += x W^T).
type GemvFusion struct {
	Norm     *GemvNorm
	GLU      bool
	Residual bool
}

func (f GemvFusion) suffix() string {
	switch {
	case f.Norm != nil && f.GLU:
		return "_normglu"
	case f.Norm != nil:
		return "_norm"
	case f.GLU:
		return "_glu"
	case f.Residual:
		return "_res"
	}
	return ""
}

func (g *GPU) gemv(s *Stream, dt DType, y, x, w Buffer, m, n, k int, fu GemvFusion) error {
	mt, r := gemvPlan(m, n, g.Info.SMs, fu.GLU)
	f, err := g.function("gemv", fmt.Sprintf("gemv%s_%s_m%d_r%d", fu.suffix(), dt.suffix(), mt, r))
	if err != nil {
		return err
	}
	var nw, xo Buffer
	eps := float32(0)
	if fu.Norm != nil {
		x, nw, xo, eps = fu.Norm.Residual, fu.Norm.Weight, fu.Norm.Out, fu.Norm.Eps
	}
	a := g.argsPack().Ptr(x).Ptr(w).Ptr(y).Ptr(nw).Ptr(xo).I32(m).I32(n).I32(k).F32(eps)
	return s.Launch(f, Dim3{X: ceilDiv(n, gemvWarps*r)}, Dim3{X: 32 * gemvWarps}, 0, a)
}

// GemmFused queues a decode GEMM (m <= GemvMaxM) of the own GEMM's matrix-
// vector kernels with its neighbours folded in (GemvFusion): y[m,n] = x[m,k]
// W^T, where W is [n, k], or [2n, k] gate_up rows (gate first) under GLU,
// y = silu(x Wg^T) * (x Wu^T); under Norm x is not read (Norm.Residual is);
// under Residual y += the product. Every intermediate is rounded to the
// dtype as the separate kernels store it, so the fused and unfused decode
// paths agree to rounding.
func (g *GPU) GemmFused(s *Stream, dt DType, y, x, w Buffer, m, n, k int, fu GemvFusion) error {
	es := dt.Size()
	rowsW := n
	if fu.GLU {
		rowsW = 2 * n
	}
	in := x
	if fu.Norm != nil {
		in = fu.Norm.Residual
	}
	switch {
	case m <= 0 || m > GemvMaxM || n <= 0 || k <= 0 || k%8 != 0:
		return fmt.Errorf("cuda: fused GEMV shape M=%d N=%d K=%d (M 1..%d, K a multiple of 8)", m, n, k, GemvMaxM)
	case fu.Residual && (fu.GLU || fu.Norm != nil):
		return fmt.Errorf("cuda: fused GEMV: the residual add goes with neither a norm nor SwiGLU")
	case in.Bytes < m*k*es || w.Bytes < rowsW*k*es || y.Bytes < m*n*es:
		return fmt.Errorf("cuda: fused GEMV buffers too small for M=%d N=%d K=%d", m, n, k)
	case fu.Norm != nil && (fu.Norm.Weight.Bytes < k*es || fu.Norm.Out.Ptr != 0 && fu.Norm.Out.Bytes < m*k*es):
		return fmt.Errorf("cuda: fused GEMV norm weight or output too small for K=%d", k)
	case in.Ptr%16 != 0 || w.Ptr%16 != 0 || fu.Norm != nil && (fu.Norm.Weight.Ptr%16 != 0 || fu.Norm.Out.Ptr%16 != 0):
		return fmt.Errorf("cuda: fused GEMV needs 16-byte aligned operands")
	}
	return g.gemv(s, dt, y, x, w, m, n, k, fu)
}

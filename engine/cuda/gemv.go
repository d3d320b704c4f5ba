//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/model"
)

// GemvMaxM is the largest M the matrix-vector kernels (kernels/gemv.cu,
// GemmFused) take. GemvRowsFor is the largest the own GEMM sends them: M
// up to it runs there, larger M on the tensor-core tiles. Its default is 4:
// from M = 5 the CUDA-core GEMV is issue-bound (each 16-byte chunk of W
// costs 8 x M FMAs plus the conversions), and on an H200 TinyLlama at batch
// 8 decodes at 5,119 tok/s on the tiles against 2,486 on the GEMV.
// XRUN_CUDA_GEMV_MAXM sets it (0: every M on the tiles, as XRUN_CUDA_GEMV=0).
const (
	GemvMaxM        = 8
	gemvRowsDefault = 4
)

// GemvRowsFor is the largest M the own GEMM serves with the matrix-vector
// kernels (see GemvMaxM) under the switches s.
func GemvRowsFor(s model.Switches) int {
	if !s.CUDAGemv {
		return 0
	}
	// The table's range and default are GemvMaxM's and gemvRowsDefault
	// (TestSwitchesMatchKernels).
	return s.CUDAGemvMaxM
}

// gemvWarps is the warps per block of the gemv kernels (__launch_bounds__(128)).
const gemvWarps = 4

// gemvPlanFixed is the plan that assumes every warp of a launch can be
// resident at once: mt is m rounded up to a power of two; r, the outputs per
// warp, is the smallest that keeps the warps within 64 per multiprocessor,
// at least 2 from M = 4 and 4 at M = 8 (each chunk of X then serves more
// rows of W). A GLU warp reads two rows of W per output, so r stops at 2
// there (4 rows).
func gemvPlanFixed(m, n, sms int, glu bool) (mt, r int) {
	mt = 1
	for mt < m {
		mt *= 2
	}
	rmax := 4
	if glu {
		rmax = 2
	}
	r = gemvMinRows(mt, glu)
	for r < rmax && ceilDiv(n, r) > 64*sms {
		r *= 2
	}
	return mt, r
}

// gemvMinRows is the fewest outputs per warp at mt rows: at mt >= 4 each
// chunk of X must serve at least mt / 2 rows of W (at most 2 under GLU).
func gemvMinRows(mt int, glu bool) int {
	if mt < 4 {
		return 1
	}
	if glu {
		return 2
	}
	return min(4, mt/2)
}

// gemvKernel is one gemv instantiation: mt rows of X, r outputs per warp,
// l 16-byte loads of W in flight per lane.
type gemvKernel struct{ mt, r, l int }

// gemvHas reports whether gemv.cu instantiates k (GEMV_ROWS, GEMV_ROWS_GLU).
func gemvHas(k gemvKernel, glu bool) bool {
	if k.l == 16 {
		if k.mt != 1 {
			return false
		}
		if glu {
			return k.r == 1 || k.r == 2
		}
		return k.r == 2 || k.r == 4
	}
	if k.l != 8 {
		return false
	}
	if glu {
		return k.mt <= 2 && k.r <= 2 || k.mt >= 4 && k.mt <= 8 && k.r == 2
	}
	return k.mt <= 2 && k.r <= 4 || k.mt == 4 && (k.r == 2 || k.r == 4) || k.mt == 8 && k.r == 4
}

// gemvBlocksPerSM is how many gemv blocks (gemvWarps warps) of regs
// registers a thread one multiprocessor holds: 64K registers, given out
// per warp in units of 256, and at most 64 warps.
func gemvBlocksPerSM(regs int) int {
	perWarp := roundUp(max(regs, 1)*32, 256)
	return max(1, min(64/gemvWarps, 65536/(perWarp*gemvWarps)))
}

// gemvChoose picks the kernel for M = m, n outputs of k inputs on sms
// multiprocessors; regs returns a kernel's registers per thread (false: not
// available). The fixed plan (gemvPlanFixed) assumes all of a launch's
// warps are resident at once. They are not when the kernel needs many
// registers: the QKV GEMV with its norm (M = 1, N = 2560, ~120 registers,
// 4 blocks of 4 warps a multiprocessor) had 640 blocks for 528 places, so
// its launch took two waves, the second a whole memory latency after the
// first, for a projection whose bytes take ~2.5 us. So where the fixed
// plan is not a single round of loads per warp in a single wave (all of W
// requested at once, the latency paid once), the first kernel (fewest
// rows per warp, then fewest loads in flight) that is takes its place.
// Where none is, the fixed plan stays: a launch of several waves or rounds
// is a large matrix, bandwidth-bound whatever the plan.
func gemvChoose(m, n, k, sms int, glu bool, regs func(gemvKernel) (int, bool)) gemvKernel {
	mt, r0 := gemvPlanFixed(m, n, sms, glu)
	fixed := gemvKernel{mt, r0, 8}
	oneShot := func(c gemvKernel) bool {
		rg, ok := regs(c)
		if !ok {
			return false
		}
		rr := c.r
		if glu {
			rr *= 2
		}
		u := max(1, c.l/rr) // steps of 32 chunks of K a lane loads per round
		return 32*u*8 >= k && ceilDiv(n, gemvWarps*c.r) <= gemvBlocksPerSM(rg)*sms
	}
	if oneShot(fixed) {
		return fixed
	}
	rmax := 4
	if glu {
		rmax = 2
	}
	for r := gemvMinRows(mt, glu); r <= rmax; r *= 2 {
		for _, l := range []int{8, 16} {
			if c := (gemvKernel{mt, r, l}); c != fixed && gemvHas(c, glu) && oneShot(c) {
				return c
			}
		}
	}
	return fixed
}

// cuFuncGetAttribute attribute: registers per thread.
const funcAttrNumRegs = 4

// gemvRegs caches the registers of gemv kernels per loaded function.
var gemvRegs = struct {
	sync.Mutex
	m map[*Function]int
}{m: map[*Function]int{}}

func (f *Function) numRegs() (int, error) {
	gemvRegs.Lock()
	defer gemvRegs.Unlock()
	if v, ok := gemvRegs.m[f]; ok {
		return v, nil
	}
	var v C.int
	if err := cuErrf("cuFuncGetAttribute", C.xr_cuFuncGetAttribute(&v, funcAttrNumRegs, f.f), "%s: registers", f.name); err != nil {
		return 0, err
	}
	gemvRegs.m[f] = int(v)
	return int(v), nil
}

func gemvName(suffix string, dt DType, c gemvKernel) string {
	name := fmt.Sprintf("gemv%s_%s_m%d_r%d", suffix, dt.suffix(), c.mt, c.r)
	if c.l == 16 {
		name += "_l16"
	}
	return name
}

// gemvPlans caches gemvPlan's choices per GPU and shape.
var gemvPlans = struct {
	sync.Mutex
	m map[gemvPlanKey]gemvKernel
}{m: map[gemvPlanKey]gemvKernel{}}

type gemvPlanKey struct {
	g       *GPU
	suffix  string
	dt      DType
	m, n, k int
}

// gemvPlan picks the kernel of a launch (gemvChoose, or gemvPlanFixed with
// XRUN_CUDA_GEMV_PLAN=0: the first plan, 8 loads per lane and rows per
// warp from N alone, blind to the kernels' register counts, for an A/B).
func (g *GPU) gemvPlan(dt DType, m, n, k int, fu GemvFusion) gemvKernel {
	if !g.sw.CUDAGemvPlan {
		mt, r := gemvPlanFixed(m, n, g.Info.SMs, fu.GLU)
		return gemvKernel{mt, r, 8}
	}
	key := gemvPlanKey{g, fu.suffix(), dt, m, n, k}
	gemvPlans.Lock()
	c, ok := gemvPlans.m[key]
	gemvPlans.Unlock()
	if ok {
		return c
	}
	c = gemvChoose(m, n, k, g.Info.SMs, fu.GLU, func(c gemvKernel) (int, bool) {
		f, err := g.function("gemv", gemvName(fu.suffix(), dt, c))
		if err != nil {
			return 0, false
		}
		rg, err := f.numRegs()
		return rg, err == nil
	})
	gemvPlans.Lock()
	gemvPlans.m[key] = c
	gemvPlans.Unlock()
	return c
}

// GemvNorm is an RMSNorm in front of a decode GEMM (GemmFused): the GEMM's
// input rows are RMSNorm(Residual) * Weight, computed in its prologue, and
// also written to Out when Out is set (so the norm's output still exists).
// With Gather set, Residual is not read: its rows are gathered from an
// embedding table first.
type GemvNorm struct {
	Residual, Weight, Out Buffer
	Eps                   float32
	Gather                *GemvGather
}

// GemvGather is an embedding gather in front of a GemvNorm (the first
// layer's QKV projection at decode): row m is Table's row IDs[m], where a
// negative id -1 - j is Fed[j] (j < NFed; as EmbeddingFed), and an id
// outside the Vocab rows reads as NaN. The gathered rows are written to
// Hidden, the embedding's output.
type GemvGather struct {
	Table, IDs, Fed, Hidden Buffer
	NFed, Vocab             int
}

// GemvFusion says what a decode GEMM (GemmFused) absorbs: an RMSNorm in
// front (Norm), SwiGLU behind it (GLU: the weight is a fused [2N, K]
// gate_up), or the residual add behind it (Residual: y += x W^T).
type GemvFusion struct {
	Norm     *GemvNorm
	GLU      bool
	Residual bool
}

// gather is n's gather, nil without one (or without n).
func (n *GemvNorm) gather() *GemvGather {
	if n == nil {
		return nil
	}
	return n.Gather
}

func (f GemvFusion) suffix() string {
	switch {
	case f.Norm != nil && f.GLU:
		return "_normglu"
	case f.Norm != nil && f.Norm.Gather != nil:
		return "_embnorm"
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
	return g.gemvOn(s, dt, y, x, w, m, n, k, fu, g.gemvPlan(dt, m, n, k, fu))
}

// gemvOn is gemv on kernel c (c.mt >= m).
func (g *GPU) gemvOn(s *Stream, dt DType, y, x, w Buffer, m, n, k int, fu GemvFusion, c gemvKernel) error {
	f, err := g.function("gemv", gemvName(fu.suffix(), dt, c))
	if err != nil {
		return err
	}
	var nw, xo Buffer
	eps := float32(0)
	em := GemvGather{}
	if fu.Norm != nil {
		x, nw, xo, eps = fu.Norm.Residual, fu.Norm.Weight, fu.Norm.Out, fu.Norm.Eps
		if gt := fu.Norm.Gather; gt != nil {
			x, em = gt.Table, *gt
		}
	}
	a := g.argsPack().Ptr(x).Ptr(w).Ptr(y).Ptr(nw).Ptr(xo).I32(m).I32(n).I32(k).F32(eps).
		Ptr(em.IDs).Ptr(em.Fed).I32(em.NFed).I32(em.Vocab).Ptr(em.Hidden)
	return s.Launch(f, Dim3{X: ceilDiv(n, gemvWarps*c.r)}, Dim3{X: 32 * gemvWarps}, 0, a)
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
	if gt := fu.Norm.gather(); gt != nil {
		switch {
		case fu.GLU || fu.Residual:
			return fmt.Errorf("cuda: fused GEMV: the embedding gather goes with a norm alone")
		case gt.Vocab <= 0 || gt.Table.Bytes < gt.Vocab*k*es || gt.IDs.Bytes < m*4 || gt.Fed.Bytes < gt.NFed*4 || gt.NFed < 0:
			return fmt.Errorf("cuda: fused GEMV gather: table of %d bytes for %d rows, %d id bytes for M=%d, %d fed", gt.Table.Bytes, gt.Vocab, gt.IDs.Bytes, m, gt.NFed)
		case gt.Hidden.Bytes < m*k*es || gt.Table.Ptr%16 != 0 || gt.Hidden.Ptr%16 != 0:
			return fmt.Errorf("cuda: fused GEMV gather: hidden rows too small or operands not 16-byte aligned")
		}
		in = gt.Hidden // only its size and alignment are checked below
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

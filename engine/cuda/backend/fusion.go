//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// Fusion: the model asks for its ops one at a time (engine/model.Forward;
// the table beside it lists what this backend makes of them), and the
// backend holds one op back, in b.pend, so that the op after it can do
// its work in the same kernel. b.pend is touched on the caller's goroutine
// only; the states and what each op does in them:
//
//	held          op that takes it            kernel queued
//	----          ----------------            -------------
//	RoPE of qkv   Attention on qkv            the decode attention rotating q, k and
//	                                          writing the cache (ropeFold, decode items
//	                                          only, cuda.GPU.AttnFoldsRope), else RopeKV
//	                                          (rotation and cache write), then attention
//	RMSNorm → x   MatMul of x (GEMV rows)     nothing yet: the GEMM is held, the norm
//	                                          its prologue
//	GEMM → y      SwiGLU of y (gate_up rows)  GEMV, norm prologue if held, SwiGLU epilogue
//	GEMM → y      Add / AddRMSNorm of y       GEMV + residual epilogue (no prologue);
//	              (no norm prologue)          AddRMSNorm then holds its RMSNorm (or, with
//	                                          normFuse off, queues it alone)
//
// What is held back and when: RoPE whenever fuseOn (XRUN_CUDA_FUSE) and
// the head dimension is a multiple of 16, with either gemm_plugin and at
// any batch (a prefill's RoPE becomes RopeKV: one kernel instead of RoPE
// and KVWrite); a GEMM and an out-of-place RMSNorm (normFuse,
// XRUN_CUDA_FUSE_NORM) only on the own GEMM's decode path (gemvFusing:
// gemm_plugin disable, rows <= cuda.GemvRowsFor(switches)). Holding an op
// first releases the one held before; any op that does not take the held
// one (Embed, HeadNorm, GatherRows, Route, MoE, Zero, a norm in place, a
// GEMM of another tensor), and every synchronising call (SetBatch, Write*,
// Read*, Argmax, ArgmaxStart), first queues it as it is (release): the
// same kernel it would have run unheld, or, for a GEMM with a norm
// prologue, the GEMV doing both.
//
// So a dense layer at decode with gemm_plugin disable is five kernels
// where Forward asks for nine ops: QKV (norm in front), attention (RoPE
// and the cache write in front), output projection (+ residual), gate_up
// (norm in front, SwiGLU behind) and down (+ residual).
//
// pending is the op held back: a RoPE, an RMSNorm or a GEMM (with the
// RMSNorm it took as its prologue, if any).
type pending struct {
	kind  pendKind
	qkv   *tensor // RoPE
	table *tensor
	h     model.HeadLayout
	lay   batchLayout
	out   *tensor // GEMM: out = x w^T; norm: out = RMSNorm(res) * nw
	x, w  *tensor
	rows  int
	res   *tensor // norm, or a GEMM's norm prologue (then x is the norm's out)
	nw    *tensor
	eps   float32
}

type pendKind int

const (
	pendRope pendKind = iota
	pendGemm
	pendNorm
)

// release queues the held-back op, if any, on its own.
func (b *Backend) release() {
	p := b.pend
	if p == nil {
		return
	}
	b.pend = nil
	switch p.kind {
	case pendRope:
		b.rope(p.qkv, p.table, p.h, p.lay)
	case pendNorm:
		b.rmsnorm(p.out, p.res, p.nw, p.rows, p.eps)
	case pendGemm:
		if p.res == nil {
			b.matmul(p.out, p.x, p.w, p.rows)
			return
		}
		b.gemv(p, p.out, cuda.GemvFusion{})
	}
}

// take returns the held-back op if it is a RoPE of t, or a GEMM or norm
// into t over rows, and releases any other.
func (b *Backend) take(kind pendKind, t *tensor, rows int) *pending {
	p := b.pend
	if p != nil && p.kind == kind && (kind == pendRope && p.qkv == t || kind != pendRope && p.out == t && p.rows == rows) {
		b.pend = nil
		return p
	}
	b.release()
	return nil
}

// takeGemm returns the held-back GEMM into t over rows if fits says the
// consumer can fold it in, and releases anything else.
func (b *Backend) takeGemm(t *tensor, rows int, fits func(*pending) bool) *pending {
	if p := b.pend; p != nil && p.kind == pendGemm && p.out == t && p.rows == rows && fits(p) {
		b.pend = nil
		return p
	}
	b.release()
	return nil
}

// plainGemm: a held-back GEMM without a norm prologue (one that may take
// the residual add as its epilogue).
func plainGemm(p *pending) bool { return p.res == nil }

// gemvFusing is whether ops over rows rows are held back for the decode
// GEMV fusions (see pending).
func (b *Backend) gemvFusing(rows int) bool {
	return b.fuseOn && b.blas == nil && rows <= b.gemvRows
}

// gemv queues the held-back GEMM p, with its norm prologue if it has one
// and the epilogue fu, into y.
func (b *Backend) gemv(p *pending, y *tensor, fu cuda.GemvFusion) {
	b.op(func(g *cuda.GPU) error {
		n, k := p.w.shape[0], p.w.shape[1]
		if fu.GLU {
			n /= 2
		}
		if p.x.cols() != k || y.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v (fused: %+v)", p.w.name, p.x.cols(), y.cols(), p.w.shape, fu)
		}
		var x cuda.Buffer
		if p.res != nil {
			fu.Norm = &cuda.GemvNorm{Residual: p.res.buf, Weight: p.nw.buf, Out: p.x.buf, Eps: p.eps}
		} else {
			x = p.x.buf
		}
		return g.GemmFused(g.Stream, b.dt, y.buf, x, p.w.buf, p.rows, n, k, fu)
	})
}

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
//	held             op that takes it            kernel queued
//	----             ----------------            -------------
//	RoPE of qkv      Attention on qkv            the decode attention rotating q, k and
//	                                             writing the cache (ropeFold, decode items
//	                                             only, cuda.GPU.AttnFoldsRope, AttnFoldPays), else RopeKV
//	                                             (rotation and cache write), then attention
//	Embed → h        RMSNorm of h (GEMV rows)    nothing yet: the norm is held with the
//	                                             embedding, which the GEMV taking the norm
//	                                             gathers in its prologue, writing h too
//	                                             (cuda.GemvGather; the first layer's QKV)
//	RMSNorm → x      MatMul of x (GEMV rows)     nothing yet: the GEMM is held, the norm
//	                                             its prologue (normFuse; not AddRMSNorm's)
//	GEMM → y         SwiGLU of y (gate_up rows)  GEMV, norm prologue if held, SwiGLU epilogue
//	GEMM → y         Add / AddRMSNorm of y       GEMV + residual epilogue (no prologue);
//	                 (no norm prologue)          AddRMSNorm then holds its RMSNorm (or, with
//	                                             normFuse and fp8Fuse off, queues it alone)
//	GEMM → y above   SwiGLU of y, Add or         the own GEMM's TMA kernel with the SwiGLU or
//	the GEMV rows    AddRMSNorm of y             residual-add epilogue (epiFusing,
//	                                             XRUN_CUDA_GEMM_EPILOGUE; cuda.GPU.GemmEpilogue),
//	                                             or where that launch is not on TMA, the GEMM
//	                                             into y's producer tensor, then the op
//	RMSNorm → x,     MatMul of x, FP8 weight     fp8_rmsnorm / fp8_add_rmsnorm writing x's
//	AddRMSNorm → x   with a static per-tensor    E4M3 codes into the GEMM's input scratch
//	                 input scale                 (x itself is not written; an embedding the
//	                                             norm held is gathered first), then the FP8 GEMM
//	SwiGLU → a       MatMul of a, FP8 weight     fp8_swiglu writing a's codes, then the FP8
//	                 with a static scale         GEMM (a is not written)
//
// What is held back and when: RoPE whenever fuseOn (XRUN_CUDA_FUSE) and
// the head dimension is a multiple of 16, with either gemm_plugin and at
// any batch (a prefill's RoPE becomes RopeKV: one kernel instead of RoPE
// and KVWrite); an Embed, a GEMM and an out-of-place RMSNorm (normFuse,
// XRUN_CUDA_FUSE_NORM) only on the own GEMM's decode path (gemvFusing:
// gemm_plugin disable, rows <= cuda.GemvRowsFor(switches)); an
// out-of-place RMSNorm, AddRMSNorm or SwiGLU at any batch and with either
// gemm_plugin where some FP8 GEMM's input has a static scale (fp8Fusing:
// fuseOn, fp8Fuse, XRUN_CUDA_FP8_FUSE, and a checkpoint's input_scale or
// calibration, fp8.go). Holding an op first releases the one held before;
// any op that does not take the held one (HeadNorm, GatherRows,
// Route, MoE, Zero, a norm in place, a GEMM of another tensor or of a
// dynamically quantized FP8 weight), and every synchronising call
// (SetBatch, Write*, Read*, Argmax, ArgmaxStart, CalibrateFP8), first
// queues it as it is (release): the same kernel it would have run unheld,
// or, for a GEMM with a norm prologue, the GEMV doing both (and the
// gather, if the norm took an embedding; a norm released alone queues its
// embedding first). Prefetch alone queues its work beside the held op and
// leaves it held (opBeside): it reads weights only.
//
// The FP8 fusions leave the held op's own output unwritten: they rely on
// the model reading it only through that GEMM, as Forward does on dense
// layers (ln1's output feeds only the QKV projection, ln2's only gate_up,
// SwiGLU's only down; on MoE layers the router, a bf16 GEMM, reads ln2's
// output first and releases the norm). The attention output that o_proj
// reads has no producer to fold into: it is quantized on its own, with the
// static scale (no amax pass).
//
// So a dense layer at decode with gemm_plugin disable is five kernels
// where Forward asks for nine ops: QKV (norm in front), attention (RoPE
// and the cache write in front), output projection (+ residual), gate_up
// (norm in front, SwiGLU behind) and down (+ residual). With FP8 GEMMs
// whose inputs have static scales it is nine at any batch and with either
// gemm_plugin, where unfused it was twelve: add + norm + quantize, QKV,
// attention (RoPE in front), quantize, output projection, add + norm +
// quantize, gate_up, SwiGLU + quantize, down.
//
// pending is the op held back: a RoPE, an RMSNorm (with the residual add
// in front for AddRMSNorm: delta), a SwiGLU, or a GEMM (with the RMSNorm
// it took as its prologue, if any).
type pending struct {
	kind  pendKind
	qkv   *tensor // RoPE
	table *tensor
	h     model.HeadLayout
	lay   batchLayout
	out   *tensor // GEMM: out = x w^T; norm: out = RMSNorm(res) * nw; SwiGLU: out = swiglu(x)
	x, w  *tensor
	rows  int
	res   *tensor // norm, or a GEMM's norm prologue (then x is the norm's out)
	delta *tensor // AddRMSNorm: res += delta first
	nw    *tensor
	eps   float32
	// embedding: out = embTab's rows of lay's tokens (rows of them); a
	// norm (or a GEMM's norm prologue) holding emb reads res = its out
	// only through the gather of emb.
	embTab *tensor
	emb    *pending
}

type pendKind int

const (
	pendRope pendKind = iota
	pendGemm
	pendNorm
	pendSwiGLU
	pendEmbed
)

// release queues the held-back op, if any, on its own.
func (b *Backend) release() {
	p := b.pend
	if p == nil {
		return
	}
	b.pend = nil
	switch p.kind {
	case pendEmbed:
		b.embed(p.out, p.embTab, p.lay)
	case pendRope:
		b.rope(p.qkv, p.table, p.h, p.lay)
	case pendNorm:
		if p.emb != nil { // the norm runs alone: the embedding first
			b.embed(p.emb.out, p.emb.embTab, p.emb.lay)
		}
		if p.delta != nil {
			b.addRMSNorm(p.res, p.delta, p.nw, p.out, p.rows, p.eps)
			return
		}
		b.rmsnorm(p.out, p.res, p.nw, p.rows, p.eps)
	case pendSwiGLU:
		b.swiglu(p.out, p.x, p.rows)
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

// takeNormPrologue returns the held-back RMSNorm into x over rows if the
// decode GEMV may take it as its prologue (normFuse, and a norm alone:
// the prologue has no residual add), and releases anything else.
func (b *Backend) takeNormPrologue(x *tensor, rows int) *pending {
	if p := b.pend; p != nil && p.kind == pendNorm && p.out == x && p.rows == rows && p.delta == nil && b.normFuse {
		b.pend = nil
		return p
	}
	b.release()
	return nil
}

// fp8Fusing is whether out-of-place norms and SwiGLUs are held back for
// an FP8 GEMM that may quantize their output in the same kernel.
func (b *Backend) fp8Fusing() bool {
	return b.fuseOn && b.fp8Fuse && b.fp8.anyStatic
}

// takeFP8Producer returns the held-back norm or SwiGLU into x over rows
// if the FP8 weight q quantizes its input with a static per-tensor scale
// (the producer then writes the codes), and releases anything else.
func (b *Backend) takeFP8Producer(x *tensor, rows int, q *fp8Weight) *pending {
	p := b.pend
	if p != nil && b.fp8Fusing() && q.fusable() && p.out == x && p.rows == rows &&
		(p.kind == pendSwiGLU || p.kind == pendNorm && p.res != x) {
		b.pend = nil
		if p.emb != nil {
			// The first layer's norm held the embedding for a GEMV to
			// gather; the FP8 producer reads the residual stream, so the
			// gather runs first, on its own.
			b.embed(p.emb.out, p.emb.embTab, p.emb.lay)
			p.emb = nil
		}
		return p
	}
	b.release()
	return nil
}

// fp8Produce queues the held-back producer p of an FP8 GEMM's input,
// writing its rows x k codes with the static scale into the GEMM's input
// scratch instead of its own output.
func (b *Backend) fp8Produce(g *cuda.GPU, p *pending, rows, k int, scale cuda.Buffer) error {
	xq := b.fp8.xq
	switch {
	case p.kind == pendSwiGLU:
		gu := p.x
		if gu.cols() != 2*k {
			return fmt.Errorf("swiglu: gate_up has %d columns, out %d", gu.cols(), k)
		}
		es := b.dt.Size()
		up := gu.buf.Slice(k*es, gu.buf.Bytes-k*es)
		return g.FP8SwiGLU(g.Stream, b.dt, xq, gu.buf, up, scale, rows, k, 2*k)
	case p.res.cols() != k:
		return fmt.Errorf("rmsnorm: x has %d columns, out %d", p.res.cols(), k)
	case p.delta != nil:
		return g.FP8AddRMSNorm(g.Stream, b.dt, xq, p.res.buf, p.delta.buf, p.nw.buf, scale, rows, k, p.eps)
	default:
		return g.FP8RMSNorm(g.Stream, b.dt, xq, p.res.buf, p.nw.buf, scale, rows, k, p.eps)
	}
}

// plainGemm: a held-back GEMM without a norm prologue (one that may take
// the residual add as its epilogue).
func plainGemm(p *pending) bool { return p.res == nil }

// gemvFusing is whether ops over rows rows are held back for the decode
// GEMV fusions (see pending).
func (b *Backend) gemvFusing(rows int) bool {
	return b.fuseOn && b.blas == nil && rows <= b.gemvRows
}

// epiFusing is whether GEMMs over rows rows, above the GEMV's, are held
// back for the own GEMM's SwiGLU and residual-add epilogues
// (XRUN_CUDA_GEMM_EPILOGUE; cuda.GPU.GemmEpilogue): where the TMA kernels
// run them (cuda.GPU.EpilogueRows).
func (b *Backend) epiFusing(rows int) bool {
	return b.fuseOn && b.gemmEpi && b.blas == nil && rows > b.gemvRows && b.epiRows > 0 && rows >= b.epiRows
}

// gemv queues the held-back GEMM p, with its norm prologue if it has one
// and the epilogue fu, into y: the decode GEMV at its rows, above them the
// TMA kernels' epilogue, or where those do not run the launch, the GEMM
// into p.out and then the SwiGLU or add on its own.
func (b *Backend) gemv(p *pending, y *tensor, fu cuda.GemvFusion) {
	b.op(func(g *cuda.GPU) error {
		n, k := p.w.shape[0], p.w.shape[1]
		if fu.GLU {
			n /= 2
		}
		if p.x.cols() != k || y.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v (fused: %+v)", p.w.name, p.x.cols(), y.cols(), p.w.shape, fu)
		}
		if p.rows > b.gemvRows {
			ok, err := g.GemmEpilogue(g.Stream, b.dt, y.buf, p.x.buf, p.w.buf, p.rows, n, k, fu)
			if ok || err != nil {
				return err
			}
			if err := g.Gemm(g.Stream, b.dt, p.out.buf, p.x.buf, p.w.buf, p.rows, p.w.shape[0], k); err != nil {
				return err
			}
			if fu.GLU {
				up := p.out.buf.Slice(n*b.dt.Size(), p.out.buf.Bytes-n*b.dt.Size())
				return g.SwiGLU(g.Stream, b.dt, y.buf, p.out.buf, up, p.rows, n, 2*n)
			}
			return g.Add(g.Stream, b.dt, y.buf, p.out.buf, p.rows*n)
		}
		var x cuda.Buffer
		if p.res != nil {
			fu.Norm = &cuda.GemvNorm{Residual: p.res.buf, Weight: p.nw.buf, Out: p.x.buf, Eps: p.eps}
			if e := p.emb; e != nil {
				fu.Norm.Gather = &cuda.GemvGather{Table: e.embTab.buf, IDs: e.lay.tokens, Fed: b.ids, Hidden: e.out.buf,
					NFed: b.ids.Bytes / 4, Vocab: e.embTab.rows()}
			}
		} else {
			x = p.x.buf
		}
		return g.GemmFused(g.Stream, b.dt, y.buf, x, p.w.buf, p.rows, n, k, fu)
	})
}

//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// Embed gathers the batch tokens' embedding rows. On the decode GEMV's
// rows it is held back (fusion.go): the first layer's norm and QKV
// projection may take it into their prologue.
func (b *Backend) Embed(out, table model.Tensor) {
	o, tb := ft(out), ft(table)
	if rows := b.cur.nTok; b.gemvFusing(rows) && b.normFuse {
		b.release()
		b.pend = &pending{kind: pendEmbed, out: o, embTab: tb, lay: b.cur, rows: rows}
		return
	}
	b.embed(o, tb, b.cur)
}

func (b *Backend) embed(o, tb *tensor, lay batchLayout) {
	b.op(func(g *cuda.GPU) error {
		// Fed tokens (-1 - j) read pick j of the last ArgmaxStart from
		// b.ids: captured graphs keep the pointer, which only changes
		// when the layout grows (and drops them).
		return g.EmbeddingFed(g.Stream, b.dt, o.buf, tb.buf, lay.tokens, b.ids, lay.nTok, tb.cols(), tb.rows())
	})
}

// RMSNorm normalises rows of x into out.
func (b *Backend) RMSNorm(out, x, w model.Tensor, rows int, eps float32) {
	o, xi, wi := ft(out), ft(x), ft(w)
	rows = b.rows(rows)
	// An in-place norm is not held back: the GEMM's prologue would write
	// the rows other blocks are still reading (and a fused FP8 norm would
	// leave x as it was).
	if o != xi && (b.gemvFusing(rows) && b.normFuse || b.fp8Fusing()) {
		var emb *pending
		if p := b.pend; p != nil && p.kind == pendEmbed && p.out == xi && p.rows == rows && b.gemvFusing(rows) && b.normFuse {
			// The embedding of x: the GEMV taking this norm gathers x too.
			b.pend, emb = nil, p
		}
		b.release()
		b.pend = &pending{kind: pendNorm, out: o, res: xi, nw: wi, rows: rows, eps: eps, emb: emb}
		return
	}
	b.rmsnorm(o, xi, wi, rows, eps)
}

func (b *Backend) rmsnorm(o, x, w *tensor, rows int, eps float32) {
	b.op(func(g *cuda.GPU) error {
		return g.RMSNorm(g.Stream, b.dt, o.buf, x.buf, w.buf, rows, x.cols(), eps)
	})
}

// AddRMSNorm: residual += delta, out = RMSNorm(residual).
func (b *Backend) AddRMSNorm(residual, delta, w, out model.Tensor, rows int, eps float32) {
	r, d, wi, o := ft(residual), ft(delta), ft(w), ft(out)
	rows = b.rows(rows)
	// On the decode path the GEMM that produced delta adds it to the
	// residual itself, and the norm waits for the GEMM that reads out.
	if p := b.takeGemm(d, rows, plainGemm); p != nil {
		b.gemv(p, r, cuda.GemvFusion{Residual: true})
		b.pend = &pending{kind: pendNorm, out: o, res: r, nw: wi, rows: rows, eps: eps}
		if !b.normFuse && !b.fp8Fusing() {
			b.release()
		}
		return
	}
	// An FP8 GEMM of out with a static input scale may quantize it in the
	// same kernel (fusion.go).
	if o != r && b.fp8Fusing() {
		b.pend = &pending{kind: pendNorm, out: o, res: r, delta: d, nw: wi, rows: rows, eps: eps}
		return
	}
	b.addRMSNorm(r, d, wi, o, rows, eps)
}

func (b *Backend) addRMSNorm(r, d, w, o *tensor, rows int, eps float32) {
	b.op(func(g *cuda.GPU) error {
		return g.AddRMSNorm(g.Stream, b.dt, o.buf, r.buf, d.buf, w.buf, rows, r.cols(), eps)
	})
}

// Add: dst += src over rows.
func (b *Backend) Add(dst, src model.Tensor, rows int) {
	d, s := ft(dst), ft(src)
	rows = b.rows(rows)
	if p := b.takeGemm(s, rows, plainGemm); p != nil {
		b.gemv(p, d, cuda.GemvFusion{Residual: true})
		return
	}
	b.op(func(g *cuda.GPU) error { return g.Add(g.Stream, b.dt, d.buf, s.buf, rows*d.cols()) })
}

// MatMul is the gemm_plugin GEMM: cuBLASLt (auto) or the own kernel. On
// the own GEMM's decode path it is held back (see pending), taking a
// held-back RMSNorm of x into its prologue. An FP8 GEMM is never held
// back; with a static input scale it takes a held-back norm or SwiGLU of
// x, which then writes x's codes.
func (b *Backend) MatMul(out, x, w model.Tensor, rows int) {
	o, xi, wt := ft(out), ft(x), ft(w)
	rows = b.rows(rows)
	if wt.q != nil { // FP8 (fp8.go)
		b.matmulFP8(o, xi, wt, rows, b.takeFP8Producer(xi, rows, wt.q))
		return
	}
	if b.gemvFusing(rows) {
		p := &pending{kind: pendGemm, out: o, x: xi, w: wt, rows: rows}
		if n := b.takeNormPrologue(xi, rows); n != nil {
			p.res, p.nw, p.eps, p.emb = n.res, n.nw, n.eps, n.emb
		}
		b.pend = p
		return
	}
	if b.epiFusing(rows) {
		// Above the GEMV's rows: held for a SwiGLU or residual add that
		// the GEMM's epilogue may take (no norm prologue there).
		b.release()
		b.pend = &pending{kind: pendGemm, out: o, x: xi, w: wt, rows: rows}
		return
	}
	b.matmul(o, xi, wt, rows)
}

func (b *Backend) matmul(o, xi, wt *tensor, rows int) {
	n, k := wt.shape[0], wt.shape[1]
	b.op(func(g *cuda.GPU) error {
		if xi.cols() != k || o.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v", wt.name, xi.cols(), o.cols(), wt.shape)
		}
		if b.blas != nil {
			return b.blas.Matmul(g.Stream, b.dt, o.buf, xi.buf, wt.buf, rows, n, k)
		}
		return g.Gemm(g.Stream, b.dt, o.buf, xi.buf, wt.buf, rows, n, k)
	})
}

func attnShape(h model.HeadLayout) cuda.AttnShape {
	return cuda.AttnShape{Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim}
}

// HeadNorm is Qwen3's qk-norm.
func (b *Backend) HeadNorm(qkv, qw, kw model.Tensor, h model.HeadLayout, eps float32) {
	q, qn, kn := ft(qkv), ft(qw), ft(kw)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		return g.HeadNorm(g.Stream, b.dt, q.buf, qn.buf, kn.buf, lay.nTok, attnShape(h), eps)
	})
}

// RoPE rotates the query and key heads by each token's position.
func (b *Backend) RoPE(qkv, table model.Tensor, h model.HeadLayout) {
	q, tb := ft(qkv), ft(table)
	if b.fuseOn && h.HeadDim%16 == 0 {
		b.release()
		b.pend = &pending{kind: pendRope, qkv: q, table: tb, h: h, lay: b.cur}
		return
	}
	b.rope(q, tb, h, b.cur)
}

func (b *Backend) rope(q, tb *tensor, h model.HeadLayout, lay batchLayout) {
	b.op(func(g *cuda.GPU) error {
		if tb.f32.Bytes == 0 {
			return fmt.Errorf("rope: table %s has no float32 copy (upload it as F32)", tb.name)
		}
		W := q.cols()
		off := h.Heads * h.HeadDim * b.dt.Size()
		k := q.buf.Slice(off, q.buf.Bytes-off)
		return g.Rope(g.Stream, b.dt, q.buf, k, lay.pos, tb.f32, lay.nTok, h.Heads, h.KVHeads, h.HeadDim, W, W)
	})
}

// Attention writes the batch's keys and values into the cache, then runs
// the decode items (a few query rows per block) and the prefill items
// (chunks of up to 64 query rows) over it. With a held-back RoPE (see
// pending) and only decode items (every token in one, no prefill chunk),
// the decode attention kernel does the rotation and the cache write itself
// (cuda.AttnLaunch.Rope), with either gemm_plugin: one kernel less per
// layer, and the attention streams its cached keys while the QKV
// projection finishes. Where cuda.AttnFoldPays says the fold costs more
// than it saves (a wide decode over an FP8 cache), or with
// XRUN_CUDA_ATTN_ROPE=0 (ropeFold), RoPE and the cache write run in
// kernels of their own (ropeKV) in front of it; =1 folds wherever a
// kernel can.
func (b *Backend) Attention(out, qkv model.Tensor, cache model.KVCache, layer int) {
	o, q, c := ft(out), ft(qkv), cache.(*kvCache)
	lay := b.cur
	p := b.take(pendRope, q, 0)
	b.op(func(g *cuda.GPU) error {
		k := c.k.Slice(layer*c.layerBytes, c.layerBytes)
		v := c.v.Slice(layer*c.layerBytes, c.layerBytes)
		small := cuda.AttnLaunch{Items: lay.itemsS, N: lay.nS, Rows: lay.rowsS, Splits: lay.splitsS, Work: b.attnWork, Pages: c.pages(), FP8: c.fp8(layer)}
		if b.fuseOn {
			small.Counters = b.attnCnt
		}
		if p != nil && p.table.f32.Bytes == 0 {
			return fmt.Errorf("rope: table %s has no float32 copy (upload it as F32)", p.table.name)
		}
		if p != nil && lay.nL == 0 && lay.nS > 0 && g.AttnFoldsRope(c.shape, small) &&
			b.ropeFold != "0" && (b.ropeFold == "1" || cuda.AttnFoldPays(c.shape, small)) {
			small.Rope = p.table.f32
		}
		switch {
		case small.Rope.Ptr != 0:
		case p != nil:
			if err := b.ropeKV(g, c, layer, k, v, q.buf, p.table.f32, lay); err != nil {
				return err
			}
		default:
			if err := b.kvWrite(g, c, layer, k, v, q.buf, lay); err != nil {
				return err
			}
		}
		if err := g.Attention(g.Stream, b.dt, o.buf, q.buf, k, v, c.c.Capacity, c.shape, small); err != nil {
			return err
		}
		large := cuda.AttnLaunch{Items: lay.itemsL, N: lay.nL, Rows: lay.rowsL, Splits: 1, Pages: c.pages(), FP8: c.fp8(layer), MeanKeys: lay.keysL}
		return g.Attention(g.Stream, b.dt, o.buf, q.buf, k, v, c.c.Capacity, c.shape, large)
	})
}

// SwiGLU: out = silu(gate) * up over the halves of a fused gate_up row.
func (b *Backend) SwiGLU(out, gateUp model.Tensor, rows int) {
	o, gu := ft(out), ft(gateUp)
	rows = b.rows(rows)
	glu := func(p *pending) bool { return gu.cols() == 2*o.cols() && p.w.shape[0] == gu.cols() && p.emb == nil }
	if p := b.takeGemm(gu, rows, glu); p != nil {
		b.gemv(p, o, cuda.GemvFusion{GLU: true})
		return
	}
	// An FP8 GEMM of out with a static input scale may quantize it in the
	// same kernel (fusion.go).
	if o != gu && b.fp8Fusing() {
		b.pend = &pending{kind: pendSwiGLU, out: o, x: gu, rows: rows}
		return
	}
	b.swiglu(o, gu, rows)
}

func (b *Backend) swiglu(o, gu *tensor, rows int) {
	b.op(func(g *cuda.GPU) error {
		F := o.cols()
		if gu.cols() != 2*F {
			return fmt.Errorf("swiglu: gate_up has %d columns, out %d", gu.cols(), F)
		}
		up := gu.buf.Slice(F*b.dt.Size(), gu.buf.Bytes-F*b.dt.Size())
		return g.SwiGLU(g.Stream, b.dt, o.buf, gu.buf, up, rows, F, 2*F)
	})
}

// GatherRows: out[j] = x[LogitRows[j]].
func (b *Backend) GatherRows(out, x model.Tensor) {
	o, xi := ft(out), ft(x)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		return g.GatherRows(g.Stream, b.dt, o.buf, xi.buf, lay.logit, lay.nLogit, xi.cols())
	})
}

// Route picks each token's experts on the device (moe.go).
func (b *Backend) Route(idx, weights, logits, forced model.Tensor, forcedRow, rows, k int, method string, counts model.Tensor, layer int) {
	b.route(idx, weights, logits, forced, forcedRow, rows, k, method, counts, layer)
}

// MoE runs the experts on the routed tokens and combines them (moe.go).
func (b *Backend) MoE(out, x, idx, weights, gateUp, down model.Tensor, rows, k int) {
	if b.fp8MoE(out, x, idx, weights, gateUp, down, rows, k) { // moe_fp8.go
		return
	}
	if b.mxfp4MoE(out, x, idx, weights, gateUp, down, nil, nil, rows, k, model.GLU{}) { // moe_mxfp4.go
		return
	}
	b.moe(out, x, idx, weights, gateUp, down, rows, k)
}

// Zero clears t.
func (b *Backend) Zero(t model.Tensor) {
	d := ft(t)
	b.op(func(g *cuda.GPU) error { return g.Stream.Zero(d.buf) })
}

//go:build cgo && linux

package backend

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// GPT-OSS's ops (model.OSSBackend): bias adds, attention with sinks over a
// window on a ring KV cache (kernels/attention_sinks.cu), and experts with
// biases and the clamped SwiGLU (cuda.MoEOSSExperts).
//
// The ring is a kvCache made with KVConfig.Ring: per layer, K and V are
// [slot + 1][kv head][LayerCapacity][head dim] (the extra slot the
// padding rows' scratch), layers one after the other, so a sliding layer
// takes its window's memory only.

// ringBytes is the size of a ring cache's K (and of its V).
func ringBytes(c model.KVConfig, es int) int {
	n := 0
	for l := range c.Layers {
		n += (c.Slots + 1) * c.KVHeads * c.LayerCapacity(l) * c.HeadDim * es
	}
	return n
}

// ringLayer is layer l's K and V in a ring cache and its capacity.
func ringLayer(c *kvCache, l, es int) (k, v cuda.Buffer, lcap int) {
	off := 0
	for i := range l {
		off += (c.c.Slots + 1) * c.c.KVHeads * c.c.LayerCapacity(i) * c.c.HeadDim * es
	}
	lcap = c.c.LayerCapacity(l)
	n := (c.c.Slots + 1) * c.c.KVHeads * lcap * c.c.HeadDim * es
	return c.k.Slice(off, n), c.v.Slice(off, n), lcap
}

// AddBias: x[r] += bias for r < rows.
func (b *Backend) AddBias(x, bias model.Tensor, rows int) {
	xt, bt := ft(x), ft(bias)
	rows = b.rows(rows)
	b.op(func(g *cuda.GPU) error {
		if numel(bt.shape) != xt.cols() {
			return fmt.Errorf("bias %s: %v for rows of %d", bt.name, bt.shape, xt.cols())
		}
		return g.BiasAdd(g.Stream, b.dt, xt.buf, bt.buf, rows, xt.cols())
	})
}

// OSSAttention is attention with sinks over a window (model.OSSBackend):
// the attention of every item, then the batch's keys and values into the
// ring.
func (b *Backend) OSSAttention(out, qkv, sinks model.Tensor, cache model.KVCache, layer, window int) {
	o, q, st := ft(out), ft(qkv), ft(sinks)
	c, _ := cache.(*kvCache)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		if c == nil || !c.c.Ring {
			return fmt.Errorf("attention: GPT-OSS attention needs a ring KV cache (KVConfig.Ring)")
		}
		if layer < 0 || layer >= c.c.Layers {
			return fmt.Errorf("attention: layer %d of %d", layer, c.c.Layers)
		}
		k, v, lcap := ringLayer(c, layer, b.dt.Size())
		a := cuda.SinkAttn{Out: o.buf, QKV: q.buf, K: k, V: v, ItemsS: lay.itemsS, NS: lay.nS, ItemsL: lay.itemsL, NL: lay.nL,
			Shape: c.shape, LCap: lcap, Window: window}
		if st != nil {
			if numel(st.shape) != c.c.Heads {
				return fmt.Errorf("attention: %v sinks for %d heads", st.shape, c.c.Heads)
			}
			a.Sinks = st.buf
		}
		if err := g.AttentionSinks(g.Stream, b.dt, a); err != nil {
			return err
		}
		return g.KVRingWrite(g.Stream, b.dt, k, v, q.buf, lay.pos, lay.slot, lay.nTok, c.shape, lcap)
	})
}

// ossState is a backend's GPT-OSS MoE workspace, kept beside the Backend
// (keyed by it) as moeState is.
type ossState struct{ work cuda.Buffer }

var ossStates sync.Map // *Backend -> *ossState

func (b *Backend) ossState() *ossState {
	v, _ := ossStates.LoadOrStore(b, &ossState{})
	return v.(*ossState)
}

// OSSMoE is MoE with expert biases and the activation act
// (model.OSSBackend), on the own grouped kernels under either gemm_plugin.
func (b *Backend) OSSMoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias model.Tensor, rows, k int, act model.GLU) {
	if b.mxfp4MoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias, rows, k, act) { // moe_mxfp4.go
		return
	}
	st := b.ossState()
	o, xi, it, wt, gu, dn := ft(out), ft(x), ft(idx), ft(weights), ft(gateUp), ft(down)
	gub, dnb := ft(gateUpBias), ft(downBias)
	rows = b.rows(rows)
	E, F2, H := gu.shape[0], gu.shape[1], gu.shape[2]
	sh := cuda.MoEShape{Rows: rows, K: k, Experts: E, Hidden: H, FFN: F2 / 2}
	most := sh
	most.Rows = max(rows, b.maxRows)
	b.op(func(g *cuda.GPU) error {
		switch {
		case gu.q != nil || dn.q != nil:
			return fmt.Errorf("moe: FP8 experts with GPT-OSS's biases are not supported")
		case len(dn.shape) != 3 || dn.shape[0] != E || dn.shape[1] != H || dn.shape[2] != F2/2 || F2%2 != 0:
			return fmt.Errorf("moe: gate_up %v and down %v do not match [E, 2F, H] and [E, H, F]", gu.shape, dn.shape)
		case it.cols() != k || wt.cols() != k || rows > it.rows() || rows > wt.rows() || rows > xi.rows() || rows > o.rows():
			return fmt.Errorf("moe: ids %v, weights %v, x %v for %d rows, k = %d", it.shape, wt.shape, xi.shape, rows, k)
		case gub != nil && numel(gub.shape) != E*F2, dnb != nil && numel(dnb.shape) != E*H:
			return fmt.Errorf("moe: expert biases %v and %v for experts %v", shapeOf(gub), shapeOf(dnb), gu.shape)
		}
		if err := b.growWork(g, &st.work, cuda.MoEOSSWorkBytes(b.dt, most), "GPT-OSS moe workspace"); err != nil {
			return err
		}
		e := cuda.MoEOSS{Limit: act.Limit, Alpha: act.Alpha}
		if gub != nil {
			e.GateUpBias = gub.buf
		}
		if dnb != nil {
			e.DownBias = dnb.buf
		}
		return g.MoEOSSExperts(g.Stream, b.dt, o.buf, xi.buf, it.buf, wt.buf, gu.buf, dn.buf, st.work, sh, e)
	})
}

func shapeOf(t *tensor) []int {
	if t == nil {
		return nil
	}
	return t.shape
}

var _ model.OSSBackend = (*Backend)(nil)

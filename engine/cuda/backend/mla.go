//go:build cgo && linux

package backend

import (
	"fmt"
	"slices"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// The DeepSeek-V3 architecture's ops (model.MLABackend) and its latent
// cache. The cache is a kvCache whose k holds, per layer, [slots + 1]
// [capacity][Latent + RopeDim] (the last slot is the padding rows'
// scratch, as for K/V caches) and whose v is empty; its shape is one
// "head" so that the batch layout packs every sequence as one item, which
// the MLA kernels do not read: they take each token's slot and position.

// mlaState is a backend's grouped-routing bookkeeping, kept beside the
// Backend (keyed by it) as moeState is.
type mlaState struct {
	// On the GPU's thread: the forced weights on the device (float32,
	// cuda.MoEMaxTopK of them) and the values they hold.
	fw     cuda.Buffer
	fwHost []float32
}

var mlaStates sync.Map // *Backend -> *mlaState

func (b *Backend) mlaState() *mlaState {
	v, _ := mlaStates.LoadOrStore(b, &mlaState{})
	return v.(*mlaState)
}

func mlaShape(s model.MLAShape) cuda.MLAShape {
	return cuda.MLAShape{Heads: s.Heads, NopeDim: s.NopeDim, RopeDim: s.RopeDim, VDim: s.VDim, Latent: s.Latent,
		Interleave: s.Interleave, Scale: s.Scale, Eps: s.Eps}
}

// newMLACache is NewKVCache for an MLA cache (c.Latent > 0): the same
// budget check, with the latent rows' size.
func (b *Backend) newMLACache(c model.KVConfig) (model.KVCache, error) {
	switch {
	case c.Layers <= 0 || c.Slots <= 0 || c.Capacity <= 0 || c.Heads <= 0 || c.RopeDim <= 0 || c.RopeDim%2 != 0:
		return nil, fmt.Errorf("MLA cache %+v: sizes must be positive, the rotary dimension even", c)
	case c.Latent > cuda.MLAMaxLatent:
		return nil, fmt.Errorf("MLA cache: kv_lora_rank %d (the CUDA kernels take at most %d)", c.Latent, cuda.MLAMaxLatent)
	case c.FP8 || c.Paged():
		return nil, fmt.Errorf("MLA cache: the CUDA backend keeps it unpaged in %s", b.dt)
	}
	layer := (c.Slots + 1) * c.Capacity * (c.Latent + c.RopeDim) * b.dt.Size()
	kc := &kvCache{c: c, layerBytes: layer, shape: cuda.AttnShape{Heads: 1, KVHeads: 1}}
	err := b.dev.Do(func(g *cuda.GPU) error {
		b.dropGraphs()
		if b.cache != nil { // replaced: give its memory back first
			b.freeOwned(g, b.cache.k, b.cache.v)
			b.cache = nil
		}
		if err := b.ensureLayout(g, max(b.maxRows, c.Slots)); err != nil {
			return err
		}
		budget, err := b.kvBudget(g, false)
		if err != nil {
			return err
		}
		if need := int64(layer) * int64(c.Layers); need > budget {
			return fmt.Errorf("MLA cache of %d slots (+1 scratch) x %d positions x %d layers needs %.2f GiB; the budget is %.2f GiB (weights %.2f GiB, activations %.2f GiB)",
				c.Slots, c.Capacity, c.Layers, gib(need), gib(budget), gib(b.memWeights), gib(b.memActs))
		}
		if kc.k, err = b.alloc(g, layer*c.Layers); err != nil {
			return err
		}
		b.cache = kc
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kc, nil
}

// MLAAttention implements model.MLABackend. Every token runs the absorbed
// form, prefill included: it computes the same attention as the plain form
// (the CPU's checks hold both to transformers), with no per-head keys and
// values to decompress, so absorb changes nothing here. It runs the fused
// kernel (cuda.MLAAttention): on an H100 it measured faster than the
// split path (cuda.MLAAttentionSplit) at every batch of
// BenchmarkMLAAttention, and needs no workspace.
func (b *Backend) MLAAttention(out, q, ckv, kvNorm, kvb, table model.Tensor, cache model.KVCache, layer int, s model.MLAShape, absorb bool) {
	o, qt, kt, nt, wt, tb := ft(out), ft(q), ft(ckv), ft(kvNorm), ft(kvb), ft(table)
	c, ok := cache.(*kvCache)
	lay := b.cur
	cs := mlaShape(s)
	b.op(func(g *cuda.GPU) error {
		switch {
		case !ok || !c.c.MLA():
			return fmt.Errorf("mla attention: %T is not an MLA cache", cache)
		case c.c.Latent != s.Latent || c.c.RopeDim != s.RopeDim || layer < 0 || layer >= c.c.Layers:
			return fmt.Errorf("mla attention: layer %d of a cache of %d layers of %d + %d, for %+v", layer, c.c.Layers, c.c.Latent, c.c.RopeDim, s)
		case qt.cols() != cs.QWidth() || kt.cols() != cs.Row() || o.cols() != s.Heads*s.VDim || nt.cols() != s.Latent:
			return fmt.Errorf("mla attention: q %v, ckv %v, out %v, norm %v do not fit %+v", qt.shape, kt.shape, o.shape, nt.shape, s)
		case len(wt.shape) != 3 || wt.shape[0] != s.Heads || wt.shape[1] != s.NopeDim+s.VDim || wt.shape[2] != s.Latent:
			return fmt.Errorf("mla attention: kv_b %v, want a head stack [%d %d %d]", wt.shape, s.Heads, s.NopeDim+s.VDim, s.Latent)
		case tb.f32.Bytes == 0 || tb.cols() != s.RopeDim:
			return fmt.Errorf("mla attention: RoPE table %s %v: want a float32 copy %d wide", tb.name, tb.shape, s.RopeDim)
		case lay.nTok > qt.rows() || lay.nTok > o.rows():
			return fmt.Errorf("mla attention: %d rows, q holds %d, out %d", lay.nTok, qt.rows(), o.rows())
		}
		lc := c.k.Slice(layer*c.layerBytes, c.layerBytes)
		if err := g.MLAPrep(g.Stream, b.dt, qt.buf, kt.buf, nt.buf, tb.f32, lc, lay.pos, lay.slot, lay.nTok, c.c.Capacity, cs); err != nil {
			return err
		}
		return g.MLAAttention(g.Stream, b.dt, o.buf, qt.buf, wt.buf, lc, lay.pos, lay.slot, lay.nTok, c.c.Capacity, cs)
	})
}

// RouteGrouped implements model.MLABackend, as route does Route: padding
// rows of a decode bucket are routed nowhere and not counted, and a
// replayed graph moves the window of a varying forced table on the device.
func (b *Backend) RouteGrouped(idx, weights, logits, bias, forced model.Tensor, forcedRow, rows int, r model.GroupRoute, counts model.Tensor, layer int) {
	if rows <= 0 {
		return
	}
	st, ms := b.moeState(), b.mlaState()
	it, wt, lt, bt, fb, ct := ft(idx), ft(weights), ft(logits), ft(bias), ft(forced), ft(counts)
	rows = b.rows(rows)
	lay := b.cur
	E := lt.cols()
	gr := cuda.GroupRoute{Logits: lt.buf, Idx: it.buf, Weights: wt.buf, Rows: rows, Experts: E, K: r.K,
		Groups: r.Groups, TopKGroups: r.TopKGroups, Renorm: r.Renorm, Scale: r.Scale, Row: forcedRow}
	if lay.pad {
		gr.Slots, gr.PadSlot = lay.slot, b.cache.c.Slots
	}
	drift := false
	if fb != nil {
		if b.mode == eager && forcedRow != 0 {
			st.varies[fb] = true
		}
		drift = b.mode != eager && st.varies[fb] && fb.rows() > rows
	}
	fw := slices.Clone(r.ForcedWeights)
	b.op(func(g *cuda.GPU) error {
		switch {
		case it.cols() != r.K || wt.cols() != r.K || it.kind != kInt32 || wt.kind != kFloat:
			return fmt.Errorf("route grouped: ids %v and weights %v for k = %d", it.shape, wt.shape, r.K)
		case rows > it.rows() || rows > lt.rows():
			return fmt.Errorf("route grouped: %d rows, ids hold %d, logits %d", rows, it.rows(), lt.rows())
		}
		if ct != nil {
			if ct.kind != kInt32 || ct.cols() != E || layer < 0 || layer >= ct.rows() {
				return fmt.Errorf("route grouped: counts %v for layer %d of %d experts", ct.shape, layer, E)
			}
			gr.Counts = ct.buf.Slice(layer*E*4, E*4)
		}
		if fb == nil {
			if bt == nil || bt.kind != kFloat || numel(bt.shape) != E {
				return fmt.Errorf("route grouped: correction bias %v for %d experts", bt, E)
			}
			gr.Bias = bt.buf
			return g.RouteGrouped(g.Stream, b.dt, gr)
		}
		if fb.kind != kInt32 || fb.cols() != r.K || len(fw) != r.K || r.K > cuda.MoEMaxTopK {
			return fmt.Errorf("route grouped: forced table %v and %d weights for k = %d", fb.shape, len(fw), r.K)
		}
		gr.Forced = fb.buf
		if err := ms.uploadWeights(b, g, fw); err != nil {
			return err
		}
		gr.ForcedWeights = ms.fw
		if err := st.ensureDrift(b, g); err != nil {
			return err
		}
		if drift {
			gr.Drift, gr.Period = st.drift.Slice(layer%moeDriftCells*4, 4), fb.rows()-rows
		}
		return g.RouteGrouped(g.Stream, b.dt, gr)
	})
}

// uploadWeights puts the forced weights on the device when they changed
// (Model.Reserve sets them; a capture replays the buffer's address, so
// later changes reach replayed graphs too).
func (ms *mlaState) uploadWeights(b *Backend, g *cuda.GPU, w []float32) error {
	if ms.fw.Bytes != 0 && slices.Equal(ms.fwHost, w) {
		return nil
	}
	if g.Stream.Capturing() {
		return fmt.Errorf("route grouped: forced weights must be on the device before a capture")
	}
	if ms.fw.Bytes == 0 {
		buf, err := b.alloc(g, cuda.MoEMaxTopK*4)
		if err != nil {
			return err
		}
		ms.fw = buf
	}
	if err := cuda.UploadSlice(g.Stream, ms.fw.Slice(0, len(w)*4), w); err != nil {
		return err
	}
	ms.fwHost = slices.Clone(w)
	return nil
}

// ensureDrift allocates the drift cells route allocates (one set serves
// both routers: a layer routes by one of them).
func (st *moeState) ensureDrift(b *Backend, g *cuda.GPU) error {
	if st.drift.Bytes != 0 {
		return nil
	}
	if g.Stream.Capturing() {
		return fmt.Errorf("route grouped: drift cells must exist before a capture")
	}
	d, err := b.alloc(g, moeDriftCells*4)
	if err != nil {
		return err
	}
	if err := g.Stream.Zero(d); err != nil {
		return err
	}
	st.drift = d
	return nil
}

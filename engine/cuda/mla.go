//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
)

// MLAShape is one multi-head latent attention op (model.MLAShape): Heads
// query heads of NopeDim + RopeDim, values of VDim, a latent cache of
// Latent + RopeDim per position.
type MLAShape struct {
	Heads, NopeDim, RopeDim, VDim, Latent int
	// Interleave: rotary pairs are (2i, 2i+1), else (i, i + RopeDim/2).
	Interleave bool
	Scale      float32 // softmax scale
	Eps        float32 // the latent's RMSNorm epsilon
}

// MLAMaxLatent bounds Latent (kernels/mla.cu keeps Latent/32 running sums a
// lane); DeepSeek-V3 and Moonlight have 512.
const MLAMaxLatent = 512

// mlaTile and mlaWarps are MLA_TT and MLA_WARPS of kernels/mla.cu.
const (
	mlaTile  = 4
	mlaWarps = 8
)

// QWidth is a query row's width: every head's nope and rope parts.
func (s MLAShape) QWidth() int { return s.Heads * (s.NopeDim + s.RopeDim) }

// Row is a cache row's width: the latent, then the rotary key.
func (s MLAShape) Row() int { return s.Latent + s.RopeDim }

func (s MLAShape) check() error {
	switch {
	case s.Heads <= 0 || s.NopeDim <= 0 || s.VDim <= 0 || s.Latent <= 0 || s.RopeDim <= 0 || s.RopeDim%2 != 0:
		return fmt.Errorf("cuda: MLA shape %+v: sizes must be positive, the rotary dimension even", s)
	case s.Latent > MLAMaxLatent:
		return fmt.Errorf("cuda: MLA latent of %d (the kernels take at most %d)", s.Latent, MLAMaxLatent)
	}
	return nil
}

// MLACacheBytes is one layer's MLA cache: slots (the scratch slot
// included) x capacity rows of Latent + RopeDim elements.
func MLACacheBytes(dt DType, s MLAShape, slots, capacity int) int {
	return slots * capacity * s.Row() * dt.Size()
}

// MLAPrep queues, for each of tokens rows, the latent's RMSNorm by norm and
// the rotation of the rope parts of ckv and of every query head (in place
// in q [tokens, QWidth] and ckv [tokens, Row]), and the copy of the ckv row
// into one layer's cache [slots][capacity][Row] at (slot, pos). table is the
// float32 [positions, RopeDim] cos | sin table.
func (g *GPU) MLAPrep(st *Stream, dt DType, q, ckv, norm, table, cache, pos, slot Buffer, tokens, capacity int, s MLAShape) error {
	if err := s.check(); err != nil || tokens == 0 {
		return err
	}
	es := dt.Size()
	switch {
	case q.Bytes < tokens*s.QWidth()*es || ckv.Bytes < tokens*s.Row()*es || norm.Bytes < s.Latent*es:
		return fmt.Errorf("cuda: MLAPrep: q, ckv or norm too small for %d tokens of %+v", tokens, s)
	case pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || table.Bytes < s.RopeDim*4:
		return fmt.Errorf("cuda: MLAPrep: positions, slots or RoPE table too small")
	case cache.Bytes < capacity*s.Row()*es:
		return fmt.Errorf("cuda: MLAPrep: cache of %d bytes", cache.Bytes)
	}
	f, err := g.function("mla", "mla_prep_"+dt.suffix())
	if err != nil {
		return err
	}
	il := 0
	if s.Interleave {
		il = 1
	}
	a := g.argsPack().Ptr(q).Ptr(ckv).Ptr(norm).Ptr(table).Ptr(cache).Ptr(pos).Ptr(slot).I32(s.Heads).I32(s.NopeDim).
		I32(s.RopeDim).I32(s.Latent).I32(il).F32(s.Eps).I32(capacity)
	threads := min(256, roundUp(max(s.Latent, (s.Heads+1)*s.RopeDim/2), 32))
	return st.Launch(f, Dim3{X: tokens}, Dim3{X: threads}, 0, a)
}

// mlaAttnSmem is the attention kernel's shared memory in bytes.
func mlaAttnSmem(s MLAShape) int {
	return 4 * (mlaTile*(s.NopeDim+2*s.Latent+s.RopeDim) + mlaWarps*s.Latent + 2*mlaWarps)
}

// MLAAttention queues the absorbed attention of tokens rows (after MLAPrep
// has rotated q and written their cache rows): per head h, ql = W_UK[h]ᵀ ·
// q_nope, causal softmax of Scale · (ql · c + q_rope · k_rope) over the
// positions 0..pos of the token's slot, out[h] = W_UV[h] · Σ p · c. kvb is
// the head stack [Heads][NopeDim + VDim][Latent]; out is [tokens, Heads ·
// VDim].
func (g *GPU) MLAAttention(st *Stream, dt DType, out, q, kvb, cache, pos, slot Buffer, tokens, capacity int, s MLAShape) error {
	if err := s.check(); err != nil || tokens == 0 {
		return err
	}
	es := dt.Size()
	switch {
	case q.Bytes < tokens*s.QWidth()*es || out.Bytes < tokens*s.Heads*s.VDim*es:
		return fmt.Errorf("cuda: MLAAttention: q or out too small for %d tokens of %+v", tokens, s)
	case kvb.Bytes < s.Heads*(s.NopeDim+s.VDim)*s.Latent*es:
		return fmt.Errorf("cuda: MLAAttention: kv_b of %d bytes for %+v", kvb.Bytes, s)
	case pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || cache.Bytes < capacity*s.Row()*es:
		return fmt.Errorf("cuda: MLAAttention: positions, slots or cache too small")
	}
	f, err := g.function("mla", "mla_attn_"+dt.suffix())
	if err != nil {
		return err
	}
	smem := mlaAttnSmem(s)
	if err := f.allowShared(smem); err != nil {
		return err
	}
	a := g.argsPack().Ptr(out).Ptr(q).Ptr(kvb).Ptr(cache).Ptr(pos).Ptr(slot).I32(tokens).I32(s.Heads).I32(s.NopeDim).
		I32(s.RopeDim).I32(s.VDim).I32(s.Latent).F32(s.Scale * float32(math.Log2E)).I32(capacity)
	return st.Launch(f, Dim3{X: s.Heads, Y: ceilDiv(tokens, mlaTile)}, Dim3{X: 32 * mlaWarps}, smem, a)
}

// GroupRouteMaxGroups bounds GroupRoute.Groups (one lane per group).
const GroupRouteMaxGroups = 32

// GroupRoute is one launch of DeepSeek-V3's grouped sigmoid routing: each
// of Rows tokens gets K experts and weights in Idx (int32 [Rows, K]) and
// Weights ([Rows, K], compute dtype).
type GroupRoute struct {
	// Logits [Rows, Experts] and the correction Bias [Experts] (compute
	// dtype) are routed in Groups groups, TopKGroups of them kept, the
	// weights renormalised when Renorm and times Scale; unless Forced is
	// set.
	Logits, Bias     Buffer
	Idx, Weights     Buffer
	Rows, Experts, K int
	Groups           int
	TopKGroups       int
	Renorm           bool
	Scale            float32
	// Forced (int32 [>= Row+Rows, K]) holds the experts from row Row on,
	// slot j weighted ForcedWeights[j] (float32 [K]); Drift and Period move
	// the window under graph replay, as MoERoute's do.
	Forced, ForcedWeights Buffer
	Row                   int
	Drift                 Buffer
	Period                int
	// Counts and Slots / PadSlot are MoERoute's.
	Counts  Buffer
	Slots   Buffer
	PadSlot int
}

// RouteGrouped queues the grouped routing of r.
func (g *GPU) RouteGrouped(s *Stream, dt DType, r GroupRoute) error {
	es := dt.Size()
	n := r.Rows * r.K
	switch {
	case r.Rows == 0:
		return nil
	case r.Rows < 0 || r.Experts <= 0 || r.K <= 0 || r.K > r.Experts || r.K > MoEMaxTopK:
		return fmt.Errorf("cuda: grouped routing of %d rows to %d of %d experts (k <= %d)", r.Rows, r.K, r.Experts, MoEMaxTopK)
	case r.Idx.Bytes < n*4 || r.Weights.Bytes < n*es:
		return fmt.Errorf("cuda: grouped routing: outputs too small for %d x %d", r.Rows, r.K)
	case r.Counts.Bytes != 0 && r.Counts.Bytes < r.Experts*4, r.Slots.Bytes != 0 && r.Slots.Bytes < r.Rows*4:
		return fmt.Errorf("cuda: grouped routing: counts or slots too small")
	}
	if r.Forced.Bytes != 0 {
		rows := r.Row + r.Rows
		if r.Drift.Bytes != 0 {
			rows = r.Period + r.Rows
			if r.Period <= 0 || r.Drift.Bytes < 4 {
				return fmt.Errorf("cuda: grouped forced routing: drift period %d", r.Period)
			}
		}
		switch {
		case r.Row < 0 || rows*r.K*4 > r.Forced.Bytes:
			return fmt.Errorf("cuda: grouped forced routing: rows %d..%d beyond the table (%d rows)", r.Row, rows, r.Forced.Bytes/4/r.K)
		case r.ForcedWeights.Bytes < r.K*4:
			return fmt.Errorf("cuda: grouped forced routing: %d bytes of weights for k = %d", r.ForcedWeights.Bytes, r.K)
		}
		f, err := g.function("route_grouped", "route_grouped_forced_"+dt.suffix())
		if err != nil {
			return err
		}
		period := r.Period
		if r.Drift.Bytes == 0 {
			period = 0
		}
		a := g.argsPack().Ptr(r.Forced).I32(r.Row).Ptr(r.Drift).I32(period).Ptr(r.ForcedWeights).Ptr(r.Idx).Ptr(r.Weights).
			Ptr(r.Counts).Ptr(r.Slots).I32(r.PadSlot).I32(r.Rows).I32(r.Experts).I32(r.K)
		return s.Launch(f, Dim3{X: 1}, Dim3{X: 1024}, r.Experts*4, a)
	}
	switch {
	case r.Experts > MoEMaxExperts:
		return fmt.Errorf("cuda: grouped routing takes at most %d experts, not %d", MoEMaxExperts, r.Experts)
	case r.Groups <= 0 || r.Groups > GroupRouteMaxGroups || r.Experts%r.Groups != 0:
		return fmt.Errorf("cuda: %d experts in %d groups (equal groups, at most %d)", r.Experts, r.Groups, GroupRouteMaxGroups)
	case r.TopKGroups <= 0 || r.TopKGroups > r.Groups || r.K > r.TopKGroups*(r.Experts/r.Groups):
		return fmt.Errorf("cuda: top-%d of the experts of %d of %d groups of %d", r.K, r.TopKGroups, r.Groups, r.Experts/r.Groups)
	case r.Logits.Bytes < r.Rows*r.Experts*es || r.Bias.Bytes < r.Experts*es:
		return fmt.Errorf("cuda: grouped routing: logits or bias too small for %d x %d", r.Rows, r.Experts)
	}
	f, err := g.function("route_grouped", "route_grouped_"+dt.suffix())
	if err != nil {
		return err
	}
	const warps = 8
	renorm := 0
	if r.Renorm {
		renorm = 1
	}
	a := g.argsPack().Ptr(r.Logits).Ptr(r.Bias).Ptr(r.Idx).Ptr(r.Weights).Ptr(r.Counts).Ptr(r.Slots).I32(r.PadSlot).
		I32(r.Rows).I32(r.Experts).I32(r.Groups).I32(r.TopKGroups).I32(r.K).I32(renorm).F32(r.Scale)
	blocks := min(ceilDiv(r.Rows, warps), 4*g.Info.SMs)
	return s.Launch(f, Dim3{X: blocks}, Dim3{X: 32 * warps}, r.Experts*4*(1+warps), a)
}

// The split path's sizes: kernels/mla.cu's MLA_AT, MLA_HG, MLA_OT and
// MLA_PT, and the most splits of one token's positions.
const (
	mlaAbsorbTile = 16
	mlaHeadGroup  = 16
	mlaOutTile    = 16
	mlaPosTile    = 8
	// MLASplitMaxRows is the most rows the split path takes (its
	// workspace grows with them; longer prefills use MLAAttention).
	MLASplitMaxRows = 256
	mlaMaxSplits    = 16
	mlaMaxRope      = 128 // four rotary elements a lane
)

// MLASplits is how many ways MLAAttentionSplit splits each token's
// positions: enough blocks for about two per multiprocessor.
func (g *GPU) MLASplits(tokens int, s MLAShape) int {
	blocks := tokens * ceilDiv(s.Heads, mlaHeadGroup)
	if blocks == 0 {
		return 1
	}
	return max(1, min(mlaMaxSplits, ceilDiv(2*g.Info.SMs, blocks)))
}

// MLASplitWorkBytes is the workspace MLAAttentionSplit needs for up to rows
// tokens: the absorbed queries and every split's partial result.
func (g *GPU) MLASplitWorkBytes(rows int, s MLAShape) int {
	most := 0
	for t := 1; t <= rows; t++ {
		most = max(most, t*g.MLASplits(t, s))
	}
	return 4 * (rows*s.Heads*s.Latent + most*s.Heads*(s.Latent+2))
}

// MLAAttentionSplit is MLAAttention for at most MLASplitMaxRows tokens,
// in three kernels over work (MLASplitWorkBytes): the query absorption,
// the attention split over positions (flash-decoding), and the merge with
// W_UV. Each cache row is read once per 16 heads, and a small batch still
// fills the GPU. The CUDA backend does not use it: on an H100
// (BenchmarkMLAAttention) it was no faster than MLAAttention at any batch,
// both being bound by CUDA-core arithmetic on operands in shared memory or
// registers; the way forward is tensor-core tiles (a tile of heads times a
// tile of positions per mma), for which this split and its workspace are
// the frame.
func (g *GPU) MLAAttentionSplit(st *Stream, dt DType, out, q, kvb, cache, pos, slot, work Buffer, tokens, capacity int, s MLAShape) error {
	if err := s.check(); err != nil || tokens == 0 {
		return err
	}
	es := dt.Size()
	switch {
	case tokens > MLASplitMaxRows || s.RopeDim > mlaMaxRope:
		return fmt.Errorf("cuda: MLAAttentionSplit takes at most %d rows and a rotary dimension of %d (%d, %d)", MLASplitMaxRows, mlaMaxRope, tokens, s.RopeDim)
	case q.Bytes < tokens*s.QWidth()*es || out.Bytes < tokens*s.Heads*s.VDim*es:
		return fmt.Errorf("cuda: MLAAttentionSplit: q or out too small for %d tokens of %+v", tokens, s)
	case kvb.Bytes < s.Heads*(s.NopeDim+s.VDim)*s.Latent*es:
		return fmt.Errorf("cuda: MLAAttentionSplit: kv_b of %d bytes for %+v", kvb.Bytes, s)
	case pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || cache.Bytes < capacity*s.Row()*es:
		return fmt.Errorf("cuda: MLAAttentionSplit: positions, slots or cache too small")
	}
	splits := g.MLASplits(tokens, s)
	qlBytes := 4 * tokens * s.Heads * s.Latent
	partBytes := 4 * tokens * splits * s.Heads * (s.Latent + 2)
	if work.Bytes < qlBytes+partBytes {
		return fmt.Errorf("cuda: MLAAttentionSplit needs %d bytes of workspace, has %d", qlBytes+partBytes, work.Bytes)
	}
	ql, part := work.Slice(0, qlBytes), work.Slice(qlBytes, partBytes)
	launch := func(name string, grid Dim3, threads, smem int, a *Args) error {
		f, err := g.function("mla", name+"_"+dt.suffix())
		if err != nil {
			return err
		}
		if err := f.allowShared(smem); err != nil {
			return err
		}
		return st.Launch(f, grid, Dim3{X: threads}, smem, a)
	}
	a := g.argsPack().Ptr(ql).Ptr(q).Ptr(kvb).I32(tokens).I32(s.Heads).I32(s.NopeDim).I32(s.RopeDim).I32(s.VDim).I32(s.Latent)
	if err := launch("mla_absorb", Dim3{X: s.Heads, Y: ceilDiv(tokens, mlaAbsorbTile)}, 128, 4*mlaAbsorbTile*s.NopeDim, a); err != nil {
		return err
	}
	a = g.argsPack().Ptr(part).Ptr(ql).Ptr(q).Ptr(cache).Ptr(pos).Ptr(slot).I32(s.Heads).I32(s.NopeDim).I32(s.RopeDim).
		I32(s.Latent).F32(s.Scale * float32(math.Log2E)).I32(capacity).I32(splits)
	grid := Dim3{X: tokens, Y: ceilDiv(s.Heads, mlaHeadGroup), Z: splits}
	if err := launch("mla_split", grid, 32*mlaHeadGroup/2, 4*mlaPosTile*s.Row(), a); err != nil {
		return err
	}
	a = g.argsPack().Ptr(out).Ptr(part).Ptr(kvb).I32(tokens).I32(s.Heads).I32(s.NopeDim).I32(s.VDim).I32(s.Latent).I32(splits)
	return launch("mla_split_out", Dim3{X: s.Heads, Y: ceilDiv(tokens, mlaOutTile)}, 256, 4*mlaOutTile*s.Latent, a)
}

//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
)

// AttnShape is the attention layout of one model: Heads query heads share
// KVHeads key/value heads (GQA), each HeadDim wide; a fused QKV row is
// (Heads + 2 KVHeads) HeadDim wide, queries first.
type AttnShape struct {
	Heads, KVHeads, HeadDim int
}

// Width is the fused QKV row width.
func (a AttnShape) Width() int { return (a.Heads + 2*a.KVHeads) * a.HeadDim }

func (a AttnShape) check() error {
	switch {
	case a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0:
		return fmt.Errorf("cuda: attention with %d heads over %d KV heads", a.Heads, a.KVHeads)
	case a.HeadDim != 16 && a.HeadDim != 32 && a.HeadDim != 64 && a.HeadDim != 128:
		return fmt.Errorf("cuda: attention head dimension %d (the kernels take 16, 32, 64 or 128)", a.HeadDim)
	case a.Heads/a.KVHeads > AttnRowsLarge:
		return fmt.Errorf("cuda: attention with %d query heads per KV head (at most %d)", a.Heads/a.KVHeads, AttnRowsLarge)
	}
	return nil
}

// The attention kernels come in three sizes of query rows per block
// (tokens of one item times the query heads of one KV head): AttnRowsTiny
// and AttnRowsSmall for decode items (tiny needs a head dimension of at
// least 32), AttnRowsLarge for prefill chunks.
const (
	AttnRowsTiny  = 8
	AttnRowsSmall = 16
	AttnRowsLarge = 64
	attnKeyTile   = 64
	attnThreads   = 128
	// AttnMaxSplits bounds the key ranges one decode item is split into.
	AttnMaxSplits = 8
)

// AttnWorkBytes is the split-attention workspace for launches of at most
// blocks (items x KV heads x splits) blocks of rows query rows.
func AttnWorkBytes(blocks, rows, headDim int) int { return blocks * rows * (headDim + 2) * 4 }

// AttnLaunch is one attention launch: N work items (int32 [N][4] in Items:
// first batch row, tokens, slot, position of the first row), Rows query
// rows per block, and the key range split Splits ways (flash-decoding,
// for launches with too few blocks to fill the GPU) with Work holding the
// partial results (AttnWorkBytes). With Counters (AttnCounterBytes, zeroed
// once when allocated; every launch leaves them zero again) the last block
// of each split item merges the partial results itself; without, a second
// kernel does.
type AttnLaunch struct {
	Items        Buffer
	N            int
	Rows, Splits int
	Work         Buffer
	Counters     Buffer
}

// AttnCounterBytes is the size of AttnLaunch.Counters for split launches
// of at most items x KV heads blocks per split.
func AttnCounterBytes(itemHeads int) int { return 4 * itemHeads }

// AttnSplits is how many ways to split the keys of n items so that the
// launch has about two blocks per multiprocessor.
func (g *GPU) AttnSplits(n int, a AttnShape) int {
	blocks := n * a.KVHeads
	if blocks == 0 {
		return 1
	}
	return max(1, min(AttnMaxSplits, 2*g.Info.SMs/blocks))
}

// AttnItemTokens is how many tokens of one sequence a work item of the
// given row size takes.
func AttnItemTokens(a AttnShape, rows int) int { return max(1, rows/(a.Heads/a.KVHeads)) }

// KVWrite queues the copy of the batch's keys and values from the fused
// QKV rows into one layer's cache: k and v are [slots][KVHeads][capacity]
// [HeadDim]; pos and slot are int32 per token.
func (g *GPU) KVWrite(s *Stream, dt DType, k, v, qkv, pos, slot Buffer, tokens, capacity int, a AttnShape) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	if qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 {
		return fmt.Errorf("cuda: KVWrite buffers too small for %d tokens", tokens)
	}
	f, err := g.function("attention", "kv_write_"+dt.suffix())
	if err != nil {
		return err
	}
	chunks := 2 * a.KVHeads * a.HeadDim / 8
	args := g.argsPack().Ptr(k).Ptr(v).Ptr(qkv).Ptr(pos).Ptr(slot).I32(a.Heads).I32(a.KVHeads).I32(a.HeadDim).
		I32(a.Width()).I32(capacity)
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(chunks, 32))}, 0, args)
}

// RopeKV queues RoPE of the query and key heads of the fused QKV rows (in
// place, as Rope with both strides the row width) and the copy of the
// rotated keys and the values into one layer's cache (as KVWrite): one
// kernel for the two. table is the float32 [positions, HeadDim] RoPE table;
// HeadDim must be a multiple of 16.
func (g *GPU) RopeKV(s *Stream, dt DType, k, v, qkv, pos, slot, table Buffer, tokens, capacity int, a AttnShape) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	switch {
	case a.HeadDim%16 != 0:
		return fmt.Errorf("cuda: RopeKV needs a head dimension that is a multiple of 16, got %d", a.HeadDim)
	case qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || table.Bytes < a.HeadDim*4:
		return fmt.Errorf("cuda: RopeKV buffers too small for %d tokens", tokens)
	}
	f, err := g.function("attention", "rope_kv_"+dt.suffix())
	if err != nil {
		return err
	}
	units := (a.Heads+a.KVHeads)*a.HeadDim/16 + a.KVHeads*a.HeadDim/8
	args := g.argsPack().Ptr(qkv).Ptr(k).Ptr(v).Ptr(pos).Ptr(slot).Ptr(table).I32(a.Heads).I32(a.KVHeads).
		I32(a.HeadDim).I32(a.Width()).I32(capacity)
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(units, 32))}, 0, args)
}

func attnSmem(headDim, rows int) int {
	dw := headDim / 2
	// Mirrors the kernel: Qs, Ss (rows of KT + 4), Ms, Ls, As, Ks (rows of
	// DW + 2 words), Vs.
	return 4 * (rows*headDim + rows*(attnKeyTile+4) + 3*rows + attnKeyTile*(dw+2) + attnKeyTile*dw)
}

// Attention queues causal attention of the launch's work items over the
// cache k, v (laid out as KVWrite writes them): each token of an item
// attends to positions 0..its own. out is [tokens][Heads*HeadDim].
func (g *GPU) Attention(s *Stream, dt DType, out, qkv, k, v Buffer, capacity int, a AttnShape, l AttnLaunch) error {
	if err := a.check(); err != nil || l.N == 0 {
		return err
	}
	switch {
	case l.Rows != AttnRowsTiny && l.Rows != AttnRowsSmall && l.Rows != AttnRowsLarge,
		l.Rows == AttnRowsTiny && a.HeadDim < 32:
		return fmt.Errorf("cuda: attention rows %d for head dimension %d", l.Rows, a.HeadDim)
	case l.Items.Bytes < l.N*16:
		return fmt.Errorf("cuda: attention items buffer too small for %d items", l.N)
	}
	splits := max(1, l.Splits)
	half := 0
	if splits > 1 {
		half = AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim) / (a.HeadDim + 2) * a.HeadDim
		if l.Work.Bytes < AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim) {
			return fmt.Errorf("cuda: split attention needs %d bytes of workspace, has %d", AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim), l.Work.Bytes)
		}
	}
	f, err := g.function("attention", fmt.Sprintf("attention_%s_d%d_r%d", dt.suffix(), a.HeadDim, l.Rows))
	if err != nil {
		return err
	}
	smem := attnSmem(a.HeadDim, l.Rows)
	if smem > 48<<10 && f.smemOptIn < smem {
		if err := f.setMaxDynamicShared(smem); err != nil {
			return err
		}
		f.smemOptIn = smem
	}
	var part, ml, counters DevicePtr
	if splits > 1 {
		part, ml = l.Work.Ptr, l.Work.Ptr+DevicePtr(half)
		if l.Counters.Bytes > 0 {
			if l.Counters.Bytes < AttnCounterBytes(l.N*a.KVHeads) {
				return fmt.Errorf("cuda: split attention needs %d bytes of counters, has %d", AttnCounterBytes(l.N*a.KVHeads), l.Counters.Bytes)
			}
			counters = l.Counters.Ptr
		}
	}
	args := g.argsPack().Ptr(out).Ptr(qkv).Ptr(k).Ptr(v).Ptr(l.Items).I32(a.Heads).I32(a.KVHeads).I32(a.Width()).
		I32(capacity).F32(float32(1 / math.Sqrt(float64(a.HeadDim)))).U64(uint64(part)).U64(uint64(ml)).I32(splits).
		U64(uint64(counters))
	if err := s.Launch(f, Dim3{X: l.N, Y: a.KVHeads, Z: splits}, Dim3{X: attnThreads}, smem, args); err != nil || splits == 1 || counters != 0 {
		return err
	}
	c, err := g.function("attention", "attn_combine_"+dt.suffix())
	if err != nil {
		return err
	}
	args = g.argsPack().Ptr(out).U64(uint64(part)).U64(uint64(ml)).Ptr(l.Items).I32(a.Heads).I32(a.KVHeads).
		I32(a.HeadDim).I32(l.Rows).I32(splits)
	return s.Launch(c, Dim3{X: l.N, Y: a.KVHeads}, Dim3{X: attnThreads}, 0, args)
}

// Add queues dst[i] += src[i] for the first n elements (n % 8 == 0).
func (g *GPU) Add(s *Stream, dt DType, dst, src Buffer, n int) error {
	switch {
	case n == 0:
		return nil
	case n%8 != 0 || dst.Bytes < n*dt.Size() || src.Bytes < n*dt.Size():
		return fmt.Errorf("cuda: Add of %d elements (a multiple of 8 within %d and %d bytes)", n, dst.Bytes, src.Bytes)
	}
	f, err := g.function("ops", "add_"+dt.suffix())
	if err != nil {
		return err
	}
	n8 := n / 8
	return s.Launch(f, Dim3{X: min(ceilDiv(n8, 256), 8*g.Info.SMs)}, Dim3{X: 256}, 0,
		g.argsPack().Ptr(dst).Ptr(src).U64(uint64(n8)))
}

// GatherRows queues out[j] = x[rows[j]] for j < n; rows is int32 on the
// device, cols % 8 == 0.
func (g *GPU) GatherRows(s *Stream, dt DType, out, x, rows Buffer, n, cols int) error {
	switch {
	case n == 0:
		return nil
	case cols%8 != 0 || out.Bytes < n*cols*dt.Size() || rows.Bytes < n*4:
		return fmt.Errorf("cuda: GatherRows of %d rows x %d", n, cols)
	}
	f, err := g.function("ops", "gather_rows")
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: n}, Dim3{X: min(256, roundUp(cols/8, 32))}, 0,
		g.argsPack().Ptr(out).Ptr(x).Ptr(rows).I32(cols/8))
}

// HeadNorm queues Qwen3's qk-norm in place: RMSNorm over HeadDim of every
// query head (scale qw) and key head (scale kw) of tokens fused QKV rows.
func (g *GPU) HeadNorm(s *Stream, dt DType, qkv, qw, kw Buffer, tokens int, a AttnShape, eps float32) error {
	switch {
	case tokens == 0:
		return nil
	case qkv.Bytes < tokens*a.Width()*dt.Size() || qw.Bytes < a.HeadDim*dt.Size() || kw.Bytes < a.HeadDim*dt.Size():
		return fmt.Errorf("cuda: HeadNorm buffers too small for %d tokens", tokens)
	}
	f, err := g.function("ops", "head_norm_"+dt.suffix())
	if err != nil {
		return err
	}
	heads := a.Heads + a.KVHeads
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(1024, 32*heads)}, 0,
		g.argsPack().Ptr(qkv).Ptr(qw).Ptr(kw).I32(a.Heads).I32(a.KVHeads).I32(a.HeadDim).I32(a.Width()).F32(eps))
}

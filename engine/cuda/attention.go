//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"slices"

	"github.com/xrun-dev/xrun/engine/model"
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

// The attention kernels come in four sizes of query rows per block
// (tokens of one item times the query heads of one KV head): AttnRowsTiny
// and AttnRowsSmall for decode items (tiny needs a head dimension of at
// least 32), AttnRowsLarge and AttnRowsXL for prefill chunks (XL on the
// tensor cores only, at the head dimensions attnTCXL lists:
// AttnPrefillRows).
const (
	AttnRowsTiny  = 8
	AttnRowsSmall = 16
	AttnRowsLarge = 64
	AttnRowsXL    = 128
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
	// ShortKeys: in a split launch merged by its last blocks (Counters
	// set) on the tensor cores, an item of at most this many keys is done
	// by its first block alone, unsplit (attention_tc.cu: the merge is a
	// dependent round trip that a short context does not repay). 0 means
	// the GPU's default (XRUN_CUDA_ATTN_SHORT, 256: at batch 1
	// TinyLlama's decode launch is 4 KV heads split 8 ways; 128 in / 128
	// out decodes at 129..256 keys, 16 tiles of 16 keys for one block's 8
	// key warps), negative never.
	ShortKeys int
	// Rope, when set, is the float32 [positions, HeadDim] RoPE table, and
	// the launch does RopeKV's work for its items' own tokens: it rotates
	// their query heads (in registers: the QKV rows are left as they are)
	// and key heads, and writes their keys and values into the cache, so
	// no RopeKV may run before it. Each item must be all of its
	// sequence's new tokens (the keys before an item's first position are
	// read from the cache, before the kernel waits for the one in front
	// of it). Decode launches (Rows <= 16) on a tensor-core kernel only:
	// AttnFoldsRope says whether one can.
	Rope Buffer
	// Pages, when set, says the cache is paged (KVPages): the launch runs
	// the _paged kernels, which find every cached row through the block
	// tables, and the capacity Attention is given is ignored.
	Pages KVPages
	// FP8, when set, says the cache holds E4M3 codes (KVFP8): the launch
	// runs attention_tc_f8.cu's kernels, on the tensor cores only.
	FP8 KVFP8
	// MeanKeys is a prefill launch's mean keys a prompt chunk (its cached
	// tokens and its own), from which the warp-specialised kernels take
	// it (attnWSMinKeys); 0: not said, they do not.
	MeanKeys int
}

// KVFP8 is an FP8 (E4M3) KV cache's scales for one layer: a value v is
// stored as E4M3(v / scale), one byte (kv_cache_dtype fp8; KVWriteFP8
// writes it, Attention with AttnLaunch.FP8 reads it). The zero value: a
// cache in the compute type.
type KVFP8 struct {
	On   bool
	K, V float32
}

func (q KVFP8) check() error {
	if q.On && !(q.K > 0 && q.V > 0) {
		return fmt.Errorf("cuda: FP8 KV cache scales %g and %g: want both positive", q.K, q.V)
	}
	return nil
}

// KVPages describes a paged KV cache (the zero value: a contiguous one).
// Each layer's K and V are [blocks][KVHeads][BlockSize][HeadDim], and
// position p of slot s (a token's slot, an item's slot) sits in block
// Tables[s*Stride + p/BlockSize], Tables being int32 on the device with a
// row of Stride blocks per slot. BlockSize is a power of two.
type KVPages struct {
	Tables    Buffer
	Stride    int
	BlockSize int
}

// On reports whether p pages a cache.
func (p KVPages) On() bool { return p.BlockSize > 0 }

// seqKeys is the most positions a sequence's cache holds: a block table's
// row of blocks where the cache is paged, else the fixed slots' capacity.
func (p KVPages) seqKeys(capacity int) int {
	if p.On() {
		return p.Stride * p.BlockSize
	}
	return capacity
}

func (p KVPages) check() error {
	if p.BlockSize <= 0 || p.BlockSize&(p.BlockSize-1) != 0 || p.Stride <= 0 || p.Tables.Bytes < 4*p.Stride {
		return fmt.Errorf("cuda: paged KV cache of blocks of %d positions, %d per table, tables of %d bytes (a power of two, at least one block a table)",
			p.BlockSize, p.Stride, p.Tables.Bytes)
	}
	return nil
}

// AttnCounterBytes is the size of AttnLaunch.Counters for split launches
// of at most items x KV heads blocks per split.
func AttnCounterBytes(itemHeads int) int { return 4 * itemHeads }

// AttnSplitsFor is how many ways to split the keys of n decode items on
// sms multiprocessors, their sequences holding meanKeys keys on average
// in a cache of elem bytes a value: enough for about two blocks a
// multiprocessor (flash-decoding, for narrow launches); and where the
// launch has fewer than AttnSplitWide blocks a multiprocessor, splits of
// at least AttnSplitBytes of keys and values each, up to AttnSplitBlocks
// blocks a multiprocessor, since a few long items leave the
// multiprocessors unevenly loaded. The 20000/2000 row's decode on an H100
// (40 sequences, 320 items of Llama-3.1-8B's heads), us a layer unsplit /
// 2 / 4 / 8 ways: at 20,000-22,000 positions 1,280 / 1,231 / 1,224 / 1,207
// over a 16-bit cache, 651 / 639 / 650 / 633 over an FP8 one; at
// 4,000-4,400 positions 263 / 259 / 262 (16-bit), 139 / 143 / 151 (FP8); at
// 1,000-1,100 70 / 74 / 76 and 42 / 50 / 55. A split of 640 KiB is past
// the last one that lost (537 KB: FP8 at 4,200 keys, 2 ways) and short of
// the ones that paid (1 MB and more).
func AttnSplitsFor(sms, n int, a AttnShape, meanKeys, elem int) int {
	blocks := n * a.KVHeads
	if blocks == 0 {
		return 1
	}
	s := max(1, min(AttnMaxSplits, 2*sms/blocks))
	if blocks < AttnSplitWide*sms {
		bySize := meanKeys * 2 * a.HeadDim * elem / AttnSplitBytes
		s = max(s, min(AttnMaxSplits, bySize, AttnSplitBlocks*sms/blocks))
	}
	return s
}

const (
	// AttnSplitWide, AttnSplitBytes, AttnSplitBlocks: AttnSplitsFor's
	// split of long items (blocks a multiprocessor below which it splits,
	// the fewest bytes of keys and values a split, the most blocks a
	// multiprocessor).
	AttnSplitWide   = 4
	AttnSplitBytes  = 640 << 10
	AttnSplitBlocks = 20
)

// AttnSplitWorkBytes and AttnSplitCounterBytes are the workspace and
// counters that every launch AttnSplitsFor splits fits in, on sms
// multiprocessors (items of up to AttnRowsSmall rows, heads of up to 128):
// at most AttnSplitBlocks blocks a multiprocessor (the narrow launches'
// rule makes two), split from fewer than AttnSplitWide item heads a
// multiprocessor.
func AttnSplitWorkBytes(sms int) int { return AttnWorkBytes(AttnSplitBlocks*sms, AttnRowsSmall, 128) }

// AttnSplitCounterBytes: see AttnSplitWorkBytes.
func AttnSplitCounterBytes(sms int) int { return AttnCounterBytes(AttnSplitWide * sms) }

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

// KVWriteFP8 is KVWrite into an FP8 cache (one byte a value, E4M3(v /
// scale) with q's scales), or into a paged one where p is set.
func (g *GPU) KVWriteFP8(s *Stream, dt DType, k, v, qkv, pos, slot Buffer, tokens, capacity int, p KVPages, a AttnShape, q KVFP8) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	if err := q.check(); err != nil {
		return err
	}
	if !q.On {
		return fmt.Errorf("cuda: KVWriteFP8 without FP8 scales")
	}
	if qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 {
		return fmt.Errorf("cuda: KVWriteFP8 buffers too small for %d tokens", tokens)
	}
	f, cap, err := g.fp8KVFunction("kv_write_", dt, capacity, p)
	if err != nil {
		return err
	}
	// The reciprocals rounded once in float32, as the CPU backend's.
	chunks := 2 * a.KVHeads * a.HeadDim / 8
	args := g.argsPack().Ptr(k).Ptr(v).Ptr(qkv).Ptr(pos).Ptr(slot).I32(a.Heads).I32(a.KVHeads).I32(a.HeadDim).
		I32(a.Width()).I32(cap).F32(1 / q.K).F32(1 / q.V)
	if p.On() {
		args.Ptr(p.Tables).I32(p.Stride)
	}
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(chunks, 32))}, 0, args)
}

// fp8KVFunction is the kernel of family (kv_write_, rope_kv_) that writes
// an FP8 cache, and the extent of the cache's rows it takes: FAMILYf8_T
// over fixed slots of capacity positions, or FAMILYpaged_f8_T over p's
// blocks (checked), whose launches end with the tables and their stride.
func (g *GPU) fp8KVFunction(family string, dt DType, capacity int, p KVPages) (*Function, int, error) {
	name, cap := family+"f8_", capacity
	if p.On() {
		if err := p.check(); err != nil {
			return nil, 0, err
		}
		name, cap = family+"paged_f8_", p.BlockSize
	}
	f, err := g.function("attention", name+dt.suffix())
	return f, cap, err
}

// KVWritePaged is KVWrite into a paged cache: k and v are [blocks]
// [KVHeads][BlockSize][HeadDim], each token's block found through its
// slot's block table (KVPages).
func (g *GPU) KVWritePaged(s *Stream, dt DType, k, v, qkv, pos, slot Buffer, tokens int, p KVPages, a AttnShape) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	if qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 {
		return fmt.Errorf("cuda: KVWritePaged buffers too small for %d tokens", tokens)
	}
	f, err := g.function("attention", "kv_write_paged_"+dt.suffix())
	if err != nil {
		return err
	}
	chunks := 2 * a.KVHeads * a.HeadDim / 8
	args := g.argsPack().Ptr(k).Ptr(v).Ptr(qkv).Ptr(pos).Ptr(slot).I32(a.Heads).I32(a.KVHeads).I32(a.HeadDim).
		I32(a.Width()).I32(p.BlockSize).Ptr(p.Tables).I32(p.Stride)
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

// RopeKVPaged is RopeKV writing into a paged cache (KVWritePaged).
func (g *GPU) RopeKVPaged(s *Stream, dt DType, k, v, qkv, pos, slot, table Buffer, tokens int, p KVPages, a AttnShape) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	switch {
	case a.HeadDim%16 != 0:
		return fmt.Errorf("cuda: RopeKVPaged needs a head dimension that is a multiple of 16, got %d", a.HeadDim)
	case qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || table.Bytes < a.HeadDim*4:
		return fmt.Errorf("cuda: RopeKVPaged buffers too small for %d tokens", tokens)
	}
	f, err := g.function("attention", "rope_kv_paged_"+dt.suffix())
	if err != nil {
		return err
	}
	units := (a.Heads+a.KVHeads)*a.HeadDim/16 + a.KVHeads*a.HeadDim/8
	args := g.argsPack().Ptr(qkv).Ptr(k).Ptr(v).Ptr(pos).Ptr(slot).Ptr(table).I32(a.Heads).I32(a.KVHeads).
		I32(a.HeadDim).I32(a.Width()).I32(p.BlockSize).Ptr(p.Tables).I32(p.Stride)
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(units, 32))}, 0, args)
}

// RopeKVFP8 is RopeKV writing into an FP8 cache (one byte a value, as
// KVWriteFP8 encodes with q's scales), or into a paged one where p is set:
// the codes Rope then KVWriteFP8 would write, and the rows rotated alike,
// in one pass over the QKV rows instead of two.
func (g *GPU) RopeKVFP8(s *Stream, dt DType, k, v, qkv, pos, slot, table Buffer, tokens, capacity int, p KVPages, a AttnShape, q KVFP8) error {
	if err := a.check(); err != nil || tokens == 0 {
		return err
	}
	if err := q.check(); err != nil {
		return err
	}
	switch {
	case !q.On:
		return fmt.Errorf("cuda: RopeKVFP8 without FP8 scales")
	case a.HeadDim%16 != 0:
		return fmt.Errorf("cuda: RopeKVFP8 needs a head dimension that is a multiple of 16, got %d", a.HeadDim)
	case qkv.Bytes < tokens*a.Width()*dt.Size() || pos.Bytes < tokens*4 || slot.Bytes < tokens*4 || table.Bytes < a.HeadDim*4:
		return fmt.Errorf("cuda: RopeKVFP8 buffers too small for %d tokens", tokens)
	}
	f, cap, err := g.fp8KVFunction("rope_kv_", dt, capacity, p)
	if err != nil {
		return err
	}
	units := (a.Heads+a.KVHeads)*a.HeadDim/16 + a.KVHeads*a.HeadDim/8
	// The reciprocals rounded once in float32, as KVWriteFP8's.
	args := g.argsPack().Ptr(qkv).Ptr(k).Ptr(v).Ptr(pos).Ptr(slot).Ptr(table).I32(a.Heads).I32(a.KVHeads).
		I32(a.HeadDim).I32(a.Width()).I32(cap).F32(1 / q.K).F32(1 / q.V)
	if p.On() {
		args.Ptr(p.Tables).I32(p.Stride)
	}
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(units, 32))}, 0, args)
}

func attnSmem(headDim, rows int) int {
	dw := headDim / 2
	// Mirrors the kernel: Qs, Ss (rows of KT + 4), Ms, Ls, As, Ks (rows of
	// DW + 2 words), Vs.
	return 4 * (rows*headDim + rows*(attnKeyTile+4) + 3*rows + attnKeyTile*(dw+2) + attnKeyTile*dw)
}

// attnTC is one configuration of the tensor-core attention kernel
// (kernels/attention_tc.cu): warps of 16 query rows, rowWarps of them
// sharing the K/V tiles of keyTile keys that keyWarps groups of warps take
// in turn, each group streaming its tiles stages deep. The zero value means
// the CUDA-core kernel (kernels/attention.cu).
type attnTC struct {
	rowWarps, keyWarps, keyTile, stages int
	// wg: the prefill kernel on Hopper's warpgroup MMA (attention_wg.cu:
	// head dimension 128, one key group of 64-key tiles, two stages,
	// unsplit launches, sm_90a), named wg-m4-k1-t64-s2 and wg-m8-k1-t64-s2.
	wg bool
}

// attnWG are the warpgroup-MMA prefill configurations at head dimension
// 128: one warpgroup (64 rows) and two (128), which attnTCDefault takes on
// Hopper (GPU.AttnWG) in place of tc-m4-k1-t64-s2 and tc-m8-k1-t64-s2.
// BenchmarkAttention on an H100 (Llama-3.1-8B's 32 x 8 heads, us a layer;
// FP8: bf16 queries), mma.sync against wgmma at the rows shown:
//
//	                                  16-bit         paged          FP8
//	8,192 after 12,288 (128 rows)   9,121 / 5,578  9,886 / 7,073  10,680 / 7,950
//	4 prompts of 2,048 (128 rows)     680 / 449      745 / 557       799 / 614
//	8 prompts of 1,024 (64 rows)      370 / 277      495 / 323       481 / 356
//	16 prompts of 512 (64 rows)       231 / 169      256 / 197       273 / 215
//	64 prompts of 128 (64 rows)       114 / 103      121 / 117       129 / 117
//
// 395 TFLOP/s of causal work at the long chunk where mma.sync reached 242.
// Since the FP8 tiles are decoded under the products (e54f42e), the FP8
// column's wgmma figures are 6,954, 554, 349, 212 and 118 (another H100,
// where the former kernels gave 8,189, 638, 406, 239 and 124).
// (End to end on an H100, FP8, median of 3, the same machine: TensorRT-
// LLM's 2048/128 row of 600 requests 3,008 output tok/s against 2,952,
// 5000/500 of 183 2,957 against 2,822.) Since the 128-row kernels run two
// blocks a multiprocessor (attention_wg.cu's bounds), they take every
// prefill launch from 128 keys (attnXLMinKeys).
var attnWG = []attnTC{{4, 1, 64, 2, true}, {8, 1, 64, 2, true}}

// attnWS is the warp-specialised form of attnWG[1] (attention_ws.cu): a
// producer warpgroup copies (and over an FP8 cache decodes) the K and V
// tiles into attnWSStages stages beside the two warpgroups that multiply,
// each queuing S_j with P_{j-1} V_{j-1}; one block a multiprocessor. Named
// ws-m8-k1-t64-s3; the stages are the kernels' WS_STAGES.
var attnWS = attnTC{8, 1, 64, attnWSStages, true}

const attnWSStages = 3

// attnWSMinKeys is the mean keys a prompt chunk from which a 128-row
// prefill launch runs on the warp-specialised kernel: it runs one block a
// multiprocessor, so short prompts, where a block's prologue is much of
// its time, keep attnWG[1]'s two. BenchmarkAttention on one H100 (v41: Q
// in registers), us a layer, wg-m8 / ws-m8 (the 8,192-token chunk and the
// 2,048-token prompts with their items last first, as packBatch lays them
// out: .../...-lpt):
//
//	                      16-bit       paged 16-bit  FP8, bf16    FP8, fp16    paged FP8, bf16
//	8,192 after 12,288    5,617/4,650  5,992/6,017   5,994/4,284  5,824/4,065  6,091/4,660
//	4 prompts of 2,048      418/394      459/415       447/362      433/357      456/392
//	8 prompts of 1,024      250/239      280/257       280/243      269/233      285/257
//	16 prompts of 512       158/167      172/173       174/176      167/166      179/179
//
// (64 prompts of 128, v40: 90/117 16-bit, 97/126 FP8 bf16.) A 16-bit
// cache takes 128-row launches only from 2,048 keys (paged) or 16,384
// (contiguous: AttnPrefillRows), hence its threshold.
func attnWSMinKeys(fp8 bool) int {
	if fp8 {
		return 1024
	}
	return 2048
}

// attnWSPays reports whether a prefill launch l that attnTCDefault put on
// attnWG[1] runs on attnWS instead: XRUN_CUDA_ATTN_WS on and
// XRUN_CUDA_ATTN_TC at auto, no E4M3 products asked for (the wg kernels
// have them), and long enough chunks.
func (g *GPU) attnWSPays(l AttnLaunch) bool {
	return g.sw.CUDAAttnWS && g.sw.CUDAAttnTC == "auto" &&
		!(l.FP8.On && g.sw.CUDAAttnWGE4M3) && l.MeanKeys >= attnWSMinKeys(l.FP8.On)
}

// ws reports whether c is a warp-specialised configuration (attnWS):
// the warpgroup-MMA kernels of more than two stages.
func (c attnTC) ws() bool { return c.wg && c.stages > 2 }

// attnTCKernels are the configurations attention_tc.cu instantiates, per
// head dimension: one row warp for decode launches (Rows 8 and 16), four
// for prefill (Rows 64).
var attnTCKernels = map[int][]attnTC{
	64:  {{1, 4, 16, 3, false}, {1, 4, 16, 2, false}, {1, 4, 32, 2, false}, {1, 2, 32, 3, false}, {1, 8, 16, 2, false}, {4, 1, 64, 2, false}, {4, 1, 32, 3, false}},
	128: {{1, 4, 16, 2, false}, {1, 2, 16, 3, false}, {4, 1, 64, 2, false}, {4, 1, 32, 2, false}, {8, 1, 64, 2, false}, attnWG[0], attnWG[1], attnWS},
}

// attnTCDefaults are Attention's choices per head dimension: for decode
// launches of at most two blocks per multiprocessor, for larger decode
// launches, and for prefill launches. BenchmarkAttention on an H200
// (TinyLlama's 32 x 4 heads of 64, fp16; two runs): with few blocks, 8 key
// warps per block beat 4 (batch 1 split 8 ways: 5.9 against 7.2-8.0 us;
// batch 64: 6.9-7.0 against 7.3-7.9 us); with many, 4 warps of 16-key
// tiles were the fastest, 2 or 3 stages alike within the runs' spread
// (batch 256: 19.7-20.6 us; 8 warps 22.6; the CUDA-core kernel 43.1);
// prefill (8192 rows): 32-key tiles 3 deep, 51 us (64-key tiles 56 us, the
// CUDA-core kernel 399 us). Heads of 128 prefill on 64-key tiles: on an
// H100 (Llama-3.1-8B's 32 x 8 heads, .../prefill-D128/...) 4 prompts of
// 2,048 tokens took 669 us against 880 on 32-key tiles (paged 778 against
// 946; over an FP8 cache, bf16 873 against 1,012, fp16 813 against 987),
// and 64 prompts of 128 tokens 104 against 117 (FP8 bf16 123 against
// 125): half the barriers and online-softmax rescales a key, where the
// shorter tiles' masking saves less.
var attnTCDefaults = map[int][3]attnTC{
	64:  {{1, 8, 16, 2, false}, {1, 4, 16, 3, false}, {4, 1, 32, 3, false}},
	128: {{1, 4, 16, 2, false}, {1, 4, 16, 2, false}, {4, 1, 64, 2, false}},
}

// attnTCXL is the configuration of prefill launches of AttnRowsXL rows, per
// head dimension: eight row warps, so that each key tile of the cache is
// read into shared memory (and, over an FP8 cache, decoded there) once for
// 128 query rows where four warps took 64. BenchmarkAttention on an H100
// (Llama-3.1-8B's 32 x 8 heads, .../prefill-D128/...), us a layer, 64 rows
// on tc-m4-k1-t64-s2 against 128 on tc-m8-k1-t64-s2:
//
//	                               16-bit  paged   FP8, fp16  FP8, bf16
//	8,192 tokens after 12,288       9,336  10,870  11,479     12,238
//	                 (128 rows)     9,030   9,893  10,268     10,680
//	4 prompts of 2,048                676     790     833        884
//	                 (128 rows)       683     749     773        805
//	8 prompts of 1,024                375     427     461        484
//	                 (128 rows)       376     421     425        451
//	16 prompts of 512                 219     257     267        285
//	                 (128 rows)       248     251     263        269
//	64 prompts of 128                 114     125     133        137
//	                 (128 rows)       131     137     138        138
//
// Twice the rows pay where the chunks attend to long contexts, the more
// the more each key tile costs to stage (an FP8 cache's decode, a paged
// cache's block tables), and cost where short prompts leave most of a
// block's rows masked (attnXLMinKeys).
var attnTCXL = map[int]attnTC{128: {8, 1, 64, 2, false}}

// attnXLMinKeys is the mean keys per prompt chunk (its cached tokens and
// its own) from which AttnPrefillRows takes AttnRowsXL, by cache and
// kernel. The warpgroup-MMA kernels (wg) take 128 rows from the shortest
// prompts measured: their two-warpgroup blocks run two a multiprocessor
// (attention_wg.cu's bounds) and won everywhere on an H100, us a layer,
// wg-m4 on 64 rows / wg-m8 on 128 (.../prefill-D128/...):
//
//	                    16-bit   paged    FP8 fp16  FP8 bf16  paged FP8 fp16  paged FP8 bf16
//	4 prompts of 2,048  434/393  553/435  589/544   596/485   641/535         662/504
//	8 prompts of 1,024  267/235  315/247  321/308   338/281   357/305         371/285
//	16 prompts of 512   165/149  217/158  203/186   206/173   219/184         227/177
//	64 prompts of 128   100/89   116/91   110/99    115/97    120/99          122/100
//
// Below 128 keys nothing was measured: 64 rows stay. The mma.sync
// kernels: the smallest length in attnTCXL's table from which 128 rows
// won for both query types, and for a 16-bit contiguous cache the only one
// where they won clearly (between 2,048 and the long chunk they were
// even). Over a paged FP8 cache the same as over fixed slots; the same
// benchmark on an H100 (.../f8/paged/...), us a layer, 64 rows / 128 rows:
//
//	                               fp16 queries    bf16 queries
//	8,192 tokens after 12,288      12,337 / 10,865  13,107 / 10,969
//	4 prompts of 2,048                908 / 831        940 / 824
//	8 prompts of 1,024                485 / 468        511 / 461
//	16 prompts of 512                 283 / 273        292 / 273
//	64 prompts of 128                 138 / 146        137 / 140
func attnXLMinKeys(fp8, paged, wg bool) int {
	switch {
	case wg:
		return 128
	case fp8:
		return 512
	case paged:
		return 2048
	}
	return 16384
}

// AttnPrefillRows is the query rows per block of an iteration's prefill
// launch whose prompt chunks attend to meanKeys keys on average over a
// cache of E4M3 codes (fp8) or blocks (paged): AttnRowsXL where
// XRUN_CUDA_ATTN_PREFILL_ROWS (sw.CUDAAttnXL) asks for them (`128`, or
// `auto` from attnXLMinKeys keys) and a tensor-core kernel takes them (the
// head dimension has an attnTCXL configuration, and XRUN_CUDA_ATTN_TC is
// `auto` or names a configuration that fits them), else AttnRowsLarge.
func AttnPrefillRows(sw model.Switches, a AttnShape, meanKeys int, fp8, paged, wg bool) int {
	_, ok := attnTCXL[a.HeadDim]
	switch {
	case !ok || sw.CUDAAttnXL == "64",
		sw.CUDAAttnXL != "128" && meanKeys < attnXLMinKeys(fp8, paged, wg && a.HeadDim == 128),
		sw.CUDAAttnTC != "auto" && !slices.ContainsFunc(attnTCKernels[a.HeadDim], func(c attnTC) bool {
			return c.String() == sw.CUDAAttnTC && c.fits(AttnRowsXL)
		}):
		return AttnRowsLarge
	}
	return AttnRowsXL
}

// attnTCRopeKernels are the decode configurations attention_tc.cu also
// instantiates with RoPE and the cache write folded in (AttnLaunch.Rope,
// kernel names ending in _rope), and attnTCRopeDefaults the choices among
// them, for launches of at most two blocks per multiprocessor and for
// larger ones. With few blocks: 8 key warps, as without RoPE, and 3 stages,
// so that a block of a short context (256 keys: 2 tiles a warp) has all
// its cached keys requested before it waits for the QKV projection.
var attnTCRopeKernels = map[int][]attnTC{
	64:  {{1, 8, 16, 3, false}, {1, 8, 16, 2, false}, {1, 4, 16, 3, false}, {1, 16, 16, 2, false}},
	128: {{1, 4, 16, 2, false}, {1, 4, 16, 3, false}},
}

var attnTCRopeDefaults = map[int][2]attnTC{
	64:  {{1, 8, 16, 3, false}, {1, 4, 16, 3, false}},
	128: {{1, 4, 16, 2, false}, {1, 4, 16, 2, false}},
}

// attnTCRopeSingle is the _rope configuration for a decode launch of one
// item (a single sequence: batch 1, the latency case) over a contiguous
// cache, where it differs from attnTCRopeDefaults' few-blocks choice: 16
// key warps of one 16-key tile each, 2 stages (144 KiB of shared memory;
// where a block cannot have that, the default runs). Why: at batch 1 the
// launch is 4 blocks that wait for the QKV projection, and what they do
// after the wait is the step's critical path. With 16 warps a context of
// up to 256 keys has every cached tile requested before the wait and each
// warp one tile's chain of mma, softmax and P V after it; with 8 warps
// (the previous choice) half the tiles were requested after the wait and
// each warp ran two tiles in turn. On two H100s, TinyLlama fp16 at batch 1
// (gemm_plugin disable, 150 requests of 128/128, one run each,
// alternating): 1,127 / 1,127 / 1,128 output tok/s against 1,077 / 1,078
// / 1,079 / 1,079 (+4.6 %); 3 stages of 16 warps 1,125. At 4 sequences
// 16 warps gave 2,908 against the few-blocks default's 2,893 (one run),
// not enough to change that default. The 8-warp, 2-stage choice before
// it had beaten 3 stages by 1 % (1,079.2 / 1,079.9 against 1,068.4 /
// 1,069.0). Paged and FP8-cache launches keep the few-blocks default
// (pagedTC: no _rope_paged kernel of 2 stages is built).
var attnTCRopeSingle = map[int]attnTC{
	64: {1, 16, 16, 2, false},
}

// attnTCPagedKernels and attnTCRopePagedKernels are the configurations
// attention_tc.cu also instantiates over a paged cache (names ending in
// _paged, _rope_paged): the defaults only, so that the family's compile
// stays short, and at head dimension 128 the former prefill default
// (32-key tiles), so that XRUN_CUDA_ATTN_TC=tc-m4-k1-t32-s2 still times it
// over a paged or an FP8 cache. A paged launch whose configuration has no
// such kernel (one XRUN_CUDA_ATTN_TC names) runs on the default instead
// (pagedTC).
var attnTCPagedKernels = map[int][]attnTC{
	64:  {{1, 8, 16, 2, false}, {1, 4, 16, 3, false}, {4, 1, 32, 3, false}},
	128: {{1, 4, 16, 2, false}, {4, 1, 64, 2, false}, {4, 1, 32, 2, false}, {8, 1, 64, 2, false}, attnWG[0], attnWG[1], attnWS},
}

var attnTCRopePagedKernels = map[int][]attnTC{
	64:  {{1, 8, 16, 3, false}, {1, 4, 16, 3, false}},
	128: {{1, 4, 16, 2, false}},
}

// pagedTC is the configuration a paged launch of rows query rows per block
// and blocks blocks runs on: tc where it has a _paged kernel, else the
// default for the launch (the CUDA-core kernel stays the CUDA-core one).
func (g *GPU) pagedTC(tc attnTC, headDim, rows, blocks int, rope bool) attnTC {
	list, few := attnTCPagedKernels[headDim], blocks <= 2*g.Info.SMs
	if rope {
		list = attnTCRopePagedKernels[headDim]
	}
	if tc.rowWarps == 0 || slices.Contains(list, tc) {
		return tc
	}
	switch {
	case rope && few:
		return attnTCRopeDefaults[headDim][0]
	case rope:
		return attnTCRopeDefaults[headDim][1]
	case rows > AttnRowsLarge:
		return attnTCXL[headDim]
	case rows > 16:
		return attnTCDefaults[headDim][2]
	case few:
		return attnTCDefaults[headDim][0]
	}
	return attnTCDefaults[headDim][1]
}

// attnTCRopeDefault is the _rope configuration for a decode launch of
// items work items, rows query rows per block and blocks blocks, or false
// where there is none: a prefill launch, another head dimension,
// XRUN_CUDA_ATTN_TC=0, or XRUN_CUDA_ATTN_TC naming a configuration without
// a _rope kernel (which then runs unfused, as asked).
func (g *GPU) attnTCRopeDefault(headDim, rows, items, blocks int) (attnTC, bool) {
	if g.sw.CUDAAttnTC == "0" || rows > 16 {
		return attnTC{}, false
	}
	for _, c := range attnTCRopeKernels[headDim] {
		if c.String() == g.sw.CUDAAttnTC {
			return c, true
		}
	}
	for _, c := range attnTCKernels[headDim] {
		if c.String() == g.sw.CUDAAttnTC && c.fits(rows) {
			return attnTC{}, false
		}
	}
	d, ok := attnTCRopeDefaults[headDim]
	one, single := attnTCRopeSingle[headDim]
	switch {
	case !ok:
		return attnTC{}, false
	case single && items == 1 && one.smem(headDim) <= g.Info.SharedPerBlock:
		return one, true
	case blocks <= 2*g.Info.SMs:
		return d[0], true
	}
	return d[1], true
}

// attnFoldFP8MaxItems is the widest decode launch over an FP8 cache, in
// items (sequences times KV heads), whose RoPE AttnFoldPays folds in.
// BenchmarkAttention's .../f8/rope against .../f8/ropekv on an H100, us:
// head dimension 64 and 4 KV heads (TinyLlama), 1,024 items at B=256: 21.7
// folded, 23.6 not; head dimension 128 and 8 KV heads (Llama-3.1-8B),
// contexts to 256: B=256 (2,048 items) 60.8 against 57.2, B=2048 389
// against 349; B=444 with contexts to 2,176, 398 against 404. Over a
// 16-bit cache the fold was the faster in every one.
const attnFoldFP8MaxItems = 1024

// AttnFoldPays says whether folding RoPE and the cache write into decode
// launch l (AttnLaunch.Rope) is expected to beat running them before it:
// always over a 16-bit cache; over an FP8 one (where they are two kernels,
// Rope then KVWriteFP8) up to attnFoldFP8MaxItems items, beyond which the
// folded kernel's own cost outgrows them. It depends on the launch's
// width only, not its contexts, so a captured graph's choice holds for
// every replay of its batch size.
func AttnFoldPays(a AttnShape, l AttnLaunch) bool {
	return !l.FP8.On || l.N*a.KVHeads <= attnFoldFP8MaxItems
}

// AttnFoldsRope reports whether Attention can take launch l with RoPE and
// the cache write folded in (AttnLaunch.Rope); where not, RopeKV runs first.
func (g *GPU) AttnFoldsRope(a AttnShape, l AttnLaunch) bool {
	if a.check() != nil || l.Rows > 16 {
		return false
	}
	_, ok := g.attnTCRopeDefault(a.HeadDim, l.Rows, l.N, l.N*a.KVHeads*max(1, l.Splits))
	return ok
}

// hasRope reports whether attention_tc.cu has c's _rope kernel.
func (c attnTC) hasRope(headDim int) bool {
	for _, k := range attnTCRopeKernels[headDim] {
		if k == c {
			return true
		}
	}
	return false
}

// attnTCDefault is the tensor-core configuration for a launch of rows query
// rows per block and blocks blocks, or false where there is none (other
// head dimensions) or XRUN_CUDA_ATTN_TC=0. The GPU's XRUN_CUDA_ATTN_TC
// (CUDAAttnTC): "0" puts every attention launch on the CUDA-core kernel
// (an ablation); a configuration's name (attnTC.String, e.g.
// tc-m1-k4-t16-s3) puts the launches it can serve on it (to time
// configurations in a whole run); "auto" is the default choice.
func (g *GPU) attnTCDefault(headDim, rows, blocks int) (attnTC, bool) {
	if g.sw.CUDAAttnTC == "0" {
		return attnTC{}, false
	}
	for _, c := range attnTCKernels[headDim] {
		if c.String() == g.sw.CUDAAttnTC && c.fits(rows) {
			return c, true
		}
	}
	d, ok := attnTCDefaults[headDim]
	switch {
	case !ok:
		return attnTC{}, false
	case rows > AttnRowsLarge && g.AttnWG() && headDim == 128:
		return attnWG[1], true
	case rows > 16 && g.AttnWG() && headDim == 128:
		return attnWG[0], true
	case rows > AttnRowsLarge:
		xl, ok := attnTCXL[headDim]
		return xl, ok
	case rows > 16:
		return d[2], true
	case blocks <= 2*g.Info.SMs:
		return d[0], true
	}
	return d[1], true
}

// fits reports whether c serves launches of rows query rows per block:
// decode configurations take 8 and 16, prefill ones 64 and, with eight row
// warps, 128.
func (c attnTC) fits(rows int) bool { return (rows > 16) == (c.rowWarps > 1) && rows <= 16*c.rowWarps }

func (c attnTC) kernel(dt DType, headDim int) string {
	if c.ws() {
		return fmt.Sprintf("attention_ws_%s_d%d_m%d", dt.suffix(), headDim, c.rowWarps)
	}
	if c.wg {
		return fmt.Sprintf("attention_wg_%s_d%d_m%d", dt.suffix(), headDim, c.rowWarps)
	}
	return fmt.Sprintf("attention_tc_%s_d%d_m%d_k%d_t%d_s%d", dt.suffix(), headDim, c.rowWarps, c.keyWarps, c.keyTile, c.stages)
}

func (c attnTC) threads() int {
	if c.ws() {
		return 32*c.rowWarps + 128 // and the producer warpgroup
	}
	return 32 * c.rowWarps * c.keyWarps
}

// smem mirrors the kernel: keyWarps groups of stages x (K, V) tiles of
// keyTile rows of headDim + 8 16-bit values.
func (c attnTC) smem(headDim int) int {
	if c.ws() {
		return c.smemWS(headDim, false)
	}
	if c.wg {
		return c.smemWG(headDim)
	}
	return c.keyWarps * c.stages * 2 * c.keyTile * (headDim + 8) * 2
}

// smemF8 mirrors the F8 kernels: per key group a decoded K and V tile
// (keyTile rows of headDim + 8 16-bit values each), then stages x (K, V)
// E4M3 tiles of keyTile rows of headDim bytes; the _f8r kernels (regs)
// have no decoded tiles and rows of headDim + 16 bytes.
func (c attnTC) smemF8(headDim int, regs bool) int {
	if c.ws() {
		return c.smemWS(headDim, true)
	}
	if c.wg {
		return c.smemWG(headDim)
	}
	if regs {
		return c.keyWarps * c.stages * 2 * c.keyTile * (headDim + 16)
	}
	return c.keyWarps * (2*c.keyTile*(headDim+8)*2 + c.stages*2*c.keyTile*headDim)
}

// smemWG mirrors attention_wg.cu: 1,024 bytes to align, Q (16 rows a row
// warp of headDim 16-bit values), then 64 KB: two stages of a K and a V
// tile of 16-bit values, or of codes and a decoded pair.
func (c attnTC) smemWG(headDim int) int { return 1024 + 16*c.rowWarps*headDim*2 + 65536 }

// smemWS mirrors attention_ws.cu: 1,024 bytes to align, Q, the stages of
// a 16-bit K and V tile, under fp8 two stages of codes, a full and an
// empty mbarrier a stage, and under fp8 a float scale a query row.
func (c attnTC) smemWS(headDim int, fp8 bool) int {
	n := 1024 + 16*c.rowWarps*headDim*2 + c.stages*2*c.keyTile*headDim*2 + 16*c.stages
	if fp8 {
		n += 2*2*c.keyTile*headDim + 16*c.rowWarps*4
	}
	return n
}

// smemWGE4M3 mirrors attention_wg.cu's E8 kernels (_f8e): 1,024 bytes to
// align, Q's 16-bit rows (V^T's 128 rows of 128 bytes once Q is
// quantized), Q's codes, two stages of a K and a V tile of codes, and a
// float scale per query row.
func (c attnTC) smemWGE4M3(headDim int) int {
	rows := 16 * c.rowWarps
	return 1024 + rows*headDim*2 + rows*headDim + 2*2*c.keyTile*headDim + rows*4
}

// f8Regs reports whether c's launches over an FP8 cache convert the codes
// in registers (attention_tc.cuh's REGS: decode configurations, one row
// warp, with XRUN_CUDA_ATTN_F8_REGS).
func (g *GPU) f8Regs(c attnTC) bool { return c.rowWarps == 1 && g.sw.CUDAAttnF8Regs }

// attnF8SwapKernels are the decode configurations attention_tc_f8.cu also
// instantiates with the products' roles swapped (the _f8t kernels): the
// defaults without RoPE folded in.
var attnF8SwapKernels = map[int][]attnTC{
	64:  {{1, 8, 16, 2, false}, {1, 4, 16, 3, false}},
	128: {{1, 4, 16, 2, false}},
}

// f8Swap reports whether decode launch l over an FP8 cache runs c's _f8t
// kernel (XRUN_CUDA_ATTN_F8_SWAP): c has one, converts in registers, and
// the launch has at most 8 query rows a block (mma's n) and no RoPE to
// fold in; under "auto" also the cache holds at most attnF8SwapMaxKeys
// positions a sequence (maxKeys), where it measured faster.
//
// Why: a decode block's warp holds 16 query rows of m16n8k16's m, of which
// an item fills its KV head's query heads (4 for Llama-3.1-8B, 8 for
// TinyLlama): three quarters of the products, of the exponentials and of
// the 64 output accumulators a thread were padding. With K as the A
// operand and the queries as n, and O^T = V^T P^T, half the mma remain,
// and 32 accumulators.
func (g *GPU) f8Swap(c attnTC, headDim int, l AttnLaunch, maxKeys int) bool {
	switch g.sw.CUDAAttnF8Swap {
	case "0":
		return false
	case "1":
	default:
		if maxKeys > attnF8SwapMaxKeys {
			return false
		}
	}
	return g.f8Regs(c) && l.Rows <= AttnRowsTiny && l.Rope.Ptr == 0 && slices.Contains(attnF8SwapKernels[headDim], c)
}

// attnF8SwapMaxKeys is the most positions a sequence's cache may hold
// (fixed slots' capacity, or a block table's row of blocks) for
// XRUN_CUDA_ATTN_F8_SWAP's auto to take the _f8t kernels. The cache's
// size, not the launch's contexts, decides, so that a captured graph's
// choice holds for every replay. On an H100 at Llama-3.1-8B's heads
// (BenchmarkAttention, us a launch) _f8t was 4 % faster than _f8r over
// 129-256 keys (2,048 sequences: 303.5 against 317-319), level over
// 129-2,176 (444: 392.6-393.5 against 392.4-393.0) and 1 % slower over
// 129-4,224 (228: 378.5-379.6 against 374.9-375.8); end to end,
// TensorRT-LLM's 128/128 row of 6,000 requests gave 29,448 and 29,396
// output tok/s with it against 28,878 and 28,943 without (alternating).
const attnF8SwapMaxKeys = 1024

// attnSwapKernels are the decode configurations attention_tc.cu also
// instantiates with the products' roles swapped over a 16-bit cache (the
// _sw kernels), without RoPE folded in and with it (attnSwapRopeKernels):
// the defaults, fixed slots and paged.
var (
	attnSwapKernels = map[int][]attnTC{
		64:  {{1, 8, 16, 2, false}, {1, 4, 16, 3, false}},
		128: {{1, 4, 16, 2, false}},
	}
	attnSwapRopeKernels = map[int][]attnTC{
		64:  {{1, 8, 16, 3, false}, {1, 4, 16, 3, false}},
		128: {{1, 4, 16, 2, false}},
	}
)

// swap16 reports whether decode launch l over a 16-bit cache runs c's _sw
// kernel (XRUN_CUDA_ATTN_SWAP): c has one (with RoPE folded in where l
// folds it) and the launch has at most 8 query rows a block. As _f8t does
// over an FP8 cache (f8Swap): TinyLlama's 8 query heads a KV head fill
// mma's n = 8 where they were half of m's 16 rows, and Llama-3.1-8B's 4
// half of n's 8 where they were a quarter of 16.
func (g *GPU) swap16(c attnTC, headDim int, l AttnLaunch) bool {
	list := attnSwapKernels[headDim]
	if l.Rope.Ptr != 0 {
		list = attnSwapRopeKernels[headDim]
	}
	return g.sw.CUDAAttnSwap && l.Rows <= AttnRowsTiny && slices.Contains(list, c)
}

// AttnWG reports whether prefill attention at head dimension 128 runs on
// the warpgroup MMA (attention_wg.cu): on Hopper, unless
// XRUN_CUDA_ATTN_WGMMA=0.
func (g *GPU) AttnWG() bool { return g.sw.CUDAAttnWG && g.Info.Major == 9 }

// runsOn reports whether c's kernel serves a launch of splits ways on a
// GPU of d: the warpgroup-MMA configurations need Hopper and one split.
func (c attnTC) runsOn(d DeviceInfo, splits int) bool { return !c.wg || d.Major == 9 && splits <= 1 }

// f8MMA is the form of c's launches over an FP8 cache whose products run
// on the E4M3 tensor cores (XRUN_CUDA_ATTN_F8_MMA, for the _f8r
// configurations of head dimension 128 over a contiguous cache; a paged
// cache keeps _f8r): "q" (Q K^T: the _f8q kernels), "p" (and P V: _f8p),
// or "" for none; an error where that is asked of a GPU without them
// (before sm_89) or of an NVRTC that cannot emit them (before 12.4).
// Hopper accepts the instruction but has no E4M3 form of mma.sync (only
// wgmma's): the compiler converts the operands to fp16 there, so on sm_90
// these forms only add work (measured slower on an H100); they are for
// Ada and Blackwell.
func (g *GPU) f8MMA(c attnTC, headDim int, paged bool) (string, error) {
	var form string
	switch g.sw.CUDAAttnF8MMA {
	case "qk":
		form = "q"
	case "qkpv":
		form = "p"
	}
	if form == "" || !g.f8Regs(c) || headDim != 128 || paged {
		return "", nil
	}
	if d := g.Info; d.Major < 8 || d.Major == 8 && d.Minor < 9 {
		return "", fmt.Errorf("cuda: XRUN_CUDA_ATTN_F8_MMA=%s needs the E4M3 tensor cores of sm_89 or later, not %s", g.sw.CUDAAttnF8MMA, d.Arch())
	}
	if g.nvrtc != 0 && g.nvrtc < 1204 {
		return "", fmt.Errorf("cuda: XRUN_CUDA_ATTN_F8_MMA=%s needs NVRTC 12.4 or later (mma.sync on E4M3 operands), not %d.%d", g.sw.CUDAAttnF8MMA, g.nvrtc/100, g.nvrtc%100)
	}
	return form, nil
}

func (c attnTC) String() string {
	if c.rowWarps == 0 {
		return "cuda-core"
	}
	if c.ws() {
		return fmt.Sprintf("ws-m%d-k%d-t%d-s%d", c.rowWarps, c.keyWarps, c.keyTile, c.stages)
	}
	if c.wg {
		return fmt.Sprintf("wg-m%d-k%d-t%d-s%d", c.rowWarps, c.keyWarps, c.keyTile, c.stages)
	}
	return fmt.Sprintf("tc-m%d-k%d-t%d-s%d", c.rowWarps, c.keyWarps, c.keyTile, c.stages)
}

// Attention queues causal attention of the launch's work items over the
// cache k, v (laid out as KVWrite writes them): each token of an item
// attends to positions 0..its own. out is [tokens][Heads*HeadDim]. Head
// dimensions 64 and 128 run on the tensor cores (attention_tc.cu), the
// others on the CUDA cores (attention.cu). With l.Rope the launch first
// does RopeKV's work for its own tokens (see AttnLaunch.Rope; an error
// where AttnFoldsRope is false).
func (g *GPU) Attention(s *Stream, dt DType, out, qkv, k, v Buffer, capacity int, a AttnShape, l AttnLaunch) error {
	blocks := l.N * a.KVHeads * max(1, l.Splits)
	if l.Rope.Ptr != 0 {
		tc, ok := g.attnTCRopeDefault(a.HeadDim, l.Rows, l.N, blocks)
		if !ok {
			return fmt.Errorf("cuda: attention of %d rows per block, head dimension %d: no kernel folds RoPE in (AttnFoldsRope)", l.Rows, a.HeadDim)
		}
		if l.Pages.On() || l.FP8.On {
			tc = g.pagedTC(tc, a.HeadDim, l.Rows, blocks, true)
		}
		return g.attention(s, dt, out, qkv, k, v, capacity, a, l, tc)
	}
	tc, _ := g.attnTCDefault(a.HeadDim, l.Rows, blocks)
	if tc == attnWG[1] && g.attnWSPays(l) {
		tc = attnWS
	}
	if l.Pages.On() || l.FP8.On {
		// The paged and the FP8 kernels are the same configurations.
		tc = g.pagedTC(tc, a.HeadDim, l.Rows, blocks, false)
	}
	return g.attention(s, dt, out, qkv, k, v, capacity, a, l, tc)
}

// attention is Attention on the kernel tc names.
func (g *GPU) attention(s *Stream, dt DType, out, qkv, k, v Buffer, capacity int, a AttnShape, l AttnLaunch, tc attnTC) error {
	if err := a.check(); err != nil || l.N == 0 {
		return err
	}
	switch {
	case l.Rows != AttnRowsTiny && l.Rows != AttnRowsSmall && l.Rows != AttnRowsLarge && l.Rows != AttnRowsXL,
		l.Rows == AttnRowsTiny && a.HeadDim < 32:
		return fmt.Errorf("cuda: attention rows %d for head dimension %d", l.Rows, a.HeadDim)
	case l.Items.Bytes < l.N*16:
		return fmt.Errorf("cuda: attention items buffer too small for %d items", l.N)
	case tc.rowWarps > 0 && l.Rows > 16*tc.rowWarps:
		return fmt.Errorf("cuda: attention rows %d for %s (at most %d)", l.Rows, tc, 16*tc.rowWarps)
	case l.Rope.Ptr != 0 && !tc.hasRope(a.HeadDim):
		return fmt.Errorf("cuda: attention %s, head dimension %d, has no kernel with RoPE folded in", tc, a.HeadDim)
	case l.Rope.Ptr != 0 && l.Rope.Bytes < a.HeadDim*4:
		return fmt.Errorf("cuda: attention RoPE table of %d bytes", l.Rope.Bytes)
	case l.FP8.On && tc.rowWarps == 0:
		return fmt.Errorf("cuda: attention over an FP8 KV cache runs on the tensor cores only (head dimension 64 or 128, XRUN_CUDA_ATTN_TC not 0), not head dimension %d on %s", a.HeadDim, tc)
	case !tc.runsOn(g.Info, l.Splits):
		return fmt.Errorf("cuda: attention %s runs on Hopper (sm_90) unsplit, not on %s split %d ways", tc, g.Info.Arch(), l.Splits)
	case tc.wg && l.Rope.Ptr != 0:
		return fmt.Errorf("cuda: attention %s has no kernel with RoPE folded in", tc)
	case l.FP8.On && !slices.Contains(attnTCPagedKernels[a.HeadDim], tc) && !slices.Contains(attnTCRopePagedKernels[a.HeadDim], tc):
		return fmt.Errorf("cuda: attention %s, head dimension %d, has no kernel over an FP8 cache (attention_tc_f8.cu: the paged configurations)", tc, a.HeadDim)
	}
	if err := l.FP8.check(); err != nil {
		return err
	}
	paged := l.Pages.On()
	maxKeys := l.Pages.seqKeys(capacity)
	if paged {
		if err := l.Pages.check(); err != nil {
			return err
		}
		list := attnTCPagedKernels[a.HeadDim]
		if l.Rope.Ptr != 0 {
			list = attnTCRopePagedKernels[a.HeadDim]
		}
		if tc.rowWarps > 0 && !slices.Contains(list, tc) {
			return fmt.Errorf("cuda: attention %s, head dimension %d, has no kernel over a paged cache", tc, a.HeadDim)
		}
		capacity = l.Pages.BlockSize // the kernels' cap is the block size
	}
	splits := max(1, l.Splits)
	half := 0
	if splits > 1 {
		half = AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim) / (a.HeadDim + 2) * a.HeadDim
		if l.Work.Bytes < AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim) {
			return fmt.Errorf("cuda: split attention needs %d bytes of workspace, has %d", AttnWorkBytes(l.N*a.KVHeads*splits, l.Rows, a.HeadDim), l.Work.Bytes)
		}
	}
	family, name := "attention", fmt.Sprintf("attention_%s_d%d_r%d", dt.suffix(), a.HeadDim, l.Rows)
	if paged {
		name = fmt.Sprintf("attention_paged_%s_d%d_r%d", dt.suffix(), a.HeadDim, l.Rows)
	}
	smem, threads := attnSmem(a.HeadDim, l.Rows), attnThreads
	if tc.rowWarps > 0 {
		family, name = "attention_tc", tc.kernel(dt, a.HeadDim)
		smem, threads = tc.smem(a.HeadDim), tc.threads()
		if l.Rope.Ptr != 0 {
			name += "_rope"
		}
		if paged {
			name += "_paged"
		}
		switch {
		case tc.ws():
			family, smem = "attention_ws", tc.smemWS(a.HeadDim, l.FP8.On)
			if l.FP8.On && g.sw.CUDAAttnWGE4M3 {
				return fmt.Errorf("cuda: attention %s has no form with E4M3 products (XRUN_CUDA_ATTN_WG_E4M3: wg-m8-k1-t64-s2)", tc)
			}
			if l.FP8.On {
				name += "_f8"
			}
		case tc.wg:
			family = "attention_wg"
			switch {
			case l.FP8.On && g.sw.CUDAAttnWGE4M3:
				name, smem = name+"_f8e", tc.smemWGE4M3(a.HeadDim)
			case l.FP8.On:
				// Sized as the FP8 stages: equal to the 16-bit ones at two
				// stages, not in general.
				name, smem = name+"_f8", tc.smemF8(a.HeadDim, false)
			}
		case !l.FP8.On && g.swap16(tc, a.HeadDim, l):
			name += "_sw"
		case l.FP8.On:
			family, name, smem = "attention_tc_f8", name+"_f8", tc.smemF8(a.HeadDim, false)
			form, err := g.f8MMA(tc, a.HeadDim, paged)
			switch {
			case err != nil:
				return err
			case form != "":
				name, smem = name+form, tc.smemF8(a.HeadDim, true)
			case g.f8Swap(tc, a.HeadDim, l, maxKeys):
				name, smem = name+"t", tc.smemF8(a.HeadDim, true)
			case g.f8Regs(tc):
				name, smem = name+"r", tc.smemF8(a.HeadDim, true)
			}
		}
	}
	f, err := g.function(family, name)
	if err != nil {
		return err
	}
	if err := f.allowShared(smem); err != nil {
		return err
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
	if tc.rowWarps > 0 {
		// One decode kernel serves launches of 8 and 16 rows: the split
		// layout's row stride is the launch's. Short items need the
		// merge by the last block (with attn_combine after the launch,
		// their unwritten partials would be merged over their output).
		short := l.ShortKeys
		if short == 0 {
			short = g.sw.CUDAAttnShort
		}
		if splits == 1 || counters == 0 || short < 0 {
			short = 0
		}
		args.I32(l.Rows).Ptr(l.Rope).I32(short)
	}
	if paged {
		args.Ptr(l.Pages.Tables).I32(l.Pages.Stride)
	}
	if l.FP8.On {
		args.F32(l.FP8.K).F32(l.FP8.V)
	}
	if err := s.Launch(f, Dim3{X: l.N, Y: a.KVHeads, Z: splits}, Dim3{X: threads}, smem, args); err != nil || splits == 1 || counters != 0 {
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

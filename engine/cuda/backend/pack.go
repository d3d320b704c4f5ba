package backend

// This file has no build constraint: packBatch makes no CUDA call, so its
// test runs on every machine.

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// packShape is what packBatch needs of the backend: the KV cache's and the
// attention kernels' sizes, whether decode batches are padded for graphs,
// and the picks fed tokens may read.
type packShape struct {
	// kv: there is a KV cache. Without one (ops checked on their own)
	// the batch has no attention items and no graphs, and the sizes below
	// are unused.
	kv bool
	// slots and capacity are the cache's; slot number slots is the
	// scratch slot padding rows write to.
	slots, capacity int
	groups          int // query heads per KV head
	headDim         int
	// largeTokens is the tokens of one prefill item (cuda.AttnItemTokens
	// at the iteration's cuda.AttnPrefillRows); smallRows and tinyRows are
	// cuda.AttnRowsSmall and cuda.AttnRowsTiny.
	largeTokens         int
	smallRows, tinyRows int
	// graphs: a decode batch is padded to its graph bucket (cuda.GraphBucket),
	// but to no more rows than minRows, the smallest activation; 0: none
	// allocated yet, no padding.
	graphs  bool
	minRows int
	// picks is how many ids the last ArgmaxStart picked, or pickErr why
	// there is none to read (model.PickTickets.Last).
	picks   int
	pickErr error
}

// packedBatch is a batch's layout as SetBatch uploads it: one run of int32
// with, in order, the token ids, positions and KV slots of rows rows, the
// nLogit logit rows, zeros up to a multiple of 4 ints, then the decode
// ("small") attention items and the prefill ("large") ones, four ints each
// (first row, tokens, slot, past), 16-byte aligned because the kernels
// read them as int4.
type packedBatch struct {
	ints []int32
	// rows is the token rows, padding rows included: the graph bucket of
	// a padded decode batch (pad), else the batch's tokens.
	rows   int
	nLogit int
	pad    bool
	// offS and offL are where the small and large items start in ints;
	// nS and nL count them.
	offS, nS, offL, nL int
	// rowsS is the small items' kernel size: tinyRows where every item
	// fits it (and the head dimension is at least 32), else smallRows.
	rowsS int
}

// packBatch checks bt and packs it into dst's memory (reused across
// iterations). Padding rows of a decode batch have token 0, position 0 and
// the scratch slot, are sampled (logit rows continue 0, 1, ...) and are
// one small item each. Fed tokens (model.Batch.Fed) are stored as -1 -
// pick: the embedding reads pick j of the last ArgmaxStart on the device.
func packBatch(dst []int32, bt *model.Batch, sh packShape) (packedBatch, error) {
	T, S := len(bt.Tokens), len(bt.LogitRows)
	if len(bt.Positions) != T {
		return packedBatch{}, fmt.Errorf("batch: %d tokens, %d positions", T, len(bt.Positions))
	}
	covered := 0
	decode := T > 0 && len(bt.Seqs) == T && S == T
	for _, s := range bt.Seqs {
		if s.Start != int32(covered) || s.Len <= 0 {
			return packedBatch{}, fmt.Errorf("batch: sequences must cover the tokens in order (sequence at %d of %d tokens, expected %d)", s.Start, s.Len, covered)
		}
		if s.Slot < 0 || s.Past < 0 {
			return packedBatch{}, fmt.Errorf("batch: slot %d, positions %d..%d: negative", s.Slot, s.Past, s.Past+s.Len-1)
		}
		if sh.kv && (int(s.Slot) >= sh.slots || int(s.Past+s.Len) > sh.capacity) {
			return packedBatch{}, fmt.Errorf("batch: slot %d, positions %d..%d outside the KV cache (%d slots x %d)", s.Slot, s.Past, s.Past+s.Len-1, sh.slots, sh.capacity)
		}
		covered += int(s.Len)
		decode = decode && s.Len == 1
	}
	if covered != T {
		return packedBatch{}, fmt.Errorf("batch: sequences cover %d of %d tokens", covered, T)
	}
	for i, r := range bt.LogitRows {
		if r < 0 || int(r) >= T || decode && int(r) != i {
			decode = false
			if r < 0 || int(r) >= T {
				return packedBatch{}, fmt.Errorf("batch: logit row %d of %d tokens", r, T)
			}
		}
	}
	rows := T
	pad := decode && sh.graphs && sh.minRows > 0 && sh.kv
	if pad {
		rows = min(cuda.GraphBucket(T), sh.minRows)
		if rows < T {
			// An activation smaller than the batch (it fails in the
			// ops): no bucket, no padding.
			rows, pad = T, false
		}
	}
	G, perL, scratch := 0, 0, int32(0)
	if sh.kv {
		G = sh.groups
		perL = sh.largeTokens
		scratch = int32(sh.slots)
	}

	// Host layout: tokens, positions, slots [rows], logit rows [rows or S],
	// small items, large items.
	nLogit := S
	if pad {
		nLogit = rows
	}
	var small, large []int32
	smallRows := 0
	lay := dst[:0]
	lay = append(lay, bt.Tokens...)
	for i, id := range bt.Tokens {
		if id < 0 {
			return packedBatch{}, fmt.Errorf("batch: token id %d at row %d", id, i)
		}
	}
	if len(bt.Fed) > 0 {
		if sh.pickErr != nil {
			return packedBatch{}, fmt.Errorf("batch: %d fed tokens: %w", len(bt.Fed), sh.pickErr)
		}
		for _, f := range bt.Fed {
			if f.Row < 0 || int(f.Row) >= T || f.Pick < 0 || int(f.Pick) >= sh.picks {
				return packedBatch{}, fmt.Errorf("batch: fed token at row %d from pick %d (%d tokens, %d picks)", f.Row, f.Pick, T, sh.picks)
			}
			lay[f.Row] = -1 - f.Pick
		}
	}
	for range rows - T {
		lay = append(lay, 0)
	}
	lay = append(lay, bt.Positions...)
	for range rows - T {
		lay = append(lay, 0)
	}
	for _, s := range bt.Seqs {
		for range s.Len {
			lay = append(lay, s.Slot)
		}
	}
	for range rows - T {
		lay = append(lay, scratch)
	}
	lay = append(lay, bt.LogitRows...)
	for i := S; i < nLogit; i++ {
		lay = append(lay, int32(i))
	}
	for _, s := range bt.Seqs {
		if !sh.kv {
			break
		}
		if int(s.Len)*G <= sh.smallRows {
			small = append(small, s.Start, s.Len, s.Slot, s.Past)
			smallRows = max(smallRows, int(s.Len)*G)
			continue
		}
		// A sequence's items last first: the blocks of its later tokens
		// attend to the most keys, and started first they do not trail
		// the launch (the GPU starts blocks in order). On an H100, 4
		// prompts of 2,048 over an FP8 cache (BenchmarkAttention's -lpt
		// scenario): 396 against 423 us a layer. They stay adjacent:
		// attn_sinks walks them for the prompt's first new position
		// (TestPackBatchItemsChain).
		for t0 := (s.Len - 1) / int32(perL) * int32(perL); t0 >= 0; t0 -= int32(perL) {
			large = append(large, s.Start+t0, min(int32(perL), s.Len-t0), s.Slot, s.Past+t0)
		}
	}
	for i := T; i < rows; i++ {
		small = append(small, int32(i), 1, scratch, 0)
		smallRows = max(smallRows, G)
	}
	rowsS := sh.smallRows
	if sh.kv && smallRows <= sh.tinyRows && sh.headDim >= 32 {
		rowsS = sh.tinyRows
	}
	// The kernels read items as int4: 16-byte aligned.
	for len(lay)%4 != 0 {
		lay = append(lay, 0)
	}
	offS := len(lay)
	lay = append(lay, small...)
	offL := len(lay)
	lay = append(lay, large...)
	return packedBatch{ints: lay, rows: rows, nLogit: nLogit, pad: pad,
		offS: offS, nS: len(small) / 4, offL: offL, nL: len(large) / 4, rowsS: rowsS}, nil
}

// layoutInts is the batch layout's size for rows tokens: tokens,
// positions and slots per token, logit rows, up to two items of four ints
// per token (and their alignment), and the pick slot SetBatch appends.
func layoutInts(rows int) int { return 3*rows + rows + 8*rows + 64 + 1 }

// decodeKeys is the mean keys the batch's small (decode) items attend to
// per sequence: those of the sequences prefillKeys leaves out; 0 without
// any.
func decodeKeys(bt *model.Batch, groups, smallRows int) int {
	keys, n := 0, 0
	for _, s := range bt.Seqs {
		if int(s.Len)*groups <= smallRows {
			keys += int(s.Past + s.Len)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return keys / n
}

// prefillKeys is the mean keys the batch's prefill items attend to per
// sequence: the cached tokens and the new ones of each sequence that
// packBatch lays out as large items (more than smallRows query rows at
// groups query heads a token); 0 without any.
func prefillKeys(bt *model.Batch, groups, smallRows int) int {
	keys, n := 0, 0
	for _, s := range bt.Seqs {
		if int(s.Len)*groups > smallRows {
			keys += int(s.Past + s.Len)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return keys / n
}

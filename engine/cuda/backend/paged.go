package backend

// This file has no build constraint: the paged KV cache's host side makes
// no CUDA call, so its tests run on every machine.
//
// A paged cache (model.KVConfig.BlockSize > 0) holds, per layer, K and V
// as [block][kv head][block size][head dim], with one block more than the
// pool: the scratch block, which padding rows (in the scratch slot) write
// to, as a contiguous cache's scratch slot. Its block tables are one row of
// stride = ceil(capacity / block size) blocks per slot, the scratch slot's
// row last (every entry the scratch block). SetBatch writes the rows of
// the batch's sequences into a host mirror and uploads, with the batch
// layout, the rows that changed since the last upload: a row changes when
// its slot takes a new request (the engine hands a request all its blocks
// at admission), so decode iterations upload none. A captured decode graph
// reads the tables at the same address at every replay.

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/model"
)

// tableShape is a paged cache's block tables: slots rows (and the scratch
// slot's) of stride blocks of blockSize positions, from a pool of blocks
// (the scratch block is number blocks).
type tableShape struct{ blockSize, stride, slots, blocks int }

// pagedStride is the blocks a table row holds for sequences of up to
// capacity positions.
func pagedStride(capacity, blockSize int) int { return (capacity + blockSize - 1) / blockSize }

// pagedBlocks is how many blocks of perBlock bytes a KV budget of budget
// bytes holds, one kept back as the scratch block (as MaxKVSlots keeps
// back the scratch slot).
func pagedBlocks(budget, perBlock int64) int {
	if perBlock <= 0 {
		return 0
	}
	return int(max(0, min(budget/perBlock-1, 1<<30)))
}

// initTables points every entry of tables ((slots + 1) x stride) at the
// scratch block.
func initTables(tables []int32, s tableShape) {
	for i := range tables {
		tables[i] = int32(s.blocks)
	}
}

// packTables writes each sequence's block table (model.Batch.Blocks) into
// its slot's row of tables, the entries past its blocks pointing at the
// scratch block (so that no entry a kernel may read leaves the cache), and
// returns the rows whose contents changed, lo..hi-1 (lo == hi: none). A
// sequence must have a block for every position up to Past + Len, each in
// the pool; blocks past a row's stride could only hold positions past the
// capacity, and are left out. Nothing is written unless every sequence
// passes.
func packTables(tables []int32, bt *model.Batch, s tableShape) (lo, hi int, err error) {
	if len(tables) < (s.slots+1)*s.stride {
		return 0, 0, fmt.Errorf("batch: block tables of %d entries for %d slots of %d", len(tables), s.slots+1, s.stride)
	}
	for _, q := range bt.Seqs {
		if q.Slot < 0 || int(q.Slot) >= s.slots {
			return 0, 0, fmt.Errorf("batch: slot %d outside the KV cache's %d", q.Slot, s.slots)
		}
		if q.Block < 0 || q.NBlocks < 0 || int(q.Block)+int(q.NBlocks) > len(bt.Blocks) {
			return 0, 0, fmt.Errorf("batch: slot %d's block table is entries %d..%d of %d", q.Slot, q.Block, q.Block+q.NBlocks, len(bt.Blocks))
		}
		if need := pagedStride(int(q.Past+q.Len), s.blockSize); int(q.NBlocks) < need {
			return 0, 0, fmt.Errorf("batch: slot %d has %d KV blocks of %d positions for length %d (needs %d)", q.Slot, q.NBlocks, s.blockSize, q.Past+q.Len, need)
		}
		for i, blk := range bt.SeqBlocks(q)[:min(int(q.NBlocks), s.stride)] {
			if blk < 0 || int(blk) >= s.blocks {
				return 0, 0, fmt.Errorf("batch: slot %d's block %d is %d, outside the pool of %d", q.Slot, i, blk, s.blocks)
			}
		}
	}
	var d dirtyRows
	for _, q := range bt.Seqs {
		blocks := bt.SeqBlocks(q)
		row := tables[int(q.Slot)*s.stride : int(q.Slot+1)*s.stride]
		changed := false
		for i := range row {
			want := int32(s.blocks)
			if i < len(blocks) {
				want = blocks[i]
			}
			if row[i] != want {
				row[i], changed = want, true
			}
		}
		if changed {
			d.add(int(q.Slot), int(q.Slot)+1)
		}
	}
	return d.lo, d.hi, nil
}

// dirtyRows is a run of table rows lo..hi-1 not uploaded yet (lo == hi:
// none): the rows packTables changed, kept until an upload succeeds.
type dirtyRows struct{ lo, hi int }

// add widens d to cover rows lo..hi-1 too.
func (d *dirtyRows) add(lo, hi int) {
	switch {
	case lo >= hi:
	case d.lo == d.hi:
		d.lo, d.hi = lo, hi
	default:
		d.lo, d.hi = min(d.lo, lo), max(d.hi, hi)
	}
}

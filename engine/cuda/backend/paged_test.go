package backend

import (
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// pagedBatch is a batch of sequences (slot, past, tokens) with their block
// tables.
func pagedBatch(seqs []seq, tables [][]int32) *model.Batch {
	b := &model.Batch{}
	for i, s := range seqs {
		b.Add(s.slot, s.past, s.toks, true)
		b.SetBlocks(tables[i])
	}
	return b
}

// TestPackTables: each sequence's blocks land in its slot's row, the rest
// of the row and the rows of other slots point at the scratch block (or
// keep what an earlier batch wrote), and the rows reported changed are
// those whose contents changed: none at a decode step that follows.
func TestPackTables(t *testing.T) {
	sh := tableShape{blockSize: 16, stride: 4, slots: 3, blocks: 10}
	tables := make([]int32, (sh.slots+1)*sh.stride)
	initTables(tables, sh)
	if want := slices.Repeat([]int32{10}, 16); !slices.Equal(tables, want) {
		t.Fatalf("initial tables %v, want every entry the scratch block", tables)
	}
	// A prefill chunk crossing a block edge (positions 10..20: blocks 0
	// and 1 of slot 1) and a decode token at position 47 (slot 0 holds
	// the 4 blocks of its whole length, the last one not reached yet).
	b := pagedBatch([]seq{{1, 10, seqRange(0, 11)}, {0, 47, []int32{5}}}, [][]int32{{7, 2}, {9, 0, 4, 8}})
	lo, hi, err := packTables(tables, b, sh)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{9, 0, 4, 8, 7, 2, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}
	if lo != 0 || hi != 2 || !slices.Equal(tables, want) {
		t.Errorf("changed rows %d..%d, tables %v; want 0..1, %v", lo, hi-1, tables, want)
	}
	// The next step decodes the same two sequences: nothing changes.
	b = pagedBatch([]seq{{1, 21, []int32{1}}, {0, 48, []int32{5}}}, [][]int32{{7, 2}, {9, 0, 4, 8}})
	if lo, hi, err = packTables(tables, b, sh); err != nil || lo != hi || !slices.Equal(tables, want) {
		t.Errorf("a decode step: changed rows %d..%d (err %v), tables %v", lo, hi-1, err, tables)
	}
	// Slot 2 takes a request: its row alone changes; slots 0 and 1 keep
	// theirs, the scratch row is untouched.
	b = pagedBatch([]seq{{2, 0, seqRange(0, 64)}, {0, 49, []int32{5}}}, [][]int32{{1, 3, 5, 6}, {9, 0, 4, 8}})
	if lo, hi, err = packTables(tables, b, sh); err != nil || lo != 2 || hi != 3 {
		t.Fatalf("changed rows %d..%d, err %v; want 2..2", lo, hi-1, err)
	}
	if got := tables[2*4 : 4*4]; !slices.Equal(got, []int32{1, 3, 5, 6, 10, 10, 10, 10}) {
		t.Errorf("slot 2's row and the scratch row: %v", got)
	}
	// Slot 0 takes a request of more blocks than a row holds: the ones
	// past the capacity are left out.
	b = pagedBatch([]seq{{0, 0, seqRange(0, 3)}}, [][]int32{{1, 2, 3, 4, 5}})
	if lo, hi, err = packTables(tables, b, sh); err != nil || lo != 0 || hi != 1 || !slices.Equal(tables[:4], []int32{1, 2, 3, 4}) {
		t.Errorf("five blocks for a row of four: changed rows %d..%d, err %v, row %v", lo, hi-1, err, tables[:4])
	}
	// A batch with no sequence writes nothing.
	if lo, hi, err = packTables(tables, &model.Batch{}, sh); err != nil || lo != hi {
		t.Errorf("empty batch: changed rows %d..%d, err %v", lo, hi-1, err)
	}
}

// TestDirtyRows: the rows not uploaded yet grow to cover every change
// until an upload clears them.
func TestDirtyRows(t *testing.T) {
	var d dirtyRows
	for _, c := range []struct{ lo, hi, wantLo, wantHi int }{
		{0, 0, 0, 0}, // nothing changed
		{3, 4, 3, 4},
		{5, 5, 3, 4},
		{1, 2, 1, 4},
		{6, 8, 1, 8},
	} {
		d.add(c.lo, c.hi)
		if d.lo != c.wantLo || d.hi != c.wantHi {
			t.Errorf("after adding %d..%d: %d..%d, want %d..%d", c.lo, c.hi, d.lo, d.hi, c.wantLo, c.wantHi)
		}
	}
}

// TestPackTablesRejects: a table too short for the sequence's length, a
// block outside the pool, a slot outside the cache, a table outside the
// batch's blocks, or tables too small for the shape are errors naming
// what is wrong.
func TestPackTablesRejects(t *testing.T) {
	sh := tableShape{blockSize: 16, stride: 4, slots: 3, blocks: 10}
	outside := pagedBatch([]seq{{0, 0, seqRange(0, 3)}}, [][]int32{{1}})
	outside.Seqs[0].NBlocks = 2
	for _, c := range []struct {
		name   string
		bt     *model.Batch
		tables int
		want   string
	}{
		{"one block for 17 positions", pagedBatch([]seq{{0, 16, []int32{1}}}, [][]int32{{3}}), 16, "1 KV blocks of 16 positions for length 17 (needs 2)"},
		{"no blocks", pagedBatch([]seq{{0, 0, []int32{1}}}, [][]int32{nil}), 16, "0 KV blocks"},
		{"a block past the pool", pagedBatch([]seq{{1, 0, []int32{1}}}, [][]int32{{10}}), 16, "block 0 is 10, outside the pool of 10"},
		{"a negative block", pagedBatch([]seq{{1, 16, []int32{1}}}, [][]int32{{0, -1}}), 16, "block 1 is -1"},
		{"the scratch slot", pagedBatch([]seq{{3, 0, []int32{1}}}, [][]int32{{0}}), 16, "slot 3 outside the KV cache's 3"},
		{"a table past the batch's blocks", outside, 16, "entries 0..2 of 1"},
		{"tables too small", pagedBatch([]seq{{0, 0, []int32{1}}}, [][]int32{{0}}), 15, "block tables of 15 entries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tables := make([]int32, c.tables)
			if _, _, err := packTables(tables, c.bt, sh); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
			if slices.ContainsFunc(tables, func(v int32) bool { return v != 0 }) {
				t.Errorf("tables written before the error: %v", tables)
			}
		})
	}
}

// TestPagedSizing: the blocks a budget holds (one kept back as the scratch
// block) and the blocks a table row holds.
func TestPagedSizing(t *testing.T) {
	for _, c := range []struct {
		budget, per int64
		want        int
	}{
		{10 << 20, 1 << 20, 9},
		{10<<20 + 5, 1 << 20, 9},
		{1 << 20, 1 << 20, 0},
		{0, 1 << 20, 0},
		{5 << 20, 0, 0},
		{1 << 62, 1, 1 << 30},
	} {
		if got := pagedBlocks(c.budget, c.per); got != c.want {
			t.Errorf("pagedBlocks(%d, %d) = %d, want %d", c.budget, c.per, got, c.want)
		}
	}
	for _, c := range []struct{ capacity, bs, want int }{{128, 32, 4}, {129, 32, 5}, {1, 32, 1}, {32, 32, 1}, {2048, 16, 128}} {
		if got := pagedStride(c.capacity, c.bs); got != c.want {
			t.Errorf("pagedStride(%d, %d) = %d, want %d", c.capacity, c.bs, got, c.want)
		}
	}
}

//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// batchLayout locates this iteration's arrays inside lay.
type batchLayout struct {
	tokens, pos, slot, logit, itemsS, itemsL cuda.Buffer
	nTok, nLogit, nS, nL                     int
	rowsS, splitsS                           int  // the decode items' kernel size and key split
	rowsL                                    int  // the prefill items' kernel size (cuda.AttnPrefillRows)
	keysL                                    int  // their mean keys a prompt chunk (prefillKeys)
	pad                                      bool // rows padded to a graph bucket
	realLogit                                int  // logit rows the caller asked for
	// pickSlot is the host slot (Backend.pickHost) the iteration's picks
	// go to, at pickAt in the layout, where a decode graph's argmax
	// reads it: the slot of the ticket an ArgmaxStart would take, or
	// pickSync while two are outstanding.
	pickSlot int
	pickAt   cuda.Buffer
}

// ensureLayout sizes the layout, argmax and staging buffers for rows.
func (b *Backend) ensureLayout(g *cuda.GPU, rows int) error {
	n := layoutInts(rows) * 4
	if b.lay.Bytes >= n {
		return nil
	}
	if n := b.pipe.Outstanding(); n > 0 {
		// The picks in flight live in b.ids and the pinned pick buffers.
		return fmt.Errorf("batch layout grows to %d rows while %d picks are outstanding", rows, n)
	}
	if err := g.Stream.Sync(); err != nil {
		return err
	}
	b.dropGraphs()
	b.freeOwned(g, b.lay, b.ids)
	for i, h := range b.hosts {
		if h == b.layHost || h == b.picks {
			g.FreeHost(h)
			b.hosts[i] = cuda.HostBuffer{}
		}
	}
	var err error
	if b.lay, err = b.alloc(g, n); err != nil {
		return err
	}
	if b.ids, err = b.alloc(g, rows*4); err != nil {
		return err
	}
	if b.layHost, err = b.allocHost(g, n); err != nil {
		return err
	}
	if b.picks, err = b.allocHost(g, pickSlots*rows*4); err != nil {
		return err
	}
	b.pickStride = rows
	return nil
}

// rows is the row count an op runs on: the caller's, or the bucket's in a
// padded decode iteration.
func (b *Backend) rows(r int) int {
	if b.cur.pad {
		return b.cur.nTok
	}
	return r
}

// SetBatch validates the layout and packs it (packBatch: padded to a graph
// bucket for decode iterations) into pinned memory, and queues its one
// copy to the device; a decode iteration whose bucket has a graph skips its
// ops from here on and replays the graph at Argmax.
func (b *Backend) SetBatch(bt *model.Batch) error {
	b.release()
	sh := packShape{smallRows: cuda.AttnRowsSmall, tinyRows: cuda.AttnRowsTiny, graphs: b.graphsOn, minRows: b.minRows}
	_, sh.picks, sh.pickErr = b.pipe.Last()
	// Without a KV cache (ops checked on their own) the batch has no
	// attention items and no graphs.
	c := b.cache
	rowsL, keysL := cuda.AttnRowsLarge, 0
	if c != nil {
		// From the kernels' shape: an MLA cache's is one head (mla.go).
		sh.kv, sh.slots, sh.capacity, sh.headDim = true, c.c.Slots, c.c.Capacity, c.shape.HeadDim
		sh.groups = c.shape.Heads / c.shape.KVHeads
		sw := model.Switches{CUDAAttnXL: b.attnXL, CUDAAttnTC: b.attnTC}
		keysL = prefillKeys(bt, sh.groups, sh.smallRows)
		rowsL = cuda.AttnPrefillRows(sw, c.shape, keysL, c.c.FP8, c.paged != nil, b.attnWG)
		sh.largeTokens = cuda.AttnItemTokens(c.shape, rowsL)
	}
	pk, err := packBatch(b.tmp, bt, sh)
	if err != nil {
		return err
	}
	// A paged cache's block tables: the rows that changed, uploaded with
	// the layout (paged.go); until then they stay dirty.
	if c != nil && c.paged != nil {
		lo, hi, err := packTables(c.paged.tab, bt, c.paged.sh)
		if err != nil {
			return err
		}
		c.paged.dirty.add(lo, hi)
	}
	// The pick slot: the ticket an ArgmaxStart ending this iteration
	// takes (none is started before it), else the synchronous one.
	pickSlot := pickSync
	if t, err := b.pipe.Next(); err == nil {
		pickSlot = t % 2
	}
	lay, rows, S := append(pk.ints, int32(pickSlot)), pk.rows, len(bt.LogitRows)
	b.tmp = lay
	// The decode items' key split, which a graph holds: a bucket has a
	// graph for each split its iterations took. (An MLA cache's attention
	// splits its own way: mla.go.)
	splits := 1
	if b.splitOn && c != nil && !c.c.MLA() {
		elem := b.dt.Size()
		if c.c.FP8 {
			elem = 1
		}
		splits = cuda.AttnSplitsFor(b.sms, pk.nS, c.shape, decodeKeys(bt, sh.groups, sh.smallRows), elem)
	}
	var gs *graphState
	if pk.pad {
		key := graphKey{rows, splits}
		gs = b.graphs[key]
		if gs == nil {
			gs = &graphState{}
			b.graphs[key] = gs
		}
	}

	var setErr error
	err = b.dev.Do(func(g *cuda.GPU) error {
		if b.mode != eager { // an iteration never synchronised: finish it
			if err := b.flush(g); err != nil {
				setErr = err
			}
		}
		if err := b.l2.ensure(g, b.gemm == "disable"); err != nil {
			return err
		}
		if err := b.ensureLayout(g, max(rows, b.maxRows)); err != nil {
			return err
		}
		n := len(lay) * 4
		if n > b.lay.Bytes {
			return fmt.Errorf("batch layout of %d bytes, room for %d", n, b.lay.Bytes)
		}
		// The previous copy out of the staging buffer must be done.
		if err := b.layEvent.Sync(); err != nil {
			return err
		}
		copy(b.layHost.Bytes(), i32Bytes(lay))
		if err := g.Stream.UploadAsync(b.lay, b.layHost, n); err != nil {
			return err
		}
		if c != nil && c.paged != nil { // before the event: the next SetBatch waits for this copy too
			if err := c.paged.upload(g); err != nil {
				return err
			}
		}
		if err := b.layEvent.Record(g.Stream); err != nil {
			return err
		}
		at := func(off, cnt int) cuda.Buffer {
			if cnt == 0 {
				return cuda.Buffer{Ptr: b.lay.Ptr}
			}
			return b.lay.Slice(off*4, cnt*4)
		}
		b.cur = batchLayout{
			tokens: at(0, rows), pos: at(rows, rows), slot: at(2*rows, rows), logit: at(3*rows, pk.nLogit),
			itemsS: at(pk.offS, 4*pk.nS), itemsL: at(pk.offL, 4*pk.nL),
			nTok: rows, nLogit: pk.nLogit, nS: pk.nS, nL: pk.nL, pad: gs != nil, realLogit: S,
			rowsS: pk.rowsS, splitsS: splits, rowsL: rowsL, keysL: keysL,
			pickSlot: pickSlot, pickAt: at(len(lay)-1, 1),
		}
		b.ops, b.bucket, b.mode = 0, gs, eager
		switch {
		case gs == nil:
		case gs.graph != nil:
			// Start the GPU now: the host walks the (skipped) ops meanwhile.
			b.mode = replay
			if err := gs.graph.Launch(g.Stream); err != nil {
				return err
			}
			b.launched = true
		case gs.seen > 0:
			if err := g.Stream.BeginCapture(); err != nil {
				return err
			}
			b.mode = capture
		default:
			gs.seen++
		}
		return nil
	})
	if err == nil {
		err = setErr
	}
	return err
}

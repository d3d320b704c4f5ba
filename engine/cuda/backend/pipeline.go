//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// pipeState is the model.Pipeliner's: ticket t's picks are written to
// host slot t%2 (pickHost), and done[t%2] is recorded behind them. The
// next iteration, queued before anyone waits, reads the same picks from
// b.ids on the device (fed tokens, SetBatch and Embed); stream order puts
// that read before its own Argmax overwrites b.ids, and the write to the
// host before both.
type pipeState struct {
	model.PickTickets
	done [2]*cuda.Event
}

// The host slots of the picks: 0 and 1 for the two tickets that may be
// outstanding, pickSync for a synchronous Argmax.
const (
	pickSync  = 2
	pickSlots = 3
)

// pickHost is host slot i of the picks.
func (b *Backend) pickHost(i int) cuda.HostBuffer {
	return b.picks.Slice(i*b.pickStride*4, b.pickStride*4)
}

// pickSpec is an argmax a decode graph holds (graphState.picks): a replay
// ended by the same call skips queuing it.
type pickSpec struct {
	logits     cuda.Buffer
	rows, cols int
}

var _ model.Pipeliner = (*Backend)(nil)

// ArgmaxStart is Argmax without the wait: the iteration's graph is
// launched (or its capture finished), the picks are made and written
// towards the host, and an event is recorded behind them.
func (b *Backend) ArgmaxStart(logits model.Tensor, rows int) (int, error) {
	l := ft(logits)
	p := &b.pipe
	t, err := p.Next()
	if err != nil {
		return 0, err
	}
	b.release()
	err = b.dev.Do(func(g *cuda.GPU) error {
		if err := b.finishPicks(g, l, rows, t%2); err != nil {
			return err
		}
		return p.done[t%2].Record(g.Stream)
	})
	if err != nil {
		return 0, err
	}
	p.Started(rows)
	return t, nil
}

// ArgmaxWait waits for the event behind ticket's picks (not for the
// iteration queued after it) and decodes them.
func (b *Backend) ArgmaxWait(ticket int, dst []int32) error {
	p := &b.pipe
	slot, err := p.Wait(ticket, len(dst))
	if err != nil {
		return err
	}
	return b.dev.Do(func(g *cuda.GPU) error {
		if err := p.done[slot].Sync(); err != nil {
			return err
		}
		decodeIDs(dst, b.pickHost(slot))
		return nil
	})
}

// Argmax finishes the iteration (replaying or capturing its graph), picks
// each row's greedy token on the device and has them written to the host:
// the iteration's one synchronisation.
func (b *Backend) Argmax(dst []int32, logits model.Tensor, rows int) error {
	l := ft(logits)
	if rows > len(dst) {
		return fmt.Errorf("argmax: %d rows into %d ids", rows, len(dst))
	}
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if n := b.pickRows(rows); b.mode == eager && n > 0 && (n*4 > b.ids.Bytes || n > b.pickStride) {
			// Argmax without a batch layout this large (ops checked on
			// their own): a sync point, so the buffers may grow here.
			if err := b.flush(g); err != nil {
				return err
			}
			if err := b.ensureLayout(g, max(n, b.maxRows)); err != nil {
				return err
			}
		}
		slot := pickSync
		if b.mode != eager {
			// A graph's argmax writes the slot the layout names.
			slot = b.cur.pickSlot
		}
		if err := b.finishPicks(g, l, rows, slot); err != nil {
			return err
		}
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		decodeIDs(dst[:rows], b.pickHost(slot))
		return nil
	})
}

// finishPicks ends the iteration with its picks into host slot: queued
// inside the graph being captured (the graph then holds them, reading the
// slot from the layout at each replay), skipped where the replayed graph
// holds the same argmax and the layout names slot, else queued after the
// graph (or the eager ops). In the graph, the argmax follows the LM head
// under programmatic dependent launch instead of being launched after the
// graph's end: at batch 1 on an H100 it ends 4.7 us after the LM head
// rather than 6.5. A graph holding picks that another call ends (a Read)
// has still picked: b.ids holds the latest picks whichever call made
// them, as after a synchronous Argmax.
func (b *Backend) finishPicks(g *cuda.GPU, l *tensor, rows, slot int) error {
	spec := pickSpec{logits: l.buf, rows: b.pickRows(rows), cols: l.cols()}
	switch {
	case b.mode == capture && g.MapsHost() && slot == b.cur.pickSlot && b.err == nil:
		// (Without mapped host memory the copy behind the kernel would
		// hold one slot's address: the picks stay out of the graph.)
		pick := func(g *cuda.GPU) error { return b.queuePicks(g, l, rows, slot, true) }
		b.capOps = append(b.capOps, pick)
		if err := pick(g); err != nil {
			b.err = err
		}
		bucket := b.bucket
		if err := b.flush(g); err != nil {
			return err
		}
		if bucket.graph != nil {
			bucket.picks = &spec
		}
		return nil
	case b.mode == replay && b.bucket.picks != nil && *b.bucket.picks == spec && slot == b.cur.pickSlot:
		return b.flush(g)
	}
	if err := b.flush(g); err != nil {
		return err
	}
	return b.queuePicks(g, l, rows, slot, false)
}

// pickRows is how many logit rows an Argmax of rows computes: in a padded
// decode iteration the padding rows too, which costs nothing.
func (b *Backend) pickRows(rows int) int {
	if b.cur.pad && rows == b.cur.realLogit {
		return b.cur.nLogit
	}
	return rows
}

// queuePicks queues the greedy picks of rows logit rows into b.ids and of
// the first rows of them into host slot (Argmax, ArgmaxStart): written
// there by the argmax kernel where the GPU maps host memory, else copied
// behind it. Under fromLayout (a graph's argmax) every computed row is
// written, to the slot the layout names when the graph runs.
func (b *Backend) queuePicks(g *cuda.GPU, l *tensor, rows, slot int, fromLayout bool) error {
	n := b.pickRows(rows)
	if n*4 > b.ids.Bytes || n > b.pickStride || slot < 0 || slot >= pickSlots {
		return fmt.Errorf("argmax: %d rows into slot %d, room for %d", n, slot, min(b.ids.Bytes/4, b.pickStride))
	}
	if n == 0 {
		return nil
	}
	host := b.pickHost(slot)
	if !g.MapsHost() {
		if err := g.Argmax(g.Stream, b.dt, b.ids, l.buf, n, l.cols()); err != nil {
			return err
		}
		return g.Stream.DownloadAsync(host, b.ids, n*4)
	}
	// The kernel writes the host's copy itself: no copy behind it.
	dst := cuda.PickHost{Host: host, Rows: rows}
	if fromLayout {
		dst = cuda.PickHost{Host: b.picks, Rows: n, Slot: b.cur.pickAt, Slots: pickSlots, Stride: b.pickStride}
	}
	return g.ArgmaxTo(g.Stream, b.dt, b.ids, dst, l.buf, n, l.cols())
}

// decodeIDs reads len(dst) little-endian int32 ids from host.
func decodeIDs(dst []int32, host cuda.HostBuffer) {
	src := host.Bytes()
	for i := range dst {
		dst[i] = int32(uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24)
	}
}

//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// pipeState is the model.Pipeliner's: ticket t's picks are copied from
// b.ids into host[t%2], and done[t%2] is recorded behind the copy. The
// next iteration, queued before anyone waits, reads the same picks from
// b.ids on the device (fed tokens, SetBatch and Embed); stream order puts
// that read before its own Argmax overwrites b.ids, and the copy to the
// host before both.
type pipeState struct {
	model.PickTickets
	host [2]cuda.HostBuffer
	done [2]*cuda.Event
}

var _ model.Pipeliner = (*Backend)(nil)

// ArgmaxStart is Argmax without the wait: the iteration's graph is
// launched (or its capture finished), the picks are made and copied
// towards the host, and an event is recorded behind the copy.
func (b *Backend) ArgmaxStart(logits model.Tensor, rows int) (int, error) {
	l := ft(logits)
	p := &b.pipe
	t, err := p.Next()
	if err != nil {
		return 0, err
	}
	b.release()
	err = b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if err := b.queuePicks(g, l, rows, p.host[t%2]); err != nil {
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

// ArgmaxWait waits for the event behind ticket's copy (not for the
// iteration queued after it) and decodes its picks.
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
		decodeIDs(dst, p.host[slot])
		return nil
	})
}

// Argmax finishes the iteration (replaying or capturing its graph), picks
// each row's greedy token on the device and copies the ids back: the
// iteration's one device-to-host copy and synchronisation.
func (b *Backend) Argmax(dst []int32, logits model.Tensor, rows int) error {
	l := ft(logits)
	if rows > len(dst) {
		return fmt.Errorf("argmax: %d rows into %d ids", rows, len(dst))
	}
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if n := b.pickRows(rows); n > 0 && (n*4 > b.ids.Bytes || n*4 > b.idsHost.Len()) {
			// Argmax without a batch layout this large (ops checked on
			// their own): a sync point, so the buffers may grow here.
			if err := b.ensureLayout(g, max(n, b.maxRows)); err != nil {
				return err
			}
		}
		if err := b.queuePicks(g, l, rows, b.idsHost); err != nil {
			return err
		}
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		decodeIDs(dst[:rows], b.idsHost)
		return nil
	})
}

// pickRows is how many logit rows an Argmax of rows computes: in a padded
// decode iteration the padding rows too, which costs nothing.
func (b *Backend) pickRows(rows int) int {
	if b.cur.pad && rows == b.cur.realLogit {
		return b.cur.nLogit
	}
	return rows
}

// queuePicks queues the greedy picks of rows logit rows into b.ids and
// the copy of the first rows of them into host (Argmax, ArgmaxStart):
// written there by the argmax kernel where the GPU maps host memory,
// else copied behind it.
func (b *Backend) queuePicks(g *cuda.GPU, l *tensor, rows int, host cuda.HostBuffer) error {
	n := b.pickRows(rows)
	if n*4 > b.ids.Bytes || rows*4 > host.Len() {
		return fmt.Errorf("argmax: %d rows, room for %d", n, min(b.ids.Bytes, host.Len())/4)
	}
	if n == 0 {
		return nil
	}
	if g.MapsHost() {
		// The kernel writes the host's copy itself: no copy behind it.
		return g.ArgmaxTo(g.Stream, b.dt, b.ids, host, rows, l.buf, n, l.cols())
	}
	if err := g.Argmax(g.Stream, b.dt, b.ids, l.buf, n, l.cols()); err != nil {
		return err
	}
	return g.Stream.DownloadAsync(host, b.ids, rows*4)
}

// decodeIDs reads len(dst) little-endian int32 ids from host.
func decodeIDs(dst []int32, host cuda.HostBuffer) {
	src := host.Bytes()
	for i := range dst {
		dst[i] = int32(uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24)
	}
}

//go:build cgo && linux

package backend

import (
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

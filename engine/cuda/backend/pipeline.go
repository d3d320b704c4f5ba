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
		n := rows
		if b.cur.pad && rows == b.cur.realLogit {
			n = b.cur.nLogit // the padded rows exist too; computing them costs nothing
		}
		if n*4 > b.ids.Bytes || rows*4 > p.host[t%2].Len() {
			return fmt.Errorf("argmax: %d rows, room for %d", n, min(b.ids.Bytes, p.host[t%2].Len())/4)
		}
		if n > 0 {
			if err := g.Argmax(g.Stream, b.dt, b.ids, l.buf, n, l.cols()); err != nil {
				return err
			}
			if err := g.Stream.DownloadAsync(p.host[t%2], b.ids, rows*4); err != nil {
				return err
			}
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
		src := p.host[slot].Bytes()
		for i := range dst {
			dst[i] = int32(uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24)
		}
		return nil
	})
}

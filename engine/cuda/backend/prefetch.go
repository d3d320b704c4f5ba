//go:build cgo && linux

package backend

import (
	"errors"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// l2Prefetch reads the leading rows of a weight into L2 from a side stream
// (Prefetch). The stream forks from the main one where Prefetch is called
// and joins it at the iteration's end (flush), inside a capture too, so a
// decode graph holds the prefetch as a branch beside its kernels.
type l2Prefetch struct {
	percent    int // of each part's rows (XRUN_CUDA_L2_PREFETCH); 0: off
	side       *cuda.Stream
	fork, join *cuda.Event
	joinDue    bool // a capture forked the side stream
	issued     int  // prefetches queued on the side stream (tests)
}

var _ model.Prefetcher = (*Backend)(nil)

// Prefetch (model.Prefetcher) reads the leading percent of the rows of
// each of w's parts into L2, on the own GEMM's decode GEMV rows, 16-bit
// weights and a GPU with the bulk prefetch. The model calls it for a dense
// layer's gate_up weight in front of the layer's QKV projection: the
// prefetch then starts when the down projection before it has ended, and
// streams while the QKV projection, the attention and the output
// projection wait on each other, where their own weights are already
// loaded. Where the weights read in between and the prefetch together
// exceed L2, those reads would evict what the prefetch brought (L2 keeps
// the lines read last), so nothing is prefetched: a model of
// Llama-3.1-8B's width streams 84 MB of QKV and output weights there. The
// held-back op (the QKV's norm) stays held: the prefetch reads only
// weights.
func (b *Backend) Prefetch(w model.Tensor, parts, rows int, between ...model.Tensor) {
	wt := ft(w)
	if b.l2.percent <= 0 || wt.q != nil || parts < 1 || parts > 2 || !b.gemvFusing(b.rows(rows)) {
		return
	}
	n := wt.shape[0]
	if n%parts != 0 {
		return
	}
	per := n / parts
	take := per * b.l2.percent / 100
	rowBytes := wt.buf.Bytes / n
	if take == 0 || rowBytes%16 != 0 {
		return
	}
	room := b.dev.Info.L2Bytes - parts*take*rowBytes
	for _, t := range between {
		room -= ft(t).buf.Bytes
	}
	if room < 0 {
		return
	}
	var r [2]cuda.Buffer
	for p := range parts {
		r[p] = wt.buf.Slice(p*per*rowBytes, take*rowBytes)
	}
	b.opBeside(func(g *cuda.GPU) error { return b.l2.issue(g, r[0], r[1]) })
}

// ensure makes the side stream and its events (on the GPU's thread,
// outside a capture) where a prefetch could run.
func (l *l2Prefetch) ensure(g *cuda.GPU, ownGemm bool) error {
	if l.side != nil || l.percent <= 0 || !ownGemm || !g.CanPrefetchL2() || g.Stream.Capturing() {
		return nil
	}
	var err error
	if l.fork, err = g.NewEvent(); err != nil {
		return err
	}
	if l.join, err = g.NewEvent(); err != nil {
		return err
	}
	l.side, err = g.NewStream()
	return err
}

// issue forks the side stream from the main one and queues the prefetch on
// it. Outside a capture nothing waits for it: a prefetch writes nothing.
func (l *l2Prefetch) issue(g *cuda.GPU, a, b cuda.Buffer) error {
	if l.side == nil {
		return nil
	}
	if err := l.fork.Record(g.Stream); err != nil {
		return err
	}
	if err := l.side.Wait(l.fork); err != nil {
		return err
	}
	l.joinDue = l.joinDue || g.Stream.Capturing()
	l.issued++
	return g.PrefetchL2(l.side, a, b)
}

// joinSide makes the main stream wait for the side stream where a capture
// forked it: a capture must join every stream it forked before it ends.
func (l *l2Prefetch) joinSide(g *cuda.GPU) error {
	if !l.joinDue {
		return nil
	}
	l.joinDue = false
	if err := l.join.Record(l.side); err != nil {
		return err
	}
	return g.Stream.Wait(l.join)
}

// close waits for the side stream and frees it (GPU thread).
func (l *l2Prefetch) close() error {
	if l.side == nil {
		return nil
	}
	err := errors.Join(l.side.Sync(), l.side.Close(), l.fork.Close(), l.join.Close())
	l.side, l.fork, l.join = nil, nil, nil
	return err
}

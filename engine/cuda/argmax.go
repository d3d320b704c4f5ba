//go:build cgo && linux

package cuda

import "fmt"

// Argmax queues ids[r] = argmax over v of logits[r, v] (int32 ids; ties to
// the lowest index; NaN skipped; -1 for a row of NaN).
func (g *GPU) Argmax(s *Stream, dt DType, ids, logits Buffer, rows, vocab int) error {
	return g.ArgmaxTo(s, dt, ids, PickHost{}, logits, rows, vocab)
}

// PickHost is where ArgmaxTo also writes the picks: page-locked memory the
// kernel writes directly (MapsHost), so that they reach the host with no
// copy queued behind the kernel; an event recorded after it covers them.
//
// Host holds Slots slots of Stride ids each. With Slot empty the first Rows
// ids go to the start of Host; with Slot set (an int32 in device memory,
// below Slots) they go to slot *Slot, read when the kernel runs: a
// captured graph then writes whichever slot the batch layout names at each
// replay.
type PickHost struct {
	Host          HostBuffer
	Rows          int
	Slot          Buffer
	Slots, Stride int
}

// ArgmaxTo is Argmax that also writes the picks into host memory (dst;
// its zero value writes none there).
func (g *GPU) ArgmaxTo(s *Stream, dt DType, ids Buffer, dst PickHost, logits Buffer, rows, vocab int) error {
	switch {
	case rows == 0:
		return nil
	case ids.Bytes < rows*4 || logits.Bytes < rows*vocab*dt.Size():
		return fmt.Errorf("cuda: Argmax buffers too small for %d x %d", rows, vocab)
	case dst.Host.p == nil:
	case !g.MapsHost():
		return fmt.Errorf("cuda: Argmax into host memory on a GPU without unified addressing")
	case dst.Rows > rows || dst.Rows < 0:
		return fmt.Errorf("cuda: Argmax of %d rows writes %d of them to the host", rows, dst.Rows)
	case dst.Slot.Ptr == 0 && dst.Host.n < dst.Rows*4:
		return fmt.Errorf("cuda: Argmax of %d rows into %d host bytes", dst.Rows, dst.Host.n)
	case dst.Slot.Ptr != 0 && (dst.Slot.Bytes < 4 || dst.Slots < 1 || dst.Stride < dst.Rows || dst.Host.n < dst.Slots*dst.Stride*4):
		return fmt.Errorf("cuda: Argmax of %d rows into %d host slots of %d ids (%d bytes, slot buffer of %d)",
			dst.Rows, dst.Slots, dst.Stride, dst.Host.n, dst.Slot.Bytes)
	}
	hostRows, stride := dst.Rows, dst.Stride
	if dst.Host.p == nil {
		hostRows = 0
	}
	f, err := g.function("argmax", "argmax_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: 1024}, 0,
		g.argsPack().Ptr(ids).U64(dst.Host.devicePtr()).Ptr(dst.Slot).I32(stride).I32(hostRows).Ptr(logits).I32(vocab))
}

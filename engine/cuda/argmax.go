//go:build cgo && linux

package cuda

import "fmt"

// Argmax queues ids[r] = argmax over v of logits[r, v] (int32 ids; ties to
// the lowest index; NaN skipped; -1 for a row of NaN).
func (g *GPU) Argmax(s *Stream, dt DType, ids, logits Buffer, rows, vocab int) error {
	return g.ArgmaxTo(s, dt, ids, HostBuffer{}, 0, logits, rows, vocab)
}

// ArgmaxTo is Argmax that also writes the first hostRows ids into host,
// page-locked memory the kernel writes directly (MapsHost), so that they
// reach the host with no copy queued behind the kernel: an event recorded
// after it covers them. An empty host writes none there.
func (g *GPU) ArgmaxTo(s *Stream, dt DType, ids Buffer, host HostBuffer, hostRows int, logits Buffer, rows, vocab int) error {
	switch {
	case rows == 0:
		return nil
	case ids.Bytes < rows*4 || logits.Bytes < rows*vocab*dt.Size():
		return fmt.Errorf("cuda: Argmax buffers too small for %d x %d", rows, vocab)
	case host.p != nil && (hostRows > rows || host.n < hostRows*4):
		return fmt.Errorf("cuda: Argmax of %d rows into %d host bytes for %d of them", rows, host.n, hostRows)
	case host.p != nil && !g.MapsHost():
		return fmt.Errorf("cuda: Argmax into host memory on a GPU without unified addressing")
	}
	if host.p == nil {
		hostRows = 0
	}
	f, err := g.function("argmax", "argmax_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: 1024}, 0,
		g.argsPack().Ptr(ids).U64(host.devicePtr()).I32(hostRows).Ptr(logits).I32(vocab))
}

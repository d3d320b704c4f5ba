//go:build cgo && linux

package cuda

import "fmt"

// Argmax queues ids[r] = argmax over v of logits[r, v] (int32 ids; ties to
// the lowest index; NaN skipped; -1 for a row of NaN).
func (g *GPU) Argmax(s *Stream, dt DType, ids, logits Buffer, rows, vocab int) error {
	switch {
	case rows == 0:
		return nil
	case ids.Bytes < rows*4 || logits.Bytes < rows*vocab*dt.Size():
		return fmt.Errorf("cuda: Argmax buffers too small for %d x %d", rows, vocab)
	}
	f, err := g.function("argmax", "argmax_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: 1024}, 0, g.argsPack().Ptr(ids).Ptr(logits).I32(vocab))
}

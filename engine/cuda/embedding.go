//go:build cgo && linux

package cuda

import "fmt"

// Embedding queues out[t, :] = table[ids[t], :] for t < tokens. ids are
// int32 on the device; an id outside [0, vocab) yields a row of NaN.
func (g *GPU) Embedding(s *Stream, dt DType, out, table, ids Buffer, tokens, hidden, vocab int) error {
	return g.EmbeddingFed(s, dt, out, table, ids, Buffer{}, tokens, hidden, vocab)
}

// EmbeddingFed is Embedding where an id -1 - j (j < fed.Bytes / 4) stands
// for fed[j]: an int32 id still on the device, the previous iteration's
// pick j, so the iteration can be queued before the host has it.
func (g *GPU) EmbeddingFed(s *Stream, dt DType, out, table, ids, fed Buffer, tokens, hidden, vocab int) error {
	es := dt.Size()
	switch {
	case hidden%8 != 0:
		return fmt.Errorf("cuda: Embedding needs hidden %% 8 == 0, got %d", hidden)
	case out.Bytes < tokens*hidden*es || table.Bytes < vocab*hidden*es || ids.Bytes < tokens*4:
		return fmt.Errorf("cuda: Embedding buffers too small for %d tokens x %d of a %d-row table", tokens, hidden, vocab)
	case tokens == 0:
		return nil
	}
	f, err := g.function("embedding", "embedding")
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(out).Ptr(table).Ptr(ids).I32(hidden / 8).I32(vocab).I32(int(dt.NaNBits())).Ptr(fed).I32(fed.Bytes / 4)
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(256, roundUp(hidden/8, 32))}, 0, a)
}

func roundUp(a, b int) int { return ceilDiv(a, b) * b }

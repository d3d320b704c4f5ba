//go:build cgo && linux

package cuda

import "fmt"

// Rope queues the rotary embedding in place on q [tokens, qHeads, headDim]
// and k [tokens, kvHeads, headDim], whose rows are qStride and kStride
// elements apart (both inside one fused QKV row: stride = the QKV width).
// pos holds each token's position (int32); table is the float32
// [positions, headDim] cos|sin table of model.RopeTable, positions < rows
// of the table.
func (g *GPU) Rope(s *Stream, dt DType, q, k, pos, table Buffer, tokens, qHeads, kvHeads, headDim, qStride, kStride int) error {
	es := dt.Size()
	switch {
	case headDim%2 != 0:
		return fmt.Errorf("cuda: Rope needs an even head dimension, got %d", headDim)
	case tokens == 0:
		return nil
	case q.Bytes < ((tokens-1)*qStride+qHeads*headDim)*es || k.Bytes < ((tokens-1)*kStride+kvHeads*headDim)*es:
		return fmt.Errorf("cuda: Rope q or k too small for %d tokens", tokens)
	case pos.Bytes < tokens*4 || table.Bytes < headDim*4:
		return fmt.Errorf("cuda: Rope positions or table too small")
	}
	f, err := g.function("rope", "rope_"+dt.suffix())
	if err != nil {
		return err
	}
	pairs := (qHeads + kvHeads) * headDim / 2
	a := g.argsPack().Ptr(q).Ptr(k).Ptr(pos).Ptr(table).I32(qHeads).I32(kvHeads).I32(headDim).
		U64(uint64(qStride)).U64(uint64(kStride))
	return s.Launch(f, Dim3{X: tokens}, Dim3{X: min(512, roundUp(pairs, 32))}, 0, a)
}

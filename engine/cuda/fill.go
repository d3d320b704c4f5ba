//go:build cgo && linux

package cuda

// RandomFill queues dst[i] = model.RandomValue(seed, offset+i, scale)
// rounded to dt: the engine's random weights generated on the device, the
// same values the CPU backend computes.
func (g *GPU) RandomFill(s *Stream, dt DType, dst Buffer, seed uint64, offset int64, scale float32) error {
	f, err := g.function("fill", "random_fill_"+dt.suffix())
	if err != nil {
		return err
	}
	n := dst.Bytes / dt.Size()
	a := g.argsPack().Ptr(dst).U64(uint64(n)).U64(seed).U64(uint64(offset)).F32(scale)
	return s.Launch(f, Dim3{X: min(ceilDiv(n, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}

//go:build cgo && linux

package cuda

// FillUniform queues dst = uniform [lo, hi) values of dt from a hash of
// (seed, index): large benchmark operands without a host upload.
func (g *GPU) FillUniform(s *Stream, dt DType, dst Buffer, seed uint64, lo, hi float32) error {
	f, err := g.function("fill", "fill_uniform_"+dt.suffix())
	if err != nil {
		return err
	}
	n := dst.Bytes / dt.Size()
	a := g.argsPack().Ptr(dst).U64(uint64(n)).U64(seed).F32(lo).F32(hi)
	return s.Launch(f, Dim3{X: min(ceilDiv(n, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}

//go:build cgo && linux

package cuda

import "fmt"

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

// RandomFillRows queues dst[r*cols+c] = model.RandomValue(seed,
// src+r*stride+c, scale) for r < rows and c < cols, rounded to dt: a block
// of a slice of a random weight (model.RandomRun), made on the device.
func (g *GPU) RandomFillRows(s *Stream, dt DType, dst Buffer, rows, cols int, seed uint64, src, stride int64, scale float32) error {
	n := rows * cols
	if rows <= 0 || cols <= 0 || n*dt.Size() > dst.Bytes || src < 0 || stride < int64(cols) {
		return fmt.Errorf("cuda: RandomFillRows: %d rows of %d elements (source %d, stride %d) into %d bytes of %v", rows, cols, src, stride, dst.Bytes, dt)
	}
	f, err := g.function("fill", "random_fill_rows_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(dst).U64(uint64(rows)).U64(uint64(cols)).U64(seed).U64(uint64(src)).U64(uint64(stride)).F32(scale)
	return s.Launch(f, Dim3{X: min(ceilDiv(n, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}

//go:build cgo && linux

package cuda

import "fmt"

// BiasAdd queues x[r][c] += bias[c] for r < rows, c < cols (bias: cols
// elements).
func (g *GPU) BiasAdd(s *Stream, dt DType, x, bias Buffer, rows, cols int) error {
	es := dt.Size()
	switch {
	case cols <= 0:
		return fmt.Errorf("cuda: BiasAdd of %d columns", cols)
	case rows == 0:
		return nil
	case x.Bytes < rows*cols*es || bias.Bytes < cols*es:
		return fmt.Errorf("cuda: BiasAdd buffers too small for %d x %d", rows, cols)
	}
	f, err := g.function("bias", "bias_add_"+dt.suffix())
	if err != nil {
		return err
	}
	n := rows * cols
	a := g.argsPack().Ptr(x).Ptr(bias).U64(uint64(n)).I32(cols)
	return s.Launch(f, Dim3{X: min(ceilDiv(n, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}

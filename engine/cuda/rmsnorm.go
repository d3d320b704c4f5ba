//go:build cgo && linux

package cuda

import "fmt"

// rmsnormMaxChunks is MAXV of kernels/rmsnorm.cuh: 16-byte chunks a thread
// keeps in registers.
const rmsnormMaxChunks = 4

func rmsnormBlock(dt DType, rows, hidden int, bufs ...Buffer) (int, error) {
	if hidden%8 != 0 || hidden/8 > rmsnormMaxChunks*1024 {
		return 0, fmt.Errorf("cuda: RMSNorm needs hidden %% 8 == 0 and at most %d, got %d", rmsnormMaxChunks*1024*8, hidden)
	}
	for _, b := range bufs {
		if b.Bytes < rows*hidden*dt.Size() {
			return 0, fmt.Errorf("cuda: RMSNorm buffer of %d bytes for %d x %d", b.Bytes, rows, hidden)
		}
	}
	// One chunk per thread while that fits in a block, so short rows still
	// spread over a whole block's loads.
	return min(1024, roundUp(ceilDiv(hidden/8, 1), 32)), nil
}

// RMSNorm queues out = x / sqrt(mean(x^2) + eps) * w, row by row; x and out
// are [rows, hidden], w is [hidden].
func (g *GPU) RMSNorm(s *Stream, dt DType, out, x, w Buffer, rows, hidden int, eps float32) error {
	threads, err := rmsnormBlock(dt, rows, hidden, out, x)
	if err != nil || rows == 0 {
		return err
	}
	f, err := g.function("rmsnorm", "rmsnorm_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: threads}, 0, g.argsPack().Ptr(out).Ptr(x).Ptr(w).I32(hidden).F32(eps))
}

// AddRMSNorm queues residual += x, then out = RMSNorm(residual): the
// residual stream's update fused with the next norm, one pass over memory.
func (g *GPU) AddRMSNorm(s *Stream, dt DType, out, residual, x, w Buffer, rows, hidden int, eps float32) error {
	threads, err := rmsnormBlock(dt, rows, hidden, out, residual, x)
	if err != nil || rows == 0 {
		return err
	}
	f, err := g.function("rmsnorm", "add_rmsnorm_"+dt.suffix())
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows}, Dim3{X: threads}, 0,
		g.argsPack().Ptr(out).Ptr(residual).Ptr(x).Ptr(w).I32(hidden).F32(eps))
}

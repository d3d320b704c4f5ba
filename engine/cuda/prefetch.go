//go:build cgo && linux

package cuda

import "fmt"

// CanPrefetchL2 reports whether PrefetchL2 reads anything: the bulk
// prefetch is Hopper's (sm_90) and later.
func (g *GPU) CanPrefetchL2() bool { return g.Info.Major >= 9 }

// PrefetchL2 queues on s a prefetch of a and b (either may be empty) into
// L2: the kernel (kernels/prefetch.cu) completes once the data has landed,
// so s should be a side stream that no kernel waits on. Both must start on
// 16 bytes and be a multiple of 16 bytes long. Where the GPU cannot
// (CanPrefetchL2) nothing is queued.
func (g *GPU) PrefetchL2(s *Stream, a, b Buffer) error {
	if a.Ptr%16 != 0 || b.Ptr%16 != 0 || a.Bytes%16 != 0 || b.Bytes%16 != 0 {
		return fmt.Errorf("cuda: L2 prefetch of %d bytes at %#x and %d at %#x: ranges must be 16-byte aligned multiples of 16 bytes",
			a.Bytes, a.Ptr, b.Bytes, b.Ptr)
	}
	if !g.CanPrefetchL2() || a.Bytes+b.Bytes == 0 {
		return nil
	}
	f, err := g.function("prefetch", "l2_prefetch")
	if err != nil {
		return err
	}
	const chunk, threads = 16 << 10, 128
	chunks := ceilDiv(a.Bytes, chunk) + ceilDiv(b.Bytes, chunk)
	blocks := min(max(ceilDiv(chunks, threads), 1), 16)
	return s.Launch(f, Dim3{X: blocks}, Dim3{X: threads}, 0,
		g.argsPack().Ptr(a).U64(uint64(a.Bytes)).Ptr(b).U64(uint64(b.Bytes)))
}

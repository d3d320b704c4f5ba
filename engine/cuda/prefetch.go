//go:build cgo && linux

package cuda

import (
	"os"
	"strconv"
)

// L2Prefetch is up to three byte ranges of device memory that a kernel asks
// the L2 cache to fetch while it runs (kernels/common.cuh, l2pf): the
// weights of the projections that follow it. At batch 1 the decode step
// of a dense model is a chain of kernels of which several leave the HBM
// idle: the attention over a short context, and each projection's last
// microseconds, when its blocks drain and the next projection's first
// loads have not left yet. Weights are never written during a forward
// pass, so they can be requested before they are needed; the projection
// that reads them then finds them in L2. Only a hint: a range that is
// evicted again before use costs bandwidth, never correctness.
type L2Prefetch [3]Buffer

// l2PrefetchMax is XRUN_CUDA_L2PF_MB, read once: the most bytes one range
// may ask for (default 16 MB; the H100 and H200 have 50 MB of L2, and a
// range must survive until its reader gets there).
var l2PrefetchMax = func() int {
	if v, err := strconv.Atoi(os.Getenv("XRUN_CUDA_L2PF_MB")); err == nil && v >= 0 {
		return v << 20
	}
	return 16 << 20
}()

// L2PrefetchMax is the most bytes one prefetch range may cover.
func L2PrefetchMax() int { return l2PrefetchMax }

// L2Prefetch appends the three ranges as the kernels take them (L2PF_PARAMS:
// three pointers, then three int sizes). Each range is trimmed to whole 16-
// byte units inside it, as the bulk prefetch requires; an empty or
// unaligned-to-nothing range is passed as empty.
func (a *Args) L2Prefetch(p L2Prefetch) *Args {
	var n [3]int
	for i, b := range p {
		lo := (int(b.Ptr) + 15) &^ 15
		hi := (int(b.Ptr) + min(b.Bytes, 1<<30)) &^ 15
		if b.Ptr == 0 || hi <= lo {
			p[i], n[i] = Buffer{}, 0
			continue
		}
		p[i], n[i] = Buffer{Ptr: DevicePtr(lo), Bytes: hi - lo}, hi-lo
	}
	for _, b := range p {
		a.Ptr(b)
	}
	for _, v := range n {
		a.I32(v)
	}
	return a
}

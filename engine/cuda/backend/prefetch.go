//go:build cgo && linux

package backend

import (
	"os"

	"github.com/xrun-dev/xrun/engine/cuda"
)

// XRUN_CUDA_L2PF, read once: which decode kernels prefetch the weights of
// the projections after them into L2 (cuda.L2Prefetch). "attn": the
// decode attention at up to cuda.GemvMaxM rows asks for the output
// projection and the start of the gate_up projection; "gemv": the own
// GEMM's multi-round matrix-vector launches (gate_up, down) ask for the
// next projection as their last round goes out; default both, "0" none.
var l2pfAttn, l2pfGemv = func() (bool, bool) {
	switch os.Getenv("XRUN_CUDA_L2PF") {
	case "0":
		return false, false
	case "attn":
		return true, false
	case "gemv":
		return false, true
	}
	return true, true
}()

// noteWeight records w as this forward pass's next GEMM weight and returns
// its index.
func (b *Backend) noteWeight(w *tensor) int {
	b.wseq = append(b.wseq, w)
	return len(b.wseq) - 1
}

// prefetchAhead returns the prefetch ranges of the n GEMM weights the last
// forward pass used from index k on, provided this pass has used the same
// weights so far (the same model; a pass of another shape may take other
// paths, so anything else prefetches nothing). Each weight gets at most
// cuda.L2PrefetchMax bytes: a weight larger than that gets its first rows
// and the first rows of its second half, since a fused gate_up ([gate; up])
// is read from both halves at once.
func (b *Backend) prefetchAhead(k, n int) cuda.L2Prefetch {
	var pf cuda.L2Prefetch
	if k > len(b.wseq) || k+n > len(b.wprev) || k > 0 && b.wprev[k-1] != b.wseq[k-1] {
		return pf
	}
	capB := cuda.L2PrefetchMax()
	i := 0
	for _, w := range b.wprev[k : k+n] {
		buf := w.buf
		if i == len(pf) || capB == 0 || buf.Bytes == 0 {
			break
		}
		if buf.Bytes <= capB || len(w.shape) != 2 || i+2 > len(pf) {
			pf[i] = buf.Slice(0, min(buf.Bytes, capB))
			i++
			continue
		}
		row := buf.Bytes / w.shape[0]
		rows := max(1, capB/2/row)
		pf[i] = buf.Slice(0, rows*row)
		pf[i+1] = buf.Slice(w.shape[0]/2*row, rows*row)
		i += 2
	}
	return pf
}

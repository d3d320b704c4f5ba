package cpu

import (
	"slices"

	"github.com/xrun-dev/xrun/engine/model"
)

// MXFP4 experts (model.MXFP4Experts): the weights stay as codes and
// scales, and each expert GEMM work item dequantizes its expert into the
// worker's scratch, in the layout the float32 GEMM reads (panels under
// gemm_plugin auto, rows under disable), then runs that very GEMM. So
// MXFP4 experts compute exactly what float32 experts holding the
// dequantized values compute (dequantization is exact): the CPU is the
// reference the CUDA kernels are checked against.

// mxfp4Scratch is the per-worker dequantized expert.
type mxfp4Scratch struct {
	rows    [][]float32 // [N][K] row-major (gemm_plugin disable)
	pk      []*packed
	blocked bool
}

// RandomMXFP4 creates model.RandomMXFP4's weight.
func (b *Backend) RandomMXFP4(name string, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	w, err := model.RandomMXFP4(shape, seed, scale)
	if err != nil {
		return nil, err
	}
	return &tensor{name: name, shape: slices.Clone(shape), mx: &w}, nil
}

// UploadMXFP4 keeps an MXFP4 Experts weight (copied: the caller's
// buffers stay the caller's).
func (b *Backend) UploadMXFP4(name string, w model.MXFP4) (model.Tensor, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	c := model.MXFP4{Shape: slices.Clone(w.Shape), Blocks: slices.Clone(w.Blocks), Scales: slices.Clone(w.Scales)}
	return &tensor{name: name, shape: c.Shape, mx: &c}, nil
}

// mxfp4Prepare sizes the per-worker scratch for a MoE whose experts are
// MXFP4 (nil when they are not).
func (b *Backend) mxfp4Prepare(gateUp, down *tensor) *mxfp4Scratch {
	if gateUp.mx == nil && down.mx == nil {
		return nil
	}
	s := &b.mxfp4
	s.blocked = b.blocked
	for len(s.rows) < b.pool.workers {
		s.rows = append(s.rows, nil)
		s.pk = append(s.pk, nil)
	}
	for _, t := range []*tensor{gateUp, down} {
		if t.mx == nil {
			continue
		}
		n, k := t.shape[1], t.shape[2]
		for w := range b.pool.workers {
			if b.blocked {
				if p := s.pk[w]; p == nil || len(p.panels) < (n+nr-1)/nr*k*nr {
					s.pk[w] = &packed{panels: make([]float32, (n+nr-1)/nr*k*nr)}
				}
			} else if len(s.rows[w]) < n*k {
				s.rows[w] = make([]float32, n*k)
			}
		}
	}
	return s
}

// expert is expert e's weight as gemmSerial takes it, dequantized into
// worker w's scratch when it is MXFP4.
func (t *moeTask) expert(wt *tensor, e, w int) ([]float32, *packed) {
	if wt.mx == nil {
		return expertData(wt, e), expertPacked(wt, e)
	}
	n, k := wt.shape[1], wt.shape[2]
	mx := wt.mx
	codes := mx.Blocks[e*n*k/2 : (e+1)*n*k/2]
	scales := mx.Scales[e*n*k/model.MXFP4Block : (e+1)*n*k/model.MXFP4Block]
	s := t.mx
	if s.blocked {
		// The panels packWeight would make (zero padding included), filled
		// a block of 32 values of 16 rows at a time so that the writes run
		// along the panel.
		p := s.pk[w]
		p.n, p.k = n, k
		var blk [nr][model.MXFP4Block]float32
		for pi := range (n + nr - 1) / nr {
			panel := p.panels[pi*k*nr : (pi+1)*k*nr]
			r0, rn := pi*nr, min(nr, n-pi*nr)
			for c := rn; c < nr; c++ {
				clear(blk[c][:])
			}
			for g := range k / model.MXFP4Block {
				for c := range rn {
					r := r0 + c
					model.DequantMXFP4Row(blk[c][:], codes[r*k/2+g*16:r*k/2+g*16+16], scales[r*k/model.MXFP4Block+g:])
				}
				out := panel[g*model.MXFP4Block*nr : (g+1)*model.MXFP4Block*nr]
				for i := range model.MXFP4Block {
					row := (*[nr]float32)(out[i*nr : (i+1)*nr])
					for c := range nr {
						row[c] = blk[c][i]
					}
				}
			}
		}
		return nil, p
	}
	dst := s.rows[w][:n*k]
	model.DequantMXFP4Row(dst, codes, scales)
	return dst, nil
}

var _ model.MXFP4Experts = (*Backend)(nil)

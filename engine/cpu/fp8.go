package cpu

import (
	"fmt"
	"slices"

	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 GEMMs (dtype fp8) are computed exactly as an FP8 tensor-core GEMM
// with float32 accumulation computes them, up to the order of the sums:
// the weight holds the E4M3 values of its codes (unscaled, exact in
// float32), the input is quantized to E4M3 values with its scale (per
// tensor, or per row), the float32 GEMM multiplies the two (each product
// of two E4M3 values is exact in float32) and the output is scaled by
// input scale × weight scale of its row and column, as cuBLASLt's FP8
// path scales D by alpha = scale_A × scale_B.

// fp8Weight is an FP8 GEMM weight's scales (tensor.q).
type fp8Weight struct {
	// scale is one per row of the weight (per output column of its GEMM;
	// an Experts stack's rows expert by expert), a per-tensor scale
	// repeated.
	scale []float32
	// input is the static per-tensor scale of the GEMM's input; 0:
	// dynamic, per tensor or, with perToken, per row.
	input    float32
	perToken bool
	// experts marks an Experts stack, whose input is never calibrated.
	experts bool
	// amax is the largest amax of the inputs seen while calibrating.
	amax float32
}

// fp8Scratch holds a quantized GEMM input and its scales, and the state
// of a calibration (CalibrateFP8).
type fp8Scratch struct {
	x  []float32 // the input's E4M3 values
	sx []float32 // its scale per row (one when per tensor)
	// calibrating: the Matrix weights whose input is dynamic per tensor
	// keep their inputs' largest amax; seen are those that had input.
	calibrating bool
	seen        []*fp8Weight
}

// uploadFP8 makes an FP8 GEMM weight of an F8_E4M3 host tensor.
func (b *Backend) uploadFP8(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	if kind != model.Matrix && kind != model.Experts {
		return nil, fmt.Errorf("%s: an F8_E4M3 weight must be a GEMM weight (Matrix or Experts)", name)
	}
	if err := h.CheckFP8(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n := numel(h.Shape)
	if len(h.Data) != n {
		return nil, fmt.Errorf("%s: %d bytes for shape %v of F8_E4M3", name, len(h.Data), h.Shape)
	}
	f := make([]float32, n)
	for i, c := range h.Data {
		f[i] = fp8.Decode(c)
	}
	rows := n / h.Shape[len(h.Shape)-1]
	q := &fp8Weight{scale: make([]float32, rows), input: h.FP8.Input, perToken: h.FP8.PerToken, experts: kind == model.Experts}
	for r := range rows {
		q.scale[r] = h.FP8.RowScale(r)
	}
	t := b.weight(name, kind, slices.Clone(h.Shape), f)
	t.q = q
	return t, nil
}

// QuantizeFP8 quantizes a Matrix or Experts weight in place to E4M3 with
// one scale per tensor (per expert), amax/448 (model.FP8GEMMs).
func (b *Backend) QuantizeFP8(w model.Tensor) (model.Tensor, error) {
	t := ft(w)
	if t.q != nil {
		return t, nil
	}
	experts, n := 1, t.shape[0]
	switch len(t.shape) {
	case 2:
	case 3:
		experts, n = t.shape[0], t.shape[1]
	default:
		return nil, fmt.Errorf("%s: shape %v is not a Matrix or Experts weight", t.name, t.shape)
	}
	t.q = &fp8Weight{scale: make([]float32, experts*n), experts: len(t.shape) == 3}
	for e := range experts {
		// Packed panels hold the weights and zero padding, which neither
		// changes the largest magnitude nor quantizes to anything but 0.
		var vals []float32
		if t.pk != nil {
			vals = t.pk[e].panels
		} else {
			sz := len(t.f) / experts
			vals = t.f[e*sz : (e+1)*sz]
		}
		s := fp8.Scale(fp8.AbsMax(vals))
		fp8.RoundTrip(vals, s)
		for r := range n {
			t.q.scale[e*n+r] = s
		}
	}
	return t, nil
}

// quantizeInput quantizes rows×k of x for a GEMM on weight q into the
// scratch: E4M3 values, and their scale per row (sx[0] for all when per
// tensor). It returns both.
func (s *fp8Scratch) quantizeInput(x []float32, rows, k int, q *fp8Weight) ([]float32, []float32) {
	n := rows * k
	if cap(s.x) < n {
		s.x = make([]float32, n)
	}
	xs := s.x[:n]
	copy(xs, x[:n])
	if cap(s.sx) < max(rows, 1) {
		s.sx = make([]float32, max(rows, 1))
	}
	if q.perToken {
		sx := s.sx[:rows]
		for r := range rows {
			sx[r] = fp8.Scale(fp8.AbsMax(xs[r*k : (r+1)*k]))
			fp8.RoundTrip(xs[r*k:(r+1)*k], sx[r])
		}
		return xs, sx
	}
	sc := q.input
	if sc == 0 {
		amax := fp8.AbsMax(xs)
		sc = fp8.Scale(amax)
		if s.calibrating && !q.experts {
			if !slices.Contains(s.seen, q) {
				s.seen = append(s.seen, q)
			}
			q.amax = max(q.amax, amax)
		}
	}
	fp8.RoundTrip(xs, sc)
	s.sx[0] = sc
	return xs, s.sx[:1]
}

// CalibrateFP8 begins (on) or ends a calibration of static input scales
// (model.FP8Calibrator). Every op runs before its call returns, on the
// caller's goroutine, and quantizeInput runs before an op's work is
// spread over the pool, so the amaxes need no locks. Ending it gives each
// Matrix weight that saw input while its input was dynamic per tensor
// the static scale fp8.Scale(amax); an op that failed meanwhile is
// reported instead.
func (b *Backend) CalibrateFP8(on bool) error {
	s := &b.fp8
	for _, q := range s.seen {
		if !on && b.err == nil {
			q.input = fp8.Scale(q.amax)
		}
		q.amax = 0
	}
	s.calibrating, s.seen = on, s.seen[:0]
	if !on {
		return b.takeErr()
	}
	return nil
}

// scaleOutput multiplies out[r][j] (rows × n, ldo apart) by sx[r] (or
// sx[0]) × ws[j]: the FP8 GEMM's epilogue.
func scaleOutput(out []float32, ldo, rows, n int, sx, ws []float32) {
	for r := range rows {
		a := sx[0]
		if len(sx) > 1 {
			a = sx[r]
		}
		o := out[r*ldo : r*ldo+n]
		for j := range o {
			o[j] *= a * ws[j]
		}
	}
}

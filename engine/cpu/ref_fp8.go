package cpu

import "github.com/xrun-dev/xrun/engine/fp8"

// Reference FP8 GEMMs (dtype fp8), for the CPU backend's FP8 path here and
// the CUDA backend's FP8 kernels: float64 accumulation over E4M3 values,
// the scales applied to the result.

// RefFP8Input quantizes rows×k activations for an FP8 GEMM: their E4M3
// values (unscaled) and scales, one for the tensor (static when given,
// else amax/448) or, perToken, one per row; each value is
// E4M3(x · (1/scale)) with the reciprocal taken in float32.
func RefFP8Input(x []float32, rows, k int, static float32, perToken bool) (q, scales []float32) {
	q = make([]float32, rows*k)
	quant := func(lo, hi int, s float32) {
		inv := 1 / s
		for i := lo; i < hi; i++ {
			q[i] = fp8.Decode(fp8.Encode(x[i] * inv))
		}
	}
	if perToken {
		for r := range rows {
			var amax float64
			for _, v := range x[r*k : (r+1)*k] {
				amax = max(amax, abs64(float64(v)))
			}
			scales = append(scales, fp8.Scale(float32(amax)))
			quant(r*k, (r+1)*k, scales[r])
		}
		return q, scales
	}
	s := static
	if s == 0 {
		var amax float64
		for _, v := range x[:rows*k] {
			amax = max(amax, abs64(float64(v)))
		}
		s = fp8.Scale(float32(amax))
	}
	quant(0, rows*k, s)
	return q, []float32{s}
}

func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// RefFP8GEMM: out[i, j] = (Σ q[i, kk] · E4M3(w[j, kk])) · sx[i] · sw[j],
// with q from RefFP8Input (sx one or one per row), w [n, k] E4M3 codes and
// sw one scale or one per row of w.
func RefFP8GEMM(out, q, sx []float32, w []uint8, sw []float32, m, n, k int) {
	for i := range m {
		a := sx[0]
		if len(sx) > 1 {
			a = sx[i]
		}
		for j := range n {
			var s float64
			for kk := range k {
				s += float64(q[i*k+kk]) * float64(fp8.Decode(w[j*k+kk]))
			}
			b := sw[0]
			if len(sw) > 1 {
				b = sw[j]
			}
			out[i*n+j] = float32(s * float64(a*b))
		}
	}
}

// RefFP8MoE is RefMoE with FP8 experts: gateUp [E, 2F, H] and down [E, H,
// F] E4M3 codes with one scale per row (guScale, dnScale), the input
// quantized over all rows (or per token), the SwiGLU activations of every
// routed row quantized together (or per row), static scales guIn and dnIn
// where non-zero.
func RefFP8MoE(out, x []float32, idx []int32, wts []float32, gateUp []uint8, guScale []float32, guIn float32,
	down []uint8, dnScale []float32, dnIn float32, perToken bool, rows, k, H, F int) {
	xq, sx := RefFP8Input(x, rows, H, guIn, perToken)
	n := rows * k
	act := make([]float32, n*F)
	gu := make([]float32, 2*F)
	for a := range n {
		t, e := a/k, int(idx[a])
		s := sx[0:1]
		if perToken {
			s = sx[t : t+1]
		}
		RefFP8GEMM(gu, xq[t*H:(t+1)*H], s, gateUp[e*2*F*H:(e+1)*2*F*H], guScale[e*2*F:(e+1)*2*F], 1, 2*F, H)
		RefSwiGLU(act[a*F:(a+1)*F], gu, 1, F)
	}
	aq, sa := RefFP8Input(act, n, F, dnIn, perToken)
	y := make([]float32, H)
	for t := range rows {
		acc := make([]float64, H)
		for j := range k {
			a, e := t*k+j, int(idx[t*k+j])
			s := sa[0:1]
			if perToken {
				s = sa[a : a+1]
			}
			RefFP8GEMM(y, aq[a*F:(a+1)*F], s, down[e*H*F:(e+1)*H*F], dnScale[e*H:(e+1)*H], 1, H, F)
			for i := range H {
				acc[i] += float64(wts[a]) * float64(y[i])
			}
		}
		for i := range H {
			out[t*H+i] = float32(acc[i])
		}
	}
}

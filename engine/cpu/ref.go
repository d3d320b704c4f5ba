package cpu

import (
	"math"
	"sort"

	"github.com/xrun-dev/xrun/engine/model"
)

// Reference implementations of every op family: plain, serial, float64
// accumulation, written for clarity rather than speed. The fast CPU paths
// are tested against them, and so are the CUDA kernels (with a tolerance
// for fp16/bf16). Layouts are those of the model.Backend ops.

// RefGEMM: out[m, n] = x[m, k] · wᵀ, w [n, k].
func RefGEMM(out, x, w []float32, m, n, k int) {
	for i := range m {
		for j := range n {
			var s float64
			for kk := range k {
				s += float64(x[i*k+kk]) * float64(w[j*k+kk])
			}
			out[i*n+j] = float32(s)
		}
	}
}

// RefRMSNorm: out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w.
func RefRMSNorm(out, x, w []float32, rows, cols int, eps float32) {
	for r := range rows {
		var ss float64
		for _, v := range x[r*cols : (r+1)*cols] {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
		for i := range cols {
			out[r*cols+i] = float32(float64(w[i]) * float64(x[r*cols+i]) * inv)
		}
	}
}

// RefRoPE rotates, in place, the first heads heads (HeadDim wide) of each
// of rows rows (rowWidth floats apart) by the row's position, with table
// [positions, HeadDim] holding cos | sin (model.RopeTable).
func RefRoPE(x []float32, positions []int32, table []float32, rows, rowWidth, heads, headDim int) {
	half := headDim / 2
	for r := range rows {
		tab := table[int(positions[r])*headDim:]
		for h := range heads {
			v := x[r*rowWidth+h*headDim:]
			for i := range half {
				c, s := float64(tab[i]), float64(tab[half+i])
				a, b := float64(v[i]), float64(v[half+i])
				v[i], v[half+i] = float32(a*c-b*s), float32(b*c+a*s)
			}
		}
	}
}

// RefAttention is causal grouped-query attention for one sequence: q holds
// n new tokens [n, heads*D] at positions past..past+n-1; k and v hold every
// position 0..past+n-1 [past+n, kvHeads*D]. out is [n, heads*D]; the scale
// is 1/sqrt(D).
func RefAttention(out, q, k, v []float32, n, past, heads, kvHeads, D int) {
	g := heads / kvHeads
	scale := 1 / math.Sqrt(float64(D))
	for t := range n {
		pos := past + t
		for h := range heads {
			kh := h / g
			s := make([]float64, pos+1)
			mx := math.Inf(-1)
			for j := range s {
				var d float64
				for i := range D {
					d += float64(q[t*heads*D+h*D+i]) * float64(k[j*kvHeads*D+kh*D+i])
				}
				s[j] = d * scale
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for i := range D {
				var o float64
				for j := range s {
					o += s[j] * float64(v[j*kvHeads*D+kh*D+i])
				}
				out[t*heads*D+h*D+i] = float32(o / sum)
			}
		}
	}
}

// RefSwiGLU: out[r][i] = silu(gateUp[r][i]) · gateUp[r][f+i].
func RefSwiGLU(out, gateUp []float32, rows, f int) {
	for r := range rows {
		for i := range f {
			g, u := float64(gateUp[r*2*f+i]), float64(gateUp[r*2*f+f+i])
			out[r*f+i] = float32(g / (1 + math.Exp(-g)) * u)
		}
	}
}

// RefRoute routes rows tokens from logits [rows, experts] by method: idx
// [rows, k] largest first (lowest index among equals), wts [rows, k].
func RefRoute(idx []int32, wts []float32, logits []float32, rows, experts, k int, method string) {
	for r := range rows {
		l := logits[r*experts : (r+1)*experts]
		mx := math.Inf(-1)
		for _, v := range l {
			mx = math.Max(mx, float64(v))
		}
		p := make([]float64, experts)
		var sum float64
		for i, v := range l {
			p[i] = math.Exp(float64(v) - mx)
			sum += p[i]
		}
		order := make([]int, experts)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return l[order[a]] > l[order[b]] })
		var top float64
		for j := range k {
			top += p[order[j]]
		}
		for j := range k {
			e := order[j]
			idx[r*k+j] = int32(e)
			w := p[e] / sum // softmax, then top-k
			if method != model.RoutingSoftmaxTopK {
				w = p[e] / top // renormalised == softmax over the top k
			}
			wts[r*k+j] = float32(w)
		}
	}
}

// RefMoE: out[t] = Σ_j wts[t][j] · down_e(silu(gate_e x) · up_e x), e =
// idx[t][j]; gateUp [E, 2F, H] (gate rows first), down [E, H, F].
func RefMoE(out, x []float32, idx []int32, wts, gateUp, down []float32, rows, k, H, F int) {
	gu := make([]float32, 2*F)
	act := make([]float32, F)
	y := make([]float32, H)
	for t := range rows {
		acc := make([]float64, H)
		for j := range k {
			e := int(idx[t*k+j])
			RefGEMM(gu, x[t*H:(t+1)*H], gateUp[e*2*F*H:(e+1)*2*F*H], 1, 2*F, H)
			RefSwiGLU(act, gu, 1, F)
			RefGEMM(y, act, down[e*H*F:(e+1)*H*F], 1, H, F)
			for i := range H {
				acc[i] += float64(wts[t*k+j]) * float64(y[i])
			}
		}
		for i := range H {
			out[t*H+i] = float32(acc[i])
		}
	}
}

// RefArgmax: dst[r] = index of the largest of logits[r] (lowest on ties).
func RefArgmax(dst []int32, logits []float32, rows, cols int) {
	for r := range rows {
		best := 0
		for i := 1; i < cols; i++ {
			if logits[r*cols+i] > logits[r*cols+best] {
				best = i
			}
		}
		dst[r] = int32(best)
	}
}

// RelErr is ||got - want|| / ||want||, the measure kernels are checked by;
// NaN anywhere gives +Inf, so it never passes a tolerance.
func RelErr(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	r := math.Sqrt(d / n)
	if math.IsNaN(r) {
		return math.Inf(1)
	}
	return r
}

package cpu

import (
	"math"

	"github.com/xrun-dev/xrun/engine/model"
)

// RefAttentionSinks is RefAttention with GPT-OSS's attention sinks (one
// logit per query head, joining each softmax's denominator; nil: none)
// over a window (token at position p sees p-window+1..p; 0: every
// position).
func RefAttentionSinks(out, q, k, v, sinks []float32, n, past, heads, kvHeads, D, window int) {
	g := heads / kvHeads
	scale := 1 / math.Sqrt(float64(D))
	for t := range n {
		pos := past + t
		lo := 0
		if window > 0 {
			lo = max(0, pos-window+1)
		}
		for h := range heads {
			kh := h / g
			s := make([]float64, pos+1-lo)
			mx := math.Inf(-1)
			for j := range s {
				var d float64
				for i := range D {
					d += float64(q[t*heads*D+h*D+i]) * float64(k[(lo+j)*kvHeads*D+kh*D+i])
				}
				s[j] = d * scale
				mx = math.Max(mx, s[j])
			}
			var sink float64
			if sinks != nil {
				sink = float64(sinks[h])
				mx = math.Max(mx, sink)
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			if sinks != nil {
				sum += math.Exp(sink - mx)
			}
			for i := range D {
				var o float64
				for j := range s {
					o += s[j] * float64(v[(lo+j)*kvHeads*D+kh*D+i])
				}
				out[t*heads*D+h*D+i] = float32(o / sum)
			}
		}
	}
}

// RefGLU is the activation act over rows fused [gate | up] rows of 2f.
func RefGLU(out, gateUp []float32, rows, f int, act model.GLU) {
	for r := range rows {
		for i := range f {
			g, u := float64(gateUp[r*2*f+i]), float64(gateUp[r*2*f+f+i])
			if act.Limit <= 0 {
				out[r*f+i] = float32(g / (1 + math.Exp(-g)) * u)
				continue
			}
			l := float64(act.Limit)
			g = math.Min(g, l)
			u = math.Max(math.Min(u, l), -l)
			out[r*f+i] = float32((u + 1) * g / (1 + math.Exp(-float64(act.Alpha)*g)))
		}
	}
}

// RefOSSMoE is RefMoE with expert biases (guBias [E, 2F] in [gate | up]
// order, downBias [E, H]; nil: none) and the activation act.
func RefOSSMoE(out, x []float32, idx []int32, wts, gateUp, down, guBias, downBias []float32, rows, k, H, F int, act model.GLU) {
	gu := make([]float32, 2*F)
	a := make([]float32, F)
	y := make([]float32, H)
	for t := range rows {
		acc := make([]float64, H)
		for j := range k {
			e := int(idx[t*k+j])
			RefGEMM(gu, x[t*H:(t+1)*H], gateUp[e*2*F*H:(e+1)*2*F*H], 1, 2*F, H)
			if guBias != nil {
				for i := range gu {
					gu[i] += guBias[e*2*F+i]
				}
			}
			RefGLU(a, gu, 1, F, act)
			RefGEMM(y, a, down[e*H*F:(e+1)*H*F], 1, H, F)
			for i := range H {
				b := float64(0)
				if downBias != nil {
					b = float64(downBias[e*H+i])
				}
				acc[i] += float64(wts[t*k+j]) * (float64(y[i]) + b)
			}
		}
		for i := range H {
			out[t*H+i] = float32(acc[i])
		}
	}
}

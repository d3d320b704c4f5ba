package cpu

import (
	"math"
	"sort"

	"github.com/xrun-dev/xrun/engine/model"
)

// Reference implementations of the DeepSeek-V3 ops (model.MLABackend),
// plain and float64 like the others in ref.go: what MLAAttention and
// RouteGrouped here, and the CUDA kernels to come, are checked against.

// RefMLAAttention is MLA for one sequence in the plain form, the way
// transformers computes it: q holds n new tokens [n, s.QWidth()] at
// positions past..past+n-1, rotated already; latent [past+n, Latent] the
// normalised latents and krope [past+n, RopeDim] the rotated keys of every
// position; kvb is the head stack [Heads, NopeDim+VDim, Latent]. Rotation
// is left out: q and krope come rotated (RefRoPE, or mlaRope for the
// interleaved layout). out is [n, Heads·VDim].
func RefMLAAttention(out, q, latent, krope, kvb []float32, n, past int, s model.MLAShape) {
	L, dn, dr, dv := s.Latent, s.NopeDim, s.RopeDim, s.VDim
	P := past + n
	k := make([]float64, P*dn)
	v := make([]float64, P*dv)
	for h := range s.Heads {
		w := kvb[h*(dn+dv)*L : (h+1)*(dn+dv)*L]
		for p := range P {
			for i := range dn + dv {
				var acc float64
				for j := range L {
					acc += float64(w[i*L+j]) * float64(latent[p*L+j])
				}
				if i < dn {
					k[p*dn+i] = acc
				} else {
					v[p*dv+i-dn] = acc
				}
			}
		}
		for t := range n {
			qh := q[t*s.QWidth()+h*(dn+dr):]
			sc := make([]float64, past+t+1)
			mx := math.Inf(-1)
			for p := range sc {
				var d float64
				for i := range dn {
					d += float64(qh[i]) * k[p*dn+i]
				}
				for i := range dr {
					d += float64(qh[dn+i]) * float64(krope[p*dr+i])
				}
				sc[p] = d * float64(s.Scale)
				mx = math.Max(mx, sc[p])
			}
			var sum float64
			for p := range sc {
				sc[p] = math.Exp(sc[p] - mx)
				sum += sc[p]
			}
			for i := range dv {
				var o float64
				for p, e := range sc {
					o += e * v[p*dv+i]
				}
				out[t*s.Heads*dv+h*dv+i] = float32(o / sum)
			}
		}
	}
}

// RefRouteGrouped routes rows tokens by DeepSeek-V3's method from logits
// [rows, experts] and bias [experts]: idx [rows, K] by biased score,
// largest first (lowest index among equals), wts [rows, K] (see
// model.RoutingSigmoidGroupTopKRenorm).
func RefRouteGrouped(idx []int32, wts []float32, logits, bias []float32, rows, experts int, r model.GroupRoute) {
	epg := experts / r.Groups
	for t := range rows {
		score := make([]float64, experts)
		choice := make([]float64, experts)
		for e := range experts {
			score[e] = 1 / (1 + math.Exp(-float64(logits[t*experts+e])))
			choice[e] = score[e] + float64(bias[e])
		}
		gs := make([]float64, r.Groups)
		for g := range r.Groups {
			v := append([]float64(nil), choice[g*epg:(g+1)*epg]...)
			sort.Sort(sort.Reverse(sort.Float64Slice(v)))
			gs[g] = v[0]
			if epg > 1 {
				gs[g] += v[1]
			}
		}
		groups := make([]int, r.Groups)
		for g := range groups {
			groups[g] = g
		}
		sort.SliceStable(groups, func(a, b int) bool { return gs[groups[a]] > gs[groups[b]] })
		kept := map[int]bool{}
		for _, g := range groups[:r.TopKGroups] {
			kept[g] = true
		}
		var cand []int
		for e := range experts {
			if kept[e/epg] {
				cand = append(cand, e)
			}
		}
		sort.SliceStable(cand, func(a, b int) bool { return choice[cand[a]] > choice[cand[b]] })
		var sum float64
		for j := range r.K {
			sum += score[cand[j]]
		}
		for j := range r.K {
			e := cand[j]
			idx[t*r.K+j] = int32(e)
			w := score[e]
			if r.Renorm {
				w /= sum + 1e-20
			}
			wts[t*r.K+j] = float32(w * float64(r.Scale))
		}
	}
}

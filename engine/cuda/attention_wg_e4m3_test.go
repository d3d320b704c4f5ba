//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
)

// TestAttentionWGE4M3 checks attention_wg.cu's _f8e kernels (the products
// on the E4M3 tensor cores, XRUN_CUDA_ATTN_WG_E4M3) on Hopper: prompt
// chunks after cached tokens over an FP8 cache, on 64 and 128 query rows
// a block, and over a paged one against those outputs. Their roundings are part of what they compute, so the
// reference makes them too (attnRefsE4M3); within that, the bound is the
// 16-bit kernels'.
func TestAttentionWGE4M3(t *testing.T) {
	prefill := []attnSeq{{37, 45}, {5, 64}, {0, 17}, {300, 50}, {700, 90}}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 8, 128}, {8, 2, 128}} {
			for _, rows := range []int{AttnRowsLarge, AttnRowsXL} {
				t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/rows%d", dt, a.Heads, a.KVHeads, a.HeadDim, rows), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						if !g.AttnWG() {
							t.Skipf("the warpgroup-MMA kernels run on Hopper, not %s", g.Info.Arch())
						}
						defer keepSwitches(g)()
						g.sw.CUDAAttnWGE4M3 = true
						var kernels []attnTC
						for _, c := range attnWG {
							if c.fits(rows) {
								kernels = append(kernels, c)
							}
						}
						checkAttentionFP8(t, g, dt, a, prefill, rows, 1, kernels, attnRefsE4M3)
						// Over a paged cache (_paged_f8e) as over fixed slots.
						for _, bs := range []int{16, 32} {
							checkPagedAttentionFP8(t, g, dt, a, prefill, bs, rows, kernels)
						}
					})
				})
			}
		}
	}
}

// attnRefsE4M3 is attnRefs with the _f8e kernels' roundings: each query
// row (a token's head) to E4M3 codes times absmax / 448, and each 64-key
// tile's P, against the online softmax's running maximum, times 256 to
// E4M3 (l sums P unrounded).
func attnRefsE4M3(seqs []attnSeq, qkv []float32, a AttnShape) [][]float32 {
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	G := H / KV
	scale := 1 / math.Sqrt(float64(D))
	refs := make([][]float32, len(seqs))
	start := 0
	for i, s := range seqs {
		L := s.past + s.n
		out := make([]float32, s.n*H*D)
		q := make([]float32, D)
		for tok := range s.n {
			row := qkv[(start+s.past+tok)*W:]
			pos := s.past + tok
			for hq := range H {
				roundRowE4M3(q, row[hq*D:(hq+1)*D])
				kh := H + hq/G
				m, l := math.Inf(-1), 0.0
				o := make([]float64, D)
				for k0 := 0; k0 <= pos; k0 += 64 {
					k1 := min(k0+64, pos+1)
					sc := make([]float64, k1-k0)
					mx := m
					for k := k0; k < k1; k++ {
						krow := qkv[(start+k)*W+kh*D:]
						var dot float64
						for d := range D {
							dot += float64(q[d]) * float64(krow[d])
						}
						sc[k-k0] = dot * scale * math.Log2E
						mx = math.Max(mx, sc[k-k0])
					}
					alpha := math.Exp2(m - mx)
					l *= alpha
					for d := range o {
						o[d] *= alpha
					}
					for k := k0; k < k1; k++ {
						p := math.Exp2(sc[k-k0] - mx)
						l += p
						pr := float64(fp8.Decode(fp8.Encode(float32(p)*256))) / 256
						vrow := qkv[(start+k)*W+(kh+KV)*D:]
						for d := range o {
							o[d] += pr * float64(vrow[d])
						}
					}
					m = mx
				}
				for d := range o {
					out[(tok*H+hq)*D+d] = float32(o[d] / l)
				}
			}
		}
		refs[i] = out
		start += L
	}
	return refs
}

// roundRowE4M3 sets q to x as the _f8e kernels take a query row: E4M3
// codes of x times 448 / absmax, decoded, times absmax / 448 (float32
// arithmetic, rounded to nearest as the kernels' __fmul_rn and __fdiv_rn).
func roundRowE4M3(q, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		clear(q)
		return
	}
	inv, qs := float32(448)/amax, amax/float32(448)
	for d, v := range x {
		q[d] = fp8.Decode(fp8.Encode(v*inv)) * qs
	}
}

// TestAttnRefsE4M3 checks the reference itself, without a GPU: its
// roundings must move the outputs from attnRefs' (so that they are in
// effect) by about what E4M3's 3-bit mantissa allows, no more; and a row
// whose every value is representable at its scale comes back unchanged.
func TestAttnRefsE4M3(t *testing.T) {
	r := newRand(t)
	a := AttnShape{8, 2, 128}
	seqs := []attnSeq{{300, 50}, {0, 17}}
	total := 0
	for _, s := range seqs {
		total += s.past + s.n
	}
	qkv := randVals(r, F16, total*a.Width(), 1.5)
	want, got := attnRefs(seqs, qkv, a), attnRefsE4M3(seqs, qkv, a)
	for i := range seqs {
		e := cpu.RelErr(got[i], want[i])
		t.Logf("sequence %d: relative error %.3g", i, e)
		if !(e > 1e-4 && e < 0.05) {
			t.Errorf("sequence %d: E4M3 roundings moved the outputs by %.3g relative, want within (1e-4, 0.05)", i, e)
		}
	}
	x := []float32{448, -224, 0.5, 0, 14, -0.0625}
	q := make([]float32, len(x))
	roundRowE4M3(q, x)
	for d := range x {
		if q[d] != x[d] {
			t.Errorf("roundRowE4M3(%v)[%d] = %g, want %g", x, d, q[d], x[d])
		}
	}
}

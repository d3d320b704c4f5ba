//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestGemmSwiGLU checks the down projection with the SwiGLU prologue
// (decode, M <= GemvSwiGLUMaxM) against the CPU: engine/cpu.RefSwiGLU on
// the fused gate_up rows, rounded to the dtype as the separate kernel
// stores it, then the reference GEMM.
func TestGemmSwiGLU(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct{ n, k int }{{2048, 5632}, {64, 160}, {100, 40}, {8, 8}} {
			for m := 1; m <= GemvSwiGLUMaxM; m++ {
				t.Run(fmt.Sprintf("%s/M%d_N%d_K%d", dt, m, c.n, c.k), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						gu := randVals(r, dt, m*2*c.k, 4)
						wv := randVals(r, dt, c.n*c.k, 0.5)
						act := make([]float32, m*c.k)
						cpu.RefSwiGLU(act, gu, m, c.k)
						act = dt.Decode(dt.Encode(act))
						wRows := make([][]float32, c.n)
						for j := range wRows {
							wRows[j] = wv[j*c.k : (j+1)*c.k]
						}
						y := devPoisoned(t, g, dt, m*c.n)
						if err := g.GemmSwiGLU(g.Stream, dt, y, devUpload(t, g, dt, gu), devUpload(t, g, dt, wv), m, c.n, c.k); err != nil {
							t.Fatal(err)
						}
						checkRel(t, "swiglu+gemv", download(t, g, dt, y, m*c.n), refGemmCols(act, wRows, m, c.k))
					})
				})
			}
		}
	}
}

// TestRopeKV checks the fused RoPE + cache write against engine/cpu's
// RefRoPE: the rotated QKV rows (values untouched) and every cache
// position written (rotated keys, values), on a poisoned cache.
func TestRopeKV(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			name string
			cfg  model.Config
		}{
			{"tinyllama", model.Config{Heads: 32, KVHeads: 4, HeadDim: 64, RopeTheta: 10000}},
			{"llama3.1-8b", model.Config{Heads: 32, KVHeads: 8, HeadDim: 128, RopeTheta: 500000}},
			{"tiny", model.Config{Heads: 4, KVHeads: 2, HeadDim: 16, RopeTheta: 10000}},
		} {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					a := AttnShape{Heads: c.cfg.Heads, KVHeads: c.cfg.KVHeads, HeadDim: c.cfg.HeadDim}
					h := model.HeadLayout{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim}
					const tokens, slots, capacity = 23, 5, 64
					W, D, KV := a.Width(), a.HeadDim, a.KVHeads
					table := model.RopeTable(c.cfg, capacity)
					pos, slot := make([]int32, tokens), make([]int32, tokens)
					for i := range pos { // distinct (slot, position) pairs
						slot[i], pos[i] = int32(i%slots), int32(i/slots*3+r.IntN(3))
					}
					qkv := randVals(r, dt, tokens*W, 2)
					buf := devUpload(t, g, dt, qkv)
					kc, vc := devPoisoned(t, g, dt, slots*KV*capacity*D), devPoisoned(t, g, dt, slots*KV*capacity*D)
					if err := g.RopeKV(g.Stream, dt, kc, vc, buf, devUploadT(t, g, pos), devUploadT(t, g, slot), devUploadT(t, g, table),
						tokens, capacity, a); err != nil {
						t.Fatal(err)
					}
					qw := h.Heads * D
					cpu.RefRoPE(qkv, pos, table, tokens, W, h.Heads, D)
					cpu.RefRoPE(qkv[qw:], pos, table, tokens, W, h.KVHeads, D)
					checkRel(t, "qkv", download(t, g, dt, buf, tokens*W), qkv)
					kAll, vAll := download(t, g, dt, kc, slots*KV*capacity*D), download(t, g, dt, vc, slots*KV*capacity*D)
					var kGot, vGot, kRef, vRef []float32
					for i := range tokens {
						for hh := range KV {
							at := ((int(slot[i])*KV+hh)*capacity + int(pos[i])) * D
							kGot = append(kGot, kAll[at:at+D]...)
							vGot = append(vGot, vAll[at:at+D]...)
							kRef = append(kRef, qkv[i*W+qw+hh*D:i*W+qw+(hh+1)*D]...)
							vRef = append(vRef, qkv[i*W+qw+KV*D+hh*D:i*W+qw+KV*D+(hh+1)*D]...)
						}
					}
					checkRel(t, "cached keys", kGot, kRef)
					checkRel(t, "cached values", vGot, vRef)
				})
			})
		}
	}
}

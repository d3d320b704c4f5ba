//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestGemmFused checks the decode GEMV with its neighbours folded in
// against the CPU, each intermediate rounded to the dtype as the unfused
// kernels store it: SwiGLU behind gate_up (GLU), RMSNorm in front (Norm,
// with and without writing the normalised rows out), both, and the
// residual add behind (Residual). Shapes: TinyLlama's MLP and QKV, a
// ragged N (the last warp covers fewer outputs) and the smallest.
func TestGemmFused(t *testing.T) {
	type fusion struct {
		name           string
		glu, norm, res bool
		writeX         bool
	}
	fusions := []fusion{
		{name: "glu", glu: true},
		{name: "norm", norm: true, writeX: true},
		{name: "norm-noout", norm: true},
		{name: "normglu", norm: true, glu: true, writeX: true},
		{name: "res", res: true},
	}
	for _, dt := range dtypes {
		for _, fz := range fusions {
			for _, c := range []struct{ n, k int }{{5632, 2048}, {2560, 2048}, {100, 40}, {8, 8}} {
				for _, m := range []int{1, 2, 3, 4, 8} {
					t.Run(fmt.Sprintf("%s/%s/M%d_N%d_K%d", dt, fz.name, m, c.n, c.k), func(t *testing.T) {
						do(t, func(t testing.TB, g *GPU) { checkGemmFused(t, g, dt, m, c.n, c.k, fz.glu, fz.norm, fz.res, fz.writeX) })
					})
				}
			}
		}
	}
}

func checkGemmFused(t testing.TB, g *GPU, dt DType, m, n, k int, glu, norm, res, writeX bool) {
	r := newRand(t)
	rowsW := n
	if glu {
		rowsW = 2 * n
	}
	xin := randVals(r, dt, m*k, 1)
	wv := randVals(r, dt, rowsW*k, 0.5)
	wRows := make([][]float32, rowsW)
	for j := range wRows {
		wRows[j] = wv[j*k : (j+1)*k]
	}
	fu := GemvFusion{GLU: glu, Residual: res}
	x := devUpload(t, g, dt, xin)
	var xo Buffer
	if norm {
		nw := randVals(r, dt, k, 2)
		if writeX {
			xo = devPoisoned(t, g, dt, m*k)
		}
		fu.Norm = &GemvNorm{Residual: x, Weight: devUpload(t, g, dt, nw), Out: xo, Eps: 1e-5}
		normed := make([]float32, m*k)
		cpu.RefRMSNorm(normed, xin, nw, m, k, 1e-5)
		xin = dt.Decode(dt.Encode(normed))
		x = Buffer{}
	}
	ref := refGemmCols(xin, wRows, m, k)
	if glu {
		gu := dt.Decode(dt.Encode(ref))
		ref = make([]float32, m*n)
		cpu.RefSwiGLU(ref, gu, m, n)
	}
	var y Buffer
	if res {
		y0 := randVals(r, dt, m*n, 4)
		y = devUpload(t, g, dt, y0)
		ref = dt.Decode(dt.Encode(ref))
		for i := range ref {
			ref[i] += y0[i]
		}
	} else {
		y = devPoisoned(t, g, dt, m*n)
	}
	if err := g.GemmFused(g.Stream, dt, y, x, devUpload(t, g, dt, wv), m, n, k, fu); err != nil {
		t.Fatal(err)
	}
	checkRel(t, "fused gemv", download(t, g, dt, y, m*n), ref)
	if writeX {
		checkRel(t, "normalised rows", download(t, g, dt, xo, m*k), xin)
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

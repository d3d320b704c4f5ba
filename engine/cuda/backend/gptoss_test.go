//go:build cgo && linux

package backend

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// GPT-OSS on the GPU against the CPU backend (float32): its ops on fresh
// random input, then a tiny model through the scripted iterations (a
// window of 8 that prefills of 40 and 70 tokens and every decode run
// past, decode graphs captured and replayed), then the transformers
// goldens where they have been made.

// ossSpy is routeSpy (moe_test.go) with the CPU's GPT-OSS ops, so the
// routing-tie check runs GPT-OSS models too.
type ossSpy struct {
	*routeSpy
	oss model.OSSBackend
}

func (s ossSpy) AddBias(x, bias model.Tensor, rows int) { s.oss.AddBias(x, bias, rows) }
func (s ossSpy) OSSAttention(out, qkv, sinks model.Tensor, cache model.KVCache, layer, window int) {
	s.oss.OSSAttention(out, qkv, sinks, cache, layer, window)
}
func (s ossSpy) OSSMoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias model.Tensor, rows, k int, act model.GLU) {
	s.oss.OSSMoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias, rows, k, act)
}

// ossConfig is a tiny GPT-OSS the kernels take (head dim a multiple of
// 32): every feature, a window of 8 on layers 0 and 2.
func ossConfig() model.Config {
	return model.Config{Name: "tiny-oss", Family: "gpt-oss", Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64,
		Vocab: 512, DatasetVocab: 512, RMSEps: 1e-5, RopeTheta: 150000, MaxPos: 4096, Experts: 4, TopK: 2, Routing: model.RoutingTopKSoftmax,
		RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: new(bool)},
		OSS:         model.OSS{SlidingWindow: 8, Sinks: true, AttnBias: true, RouterBias: true, ExpertBias: true, SwiGLULimit: 7, SwiGLUAlpha: 1.702}}
}

// TestOSSOpsMatchCPU checks AddBias, OSSAttention (a ring cache, a window
// of 5, sinks, a prefill longer than the window, then mixed and decode
// iterations) and OSSMoE (biases, the clamp) against the CPU backend.
func TestOSSOpsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, dt := range []string{"float16", "bfloat16"} {
		t.Run(dt, func(t *testing.T) {
			bound := 1e-2
			if dt == "bfloat16" {
				bound = 3e-2
			}
			be, ref := newBackend(t, "auto", dt), newCPU(t)
			r := rand.New(rand.NewPCG(21, 1))
			randn := func(n int, s float64) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.NormFloat64() * s)
				}
				return v
			}
			both := func(f func(b model.Backend) model.Tensor) [2]model.Tensor { return [2]model.Tensor{f(be), f(ref)} }
			must := func(t model.Tensor, err error) model.Tensor {
				if err != nil {
					panic(err)
				}
				return t
			}
			input := func(v []float32, shape ...int) [2]model.Tensor {
				return both(func(b model.Backend) model.Tensor {
					x := must(b.Alloc("x", model.Float, shape...))
					if err := b.WriteFloat32(x, v); err != nil {
						t.Fatal(err)
					}
					return x
				})
			}
			weight := func(kind model.WeightKind, v []float32, shape ...int) [2]model.Tensor {
				return both(func(b model.Backend) model.Tensor { return must(b.Upload("w", kind, model.HostF32(shape, v))) })
			}
			read := func(x [2]model.Tensor, rows, cols int) (got, want []float32) {
				got, want = make([]float32, rows*cols), make([]float32, rows*cols)
				if err := be.ReadFloat32(got, x[0], rows); err != nil {
					t.Fatal(err)
				}
				if err := ref.ReadFloat32(want, x[1], rows); err != nil {
					t.Fatal(err)
				}
				return
			}
			oss := [2]model.OSSBackend{be.(model.OSSBackend), ref.(model.OSSBackend)}

			// AddBias.
			var b model.Batch
			b.Add(0, 0, make([]int32, 6), true)
			for i, x := range []model.Backend{be, ref} {
				if err := x.SetBatch(&b); err != nil {
					t.Fatal(i, err)
				}
			}
			x := input(randn(6*40, 1), 6, 40)
			bias := weight(model.Vector, randn(40, 1), 40)
			for i := range 2 {
				oss[i].AddBias(x[i], bias[i], 6)
			}
			got, want := read(x, 6, 40)
			relErr(t, "AddBias", got, want, bound)

			// OSSAttention over iterations.
			hl := model.HeadLayout{Heads: 8, KVHeads: 2, HeadDim: 64}
			const window = 5
			kc := model.KVConfig{Layers: 2, Slots: 3, Capacity: 64, HeadLayout: hl, Ring: true, Window: window, Sliding: []bool{true, false}}
			var kv [2]model.KVCache
			for i, x := range []model.Backend{be, ref} {
				c, err := x.NewKVCache(kc)
				if err != nil {
					t.Fatal(err)
				}
				kv[i] = c
			}
			sinks := weight(model.Vector, randn(hl.Heads, 1), hl.Heads)
			W := hl.QKVWidth()
			past := [3]int{}
			for si, st := range [][3]int{{23, 0, 2}, {1, 9, 1}, {1, 1, 1}, {1, 1, 1}, {4, 1, 0}} {
				var b model.Batch
				for s, n := range st {
					if n > 0 {
						b.Add(s, past[s], make([]int32, n), true)
						past[s] += n
					}
				}
				T := len(b.Tokens)
				for i, x := range []model.Backend{be, ref} {
					if err := x.SetBatch(&b); err != nil {
						t.Fatal(i, err)
					}
				}
				// Room for a decode batch's padding rows (its graph bucket).
				qkv := input(randn(T*W, 1), 32, W)
				out := both(func(b model.Backend) model.Tensor { return must(b.Alloc("o", model.Float, 32, hl.Heads*hl.HeadDim)) })
				for layer, win := range []int{window, 0} {
					for i := range 2 {
						oss[i].OSSAttention(out[i], qkv[i], sinks[i], kv[i], layer, win)
					}
					got, want := read(out, T, hl.Heads*hl.HeadDim)
					relErr(t, fmt.Sprintf("OSSAttention step %d layer %d (window %d)", si, layer, win), got, want, bound)
				}
			}

			// OSSMoE.
			const E, k, H, F, rows = 4, 2, 64, 32, 9
			b.Reset()
			b.Add(0, 0, make([]int32, rows), true)
			for i, x := range []model.Backend{be, ref} {
				if err := x.SetBatch(&b); err != nil {
					t.Fatal(i, err)
				}
			}
			xs := input(randn(rows*H, 1), rows, H)
			ids := make([]int32, rows*k)
			wts := make([]float32, rows*k)
			for i := range ids {
				ids[i] = int32((i*3 + i/k) % E)
				wts[i] = float32(r.Float64())
			}
			idx := both(func(b model.Backend) model.Tensor {
				x := must(b.Alloc("i", model.Int32, rows, k))
				if err := b.WriteInt32(x, ids); err != nil {
					t.Fatal(err)
				}
				return x
			})
			wt := input(wts, rows, k)
			gu := weight(model.Experts, randn(E*2*F*H, 0.5), E, 2*F, H) // past the clamp at 7
			dn := weight(model.Experts, randn(E*H*F, 0.1), E, H, F)
			gub := weight(model.Table, randn(E*2*F, 1), E, 2*F)
			dnb := weight(model.Table, randn(E*H, 1), E, H)
			out := both(func(b model.Backend) model.Tensor { return must(b.Alloc("o", model.Float, rows, H)) })
			for i := range 2 {
				oss[i].OSSMoE(out[i], xs[i], idx[i], wt[i], gu[i], dn[i], gub[i], dnb[i], rows, k, model.GLU{Limit: 7, Alpha: 1.702})
			}
			got, want = read(out, rows, H)
			relErr(t, "OSSMoE", got, want, bound)
		})
	}
}

func newCPU(t testing.TB) model.Backend {
	t.Helper()
	ref, err := cpu.New(model.BackendOptions{Gemm: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return ref
}

// TestOSSModelMatchesCPU runs the tiny GPT-OSS through script (prefills
// of 40 and 70 tokens in prefill items the sink kernel follows back to the
// sequence's start; decode iterations eager, captured and replayed) on
// both GEMM paths and dtypes against the CPU backend.
func TestOSSModelMatchesCPU(t *testing.T) {
	needGPU(t)
	cfg := ossConfig()
	mc := newModel(t, newCPU(t), cfg, nil)
	sc := script(cfg.Vocab)
	var want [][]float32
	for _, s := range sc {
		want = append(want, runStep(t, mc, s))
	}
	for _, dt := range []string{"float16", "bfloat16"} {
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(dt+"/"+gemm, func(t *testing.T) {
				bound := tol
				if dt == "bfloat16" {
					// 8 bits of mantissa through every layer, and experts
					// whose gate/up products reach the clamp (measured on an
					// H100: 0.059 at most).
					bound = 8e-2
				}
				m := newModel(t, newBackend(t, gemm, dt), cfg, nil)
				if kc := m.KVConfig(8, 128); !kc.Ring || kc.LayerCapacity(0) != 8 {
					t.Fatalf("KV config %+v", kc)
				}
				for i, s := range sc {
					relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), runStep(t, m, s), want[i], bound)
				}
			})
		}
	}
}

// TestGoldenGPTOSS matches transformers' tiny GPT-OSS goldens (experts
// unquantized and MXFP4; bench/make_golden_gptoss.py) on the GPU, as
// TestGoldenHF does the others; skipped where they have not been made.
func TestGoldenGPTOSS(t *testing.T) {
	needGPU(t)
	for _, name := range []string{"tiny-gpt-oss", "tiny-gpt-oss-mxfp4"} {
		dir := filepath.Join("..", "..", "testdata", "hf", name)
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "reference.safetensors")); err != nil {
				t.Skipf("no golden %s: make it with `python3 bench/make_golden_gptoss.py OUT` and copy OUT/%s there", dir, name)
			}
			testGoldenHF(t, dir)
		})
	}
}

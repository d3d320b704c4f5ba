//go:build cgo && linux

package backend

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestPrefillRowsSameLogits serves prompt chunks, one after cached tokens,
// and decodes after them, on Llama-3.1-8B's attention shape (32 query
// heads over 8 KV heads of 128) cut to two layers, with the prefill
// attention on blocks of 128 query rows (XRUN_CUDA_ATTN_PREFILL_ROWS=128:
// items of 32 tokens, the chunks' lengths not multiples of it) and of 64
// (=64): every logit within 1e-3 of the other's and every greedy token the
// same.
func TestPrefillRowsSameLogits(t *testing.T) {
	needGPU(t)
	cfg, tok := llamaTwoLayers()
	steps := []step{
		{{0, 0, tok(1, 40)}, {1, 0, tok(2, 300)}},
		{{0, 40, tok(3, 1)}, {1, 300, tok(4, 150)}, {2, 0, tok(5, 70)}},
		{{0, 41, tok(6, 1)}, {1, 450, tok(7, 1)}, {2, 70, tok(8, 1)}},
	}
	for _, dt := range []string{"float16", "bfloat16"} {
		t.Run(dt, func(t *testing.T) {
			open := func(rows string) *model.Model {
				sw := fixedLt()
				sw.CUDAAttnXL = rows
				m, err := model.New(newBackendWith(t, "auto", dt, sw), cfg, model.Options{Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Reserve(model.Capacity{MaxTokens: 512, MaxLogitRows: 8, Slots: 4, MaxLen: 512}); err != nil {
					t.Fatal(err)
				}
				return m
			}
			m64, m128 := open("64"), open("128")
			same := true
			for i, s := range steps {
				want, wantIDs := runBatch(t, m64, s, nil)
				got, ids := runBatch(t, m128, s, nil)
				same = same && slices.Equal(got, want)
				if e := cpu.RelErr(got, want); !(e <= 1e-3) {
					t.Errorf("iteration %d (%d sequences): logits of 128-row blocks off the 64-row ones by %.3g (bound 1e-3)", i, len(s), e)
				}
				if !slices.Equal(ids, wantIDs) {
					t.Errorf("iteration %d: greedy tokens %v with 128-row blocks, %v with 64", i, ids, wantIDs)
				}
			}
			t.Logf("logits bitwise equal: %v", same)
		})
	}
}

// TestAttnWSSameLogits runs Llama-3.1-8B's shapes, cut to two layers,
// through prompt chunks long enough for the warp-specialised prefill
// kernel (attention_ws.cu: a mean of at least 2,048 keys a chunk over a
// 16-bit cache, 1,024 over an FP8 one), over fixed slots and over a paged
// cache (blocks of 32 positions in a random order), with
// XRUN_CUDA_ATTN_WS on and off: the logits of every iteration agree
// within two units of the type's rounding (the kernels round P after
// different float operations, and bf16 queries over an FP8 cache multiply
// in fp16 there), and the greedy tokens are the same.
func TestAttnWSSameLogits(t *testing.T) {
	needGPU(t)
	cfg, tok := llamaTwoLayers()
	steps := []step{
		{{0, 0, tok(1, 2100)}, {1, 0, tok(2, 2000)}},
		{{0, 2100, tok(3, 500)}, {1, 2000, tok(4, 1)}, {2, 0, tok(5, 1900)}},
		{{0, 2600, tok(6, 1)}, {1, 2001, tok(7, 1)}, {2, 1900, tok(8, 1)}},
	}
	for _, paged := range []bool{false, true} {
		for _, kv := range []string{"16-bit", "fp8"} {
			for _, dt := range []string{"float16", "bfloat16"} {
				name := kv + "/" + dt
				if paged {
					name = "paged/" + name
				}
				t.Run(name, func(t *testing.T) {
					capa := model.Capacity{MaxTokens: 4608, MaxLogitRows: 8, Slots: 4, MaxLen: 3072}
					var tables map[int][]int32
					if paged {
						capa.BlockSize, capa.Blocks = 32, 4*3072/32+5
						seed := rand.Uint64()
						t.Logf("block order seed %d", seed)
						tables = slotTables(rand.New(rand.NewPCG(seed, 1)), capa)
					}
					open := func(ws bool) *model.Model {
						sw := fixedLt()
						sw.CUDAAttnWS = ws
						m, err := model.New(newBackendWith(t, "auto", dt, sw), cfg, model.Options{Seed: 7, KVFP8: kv == "fp8"})
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Reserve(capa); err != nil {
							t.Fatal(err)
						}
						return m
					}
					bound := 2 * 0x1p-11 // fp16's unit roundoff, twice
					if dt == "bfloat16" {
						bound = 2 * 0x1p-8
					}
					off, on := open(false), open(true)
					for i, s := range steps {
						want, wantIDs := runBatch(t, off, s, tables)
						got, ids := runBatch(t, on, s, tables)
						if e := cpu.RelErr(got, want); !(e <= bound) {
							t.Errorf("iteration %d (%d sequences): logits with XRUN_CUDA_ATTN_WS off the wg kernels' by %.3g (bound %.3g)", i, len(s), e, bound)
						}
						if !slices.Equal(ids, wantIDs) {
							t.Errorf("iteration %d: greedy tokens %v warp-specialised, %v not", i, ids, wantIDs)
						}
					}
				})
			}
		}
	}
}

// llamaTwoLayers is Llama-3.1-8B's configuration cut to two layers, and
// n token ids of a seed within its vocabulary.
func llamaTwoLayers() (engine.ModelConfig, func(seed, n int) []int32) {
	cfg, _ := engine.ZooModel("llama-3.1-8b")
	cfg.Layers = 2
	return cfg, func(seed, n int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32((seed*7919 + i*104729) % cfg.Vocab)
		}
		return v
	}
}

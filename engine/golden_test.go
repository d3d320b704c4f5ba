package engine

import (
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

func loadGoldenModel(t *testing.T, dir, gemm string) *model.Model {
	t.Helper()
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be, err := cpu.New(model.BackendOptions{Gemm: gemm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m, err := model.New(be, cfg, model.Options{Weights: src})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reserve(model.Capacity{MaxTokens: 64, MaxLogitRows: 64, Slots: 4, MaxLen: 64}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGoldenHF checks the CPU backend against transformers: prompt logits
// within 1e-4 relative error and the 12 greedy tokens, through one prefill,
// through token-by-token decode with the KV cache (the prompt fed one token
// per iteration too), and with both prompts sharing every batch. The tiny
// GPT-OSS goldens (bench/make_golden_gptoss.py: sinks, a window of 8 on
// every other layer so the ring cache wraps, the biases, the clamped
// SwiGLU, YaRN; MXFP4 experts in the second) go through the same steps.
func TestGoldenHF(t *testing.T) {
	for _, name := range []string{"tiny-llama", "tiny-mixtral", "tiny-deepseek-v3", "tiny-gpt-oss", "tiny-gpt-oss-mxfp4"} {
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(name+"/"+gemm, func(t *testing.T) {
				dir := filepath.Join("testdata", "hf", name)
				cases := backendtest.ReadGolden(t, dir)
				m := loadGoldenModel(t, dir, gemm)
				V := m.Config().Vocab
				var b model.Batch
				next := make([]int32, 64)
				logits := make([]float32, 64*V)

				// 1. Prefill: all prompt rows' logits at once, then greedy decode.
				for ci, c := range cases {
					b.Reset()
					start := b.Add(ci, 0, c.Input, false)
					b.LogitRows = b.LogitRows[:0]
					for i := range c.Input {
						b.LogitRows = append(b.LogitRows, int32(start+i))
					}
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(logits); err != nil {
						t.Fatal(err)
					}
					if e := cpu.RelErr(logits[:len(c.Logits)], c.Logits); e > 1e-4 {
						t.Errorf("case %d prefill: logits rel err %.3g", ci, e)
					}
					if err := m.Argmax(next); err != nil {
						t.Fatal(err)
					}
					got := []int32{next[len(c.Input)-1]}
					for len(got) < len(c.Greedy) {
						b.Reset()
						b.Add(ci, len(c.Input)+len(got)-1, got[len(got)-1:], true)
						if err := m.Forward(&b); err != nil {
							t.Fatal(err)
						}
						m.Argmax(next)
						got = append(got, next[0])
					}
					checkTokens(t, "prefill+decode", ci, got, c.Greedy)
				}

				// 2. Token by token: the prompt too goes through the cache.
				for ci, c := range cases {
					seq := append([]int32{}, c.Input...)
					var rows []float32
					for pos := 0; pos < len(c.Input)+len(c.Greedy)-1; pos++ {
						b.Reset()
						b.Add(2, pos, seq[pos:pos+1], true)
						if err := m.Forward(&b); err != nil {
							t.Fatal(err)
						}
						m.ReadLogits(logits)
						m.Argmax(next)
						if pos < len(c.Input) {
							rows = append(rows, logits[:V]...)
						}
						if pos >= len(c.Input)-1 {
							seq = append(seq, next[0])
						}
					}
					if e := cpu.RelErr(rows, c.Logits); e > 1e-4 {
						t.Errorf("case %d token by token: logits rel err %.3g", ci, e)
					}
					checkTokens(t, "token by token", ci, seq[len(c.Input):], c.Greedy)
				}

				// 3. Shared batches: case 1 prefills in two chunks while case 0
				// decodes; then both decode together.
				c0, c1 := cases[0], cases[1]
				b.Reset()
				b.Add(0, 0, c0.Input, true)
				m.Forward(&b)
				m.Argmax(next)
				out0 := []int32{next[0]}
				var out1 []int32
				half := len(c1.Input) / 2
				b.Reset()
				b.Add(0, len(c0.Input), out0, true)
				b.Add(3, 0, c1.Input[:half], false)
				m.Forward(&b)
				m.Argmax(next)
				out0 = append(out0, next[0])
				for len(out0) < len(c0.Greedy) || len(out1) < len(c1.Greedy) {
					b.Reset()
					if len(out0) < len(c0.Greedy) {
						b.Add(0, len(c0.Input)+len(out0)-1, out0[len(out0)-1:], true)
					}
					if out1 == nil {
						b.Add(3, half, c1.Input[half:], true)
					} else if len(out1) < len(c1.Greedy) {
						b.Add(3, len(c1.Input)+len(out1)-1, out1[len(out1)-1:], true)
					}
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					m.Argmax(next)
					i := 0
					if len(out0) < len(c0.Greedy) {
						out0 = append(out0, next[0])
						i++
					}
					if i < len(b.LogitRows) {
						out1 = append(out1, next[i])
					}
				}
				checkTokens(t, "shared batch", 0, out0, c0.Greedy)
				checkTokens(t, "shared batch", 1, out1, c1.Greedy)
			})
		}
	}
}

func checkTokens(t *testing.T, how string, ci int, got, want []int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("case %d %s: %d tokens, want %d", ci, how, len(got), len(want))
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d %s: tokens %v, want %v", ci, how, got, want)
			return
		}
	}
}

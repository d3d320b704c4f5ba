package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// gptOSSGoldens are the tiny GPT-OSS goldens bench/make_golden_gptoss.py
// makes with transformers: experts unquantized, and MXFP4.
var gptOSSGoldens = []string{"tiny-gpt-oss", "tiny-gpt-oss-mxfp4"}

// TestGoldenGPTOSS checks the CPU backend against transformers on the
// tiny GPT-OSS goldens (sinks, a window of 8 on every other layer, the
// biases, the clamped SwiGLU, YaRN; MXFP4 experts in the second): prompt
// logits within 1e-4 relative error and the 12 greedy tokens, through one
// prefill then decode, and token by token through the ring cache. Where
// the goldens have not been made yet it is skipped, saying how to make
// them.
func TestGoldenGPTOSS(t *testing.T) {
	for _, name := range gptOSSGoldens {
		dir := filepath.Join("testdata", "hf", name)
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "reference.safetensors")); err != nil {
				t.Skipf("no golden %s: make it with `python3 bench/make_golden_gptoss.py OUT` where transformers is installed and copy OUT/%s to %s", dir, name, dir)
			}
			cases := backendtest.ReadGolden(t, dir)
			for _, gemm := range []string{"auto", "disable"} {
				m := loadGoldenModel(t, dir, gemm)
				V := m.Config().Vocab
				var b model.Batch
				next := make([]int32, 64)
				logits := make([]float32, 64*V)
				for ci, c := range cases {
					// Prefill (every prompt row's logits), then greedy decode.
					b.Reset()
					start := b.Add(ci, 0, c.Input, false)
					for i := range c.Input {
						b.LogitRows = append(b.LogitRows, int32(start+i))
					}
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					m.ReadLogits(logits)
					if e := cpu.RelErr(logits[:len(c.Logits)], c.Logits); e > 1e-4 {
						t.Errorf("%s case %d prefill: logits rel err %.3g", gemm, ci, e)
					}
					m.Argmax(next)
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
					checkTokens(t, gemm+" prefill+decode", ci, got, c.Greedy)

					// Token by token: the prompt too goes through the cache.
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
						t.Errorf("%s case %d token by token: logits rel err %.3g", gemm, ci, e)
					}
					checkTokens(t, gemm+" token by token", ci, seq[len(c.Input):], c.Greedy)
				}
			}
		})
	}
}

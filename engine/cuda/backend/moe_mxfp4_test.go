//go:build cgo && linux

package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// MXFP4 experts (moe_weights mxfp4) on the GPU against the CPU backend,
// which computes exactly on their dequantized values: the weights made on
// the device, whole models through the scripted iterations (decode graphs
// captured and replayed), and the tiny GPT-OSS MXFP4 golden. Written
// without a GPU: engine.ResolveMoEWeights keeps moe_weights auto on bf16
// experts on CUDA until these pass on one.

func newModelMXFP4(t testing.TB, be model.Backend, cfg model.Config, src model.WeightSource) *model.Model {
	t.Helper()
	m, err := model.New(be, cfg, model.Options{Seed: 7, Weights: src, MXFP4: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reserve(model.Capacity{MaxTokens: 256, MaxLogitRows: 64, Slots: 8, MaxLen: 128}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMXFP4Weights: RandomMXFP4 on the device is model.RandomMXFP4 bit for
// bit, UploadMXFP4 keeps codes and scales as given, and bad shapes are
// refused.
func TestMXFP4Weights(t *testing.T) {
	needGPU(t)
	be, ok := asBackend(newBackend(t, "auto", "bfloat16")) // paging on wraps the Backend
	if !ok {
		t.Fatal("no CUDA Backend")
	}
	shape := []int{4, 64, 2880}
	want, err := model.RandomMXFP4(shape, 99, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	rnd, err := be.RandomMXFP4("r", shape, 99, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	up, err := be.UploadMXFP4("u", want)
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]model.Tensor{"RandomMXFP4": rnd, "UploadMXFP4": up} {
		w, ok := be.mxfp4Of(ft(tt))
		if !ok || !slices.Equal(tt.Shape(), shape) {
			t.Fatalf("%s: not an MXFP4 tensor of %v", name, shape)
		}
		codes, scales := make([]byte, len(want.Blocks)), make([]byte, len(want.Scales))
		err := be.dev.Do(func(g *cuda.GPU) error {
			if err := cuda.DownloadSlice(g.Stream, codes, w.Codes.Slice(0, len(codes))); err != nil {
				return err
			}
			return cuda.DownloadSlice(g.Stream, scales, w.Scales.Slice(0, len(scales)))
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(codes, want.Blocks) || !slices.Equal(scales, want.Scales) {
			t.Errorf("%s: codes or scales differ from model.RandomMXFP4", name)
		}
	}
	if _, err := be.RandomMXFP4("bad", []int{2, 8, 48}, 1, 1); err == nil {
		t.Error("rows of 48: no error")
	}
	if _, err := be.UploadMXFP4("bad", model.MXFP4{Shape: shape, Blocks: want.Blocks[:16], Scales: want.Scales}); err == nil {
		t.Error("short codes: no error")
	}
}

// TestMXFP4ModelMatchesCPU runs the tiny GPT-OSS (OSSMoE: biases, the
// clamped SwiGLU) and tiny-moe (MoE) with MXFP4 experts through script on
// both GEMM paths and dtypes, against the CPU backend's MXFP4 model.
func TestMXFP4ModelMatchesCPU(t *testing.T) {
	needGPU(t)
	moe, ok := engine.ZooModel("tiny-moe")
	if !ok {
		t.Fatal("no zoo model tiny-moe")
	}
	for _, cfg := range []model.Config{ossConfig(), moe} {
		mc := newModelMXFP4(t, newCPU(t), cfg, nil)
		sc := script(cfg.Vocab)
		var want [][]float32
		for _, s := range sc {
			want = append(want, runStep(t, mc, s))
		}
		for _, dt := range []string{"float16", "bfloat16"} {
			for _, gemm := range []string{"auto", "disable"} {
				t.Run(cfg.Name+"/"+dt+"/"+gemm, func(t *testing.T) {
					bound := tol
					if dt == "bfloat16" {
						bound = 8e-2 // as TestOSSModelMatchesCPU's
					}
					m := newModelMXFP4(t, newBackend(t, gemm, dt), cfg, nil)
					for i, s := range sc {
						relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), runStep(t, m, s), want[i], bound)
					}
				})
			}
		}
	}
}

// TestMXFP4GoldenGPTOSS matches transformers' tiny GPT-OSS MXFP4 golden
// with the experts kept as MXFP4 on the GPU: the prompt's logits in one
// prefill and the greedy tokens token by token, up to a step whose top
// two logits are nearly tied.
func TestMXFP4GoldenGPTOSS(t *testing.T) {
	needGPU(t)
	dir := filepath.Join("..", "..", "testdata", "hf", "tiny-gpt-oss-mxfp4")
	if _, err := os.Stat(filepath.Join(dir, "reference.safetensors")); err != nil {
		t.Skipf("no golden %s", dir)
	}
	cases := backendtest.ReadGolden(t, dir)
	cfg, err := engine.LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, gemm := range []string{"auto", "disable"} {
		t.Run(gemm, func(t *testing.T) {
			src, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			m := newModelMXFP4(t, newBackend(t, gemm, "float16"), cfg, src)
			V := cfg.Vocab
			for ci, c := range cases {
				var b model.Batch
				start := b.Add(ci, 0, c.Input, false)
				b.LogitRows = b.LogitRows[:0]
				for i := range c.Input {
					b.LogitRows = append(b.LogitRows, int32(start+i))
				}
				if err := m.Forward(&b); err != nil {
					t.Fatal(err)
				}
				logits := make([]float32, len(c.Input)*V)
				if err := m.ReadLogits(logits); err != nil {
					t.Fatal(err)
				}
				relErr(t, fmt.Sprintf("case %d prefill logits", ci), logits, c.Logits, 1e-2)
				seq := slices.Clone(c.Input)
				one := make([]float32, V)
				next := make([]int32, 1)
				for pos := 0; pos < len(c.Input)+len(c.Greedy)-1; pos++ {
					b.Reset()
					b.Add(4+ci, pos, seq[pos:pos+1], true)
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(one); err != nil {
						t.Fatal(err)
					}
					if err := m.Argmax(next); err != nil {
						t.Fatal(err)
					}
					if pos < len(c.Input)-1 {
						continue
					}
					k := len(seq) - len(c.Input)
					if next[0] != c.Greedy[k] {
						if nearTie(one) {
							t.Logf("case %d: greedy token %d differs at a near tie; stopping there", ci, k)
							break
						}
						t.Errorf("case %d: greedy token %d is %d, reference %d", ci, k, next[0], c.Greedy[k])
						break
					}
					seq = append(seq, next[0])
				}
			}
		})
	}
}

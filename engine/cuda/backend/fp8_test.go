//go:build cgo && linux

package backend

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 (dtype fp8) on the GPU against the CPU backend's FP8 path, the
// reference (engine/cpu/fp8.go).

// fp8ModelTol bounds the whole model's logits against the CPU's FP8 run.
// Both quantize the same weights to the same codes; the activations
// differ by bf16's rounding on the GPU (float32 on the CPU), which moves
// an activation's code by one step now and then (E4M3's steps are 2^-3
// relative) and compounds through the layers: the bf16 model's own bound
// (5e-2, TestCUDAMatchesCPU) doubled.
const fp8ModelTol = 1e-1

func newModelOpt(t testing.TB, be model.Backend, cfg model.Config, opt model.Options) *model.Model {
	t.Helper()
	opt.Seed = 7
	m, err := model.New(be, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reserve(model.Capacity{MaxTokens: 256, MaxLogitRows: 64, Slots: 8, MaxLen: 128}); err != nil {
		t.Fatal(err)
	}
	return m
}

// fp8Reference runs cfg with FP8 GEMMs on the CPU backend (the reference)
// through the scripted batches: the script and each step's logits.
func fp8Reference(t testing.TB, cfg model.Config) ([]step, [][]float32) {
	return cpuReference(t, cfg, model.Options{FP8: true})
}

// cpuReference runs cfg with opt on the CPU backend through the scripted
// batches: the script and each step's logits.
func cpuReference(t testing.TB, cfg model.Config, opt model.Options) ([]step, [][]float32) {
	t.Helper()
	ref, err := cpu.New(model.BackendOptions{Gemm: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	mc := newModelOpt(t, ref, cfg, opt)
	sc := script(cfg.Vocab)
	var want [][]float32
	for _, s := range sc {
		want = append(want, runStep(t, mc, s))
	}
	return sc, want
}

// TestCUDAFP8MatchesCPU runs tiny-llama and tiny-dense with FP8 GEMMs on
// the CPU (the reference) and on the GPU (bf16 activations, both GEMM
// paths) through the scripted batches (prefill, mixed, decode eager,
// captured and replayed), compares every logit row, and reports the greedy
// agreement with the CPU's FP8 run and with the GPU's bf16 run.
func TestCUDAFP8MatchesCPU(t *testing.T) {
	needGPU(t)
	for _, name := range []string{"tiny-llama", "tiny-dense"} {
		cfg := zooConfig(t, name)
		sc, want := fp8Reference(t, cfg)
		var bf16 [][]float32
		mb := newModelOpt(t, newBackend(t, "auto", "bfloat16"), cfg, model.Options{})
		for _, s := range sc {
			bf16 = append(bf16, runStep(t, mb, s))
		}
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(fmt.Sprintf("%s/%s", name, gemm), func(t *testing.T) {
				m := newModelOpt(t, newBackend(t, gemm, "bfloat16"), cfg, model.Options{FP8: true})
				var agreeCPU, agreeBF16, rows int
				for i, s := range sc {
					got := runStep(t, m, s)
					relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), got, want[i], fp8ModelTol)
					V := cfg.Vocab
					for r := range len(s) {
						g := refArgmax(got[r*V : (r+1)*V])
						rows++
						if g == refArgmax(want[i][r*V:(r+1)*V]) {
							agreeCPU++
						}
						if g == refArgmax(bf16[i][r*V:(r+1)*V]) {
							agreeBF16++
						}
					}
				}
				t.Logf("greedy agreement: %d of %d rows with the CPU's FP8 run, %d of %d with the GPU's bf16 run", agreeCPU, rows, agreeBF16, rows)
				if agreeCPU*2 < rows {
					t.Errorf("greedy tokens agree with the CPU's FP8 run on only %d of %d rows", agreeCPU, rows)
				}
			})
		}
	}
}

// TestFP8CheckpointMatMul uploads F8_E4M3 weights as a checkpoint holds
// them (per-tensor and per-channel weight scales; static, dynamic and
// per-token activations) to the GPU and the CPU backends and compares one
// MatMul at decode and prefill sizes: the same input values quantize to
// the same codes on both, so only accumulation order and bf16's output
// rounding differ.
func TestFP8CheckpointMatMul(t *testing.T) {
	needGPU(t)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const n, k = 320, 256
	w := make([]float32, n*k)
	for i := range w {
		w[i] = (2*r.Float32() - 1) * float32(1+i/k%5)
	}
	for _, c := range []struct {
		name       string
		perChannel bool
		input      float32
		perToken   bool
	}{
		{"per-tensor/static", false, 0.02, false},
		{"per-tensor/dynamic", false, 0, false},
		{"per-channel/static", true, 0.02, false},
		{"per-channel/per-token", true, 0, true},
	} {
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(c.name+"/"+gemm, func(t *testing.T) {
				h := model.HostTensor{Shape: []int{n, k}, DType: "F8_E4M3", Data: make([]byte, n*k),
					FP8: &model.FP8Scales{Input: c.input, PerToken: c.perToken}}
				if c.perChannel {
					for j := range n {
						s := fp8.Scale(fp8.AbsMax(w[j*k : (j+1)*k]))
						fp8.Quantize(h.Data[j*k:(j+1)*k], w[j*k:(j+1)*k], s)
						h.FP8.Weight = append(h.FP8.Weight, s)
					}
				} else {
					s := fp8.Scale(fp8.AbsMax(w))
					fp8.Quantize(h.Data, w, s)
					h.FP8.Weight = []float32{s}
				}
				ref, err := cpu.New(model.BackendOptions{Gemm: "auto"})
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				gpu := newBackend(t, gemm, "bfloat16")
				for _, m := range []int{1, 3, 40} {
					x := make([]float32, m*k)
					for i := range x {
						x[i] = cuda.BF16.ToFloat32(cuda.BF16.FromFloat32(2*r.Float32() - 1))
					}
					var outs [2][]float32
					for bi, be := range []model.Backend{ref, gpu} {
						wt, err := be.Upload("w", model.Matrix, h)
						if err != nil {
							t.Fatal(err)
						}
						xt, err := be.Alloc("x", model.Float, m, k)
						if err != nil {
							t.Fatal(err)
						}
						yt, err := be.Alloc("y", model.Float, m, n)
						if err != nil {
							t.Fatal(err)
						}
						if err := be.WriteFloat32(xt, x); err != nil {
							t.Fatal(err)
						}
						be.MatMul(yt, xt, wt, m)
						outs[bi] = make([]float32, m*n)
						if err := be.ReadFloat32(outs[bi], yt, m); err != nil {
							t.Fatal(err)
						}
					}
					relErr(t, fmt.Sprintf("M=%d", m), outs[1], outs[0], 1e-2)
				}
			})
		}
	}
}

// TestEngineRunFP8 serves a dataset through engine.New / Run with dtype
// fp8 on the cuda backend (the runner's path), both GEMM paths, and checks
// that a KV cache the backend cannot keep is a spec error naming the
// parameter.
func TestEngineRunFP8(t *testing.T) {
	needGPU(t)
	for _, gemm := range []string{"auto", "disable"} {
		e, err := engine.New(context.Background(), engine.Config{Model: "tiny-dense", Backend: "cuda", BatchSize: 8, Warmup: 2, Dtype: "fp8", GemmPlugin: gemm})
		if err != nil {
			t.Fatal(err)
		}
		p := datasets.Params{Dist: datasets.NormDist, NumRequests: 20, InputMean: 40, InputStdev: 10, OutputMean: 20, OutputStdev: 5,
			Seed: datasets.DefaultSeed, VocabSize: e.Model().DatasetVocab, EOSID: e.Model().EOS}
		reqs, err := datasets.GenerateAll(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Requests {
			if len(r.OutputIDs) != reqs[i].OutputTokens {
				t.Errorf("%s: request %d: %d tokens, want %d", gemm, i, len(r.OutputIDs), reqs[i].OutputTokens)
			}
		}
		t.Logf("%s (fp8): %.0f output tok/s", e.Backend(), res.Metrics["system_output_throughput_tok_s"])
	}
	// tiny-llama's heads (16) have no tensor-core attention: the FP8
	// cache is refused when the run makes it.
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", Backend: "cuda", KVCacheDtype: "fp8"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reqs, err := datasets.GenerateAll(datasets.Params{Dist: datasets.NormDist, NumRequests: 2, InputMean: 8, OutputMean: 4,
		Seed: datasets.DefaultSeed, VocabSize: e.Model().DatasetVocab, EOSID: e.Model().EOS})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(context.Background(), reqs, engine.RunOptions{})
	var pe *engine.ParamError
	if !errors.As(err, &pe) || pe.Field != "kv_cache_dtype" {
		t.Errorf("tiny-llama, kv_cache_dtype fp8: %v, want a ParamError on kv_cache_dtype", err)
	}
}

// TestKVBudgetAfterActivations: the cache MaxKVSlots sizes still fits
// once more activations are allocated after the sizing (at batch 2048, TensorRT-LLM's
// default and the perf-overview study's, the cache is the whole budget).
func TestKVBudgetAfterActivations(t *testing.T) {
	needGPU(t)
	be := newBackend(t, "auto", "bfloat16")
	c := model.KVConfig{Layers: 4, Capacity: 4096, HeadLayout: model.HeadLayout{Heads: 8, KVHeads: 8, HeadDim: 128}}
	c.Slots = be.(model.KVBudget).MaxKVSlots(c)
	if c.Slots < 1 {
		t.Fatalf("MaxKVSlots = %d", c.Slots)
	}
	if _, err := be.Alloc("activations", model.Float, 4096, 128<<10); err != nil { // 1 GiB
		t.Fatal(err)
	}
	if _, err := be.NewKVCache(c); err != nil {
		t.Fatalf("the cache MaxKVSlots sized (%d slots) does not fit once the activations are allocated: %v", c.Slots, err)
	}
}

// TestKVBudgetStands: every run of an engine holds as many requests at once
// where the KV cache bounds them. Measured again for each run, the budget
// shrank by what the first run left allocated (graphs, scratch), and a
// cell's first repeat ran more requests at once than the others.
func TestKVBudgetStands(t *testing.T) {
	needGPU(t)
	// tiny-llama keeps 256 bytes of K and V a position in fp16: 16 KiB a
	// slot of these 64 positions, 600 slots 9.4 MiB, over 3e-5 of the
	// free memory of any GPU under 300 GiB (1e-4 of an H200's was not).
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", Backend: "cuda", BatchSize: 1024, KVCacheFreeGPUMemFraction: 3e-5})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reqs, err := datasets.GenerateAll(datasets.Params{Dist: datasets.NormDist, NumRequests: 600, InputMean: 48, OutputMean: 16,
		Seed: datasets.DefaultSeed, VocabSize: e.Model().DatasetVocab, EOSID: e.Model().EOS})
	if err != nil {
		t.Fatal(err)
	}
	var first int
	for i := range 3 {
		res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case res.MaxInFlight >= 600 || res.MaxInFlight < 1:
			t.Fatalf("run %d: %d requests at once: the KV cache should bound them below 600", i, res.MaxInFlight)
		case i == 0:
			first = res.MaxInFlight
		case res.MaxInFlight != first:
			t.Errorf("run %d held %d requests at once, run 0 %d", i, res.MaxInFlight, first)
		}
	}
	t.Logf("%d requests at once in every run", first)
}

//go:build cgo && linux

package backend

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// fp8KVModel is tiny-dense with heads of 64, the narrowest the FP8 cache's
// (tensor-core) attention takes.
func fp8KVModel(t testing.TB) model.Config {
	cfg := zooConfig(t, "tiny-dense")
	cfg.HeadDim = 64
	return cfg
}

// TestFP8KVMatchesCPU runs a model with an FP8 KV cache on the CPU (the
// reference: float32 values encoded E4M3(v / scale), decoded as read) and
// on the GPU (fp16 and bf16, both GEMM paths) through
// the scripted batches: prefill (RoPE, then KVWriteFP8), mixed, decode
// eager and in graphs (the _rope_f8 kernels write the new keys). Every
// logit row within the FP8 models' bound: the GPU encodes keys and values
// rounded to fp16/bf16 first, which moves a code by one step now and
// then.
func TestFP8KVMatchesCPU(t *testing.T) {
	needGPU(t)
	cfg := fp8KVModel(t)
	sc, want := cpuReference(t, cfg, model.Options{KVFP8: true})
	for _, dtype := range []string{"float16", "bfloat16"} {
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(fmt.Sprintf("%s/%s", dtype, gemm), func(t *testing.T) {
				fp8KVAgainstCPU(t, cfg, model.BackendOptions{Gemm: gemm, Dtype: dtype}, sc, want)
			})
		}
		// Decode steps with RoPE and the cache write in kernels of their own
		// (Rope, KVWriteFP8), as XRUN_CUDA_ATTN_ROPE's auto does for wide
		// decodes (cuda.AttnFoldPays), and folded wherever a kernel can.
		for _, rope := range []string{"0", "1"} {
			t.Run(fmt.Sprintf("rope=%s/%s", rope, dtype), func(t *testing.T) {
				sw := engine.DefaultSwitches()
				sw.CUDAAttnRope = rope
				fp8KVAgainstCPU(t, cfg, model.BackendOptions{Gemm: "auto", Dtype: dtype, Switches: &sw}, sc, want)
			})
		}
	}
}

// TestFP8KVRefusals: for a model whose attention is not on the tensor
// cores (heads of 32 or 16), the cache is refused with model.ErrNoFP8 when
// it is made.
func TestFP8KVRefusals(t *testing.T) {
	needGPU(t)
	for _, name := range []string{"tiny-dense", "tiny-llama"} {
		cfg := zooConfig(t, name)
		be, err := New(model.BackendOptions{Gemm: "auto", Dtype: "bfloat16"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(be, cfg, model.Options{KVFP8: true, Seed: 7})
		if err == nil {
			err = m.Reserve(model.Capacity{MaxTokens: 64, MaxLogitRows: 8, Slots: 2, MaxLen: 64})
		}
		if !errors.Is(err, model.ErrNoFP8) {
			t.Errorf("%s (heads of %d): %v, want model.ErrNoFP8", name, cfg.HeadDim, err)
		}
		be.Close()
	}
}

// TestFP8KVMMAMatchesCPU is TestFP8KVMatchesCPU at heads of 128 (Llama-
// 3's), the decode attention in each form XRUN_CUDA_ATTN_F8_MMA chooses:
// the codes converted in registers (_f8r), Q K^T on the E4M3 tensor cores
// (_f8q, each query row split into two E4M3 terms) and P V there too
// (_f8p), which must stay within the same bound. A GPU before sm_89 has no
// _f8q or _f8p (skipped).
func TestFP8KVMMAMatchesCPU(t *testing.T) {
	needGPU(t)
	d, err := cuda.Probe(context.Background())
	if err != nil || len(d.GPUs) == 0 {
		t.Fatalf("probe: %v", err)
	}
	cfg := fp8KVModel(t)
	cfg.HeadDim = 128
	sc, want := cpuReference(t, cfg, model.Options{KVFP8: true})
	// swap: the _f8t decode kernels (XRUN_CUDA_ATTN_F8_SWAP), any GPU.
	for _, mma := range []string{"0", "qk", "qkpv", "swap"} {
		for _, dtype := range []string{"float16", "bfloat16"} {
			t.Run(fmt.Sprintf("mma=%s/%s", mma, dtype), func(t *testing.T) {
				if g := d.GPUs[0]; mma != "0" && mma != "swap" && (g.Major < 8 || g.Major == 8 && g.Minor < 9) {
					t.Skipf("no _f8q or _f8p before sm_89 (%s): its decode steps are refused", g.Arch())
				}
				sw := engine.DefaultSwitches()
				if mma == "swap" {
					// Unfolded, as launches of more than 1,024 items run:
					// a launch with RoPE folded in keeps _f8r.
					sw.CUDAAttnF8Swap, sw.CUDAAttnRope = "1", "0"
				} else {
					sw.CUDAAttnF8MMA = mma
				}
				fp8KVAgainstCPU(t, cfg, model.BackendOptions{Gemm: "auto", Dtype: dtype, Switches: &sw}, sc, want)
			})
		}
	}
}

// fp8KVAgainstCPU runs the scripted batches sc with an FP8 cache on a
// backend of opts and checks every logit row against the CPU's, want,
// within the FP8 models' bound.
func fp8KVAgainstCPU(t *testing.T, cfg model.Config, opts model.BackendOptions, sc []step, want [][]float32) {
	be, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m := newModelOpt(t, be, cfg, model.Options{KVFP8: true})
	for i, s := range sc {
		relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), runStep(t, m, s), want[i], fp8ModelTol)
	}
}

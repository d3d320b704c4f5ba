package runner

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine"
)

// fp8Check refuses at plan time the FP8 cells a run would fail on (issue
// 22): dtype fp8 and kv_cache_dtype fp8 are xrun's own engine's
// (TensorRT-LLM takes FP8 as a quantized checkpoint, not a dtype), MLA
// models' block-scaled FP8 is not supported, nor is FP8 with GPT-OSS's
// expert biases or its sinks and window, and the CUDA backend's FP8 KV
// cache needs its tensor-core attention (heads of 64 or 128). On engine
// auto the backend is chosen when the study runs, so
// the plan warns and autoCudaFP8Error keeps the error for
// Cell.CheckBackend.
func (d *decoder) fp8Check(p *Params, m *engine.ModelConfig, na uint64, vals []int32, warn func(string)) error {
	gemms := p.Dtype == "fp8" && na&(1<<pDtype) == 0
	kv := p.KVCacheDtype == "fp8" && na&(1<<pKVCacheDtype) == 0
	if !gemms && !kv {
		return nil
	}
	if gemms && p.Engine == "trtllm" {
		n, f := d.blame(vals, pDtype, pEngine)
		return d.errAt(n, f, "dtype fp8 on engine trtllm: TensorRT-LLM takes FP8 as a quantized checkpoint (ModelOpt's quant_algo FP8), not a dtype; give such a model directory with dtype bfloat16")
	}
	if !builtinEngine(p.Engine) {
		return nil
	}
	if engine.NeedsMLA(*m) {
		pi := pDtype
		if !gemms {
			pi = pKVCacheDtype
		}
		n, f := d.blame(vals, pi, pModel)
		return d.errAt(n, f, "%s fp8: model %s is an MLA model (DeepSeek-V3), whose block-scaled FP8 is not supported; use float16 or bfloat16", params[pi].path, p.Model)
	}
	// GPT-OSS's features have no FP8 on any backend (engine/model's
	// ossCheck), so engine cpu is no way out either.
	switch {
	case gemms && m.OSSExperts():
		n, f := d.blame(vals, pDtype, pModel)
		return d.errAt(n, f, "dtype fp8: model %s's GPT-OSS expert biases and clamped SwiGLU have no FP8 GEMMs on any backend; use bfloat16 or float16", p.Model)
	case kv && m.OSSAttention():
		n, f := d.blame(vals, pKVCacheDtype, pModel)
		return d.errAt(n, f, "kv_cache_dtype fp8: model %s's GPT-OSS attention sinks and sliding window have no FP8 KV cache on any backend; use kv_cache_dtype auto", p.Model)
	}
	msg, pi := cudaFP8Problem(kv, m)
	if msg == "" {
		return nil
	}
	switch p.Engine {
	case "cuda":
		n, f := d.blame(vals, pi, pEngine)
		return d.errAt(n, f, "engine cuda: %s", msg)
	case "auto":
		n, f := d.blame(vals, pi, pEngine)
		warn(fmt.Sprintf("%s fp8 on engine auto (%s, %s): where a GPU is usable the run refuses these cells (%s); engine cpu runs them anywhere", params[pi].path, f, d.where(n), msg))
	}
	return nil
}

// cudaFP8Problem says what of a cell's FP8 the CUDA backend cannot run,
// and the parameter that asks for it; "" when it can run it all: its FP8
// GEMMs take dense layers and MoE experts, and its FP8 KV cache (kv) the
// models whose attention runs on its tensor cores.
func cudaFP8Problem(kv bool, m *engine.ModelConfig) (string, int) {
	if kv && m.HeadDim != 64 && m.HeadDim != 128 {
		return fmt.Sprintf("kv_cache_dtype fp8 needs the CUDA backend's tensor-core attention (heads of 64 or 128), and model %s's heads are %d wide; engine cpu runs it as the reference", m.Name, m.HeadDim), pKVCacheDtype
	}
	return "", 0
}

// autoCudaFP8Error is the error Cell.CheckBackend returns for an FP8 cell
// of engine auto that the cuda backend cannot run; nil when it can.
func (d *decoder) autoCudaFP8Error(p *Params, na uint64, vals []int32) *SpecError {
	m := d.models[p.Model]
	if p.Engine != "auto" || m == nil {
		return nil
	}
	kv := p.KVCacheDtype == "fp8" && na&(1<<pKVCacheDtype) == 0
	msg, pi := cudaFP8Problem(kv, m)
	if msg == "" {
		return nil
	}
	n, f := d.blame(vals, pi, pEngine)
	return d.errAt(n, f, "engine auto, which runs on the cuda backend here: %s", msg)
}

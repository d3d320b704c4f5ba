package runner

import (
	"errors"
	"strings"
	"testing"
)

// dtype fp8 and kv_cache_dtype (issue 22) on the built-in engine: the
// plan keeps them apart on the cpu engine (where the other dtypes
// collapse), hands them to the engine, refuses what the CUDA backend
// cannot run, and warns on engine auto. (The refusals' messages are in
// testdata/bad, 220 onwards.)
func TestPlanFP8(t *testing.T) {
	cases := []struct {
		name, spec string
		cells      int    // cells planned
		err        string // a substring of the error; "" when the spec plans
		warning    string // a substring of the one warning; "" for none
	}{
		{"cpu keeps fp8 apart", "params: {model: tiny-llama, engine: cpu}\nmatrix: {dtype: [float16, bfloat16, fp8]}", 2, "", ""},
		{"cpu kv fp8", "params: {model: tiny-llama, engine: cpu}\nmatrix: {dtype: [bfloat16, fp8], kv_cache_dtype: [auto, fp8]}", 4, "", ""},
		{"cpu MoE fp8", "params: {model: tiny-moe, engine: cpu, dtype: fp8}", 1, "", ""},
		{"cuda dense fp8", "params: {model: tiny-llama, engine: cuda}\nmatrix: {dtype: [bfloat16, fp8], gemm_plugin: [auto, disable]}", 4, "", ""},
		{"cuda MoE fp8", "params: {model: tiny-moe, engine: cuda, dtype: fp8}", 1, "", ""},
		{"cuda kv fp8, heads of 16", "params: {model: tiny-llama, engine: cuda, kv_cache_dtype: fp8}", 0, "needs the CUDA backend's tensor-core attention (heads of 64 or 128), and model tiny-llama's heads are 16 wide", ""},
		{"cuda kv fp8, heads of 64", "params: {model: llama-3.2-1b, engine: cuda, kv_cache_dtype: fp8}", 1, "", ""},
		{"auto MoE fp8", "params: {model: tiny-moe, dtype: fp8}", 1, "", ""},
		{"auto kv fp8 warns", "params: {model: tiny-llama, kv_cache_dtype: fp8}", 1, "", "kv_cache_dtype fp8 on engine auto (params.kv_cache_dtype, line 1)"},
		{"kv_cache_dtype is the built-in engine's", "params: {model: tinyllama-1.1b, engine: trtllm}\nmatrix: {kv_cache_dtype: [auto, fp8]}", 1, "", ""},
		{"mla", "params: {model: tiny-deepseek, engine: cpu, kv_cache_dtype: fp8}", 0, "block-scaled FP8 is not supported", ""},
		// GPT-OSS's features have no FP8 on either backend (engine/model's
		// ossCheck): refused on cpu too, rather than failing at run time.
		{"gpt-oss fp8 on cpu", "params: {model: gpt-oss-20b, engine: cpu, dtype: fp8}", 0, "expert biases and clamped SwiGLU have no FP8 GEMMs", ""},
		{"gpt-oss kv fp8 on cpu", "params: {model: gpt-oss-20b, engine: cpu, kv_cache_dtype: fp8}", 0, "attention sinks and sliding window have no FP8 KV cache", ""},
		{"gpt-oss fp8 on auto", "params: {model: gpt-oss-20b, dtype: fp8}", 0, "expert biases and clamped SwiGLU have no FP8 GEMMs", ""},
		{"gpt-oss fp8 on cuda", "params: {model: gpt-oss-20b, engine: cuda, dtype: fp8}", 0, "expert biases and clamped SwiGLU have no FP8 GEMMs", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := planCells(t, c.spec, c.err, c.cells)
			if s == nil {
				return
			}
			checkWarning(t, s.Plan.Warnings, c.warning)
			// What the engine is given (and cell.json records).
			for i := range s.Plan.Cells {
				cell := &s.Plan.Cells[i]
				cfg := engineConfig(cell, "cpu")
				if cfg.Dtype != cell.Params.Dtype || cfg.KVCacheDtype != cell.Params.KVCacheDtype || cfg.KVCacheDtype == "" {
					t.Errorf("%s: engine config dtype %q kv %q, params %q %q", cell.ID, cfg.Dtype, cfg.KVCacheDtype, cell.Params.Dtype, cell.Params.KVCacheDtype)
				}
			}
		})
	}
	// On engine auto the refusal waits for the backend.
	s := mustParse(t, "params: {model: tiny-llama}\nmatrix:\n  kv_cache_dtype: [auto, fp8]\n")
	var refused int
	for i := range s.Plan.Cells {
		c := &s.Plan.Cells[i]
		err := c.CheckBackend("cuda")
		if c.Params.KVCacheDtype != "fp8" {
			if err != nil {
				t.Errorf("%s: %v", c.ID, err)
			}
			continue
		}
		refused++
		var se *SpecError
		if !errors.As(err, &se) || se.Line != 3 || se.Field != "matrix.kv_cache_dtype[1]" || c.CheckBackend("cpu") != nil {
			t.Errorf("%s on cuda: %v, want a *SpecError at line 3, matrix.kv_cache_dtype[1] (and none on cpu)", c.ID, err)
		}
	}
	if refused != 1 {
		t.Errorf("%d cells of kv_cache_dtype fp8, want 1", refused)
	}
}

// TestPlanFP8MoEOnCUDA: the CUDA backend runs FP8 experts, so a MoE
// model's fp8 cell on engine auto is not refused there either.
func TestPlanFP8MoEOnCUDA(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-moe, dtype: fp8}\n")
	for i := range s.Plan.Cells {
		if err := s.Plan.Cells[i].CheckBackend("cuda"); err != nil {
			t.Errorf("%s on cuda: %v", s.Plan.Cells[i].ID, err)
		}
	}
}

// fp8_activations: an axis of dtype fp8 on the built-in engine, in a
// cell's id only where given, handed to the engine as written, collapsed
// with other dtypes and on external engines, and in each cell's params
// where it applies. (A bad value's message is in testdata/bad, 233.)
func TestPlanFP8Activations(t *testing.T) {
	cases := []struct {
		name, spec string
		cells      int    // cells planned
		collapsed  string // a substring of every collapse reason; "" for none
		err        string // a substring of the error; "" when the spec plans
	}{
		{"cpu axis", "params: {model: tiny-llama, engine: cpu, dtype: fp8}\nmatrix: {fp8_activations: [auto, static, dynamic]}", 3, "", ""},
		{"cuda MoE axis", "params: {model: tiny-moe, engine: cuda, dtype: fp8}\nmatrix: {fp8_activations: [static, dynamic]}", 2, "", ""},
		{"bfloat16 collapses", "params: {model: tiny-llama, engine: cuda, dtype: bfloat16}\nmatrix: {fp8_activations: [static, dynamic]}", 1, "fp8_activations has no effect with dtype bfloat16", ""},
		{"with the dtype axis", "params: {model: tiny-llama, engine: cuda}\nmatrix: {dtype: [bfloat16, fp8], fp8_activations: [static, dynamic]}", 3, "fp8_activations has no effect with dtype bfloat16", ""},
		{"trtllm collapses", "params: {model: tinyllama-1.1b, engine: trtllm}\nmatrix: {fp8_activations: [static, dynamic]}", 1, "fp8_activations has no effect on engine trtllm", ""},
		{"bad value", "params: {model: tiny-llama, engine: cpu, dtype: fp8, fp8_activations: per_token}", 0, "", `"per_token" is not one of auto, static or dynamic`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := planCells(t, c.spec, c.err, c.cells)
			if s == nil {
				return
			}
			col := s.Plan.Collapsed
			if (c.collapsed == "") != (len(col) == 0) {
				t.Errorf("collapsed %+v, want some only with %q", col, c.collapsed)
			}
			for _, cc := range col {
				if !strings.Contains(cc.Reason, c.collapsed) {
					t.Errorf("collapse reason %q, want %q", cc.Reason, c.collapsed)
				}
			}
			for i := range s.Plan.Cells {
				cell := &s.Plan.Cells[i]
				if cfg := engineConfig(cell, "cpu"); cfg.FP8Activations != cell.Params.FP8Activations || cfg.FP8Activations == "" {
					t.Errorf("%s: engine config fp8_activations %q, params %q", cell.ID, cfg.FP8Activations, cell.Params.FP8Activations)
				}
				_, in := cell.Flat()["fp8_activations"]
				if want := cell.Params.Dtype == "fp8" && builtinEngine(cell.Params.Engine); in != want {
					t.Errorf("%s (dtype %s, engine %s): fp8_activations in its params %v, want %v", cell.ID, cell.Params.Dtype, cell.Params.Engine, in, want)
				}
			}
		})
	}
	// In the id where given only: a spec without it keeps its ids.
	checkIDWhenGiven(t, "model: tiny-llama, engine: cpu, dtype: fp8", "fp8_activations", "auto", "fp8act-", []string{"static", "dynamic"})
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// gptOSS20BConfig is openai/gpt-oss-20b's config.json (layer_types
// written out by the test).
const gptOSS20BConfig = `{
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, "eos_token_id": 200002,
  "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
  "initializer_range": 0.02, "intermediate_size": 2880, "layer_types": LAYERS, "max_position_embeddings": 131072,
  "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
  "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 199999,
  "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088
}`

func gptOSSLayers(n int) string {
	var l []string
	for i := range n {
		l = append(l, map[bool]string{true: `"sliding_attention"`, false: `"full_attention"`}[i%2 == 0])
	}
	return "[" + strings.Join(l, ", ") + "]"
}

// TestLoadHFConfigGPTOSS reads gpt-oss-20b's config.json: the zoo's
// gpt-oss-20b shape and features, MXFP4 experts noted; then variants and
// the refusals.
func TestLoadHFConfigGPTOSS(t *testing.T) {
	base := strings.Replace(gptOSS20BConfig, "LAYERS", gptOSSLayers(24), 1)
	c, err := parseHFConfig("oss", "oss/config.json", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	zoo, _ := ZooModel("gpt-oss-20b")
	if !c.MXFP4 || len(c.LayerTypes) != 24 || c.LayerWindow(0) != 128 || c.LayerWindow(1) != 0 {
		t.Errorf("MXFP4 %v, layer types %v", c.MXFP4, c.LayerTypes)
	}
	c.MXFP4, c.LayerTypes = false, nil
	if !reflect.DeepEqual(c.OSS, zoo.OSS) {
		t.Errorf("features %+v, the zoo's %+v", c.OSS, zoo.OSS)
	}
	if c.Hidden != zoo.Hidden || c.Layers != zoo.Layers || c.Heads != zoo.Heads || c.KVHeads != zoo.KVHeads || c.HeadDim != zoo.HeadDim ||
		c.FFN != zoo.FFN || c.Experts != zoo.Experts || c.TopK != zoo.TopK || c.Routing != zoo.Routing || c.Vocab != zoo.Vocab ||
		c.RopeTheta != zoo.RopeTheta || !reflect.DeepEqual(c.RopeScaling, zoo.RopeScaling) || c.Params() != zoo.Params() {
		t.Errorf("got  %+v\nzoo  %+v", c, zoo)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	edit := func(field, value string) []byte {
		s := base
		if i := strings.Index(s, `"`+field+`":`); i >= 0 {
			j := i + len(field) + 3
			depth := 0
			for ; j < len(s); j++ {
				switch s[j] {
				case '{', '[':
					depth++
				case '}', ']':
					depth--
				}
				if depth == 0 && (s[j] == ',' || s[j] == '\n') {
					break
				}
				if depth < 0 {
					break
				}
			}
			return []byte(s[:i] + `"` + field + `": ` + value + s[j:])
		}
		return []byte(strings.Replace(s, "{", `{"`+field+`": `+value+",", 1))
	}
	for _, v := range []struct {
		field, value string
		check        func(ModelConfig) bool
	}{
		{"quantization_config", "null", func(c ModelConfig) bool { return !c.MXFP4 }},
		{"attention_bias", "false", func(c ModelConfig) bool { return !c.AttnBias && c.Sinks }},
		{"swiglu_limit", "5.5", func(c ModelConfig) bool { return c.SwiGLULimit == 5.5 && c.ExpertGLU().Alpha == float32(gptOSSAlpha) }},
		{"sliding_window", "null", func(c ModelConfig) bool { return false }}, // layer_types has sliding layers: refused below
		{"layer_types", gptOSSLayers(0), func(c ModelConfig) bool { return false }},
	} {
		c, err := parseHFConfig("oss", "oss/config.json", edit(v.field, v.value))
		if v.field == "sliding_window" || v.field == "layer_types" {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), v.field) && !strings.Contains(err.Error(), "sliding_window") {
				t.Errorf("%s %s: %v, want a ConfigError", v.field, v.value, err)
			}
			continue
		}
		if err != nil || !v.check(c) {
			t.Errorf("%s %s: %v %+v", v.field, v.value, err, c.OSS)
		}
	}
	for _, v := range []struct{ field, value, msg string }{
		{"quantization_config", `{"quant_method": "fp8"}`, `"quantization_config.quant_method"`},
		{"swiglu_limit", "0", `"swiglu_limit"`},
		{"sliding_window", "-2", `"sliding_window"`},
		{"layer_types", `["sliding_attention"]`, `"layer_types"`},
		{"layer_types", strings.Replace(gptOSSLayers(24), "full_attention", "chunked_attention", 1), `"layer_types[1]"`},
	} {
		_, err := parseHFConfig("oss", "oss/config.json", edit(v.field, v.value))
		var ce *ConfigError
		if !errors.As(err, &ce) || !ce.BadInput() || !strings.Contains(err.Error(), v.msg) {
			t.Errorf("%s %s: %v, want a ConfigError about %s", v.field, v.value, err, v.msg)
		}
	}
	// Without layer_types a window alternates, sliding first.
	c, err = parseHFConfig("oss", "oss/config.json", edit("layer_types", "null"))
	if err != nil || c.LayerTypes != nil || c.LayerWindow(0) != 128 || c.LayerWindow(1) != 0 {
		t.Errorf("no layer_types: %v %v", err, c.LayerTypes)
	}
}

func FuzzLoadHFConfigGPTOSS(f *testing.F) {
	f.Add([]byte(strings.Replace(gptOSS20BConfig, "LAYERS", gptOSSLayers(24), 1)))
	f.Add([]byte(`{"model_type":"gpt_oss","hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,"num_local_experts":4,"num_experts_per_tok":2,"intermediate_size":8,"vocab_size":10,"rms_norm_eps":1e-5,"sliding_window":4,"layer_types":["full_attention","sliding_attention"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseHFConfig("model", "model/config.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), "config.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted a config the model rejects: %v", err)
		}
	})
}

// tinyOSSConfig is a gpt_oss config.json of the tiny golden's shape.
func tinyOSSConfig(mxfp4 bool) map[string]any {
	c := map[string]any{
		"architectures": []string{"GptOssForCausalLM"}, "model_type": "gpt_oss", "vocab_size": 128, "hidden_size": 64,
		"intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"num_local_experts": 4, "num_experts_per_tok": 2, "rms_norm_eps": 1e-5, "sliding_window": 8,
		"layer_types": []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention"},
		"rope_theta":  150000.0, "max_position_embeddings": 4096, "attention_bias": true, "swiglu_limit": 7.0,
		"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 4096, "truncate": false},
		"eos_token_id": 2, "bos_token_id": 1, "tie_word_embeddings": false,
	}
	if mxfp4 {
		c["quantization_config"] = map[string]any{"quant_method": "mxfp4"}
	}
	return c
}

// fp4Code picks a value the FP4 grid times 2^e holds exactly.
var fp4Grid = []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}

// writeTinyOSS writes a tiny gpt_oss checkpoint in transformers' layout,
// unquantized (F32) or with MXFP4 experts holding the same values: the
// expert weights are drawn from the FP4 grid times per-block powers of
// two, so both dequantize to identical values.
func writeTinyOSS(t *testing.T, dir string, mxfp4 bool) {
	t.Helper()
	cfg := tinyOSSConfig(mxfp4)
	const V, H, F, E, L, heads, kv, D = 128, 64, 32, 4, 4, 4, 2, 16
	seed := uint32(1)
	rnd := func() float32 { // deterministic, in [-1, 1)
		seed = seed*1664525 + 1013904223
		return float32(seed>>8)/float32(1<<23) - 1
	}
	vec := func(n int, s float32) model.HostTensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = s * rnd()
		}
		return model.HostF32([]int{n}, v)
	}
	mat := func(r, c int, s float32) model.HostTensor {
		h := vec(r*c, s)
		h.Shape = []int{r, c}
		return h
	}
	ts := map[string]model.HostTensor{
		"model.embed_tokens.weight": mat(V, H, 1), "lm_head.weight": mat(V, H, 0.2), "model.norm.weight": vec(H, 1),
	}
	// mx makes one stacked expert weight: its values as [E, rows, cols]
	// (the engine's order before transformers' transposition), blocks and
	// scales encoding them.
	mx := func(rows, cols int) (vals []float32, blocks, scales []byte) {
		vals = make([]float32, E*rows*cols)
		for g := range E * rows * cols / 32 {
			e := int(seed%3) - 5 // 2^-5 .. 2^-3
			rnd()
			scales = append(scales, byte(127+e))
			var codes [32]byte
			for i := range 32 {
				c := byte(seed>>9) & 15
				rnd()
				codes[i] = c
				vals[g*32+i] = fp4Grid[c] * float32(math.Ldexp(1, e))
			}
			for i := range 16 {
				blocks = append(blocks, codes[2*i]|codes[2*i+1]<<4)
			}
		}
		return
	}
	for l := range L {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		ts[p+"input_layernorm.weight"], ts[p+"post_attention_layernorm.weight"] = vec(H, 1), vec(H, 1)
		ts[a+"q_proj.weight"], ts[a+"k_proj.weight"], ts[a+"v_proj.weight"] = mat(heads*D, H, 0.2), mat(kv*D, H, 0.2), mat(kv*D, H, 0.2)
		ts[a+"q_proj.bias"], ts[a+"k_proj.bias"], ts[a+"v_proj.bias"] = vec(heads*D, 0.1), vec(kv*D, 0.1), vec(kv*D, 0.1)
		ts[a+"o_proj.weight"], ts[a+"o_proj.bias"] = mat(H, heads*D, 0.1), vec(H, 0.1)
		ts[a+"sinks"] = vec(heads, 2)
		ts[p+"mlp.router.weight"], ts[p+"mlp.router.bias"] = mat(E, H, 0.3), vec(E, 0.1)
		ex := p + "mlp.experts."
		gub := vec(E*2*F, 0.1)
		gub.Shape = []int{E, 2 * F}
		db := vec(E*H, 0.1)
		db.Shape = []int{E, H}
		ts[ex+"gate_up_proj_bias"], ts[ex+"down_proj_bias"] = gub, db
		// [E, 2F, H] rows interleaved (gate, up, ...), and [E, H, F].
		gu, gub8, gus := mx(2*F, H)
		dn, db8, ds := mx(H, F)
		if mxfp4 {
			ts[ex+"gate_up_proj_blocks"] = model.HostTensor{Shape: []int{E, 2 * F, H / 32, 16}, DType: "U8", Data: gub8}
			ts[ex+"gate_up_proj_scales"] = model.HostTensor{Shape: []int{E, 2 * F, H / 32}, DType: "U8", Data: gus}
			ts[ex+"down_proj_blocks"] = model.HostTensor{Shape: []int{E, H, F / 32, 16}, DType: "U8", Data: db8}
			ts[ex+"down_proj_scales"] = model.HostTensor{Shape: []int{E, H, F / 32}, DType: "U8", Data: ds}
			continue
		}
		// transformers' parameters: gate_up_proj [E, H, 2F], down_proj [E, F, H].
		tr := func(v []float32, r, c int) []float32 {
			out := make([]float32, len(v))
			for e := range E {
				for i := range r {
					for j := range c {
						out[e*r*c+j*r+i] = v[e*r*c+i*c+j]
					}
				}
			}
			return out
		}
		ts[ex+"gate_up_proj"] = model.HostF32([]int{E, H, 2 * F}, tr(gu, 2*F, H))
		ts[ex+"down_proj"] = model.HostF32([]int{E, F, H}, tr(dn, H, F))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
}

// TestGPTOSSCheckpoints loads a gpt_oss directory unquantized and with
// MXFP4 experts of the same values: both load (engine.New no longer
// refuses them), give the same logits, and serve a request.
func TestGPTOSSCheckpoints(t *testing.T) {
	root := t.TempDir()
	var logits [2][]float32
	for i, mx := range []bool{false, true} {
		dir := filepath.Join(root, map[bool]string{false: "oss-f32", true: "oss-mxfp4"}[mx])
		writeTinyOSS(t, dir, mx)
		m := loadGoldenModel(t, dir, "auto")
		if c := m.Config(); c.MXFP4 != mx || !c.Sinks || c.LayerWindow(0) != 8 {
			t.Fatalf("config %+v", c.OSS)
		}
		prompt := make([]int32, 20)
		for j := range prompt {
			prompt[j] = int32(j*13%120 + 3)
		}
		var b model.Batch
		start := b.Add(0, 0, prompt, false)
		for j := range prompt {
			b.LogitRows = append(b.LogitRows, int32(start+j))
		}
		if err := m.Forward(&b); err != nil {
			t.Fatal(err)
		}
		logits[i] = make([]float32, len(prompt)*128)
		if err := m.ReadLogits(logits[i]); err != nil {
			t.Fatal(err)
		}
		e, err := New(context.Background(), Config{Model: dir, Backend: "cpu", BatchSize: 2, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Run(context.Background(), []datasets.Request{{TaskID: 0, InputIDs: prompt, OutputTokens: 4}}, RunOptions{})
		e.Close()
		if err != nil || len(res.Requests) != 1 || len(res.Requests[0].OutputIDs) != 4 {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if e := cpu.RelErr(logits[1], logits[0]); e > 1e-6 {
		t.Errorf("MXFP4 against unquantized experts: logits rel err %.3g", e)
	}
	for _, v := range logits[0] {
		if math.IsNaN(float64(v)) {
			t.Fatal("NaN logits")
		}
	}
}

// TestGPTOSSCheckpointErrors: a broken MXFP4 expert names its tensor.
func TestGPTOSSCheckpointErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oss")
	writeTinyOSS(t, dir, true)
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts := map[string]model.HostTensor{}
	for _, n := range f.Names() {
		info, b, err := f.Read(n)
		if err != nil {
			t.Fatal(err)
		}
		ts[n] = model.HostTensor{Shape: info.Shape, DType: info.DType, Data: append([]byte(nil), b...)}
	}
	f.Close()
	delete(ts, "model.layers.2.mlp.experts.down_proj_scales")
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Config{Model: dir, Backend: "cpu"})
	var bad interface{ BadInput() bool }
	if err == nil || !errors.As(err, &bad) || !bad.BadInput() || !strings.Contains(err.Error(), "model.layers.2.mlp.experts.down_proj_scales") {
		t.Errorf("%v: want a bad-input error naming the missing scales", err)
	}
}

// TestGPTOSSLayers: the layers parameter keeps the first layers' types.
func TestGPTOSSLayers(t *testing.T) {
	c, err := parseHFConfig("oss", "oss/config.json", []byte(strings.Replace(gptOSS20BConfig, "LAYERS", gptOSSLayers(24), 1)))
	if err != nil {
		t.Fatal(err)
	}
	cut, err := WithLayers(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := cut.Validate(); err != nil || len(cut.LayerTypes) != 3 || cut.LayerWindow(2) != 128 || cut.LayerWindow(1) != 0 {
		t.Errorf("3 layers: %v, types %v", err, cut.LayerTypes)
	}
	if len(c.LayerTypes) != 24 {
		t.Errorf("the cut changed the original's layer types: %d", len(c.LayerTypes))
	}
}

package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

const deepSeekGolden = "tiny-deepseek-v3"

// TestDeepSeekGoldenForms feeds the golden prompts token by token, every
// token a decode step through the cache, in the absorbed and in the plain
// form: both match transformers' logits and greedy tokens, and each other.
// (TestGoldenHF covers prefill and shared batches in the default form.)
func TestDeepSeekGoldenForms(t *testing.T) {
	dir := filepath.Join("testdata", "hf", deepSeekGolden)
	cases := backendtest.ReadGolden(t, dir)
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var all [2][]float32
	for f, plain := range []bool{false, true} {
		be, _ := cpu.New(model.BackendOptions{})
		defer be.Close()
		m, err := model.New(be, cfg, model.Options{Weights: src, MLAPlain: plain})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Reserve(model.Capacity{MaxTokens: 8, Slots: 2, MaxLen: 32}); err != nil {
			t.Fatal(err)
		}
		V := cfg.Vocab
		logits := make([]float32, V)
		next := make([]int32, 1)
		for ci, c := range cases {
			var b model.Batch
			seq := append([]int32{}, c.Input...)
			var rows []float32
			for pos := 0; pos < len(c.Input)+len(c.Greedy)-1; pos++ {
				b.Reset()
				b.Add(ci, pos, seq[pos:pos+1], true)
				if err := m.Forward(&b); err != nil {
					t.Fatal(err)
				}
				m.ReadLogits(logits)
				m.Argmax(next)
				all[f] = append(all[f], logits...)
				if pos < len(c.Input) {
					rows = append(rows, logits...)
				}
				if pos >= len(c.Input)-1 {
					seq = append(seq, next[0])
				}
			}
			if e := cpu.RelErr(rows, c.Logits); e > 1e-4 {
				t.Errorf("plain=%v case %d: logits rel err %.3g", plain, ci, e)
			}
			checkTokens(t, map[bool]string{false: "absorbed", true: "plain"}[plain], ci, seq[len(c.Input):], c.Greedy)
		}
	}
	if e := cpu.RelErr(all[1], all[0]); e > 1e-5 {
		t.Errorf("plain vs absorbed: logits rel err %.3g", e)
	}
}

// TestDeepSeekEngineGolden serves the golden prompts through the engine
// (chunked prefill, two in flight), absorbed and, by its switch, plain.
func TestDeepSeekEngineGolden(t *testing.T) {
	dir := filepath.Join("testdata", "hf", deepSeekGolden)
	cases := backendtest.ReadGolden(t, dir)
	var reqs []datasets.Request
	for i, c := range cases {
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: c.Input, OutputTokens: len(c.Greedy)})
	}
	for _, absorb := range []string{"1", "0"} {
		sw := ParseSwitches(func(k string) string { return map[string]string{"XRUN_MLA_ABSORB": absorb}[k] })
		e := newEngine(t, Config{Model: dir, BatchSize: 2, MaxNumTokens: 5, Warmup: 1, Switches: &sw})
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			checkTokens(t, "engine, XRUN_MLA_ABSORB="+absorb, i, res.Requests[i].OutputIDs, c.Greedy)
		}
		// One dense first layer: nothing routed there, and the summary
		// is the MoE layers'.
		l := res.ExpertLoad
		if l == nil || l.DenseLayers != 1 || l.Layers != 3 || l.Experts != 8 {
			t.Fatalf("expert load %+v", l)
		}
		var sum float64
		n := 0
		for i := range l.Iterations {
			if l.Warmup[i] {
				continue
			}
			for layer := range l.Layers {
				c := l.At(i, layer)
				if layer == 0 {
					if maxOverMean(c) != 0 {
						t.Fatalf("dense layer 0 routed %v", c)
					}
					continue
				}
				sum += maxOverMean(c)
				n++
			}
		}
		if math.Abs(l.MaxOverMean-sum/float64(n)) > 1e-12 {
			t.Errorf("max/mean %g, the MoE layers' mean is %g", l.MaxOverMean, sum/float64(n))
		}
	}
}

func TestLoadHFConfigDeepSeek(t *testing.T) {
	c, err := LoadHFConfig(filepath.Join("testdata", "hf", deepSeekGolden))
	if err != nil {
		t.Fatal(err)
	}
	want := ModelConfig{Name: deepSeekGolden, Family: "deepseek-v3", Path: filepath.Join("testdata", "hf", deepSeekGolden),
		Hidden: 64, Layers: 3, Heads: 4, KVHeads: 4, HeadDim: 8, FFN: 32, DenseFFN: 128, Vocab: 512, DatasetVocab: 512, BOS: 1, EOS: 2,
		RMSEps: 1e-6, RopeTheta: 10000, MaxPos: 4096, QLoraRank: 32, KVLoraRank: 16, QKNopeDim: 16, VHeadDim: 16, RopeInterleave: true,
		Experts: 8, TopK: 2, Routing: RoutingSigmoidGroupTopKRenorm, Groups: 4, TopKGroups: 2, RoutedScale: 2.5, SharedExperts: 1, DenseLayers: 1}
	rs := c.RopeScaling
	c.RopeScaling = nil
	if c.Name != want.Name || !modelConfigEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if rs == nil || rs.Type != "yarn" || rs.Factor != 40 || rs.OriginalMaxPos != 128 || rs.Mscale != 1 || rs.MscaleAllDim != 1 {
		t.Errorf("rope scaling %+v", rs)
	}

	base, err := os.ReadFile(filepath.Join("testdata", "hf", deepSeekGolden, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Variants: one field replaced (or added) in the golden's config.
	edit := func(field, value string) []byte {
		s := string(base)
		if i := strings.Index(s, `"`+field+`":`); i >= 0 {
			j := i + strings.IndexAny(s[i:], ",\n")
			return []byte(s[:i] + `"` + field + `": ` + value + s[j:])
		}
		return []byte(strings.Replace(s, "{", `{"`+field+`": `+value+",", 1))
	}
	for _, v := range []struct {
		field, value string
		check        func(ModelConfig) bool
	}{
		{"q_lora_rank", "null", func(c ModelConfig) bool { return c.QLoraRank == 0 && c.Validate() == nil }},
		{"norm_topk_prob", "false", func(c ModelConfig) bool { return c.Routing == RoutingSigmoidGroupTopK }},
		{"rope_interleave", "false", func(c ModelConfig) bool { return !c.RopeInterleave }},
		{"model_type", `"kimi_k2"`, func(c ModelConfig) bool { return c.Family == "deepseek-v3" }},
		{"first_k_dense_replace", "0", func(c ModelConfig) bool { return c.MoELayers() == 3 }},
	} {
		c, err := parseHFConfig("d", "d/config.json", edit(v.field, v.value))
		if err != nil || !v.check(c) {
			t.Errorf("%s %s: %v %+v", v.field, v.value, err, c)
		}
	}
	for _, v := range []struct{ field, value, msg string }{
		{"quantization_config", `{"quant_method": "fp8"}`, `"quantization_config"`},
		{"scoring_func", `"softmax"`, `"scoring_func"`},
		{"topk_method", `"greedy"`, `"topk_method"`},
		{"attention_bias", "true", `"attention_bias"`},
		{"kv_lora_rank", "0", `"kv_lora_rank"`},
		{"qk_rope_head_dim", "7", `"qk_rope_head_dim"`},
		{"n_group", "3", `"n_group"`},
		{"topk_group", "5", `"topk_group"`},
		{"num_experts_per_tok", "5", `"num_experts_per_tok"`},
		{"routed_scaling_factor", "0", `"routed_scaling_factor"`},
		{"first_k_dense_replace", "4", `"first_k_dense_replace"`},
		{"moe_layer_freq", "2", `"moe_layer_freq"`},
		{"q_lora_rank", `"x"`, `"q_lora_rank"`},
		{"n_shared_experts", "-1", `"n_shared_experts"`},
	} {
		_, err := parseHFConfig("d", "d/config.json", edit(v.field, v.value))
		var ce *ConfigError
		if !errors.As(err, &ce) || !ce.BadInput() || !strings.Contains(err.Error(), v.msg) {
			t.Errorf("%s %s: %v, want a ConfigError about %s", v.field, v.value, err, v.msg)
		}
	}
}

// modelConfigEqual compares configs without their slices and pointers.
func modelConfigEqual(a, b ModelConfig) bool {
	a.Simplifications, b.Simplifications = nil, nil
	a.RopeScaling, b.RopeScaling = nil, nil
	return a.Name == b.Name && a.Family == b.Family && a.Path == b.Path && a.Hidden == b.Hidden && a.Layers == b.Layers &&
		a.Heads == b.Heads && a.KVHeads == b.KVHeads && a.HeadDim == b.HeadDim && a.FFN == b.FFN && a.DenseFFN == b.DenseFFN &&
		a.Vocab == b.Vocab && a.DatasetVocab == b.DatasetVocab && a.BOS == b.BOS && a.EOS == b.EOS && a.RMSEps == b.RMSEps &&
		a.RopeTheta == b.RopeTheta && a.MaxPos == b.MaxPos && a.QLoraRank == b.QLoraRank && a.KVLoraRank == b.KVLoraRank &&
		a.QKNopeDim == b.QKNopeDim && a.VHeadDim == b.VHeadDim && a.RopeInterleave == b.RopeInterleave && a.Experts == b.Experts &&
		a.TopK == b.TopK && a.Routing == b.Routing && a.Groups == b.Groups && a.TopKGroups == b.TopKGroups &&
		a.RoutedScale == b.RoutedScale && a.SharedExperts == b.SharedExperts && a.DenseLayers == b.DenseLayers
}

// TestDeepSeekZoo pins the published shapes' sizes: DeepSeek-V3's 671B
// weights (its multi-token-prediction layer not counted), Moonlight's
// 16B, and their latent caches.
func TestDeepSeekZoo(t *testing.T) {
	for _, c := range []struct {
		name          string
		params        float64 // billions
		kvBF16PerTok  int64
		hf            string
		moe, denseFFN int
	}{
		{"deepseek-v3", 671.0, 61 * (512 + 64) * 2, "deepseek-ai/DeepSeek-V3", 58, 18432},
		{"moonlight-16b-a3b", 15.96, 27 * (512 + 64) * 2, "moonshotai/Moonlight-16B-A3B", 26, 11264},
	} {
		mc, ok := ZooModel(c.name)
		if !ok {
			t.Fatalf("%s not in the zoo", c.name)
		}
		if err := mc.Validate(); err != nil || !NeedsMLA(mc) {
			t.Errorf("%s: %v, NeedsMLA %v", c.name, err, NeedsMLA(mc))
		}
		if got := float64(mc.Params()) / 1e9; math.Abs(got-c.params) > 0.01*c.params {
			t.Errorf("%s: %.2fB weights, want about %.2fB", c.name, got, c.params)
		}
		kc := model.KVConfig{Layers: mc.Layers, Latent: mc.KVLoraRank, RopeDim: mc.HeadDim}
		if got := kc.KVBytesPerToken(2); got != c.kvBF16PerTok || mc.KVElemsPerToken()*2 != got {
			t.Errorf("%s: %d KV bytes per position, want %d", c.name, got, c.kvBF16PerTok)
		}
		if HFName(c.name) != c.hf || mc.MoELayers() != c.moe || mc.DenseWidth() != c.denseFFN {
			t.Errorf("%s: HF name %q, %d MoE layers, dense width %d", c.name, HFName(c.name), mc.MoELayers(), mc.DenseWidth())
		}
	}
}

// TestNoMLABackendRefused: a backend without MLA kernels refuses the
// architecture as a parameter error naming engine cpu.
func TestNoMLABackendRefused(t *testing.T) {
	RegisterBackend("nomla-test", func(o model.BackendOptions) (model.Backend, error) {
		be, err := cpu.New(o)
		return noMLABackend{be}, err
	})
	_, err := New(context.Background(), Config{Model: "tiny-deepseek", Backend: "nomla-test"})
	var pe *ParamError
	if !errors.As(err, &pe) || !pe.BadInput() || pe.Field != "engine" ||
		!strings.Contains(err.Error(), "tiny-deepseek has the DeepSeek-V3 architecture") || !strings.Contains(err.Error(), "no MLA kernels; run it on engine cpu or cuda") {
		t.Errorf("got %v", err)
	}
	// Other models run there.
	e, err := New(context.Background(), Config{Model: "tiny-moe", Backend: "nomla-test"})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

type noMLABackend struct{ model.Backend }

// TestDeepSeekRoutingModes runs tiny-deepseek under every routing mode:
// every MoE layer routes k experts per token, within the group limit where
// forced, and the modes differ.
func TestDeepSeekRoutingModes(t *testing.T) {
	mc, _ := ZooModel("tiny-deepseek")
	reqs := mixedRequests(10)
	counts := map[string][]int32{}
	for _, mode := range []string{"learned", "perfect", "uniform", "zipf:1.5"} {
		e := newEngine(t, Config{Model: "tiny-deepseek", BatchSize: 4, MaxNumTokens: 24, RoutingMode: mode})
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := res.ExpertLoad
		for i, it := range res.Iterations {
			tokens := it.CtxTokens + it.GenRequests
			for layer := range l.Layers {
				var sum int32
				for _, v := range l.At(i, layer) {
					sum += v
				}
				if want := mc.TopK * tokens * min(layer, 1); int(sum) != want {
					t.Fatalf("%s iteration %d layer %d: %d routed, want %d", mode, i, layer, sum, want)
				}
			}
		}
		counts[mode] = l.Counts
	}
	for _, a := range []string{"perfect", "uniform", "zipf:1.5"} {
		if slices.Equal(counts["learned"], counts[a]) {
			t.Errorf("learned and %s routing gave the same expert loads", a)
		}
	}
}

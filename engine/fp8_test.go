package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// goldenRequests are a checkpoint's golden prompts as requests generating
// their greedy tokens.
func goldenRequests(t *testing.T, dir string) ([]datasets.Request, []backendtest.Golden) {
	cases := backendtest.ReadGolden(t, dir)
	var reqs []datasets.Request
	for i, c := range cases {
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: c.Input, OutputTokens: len(c.Greedy)})
	}
	return reqs, cases
}

func runTokens(t *testing.T, cfg Config, reqs []datasets.Request) [][]int32 {
	t.Helper()
	res, err := newEngine(t, cfg).Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int32
	for _, r := range res.Requests {
		out = append(out, r.OutputIDs)
	}
	return out
}

// agreement is the share of greedy tokens two runs agree on, each
// request's up to its first difference (after one, the two generate from
// different prefixes).
func agreement(a, b [][]int32) float64 {
	same, all := 0, 0
	for i := range a {
		all += len(a[i])
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				break
			}
			same++
		}
	}
	return float64(same) / float64(all)
}

// TestFP8Zoo: dtype fp8 and an FP8 KV cache run on the CPU backend, dense
// and MoE; their greedy tokens are reported against float32 (FP8 is not
// exact, so only a floor is asserted), and fp8 is not float32 (the GEMMs
// were quantized).
func TestFP8Zoo(t *testing.T) {
	reqs := variedRequests(10)
	for _, name := range []string{"tiny-llama", "tiny-moe"} {
		base := Config{Model: name, BatchSize: 4, MaxNumTokens: 64}
		ref := runTokens(t, base, reqs)
		for _, c := range []struct{ dtype, kv string }{{"fp8", "auto"}, {"float32", "fp8"}, {"fp8", "fp8"}} {
			cfg := base
			cfg.Dtype, cfg.KVCacheDtype = c.dtype, c.kv
			got := runTokens(t, cfg, reqs)
			a := agreement(got, ref)
			t.Logf("%s dtype %s, kv_cache_dtype %s: %.0f%% of float32's greedy tokens", name, c.dtype, c.kv, 100*a)
			if a < 0.3 {
				t.Errorf("%s dtype %s kv %s: only %.0f%% of float32's greedy tokens", name, c.dtype, c.kv, 100*a)
			}
		}
	}
	// The quantization is there: the logits move.
	e32 := newEngine(t, Config{Model: "tiny-llama"}).(*engine)
	e8 := newEngine(t, Config{Model: "tiny-llama", Dtype: "fp8"}).(*engine)
	l32, l8 := firstLogits(t, e32, reqs[3].InputIDs), firstLogits(t, e8, reqs[3].InputIDs)
	if e := cpu.RelErr(l8, l32); e == 0 || e > 0.2 {
		t.Errorf("fp8 logits rel err %g against float32; want FP8's small, non-zero error", e)
	}
}

// firstLogits runs one prefill of ids and returns its last row's logits.
func firstLogits(t *testing.T, e *engine, ids []int32) []float32 {
	t.Helper()
	if err := e.m.Reserve(model.Capacity{MaxTokens: len(ids), MaxLogitRows: 1, Slots: 1, MaxLen: len(ids)}); err != nil {
		t.Fatal(err)
	}
	var b model.Batch
	b.Add(0, 0, ids, true)
	if err := e.m.Forward(&b); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, e.mc.Vocab)
	if err := e.m.ReadLogits(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// plainBackend is the CPU backend with only model.Backend's methods: no
// FP8, no paging, as the CUDA backend is for now.
type plainBackend struct{ model.Backend }

var registerPlain = sync.OnceFunc(func() {
	RegisterBackend("plain-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		if err != nil {
			return nil, err
		}
		return plainBackend{b}, nil
	})
})

// TestFP8RefusedWithoutKernels: a backend without FP8 GEMMs or an FP8 KV
// cache refuses the parameters asking for them, naming them (bad input),
// and keeps fixed KV slots.
func TestFP8RefusedWithoutKernels(t *testing.T) {
	registerPlain()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Model: "tiny-llama", Backend: "plain-test", Dtype: "fp8"}, `dtype: "fp8": dtype fp8 needs the plain-test backend's FP8 GEMMs`},
		{Config{Model: "tiny-llama", Backend: "plain-test", KVCacheDtype: "fp8"}, "kv_cache_dtype fp8 needs the plain-test backend's FP8 KV cache"},
		{Config{Model: "tiny-deepseek", Dtype: "fp8"}, "MLA model"},
		{Config{Model: "tiny-llama", KVCacheDtype: "bf16"}, `kv_cache_dtype: "bf16": auto, fp8 or compute`},
	} {
		_, err := New(context.Background(), c.cfg)
		var pe *ParamError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want a ParamError saying %q", c.cfg, err, c.want)
		}
	}
	e := newEngine(t, Config{Model: "tiny-llama", Backend: "plain-test", BatchSize: 4})
	res, err := e.Run(context.Background(), mixedRequests(6), RunOptions{})
	if err != nil || len(res.Requests) != 6 {
		t.Fatalf("plain backend: %v", err)
	}
	if e.(*engine).m.Capacity().BlockSize != 0 {
		t.Error("a backend without paging got a paged cache")
	}
	// A backend with FP8 GEMMs (not for every weight) and no FP8 KV cache:
	// its refusals blame what it lacks, and say why.
	dense, _ := LookupModel("tiny-llama")
	moe, _ := LookupModel("tiny-moe")
	why := fmt.Errorf("weight experts: FP8 experts with a static or per-token input scale on the CUDA backend: %w", model.ErrNoFP8)
	for _, c := range []struct {
		mc          ModelConfig
		kv          bool
		field, want string
	}{
		{moe, false, "dtype", "dtype fp8 on the cuda backend cannot run all of model tiny-moe (weight experts: FP8 experts with a static or per-token input scale"},
		{dense, true, "kv_cache_dtype", "kv_cache_dtype fp8 needs the cuda backend's FP8 KV cache, which it does not have (cuda/cublaslt)"},
		{moe, true, "kv_cache_dtype", "kv_cache_dtype fp8 needs the cuda backend's FP8 KV cache, which it does not have"},
	} {
		err := noFP8Error(Config{Backend: "cuda"}, fp8GEMMsOnly{}, c.mc, c.kv, why)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s, kv %v: %v; want a ParamError on %s saying %q", c.mc.Name, c.kv, err, c.field, c.want)
		}
	}
}

// fp8GEMMsOnly is a backend with FP8 GEMMs and no FP8 KV cache.
type fp8GEMMsOnly struct{ model.Backend }

func (fp8GEMMsOnly) Name() string                                     { return "cuda/cublaslt" }
func (fp8GEMMsOnly) QuantizeFP8(w model.Tensor) (model.Tensor, error) { return w, nil }

// ckpt describes an FP8 checkpoint made from a float32 one.
type ckpt struct {
	style      string // "modelopt" (config.json), "hf_quant" (hf_quant_config.json) or "compressed"
	perChannel bool   // a weight scale per output row
	dynamic    string // "" static input scales; "token" or "tensor" dynamic activations
	kv         bool   // k_scale and v_scale per layer
	// edit changes the tensors before they are written.
	edit func(map[string]model.HostTensor)
}

var linearWeight = regexp.MustCompile(`\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|w1|w2|w3)\.weight$`)

// inputScales are the static input scales given to q, k and v (the fused
// GEMM takes the largest) and to every other linear layer.
var inputScales = map[string]float32{"q_proj": 0.011, "k_proj": 0.017, "v_proj": 0.013}

// writeFP8Checkpoint quantizes src's linear weights to E4M3 as the format
// stores them and writes the checkpoint in fp8Dir, and in deqDir the same
// values dequantized to float32 without a quantization config (and the
// same KV scales).
func writeFP8Checkpoint(t *testing.T, src string, c ckpt) (fp8Dir, deqDir string) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q, deq := map[string]model.HostTensor{}, map[string]model.HostTensor{}
	for _, name := range f.Names() {
		info, data, err := f.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		h := model.HostTensor{Shape: info.Shape, DType: info.DType, Data: data}
		q[name], deq[name] = h, h
		if !linearWeight.MatchString(name) {
			continue
		}
		w, err := h.Float32()
		if err != nil {
			t.Fatal(err)
		}
		rows, k := info.Shape[0], info.Shape[1]
		codes := make([]uint8, len(w))
		scales := []float32{fp8.Scale(fp8.AbsMax(w))}
		if c.perChannel {
			scales = scales[:0]
			for r := range rows {
				scales = append(scales, fp8.Scale(fp8.AbsMax(w[r*k:(r+1)*k])))
			}
		}
		back := make([]float32, len(w))
		for r := range rows {
			s := scales[min(r, len(scales)-1)]
			fp8.Quantize(codes[r*k:(r+1)*k], w[r*k:(r+1)*k], s)
			fp8.Dequantize(back[r*k:(r+1)*k], codes[r*k:(r+1)*k], s)
		}
		base := strings.TrimSuffix(name, ".weight")
		q[name] = model.HostTensor{Shape: info.Shape, DType: "F8_E4M3", Data: codes}
		deq[name] = model.HostF32(info.Shape, back)
		switch {
		case !c.perChannel:
			q[base+".weight_scale"] = model.HostF32([]int{}, scales) // ModelOpt writes scalars
		case c.style == "compressed":
			q[base+".weight_scale"] = model.HostF32([]int{rows, 1}, scales)
		default:
			q[base+".weight_scale"] = model.HostF32([]int{rows}, scales)
		}
		if c.dynamic == "" {
			in := float32(0.015)
			for proj, s := range inputScales {
				if strings.HasSuffix(base, proj) {
					in = s
				}
			}
			q[base+".input_scale"] = model.HostF32([]int{1}, []float32{in})
		}
	}
	if c.kv {
		for l := range 2 {
			p := "model.layers." + string(rune('0'+l)) + ".self_attn."
			k, v := p+"k_scale", p+"v_scale"
			if c.style != "compressed" {
				k, v = p+"k_proj.k_scale", p+"v_proj.v_scale"
			}
			q[k], q[v] = model.HostF32([]int{}, []float32{0.05}), model.HostF32([]int{}, []float32{0.04})
			// The dequantized copy keeps them, for kv_cache_dtype fp8.
			deq[k], deq[v] = q[k], q[v]
		}
	}
	if c.edit != nil {
		c.edit(q)
	}
	cfgData, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	fp8Dir, deqDir = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(deqDir, "config.json"), cfgData, 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		t.Fatal(err)
	}
	kvAlgo := any(nil)
	if c.kv {
		kvAlgo = "FP8"
	}
	algo := "FP8"
	if c.dynamic == "token" {
		algo = "FP8_PER_CHANNEL_PER_TOKEN"
	}
	switch c.style {
	case "modelopt":
		cfg["quantization_config"] = map[string]any{"quant_method": "modelopt", "quant_algo": algo, "kv_cache_quant_algo": kvAlgo, "exclude_modules": []string{"lm_head"}}
	case "hf_quant":
		hq := map[string]any{"producer": map[string]any{"name": "modelopt", "version": "0.19.0"},
			"quantization": map[string]any{"quant_algo": algo, "kv_cache_quant_algo": kvAlgo, "exclude_modules": []string{"lm_head"}}}
		b, _ := json.Marshal(hq)
		if err := os.WriteFile(filepath.Join(fp8Dir, QuantConfigFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	case "compressed":
		strategy := "tensor"
		if c.perChannel {
			strategy = "channel"
		}
		input := map[string]any{"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false, "symmetric": true}
		if c.dynamic != "" {
			input["strategy"], input["dynamic"] = c.dynamic, true
		}
		qc := map[string]any{"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": []string{"lm_head"},
			"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"},
				"weights":           map[string]any{"num_bits": 8, "type": "float", "strategy": strategy, "dynamic": false, "symmetric": true},
				"input_activations": input}}}
		if c.kv {
			qc["kv_cache_scheme"] = map[string]any{"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false}
		}
		cfg["quantization_config"] = qc
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(fp8Dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(fp8Dir, "model.safetensors"), q); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(deqDir, "model.safetensors"), deq); err != nil {
		t.Fatal(err)
	}
	return fp8Dir, deqDir
}

// recorder is the CPU backend, remembering the FP8 weights and the KV
// cache it was given, and how many calibrations of static FP8 input
// scales it ran.
type recorder struct {
	*cpu.Backend
	fp8          map[string]model.HostTensor
	kv           model.KVConfig
	calibrations int
}

var recorded = struct {
	sync.Mutex
	last *recorder
}{}

var registerRecorder = sync.OnceFunc(func() {
	RegisterBackend("record-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		if err != nil {
			return nil, err
		}
		r := &recorder{Backend: b, fp8: map[string]model.HostTensor{}}
		recorded.Lock()
		recorded.last = r
		recorded.Unlock()
		return r, nil
	})
})

func (r *recorder) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	if h.DType == "F8_E4M3" {
		r.fp8[name] = h
	}
	return r.Backend.Upload(name, kind, h)
}

func (r *recorder) CalibrateFP8(on bool) error {
	if on {
		r.calibrations++
	}
	return r.Backend.CalibrateFP8(on)
}

func (r *recorder) NewKVCache(c model.KVConfig) (model.KVCache, error) {
	r.kv = c
	return r.Backend.NewKVCache(c)
}

// TestFP8Checkpoints loads FP8 checkpoints of both formats made from
// tiny-llama's and tiny-mixtral's real weights: run unquantized they
// generate exactly what their dequantized weights do (every scale in its
// place); run in fp8 the backend gets the checkpoint's own codes, a scale
// per row, the fused GEMM's largest input scale, and the KV scales, and
// every format with the same numbers generates the same tokens.
func TestFP8Checkpoints(t *testing.T) {
	registerRecorder()
	for _, model_ := range []string{"tiny-llama", "tiny-mixtral"} {
		src := filepath.Join("testdata", "hf", model_)
		reqs, cases := goldenRequests(t, src)
		var fp8Tokens [][]int32
		for _, c := range []ckpt{
			{style: "modelopt", kv: true},
			{style: "hf_quant", kv: true},
			{style: "compressed", kv: true},
			{style: "compressed", perChannel: true},
			{style: "compressed", perChannel: true, dynamic: "token"},
			{style: "modelopt", perChannel: true, dynamic: "token"},
		} {
			dir, deq := writeFP8Checkpoint(t, src, c)
			got := runTokens(t, Config{Model: dir, BatchSize: 2, Dtype: "float32", KVCacheDtype: "auto"}, reqs)
			sw := DefaultSwitches()
			want := runTokens(t, Config{Model: deq, BatchSize: 2, KVCacheDtype: map[bool]string{true: "fp8", false: "auto"}[c.kv], Switches: &sw}, reqs)
			for i := range reqs {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("%s %+v: request %d: %v from the FP8 checkpoint, %v from its dequantized weights", model_, c, i, got[i], want[i])
				}
			}
			quant := runTokens(t, Config{Model: dir, Backend: "record-test", BatchSize: 2, Dtype: "fp8"}, reqs)
			recorded.Lock()
			r := recorded.last
			recorded.Unlock()
			t.Logf("%s %+v: fp8 keeps %.0f%% of transformers' greedy tokens", model_, c, 100*agreement(quant, goldenGreedy(cases)))
			qkv, ok := r.fp8["model.layers.0.self_attn.qkv_proj.weight"]
			if !ok {
				t.Fatalf("%s %+v: no FP8 QKV weight uploaded; got %v", model_, c, slices.Collect(mapKeys(r.fp8)))
			}
			if want := 64 + 2*32; len(qkv.FP8.Weight) != want {
				t.Errorf("%s %+v: %d QKV weight scales, want one per row (%d)", model_, c, len(qkv.FP8.Weight), want)
			}
			switch {
			case c.dynamic == "" && qkv.FP8.Input != inputScales["k_proj"]:
				t.Errorf("%s %+v: QKV input scale %v, want the largest of q, k, v (%v)", model_, c, qkv.FP8.Input, inputScales["k_proj"])
			case c.dynamic != "" && (qkv.FP8.Input != 0 || qkv.FP8.PerToken != (c.dynamic == "token")):
				t.Errorf("%s %+v: dynamic activations uploaded as %+v", model_, c, qkv.FP8)
			}
			if c.kv != r.kv.FP8 || c.kv && (r.kv.KScale[1] != 0.05 || r.kv.VScale[0] != 0.04) {
				t.Errorf("%s %+v: KV cache %v with scales %v %v", model_, c, r.kv.FP8, r.kv.KScale, r.kv.VScale)
			}
			if c.kv {
				// kv_cache_dtype compute opts out of the checkpoint's
				// calibrated FP8 cache.
				runTokens(t, Config{Model: dir, Backend: "record-test", BatchSize: 2, Dtype: "fp8", KVCacheDtype: "compute"}, reqs)
				recorded.Lock()
				if recorded.last.kv.FP8 {
					t.Errorf("%s %+v: kv_cache_dtype compute kept the FP8 KV cache", model_, c)
				}
				recorded.Unlock()
			}
			if c.style == "modelopt" && c.dynamic == "" {
				fp8Tokens = quant
			} else if !c.perChannel && c.dynamic == "" && !slices.EqualFunc(quant, fp8Tokens, slices.Equal) {
				t.Errorf("%s %+v: fp8 tokens %v differ from ModelOpt's %v with the same numbers", model_, c, quant, fp8Tokens)
			}
		}
	}
}

func goldenGreedy(cases []backendtest.Golden) [][]int32 {
	var out [][]int32
	for _, c := range cases {
		out = append(out, c.Greedy)
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestFP8CheckpointErrors: a malformed FP8 checkpoint is bad input naming
// the file and tensor or field at fault.
func TestFP8CheckpointErrors(t *testing.T) {
	src := filepath.Join("testdata", "hf", "tiny-llama")
	q0 := "model.layers.0.self_attn.q_proj"
	del := func(name string) func(map[string]model.HostTensor) {
		return func(m map[string]model.HostTensor) { delete(m, name) }
	}
	for _, c := range []struct {
		ckpt   ckpt
		config string // replaces quantization_config
		want   []string
	}{
		{ckpt: ckpt{style: "modelopt", edit: del(q0 + ".weight_scale")},
			want: []string{"model.safetensors", q0 + ".weight", "without its scale", q0 + ".weight_scale"}},
		{ckpt: ckpt{style: "modelopt", edit: del(q0 + ".input_scale")},
			want: []string{q0 + ".weight", "static activation scales", q0 + ".input_scale", "config.json"}},
		{ckpt: ckpt{style: "compressed", perChannel: true, edit: func(m map[string]model.HostTensor) {
			m[q0+".weight_scale"] = model.HostF32([]int{3}, []float32{1, 1, 1})
		}}, want: []string{q0 + ".weight_scale", "3 values for the 64 rows"}},
		{ckpt: ckpt{style: "modelopt", edit: func(m map[string]model.HostTensor) {
			m[q0+".weight_scale"] = model.HostF32([]int{}, []float32{-1})
		}}, want: []string{q0 + ".weight", "positive and finite"}},
		{ckpt: ckpt{style: "modelopt", edit: func(m map[string]model.HostTensor) {
			m[q0+".input_scale"] = model.HostTensor{Shape: []int{}, DType: "F8_E4M3", Data: []byte{0x38}}
		}}, want: []string{q0 + ".input_scale", "stored as F8_E4M3"}},
		{ckpt: ckpt{style: "modelopt", kv: true, edit: func(m map[string]model.HostTensor) {
			m["model.layers.1.self_attn.k_proj.k_scale"] = model.HostF32([]int{2}, []float32{1, 2})
		}}, want: []string{"model.layers.1.self_attn.k_proj.k_scale", "one positive, finite scale"}},
		{ckpt: ckpt{style: "modelopt"}, config: `{"quant_method": "modelopt", "quant_algo": "NVFP4"}`,
			want: []string{"config.json", "quantization_config.quant_algo", `"NVFP4" is not supported`}},
		{ckpt: ckpt{style: "modelopt"}, config: `{"quant_method": "fp8", "weight_block_size": [128, 128]}`,
			want: []string{"config.json", `quant_method "fp8" is not supported`}},
		{ckpt: ckpt{style: "compressed"}, config: `{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "block"}, "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}}`,
			want: []string{"config_groups.g.weights.strategy", `"block" is not supported`}},
		{ckpt: ckpt{style: "compressed"}, config: `{"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}}`,
			want: []string{"quantization_config.format", "pack-quantized"}},
		{ckpt: ckpt{style: "compressed"}, config: `{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "channel"}}}}`,
			want: []string{"config_groups.g.weights", "4-bit int is not supported"}},
	} {
		dir, _ := writeFP8Checkpoint(t, src, c.ckpt)
		if c.config != "" {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			var cfg map[string]any
			json.Unmarshal(b, &cfg)
			cfg["quantization_config"] = json.RawMessage(c.config)
			b, _ = json.Marshal(cfg)
			os.WriteFile(p, b, 0o644)
		}
		_, err := New(context.Background(), Config{Model: dir, Dtype: "fp8", KVCacheDtype: "auto"})
		var bi interface{ BadInput() bool }
		if err == nil || !errors.As(err, &bi) || !bi.BadInput() {
			t.Errorf("%+v %s: error %v, want bad input", c.ckpt, c.config, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v %s: error %q does not say %q", c.ckpt, c.config, err, w)
			}
		}
	}
	// hf_quant_config.json without its quantization object.
	dir, _ := writeFP8Checkpoint(t, src, ckpt{style: "hf_quant"})
	os.WriteFile(filepath.Join(dir, QuantConfigFile), []byte(`{"producer": {}}`), 0o644)
	if _, err := New(context.Background(), Config{Model: dir, Dtype: "fp8"}); err == nil || !strings.Contains(err.Error(), QuantConfigFile) {
		t.Errorf("hf_quant_config.json without quantization: %v", err)
	}
}

func FuzzQuantConfig(f *testing.F) {
	f.Add([]byte(`{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}`))
	f.Add([]byte(`{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}, "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}, "kv_cache_scheme": {"num_bits": 8, "type": "float"}}`))
	f.Add([]byte(`{"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := parseQuantConfig("m/config.json", "quantization_config", data)
		if err != nil {
			if !strings.Contains(err.Error(), "m/config.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a ConfigError", err)
			}
			return
		}
		if q == nil || q.StaticInput && q.PerToken {
			t.Fatalf("accepted an inconsistent scheme: %+v", q)
		}
	})
}

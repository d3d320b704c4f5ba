package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Options configure a model instance.
type Options struct {
	// Seed seeds the random weights (zoo models) and the uniform / zipf
	// routing tables.
	Seed uint64
	// Routing is the routing_mode axis; the zero value is learned.
	Routing Routing
	// Weights supplies checkpoint tensors; nil means random weights.
	Weights WeightSource
	// MLAPlain runs MLA models' decode tokens in the plain form
	// (decompressing K and V from the latent cache every step) instead of
	// the absorbed form deployments use (XRUN_MLA_ABSORB=0).
	MLAPlain bool
	// FP8 runs the linear layers of attention and the MLP or experts as
	// FP8 GEMMs (dtype fp8; the backend must be FP8GEMMs): a checkpoint's
	// E4M3 weights with their scales, other weights quantized per tensor.
	// Without it an FP8 checkpoint's weights are dequantized to the
	// compute type.
	FP8 bool
	// KVFP8 stores the KV cache as E4M3 (kv_cache_dtype fp8; the backend
	// must be FP8KV), with a checkpoint's k_scale and v_scale per layer
	// where it has them, else 1.
	KVFP8 bool
	// FP8Activations is how FP8 GEMMs scale their inputs (with FP8 only;
	// the zero value is FP8ActAuto).
	FP8Activations FP8Activations
	// Quant is the checkpoint's quantization scheme (nil: none declared).
	Quant *Quant
	// Parallel makes the model one rank of a tensor- and expert-parallel
	// split (shard.go); the zero value is the whole model.
	Parallel Parallel
	// MXFP4 keeps a MoE model's experts as MXFP4 (moe_weights mxfp4; the
	// backend must be MXFP4Experts; mxfp4.go).
	MXFP4 bool
}

// Capacity sizes a model's buffers for a run.
type Capacity struct {
	MaxTokens    int // tokens per iteration (max_num_tokens)
	MaxLogitRows int // sequences sampled per iteration (<= MaxTokens)
	Slots        int // requests in flight (batch_size)
	MaxLen       int // longest sequence: prompt + output tokens
	// BlockSize and Blocks page the KV cache (a Pager backend): a pool of
	// Blocks blocks of BlockSize positions. 0: fixed slots of MaxLen.
	BlockSize, Blocks int
}

// Model is a decoder-only transformer (Llama / Mixtral / GPT-OSS / Qwen3 /
// DeepSeek-V3 families) over a Backend. Create it with New, size it with
// Reserve, then call Forward and Argmax once per iteration.
type Model struct {
	cfg Config // the shape this rank computes (shardPlan.local)
	be  Backend
	opt Options
	mla MLABackend // MLA and grouped routing; nil for other models
	oss OSSBackend // GPT-OSS's features; nil for other models

	full  Config     // the model's
	shard *shardPlan // nil unless split (shard.go)

	embed, lmHead, finalNorm Tensor
	layers                   []layer

	capa                                      Capacity
	rope                                      Tensor
	cache                                     KVCache
	kScale, vScale                            []float32 // the FP8 KV cache's, per layer
	x, h, qkv, attn, delta, gu, act, g        Tensor
	qa, ckv, sgu, sact, sdelta                Tensor // MLA's query latent and kv_a output; shared experts
	logits, routerLogits, idx, wts, counts    Tensor
	route                                     routeTables
	ropeLen, lastRows, lastLogitRows, iterNum int
}

type layer struct {
	ln1, ln2, wqkv, wo, qNorm, kNorm Tensor
	gateUp, down                     Tensor // dense MLP, or stacked experts for MoE
	router                           Tensor
	// MLA (wq: q_b_proj, or q_proj without q compression), the router's
	// correction bias and the shared experts.
	qa, qaNorm, wq, kva, kvNorm, kvb Tensor
	bias, sharedGateUp, sharedDown   Tensor
	oss                              ossLayer
}

// Config returns the model's shape.
func (m *Model) Config() Config { return m.full }

// Backend returns the backend the model runs on.
func (m *Model) Backend() Backend { return m.be }

// Validate checks that a shape is one the model can run.
func (c Config) Validate() error {
	switch {
	case c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.FFN <= 0 || c.Vocab <= 0:
		return fmt.Errorf("model %q: sizes must be positive", c.Name)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model %q: %d heads are not a multiple of %d KV heads", c.Name, c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("model %q: head dim %d is odd", c.Name, c.HeadDim)
	case c.MoE() && (c.TopK <= 0 || c.TopK > c.Experts):
		return fmt.Errorf("model %q: top-k %d outside 1..%d experts", c.Name, c.TopK, c.Experts)
	case c.MoE() && c.Routing != RoutingSoftmaxTopKRenorm && c.Routing != RoutingTopKSoftmax && c.Routing != RoutingSoftmaxTopK && !c.GroupedRouting():
		return fmt.Errorf("model %q: unknown routing method %q", c.Name, c.Routing)
	}
	if err := c.validateOSS(); err != nil {
		return err
	}
	return c.validateDeepSeek()
}

// New creates the model's weights on the backend: random and seeded, or
// from opt.Weights.
func New(be Backend, cfg Config, opt Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shard, err := newShardPlan(cfg, opt.Parallel)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: shard.local(cfg), full: cfg, shard: shard, be: be, opt: opt}
	if _, ok := be.(ExpertShard); shard != nil && shard.groups > 1 && !ok {
		return nil, fmt.Errorf("model %q (%s): %w", cfg.Name, be.Name(), ErrNoExpertShard)
	}
	if shard != nil && opt.FP8 {
		// Per-tensor scales of a slice are not the whole tensor's.
		return nil, fmt.Errorf("model %q: FP8 GEMMs on a split model are not supported: %w", cfg.Name, ErrNoFP8)
	}
	if _, ok := be.(FP8GEMMs); opt.FP8 && !ok {
		return nil, fmt.Errorf("model %q (%s): FP8 GEMMs: %w", cfg.Name, be.Name(), ErrNoFP8)
	}
	if _, ok := be.(FP8KV); opt.KVFP8 && !ok {
		return nil, fmt.Errorf("model %q (%s): an FP8 KV cache: %w", cfg.Name, be.Name(), ErrNoFP8)
	}
	if cfg.MLA() && (opt.FP8 || opt.KVFP8) {
		return nil, fmt.Errorf("model %q: FP8 on MLA models (DeepSeek-V3's block-scaled FP8) is not supported: %w", cfg.Name, ErrNoFP8)
	}
	if a := opt.FP8Activations; a < FP8ActAuto || a > FP8ActDynamic {
		return nil, fmt.Errorf("model %q: unknown FP8 activation scheme %v", cfg.Name, a)
	}
	if cfg.MLA() || cfg.GroupedRouting() {
		mla, ok := be.(MLABackend)
		if !ok {
			return nil, fmt.Errorf("model %q (%s): %w", cfg.Name, be.Name(), ErrNoMLA)
		}
		m.mla = mla
	}
	if err := m.ossCheck(); err != nil {
		return nil, err
	}
	if err := m.mxfp4Check(); err != nil {
		return nil, err
	}
	l := &loader{m: m}
	H, D := cfg.Hidden, cfg.HeadDim
	hl := cfg.HeadLayout()
	// Random weights: uniform with variance 1/fan_in keeps every GEMM's
	// output at the scale of its input; the two projections that feed the
	// residual stream are further scaled by 1/sqrt(2·layers) so the stream
	// stays O(1) at any depth (fp16 stays finite).
	proj := 1 / math.Sqrt(2*float64(cfg.Layers))
	m.embed = l.table("model.embed_tokens.weight", []int{cfg.Vocab, H}, math.Sqrt(3))
	for i := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		var ly layer
		ly.ln1 = l.normWeight(p+"input_layernorm.weight", H)
		ly.ln2 = l.normWeight(p+"post_attention_layernorm.weight", H)
		if cfg.MLA() {
			l.mlaAttention(p, &ly)
		} else {
			ly.wqkv = l.qmatrix(p+"self_attn.qkv_proj.weight", Matrix, []int{hl.QKVWidth(), H}, 1,
				p+"self_attn.q_proj.weight", p+"self_attn.k_proj.weight", p+"self_attn.v_proj.weight")
			ly.wo = l.qmatrix(p+"self_attn.o_proj.weight", Matrix, []int{H, cfg.Heads * D}, proj)
			l.kvScales(p, i)
			if cfg.IsOSS() {
				l.ossAttention(p, i, &ly)
			}
		}
		if cfg.QKNorm {
			ly.qNorm = l.normWeight(p+"self_attn.q_norm.weight", D)
			ly.kNorm = l.normWeight(p+"self_attn.k_norm.weight", D)
		}
		if !cfg.MoELayer(i) {
			F := cfg.DenseWidth()
			ly.gateUp = l.qmatrix(p+"mlp.gate_up_proj.weight", Matrix, []int{2 * F, H}, 1,
				p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight")
			ly.down = l.qmatrix(p+"mlp.down_proj.weight", Matrix, []int{H, F}, proj)
		} else if cfg.IsOSS() {
			l.ossMoE(p, &ly)
		} else {
			ly.router, ly.gateUp, ly.down = l.moe(p)
			l.moeExtras(p, &ly)
		}
		m.layers = append(m.layers, ly)
	}
	m.finalNorm = l.normWeight("model.norm.weight", H)
	switch {
	case cfg.TieEmbeddings && opt.Weights == nil:
		// The same values as the embedding: same name, same scale.
		m.lmHead = l.random("model.embed_tokens.weight", Matrix, []int{cfg.Vocab, H}, math.Sqrt(3))
	case cfg.TieEmbeddings:
		m.lmHead = l.matrix("model.embed_tokens.weight", Matrix, []int{cfg.Vocab, H}, 1)
	default:
		m.lmHead = l.matrix("lm_head.weight", Matrix, []int{cfg.Vocab, H}, 1)
	}
	if l.err != nil {
		return nil, l.err
	}
	if l.fp8Calibrate() {
		if err := m.calibrateFP8(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// loader creates weights, remembering the first error.
type loader struct {
	m   *Model
	err error
	// FP8 Matrix weights whose input is left quantized dynamically per
	// tensor: quantized at load (random, or a checkpoint's fp16/bf16
	// tensor), and a checkpoint's own F8_E4M3 ones (fp8Calibrate).
	fp8Quantized, fp8Dynamic int
}

func (l *loader) random(name string, kind WeightKind, shape []int, scale float64) Tensor {
	if c, err := l.m.shard.cutFor(name, kind, shape); c != nil || err != nil {
		// The slice of the full tensor's values, made where it lives when
		// the backend can, else on the host.
		var t Tensor
		seed := WeightSeed(l.m.opt.Seed, name)
		if rs, ok := l.m.be.(RandomSlicer); ok && err == nil {
			t, err = rs.RandomSlice(name, kind, c.shape(shape), seed, float32(scale), c.runs(shape))
		} else if err == nil {
			t, err = l.m.be.Upload(name, kind, c.random(shape, seed, float32(scale)))
		}
		if err != nil && l.err == nil {
			l.err = fmt.Errorf("weight %s: %w", name, err)
		}
		return t
	}
	t, err := l.m.be.Random(name, kind, shape, WeightSeed(l.m.opt.Seed, name), float32(scale))
	if err != nil && l.err == nil {
		l.err = fmt.Errorf("weight %s: %w", name, err)
	}
	return t
}

func (l *loader) upload(name string, kind WeightKind, h HostTensor) Tensor {
	if l.err != nil {
		return nil
	}
	if h.DType == "F8_E4M3" {
		// An FP8 checkpoint's weight that runs unquantized: dequantized.
		f, err := h.Float32()
		if err != nil {
			l.err = &WeightError{File: l.m.opt.Weights.Where(name), Tensor: name, Msg: err.Error()}
			return nil
		}
		h = HostF32(h.Shape, f)
	}
	if c, err := l.m.shard.cutFor(name, kind, h.Shape); err != nil {
		l.err = err
		return nil
	} else if c != nil {
		h = c.apply(h)
	}
	t, err := l.m.be.Upload(name, kind, h)
	if err != nil {
		l.err = fmt.Errorf("weight %s: %w", name, err)
	}
	return t
}

// load reads checkpoint tensors and checks their shapes against the
// config; parts are stacked along rows into want.
func (l *loader) load(want []int, parts ...string) (HostTensor, bool) {
	if l.err != nil {
		return HostTensor{}, false
	}
	src := l.m.opt.Weights
	var hs []HostTensor
	for _, name := range parts {
		h, err := src.Tensor(name)
		if err == nil && h.DType == "F8_E4M3" {
			h.FP8, err = l.fp8Scales(name, h)
		}
		if err != nil {
			l.err = err
			return HostTensor{}, false
		}
		hs = append(hs, h)
	}
	h, err := concatRows(hs...)
	if err == nil && !slices.Equal(h.Shape, want) {
		err = fmt.Errorf("shape %v, config.json implies %v", h.Shape, want)
	}
	if err != nil {
		l.err = &WeightError{File: src.Where(parts[0]), Tensor: parts[0], Msg: err.Error()}
		return HostTensor{}, false
	}
	return h, true
}

// normWeight loads a norm weight: the checkpoint's, or for a random model values
// around one.
func (l *loader) normWeight(name string, n int) Tensor {
	if l.m.opt.Weights != nil {
		if h, ok := l.load([]int{n}, name); ok {
			return l.upload(name, Vector, h)
		}
		return nil
	}
	// A random model's norm weights are 1 ± normWeightSpread, not ones:
	// with unit weights every check against the CPU oracle would pass an
	// engine that drops a norm's weight or applies it to the wrong columns.
	v := make([]float32, n)
	RandomFill(v, WeightSeed(l.m.opt.Seed, name), 0, normWeightSpread)
	for i := range v {
		v[i]++
	}
	return l.upload(name, Vector, HostF32([]int{n}, v))
}

// normWeightSpread bounds a random model's norm weights around one: wide
// enough that a dropped weight moves the logits well past the backends'
// tolerance, narrow enough to keep the activations' scale.
const normWeightSpread = 0.25

func (l *loader) table(name string, shape []int, scale float64) Tensor {
	if l.m.opt.Weights != nil {
		if h, ok := l.load(shape, name); ok {
			return l.upload(name, Table, h)
		}
		return nil
	}
	return l.random(name, Table, shape, scale)
}

// matrix creates a GEMM weight: random with variance gain²/fan_in, or the
// checkpoint tensors parts (default: name itself) stacked along rows.
func (l *loader) matrix(name string, kind WeightKind, shape []int, gain float64, parts ...string) Tensor {
	if l.m.opt.Weights != nil {
		if len(parts) == 0 {
			parts = []string{name}
		}
		if h, ok := l.load(shape, parts...); ok {
			return l.upload(name, kind, h)
		}
		return nil
	}
	if l.err != nil {
		return nil
	}
	fanIn := shape[len(shape)-1]
	return l.random(name, kind, shape, gain*math.Sqrt(3/float64(fanIn)))
}

// qmatrix is matrix for a GEMM weight that FP8 runs quantize: the linear
// layers of attention and the MLP (not the router, not the LM head,
// which TensorRT-LLM's FP8 recipe keeps in the compute type).
func (l *loader) qmatrix(name string, kind WeightKind, shape []int, gain float64, parts ...string) Tensor {
	if !l.m.opt.FP8 {
		return l.matrix(name, kind, shape, gain, parts...)
	}
	if l.m.opt.Weights != nil {
		if len(parts) == 0 {
			parts = []string{name}
		}
		if h, ok := l.load(shape, parts...); ok {
			return l.uploadFP8(name, kind, h)
		}
		return nil
	}
	return l.quantize(kind, l.matrix(name, kind, shape, gain))
}

// uploadFP8 uploads a checkpoint's weight as an FP8 GEMM weight: its own
// codes and scales (activations as Options.FP8Activations says), or
// quantized per tensor when it is not FP8.
func (l *loader) uploadFP8(name string, kind WeightKind, h HostTensor) Tensor {
	if l.err != nil {
		return nil
	}
	if h.DType != "F8_E4M3" {
		return l.quantize(kind, l.upload(name, kind, h))
	}
	if err := h.CheckFP8(); err != nil {
		l.err = &WeightError{File: l.m.opt.Weights.Where(name), Tensor: name, Msg: err.Error()}
		return nil
	}
	s := l.fp8Activations(kind, *h.FP8)
	h.FP8 = &s
	if kind == Matrix && s.Input == 0 && !s.PerToken {
		l.fp8Dynamic++
	}
	t, err := l.m.be.Upload(name, kind, h)
	if err != nil {
		l.err = fmt.Errorf("weight %s: %w", name, err)
	}
	return t
}

// fp8Activations is a checkpoint's activation scheme s for a weight of
// kind under Options.FP8Activations: dynamic drops the input_scale (per
// token stays per token); static makes a Matrix weight's per-token input
// per tensor, for calibration to give it a static scale. Expert stacks are
// not calibrated, so static leaves them as the checkpoint has them.
func (l *loader) fp8Activations(kind WeightKind, s FP8Scales) FP8Scales {
	switch l.m.opt.FP8Activations {
	case FP8ActDynamic:
		s.Input = 0
	case FP8ActStatic:
		if kind == Matrix {
			s.PerToken = false
		}
	}
	return s
}

// fp8Calibrate reports whether the model's FP8 Matrix weights left
// dynamic per tensor get static input scales calibrated at load
// (calibrateFP8): under static whenever there are any; under auto when
// weights were quantized at load, unless the checkpoint's own activations
// are dynamic per tensor — the calibrator cannot tell its weights from
// those quantized at load, so that scheme then holds for all of them.
func (l *loader) fp8Calibrate() bool {
	if !l.m.opt.FP8 {
		return false
	}
	switch l.m.opt.FP8Activations {
	case FP8ActStatic:
		return l.fp8Quantized+l.fp8Dynamic > 0
	case FP8ActAuto:
		return l.fp8Quantized > 0 && l.fp8Dynamic == 0
	}
	return false
}

// quantize replaces a weight of kind in the compute type by its FP8 form
// (activations dynamic per tensor until calibrated).
func (l *loader) quantize(kind WeightKind, t Tensor) Tensor {
	if l.err != nil || t == nil {
		return t
	}
	q, err := l.m.be.(FP8GEMMs).QuantizeFP8(t)
	if err != nil {
		l.err = fmt.Errorf("quantizing to FP8: %w", err)
	}
	if kind == Matrix {
		l.fp8Quantized++
	}
	return q
}

// fp8Scales reads the scales of an F8_E4M3 checkpoint tensor name (a
// ".weight"): name's weight_scale (one, or one per row), and its
// input_scale where the checkpoint's activations are static. A missing
// one is an error naming it (under fp8_activations dynamic too: the
// checkpoint contradicts its own config). The scheme is the checkpoint's;
// uploadFP8 applies Options.FP8Activations.
func (l *loader) fp8Scales(name string, h HostTensor) (*FP8Scales, error) {
	src := l.m.opt.Weights
	base := strings.TrimSuffix(name, ".weight")
	q := l.m.opt.Quant
	s := &FP8Scales{PerToken: q != nil && q.PerToken}
	bad := func(tensor, msg string) error {
		return &WeightError{File: src.Where(tensor), Tensor: tensor, Msg: msg}
	}
	ws := base + ".weight_scale"
	if !src.Has(ws) {
		return nil, bad(name, fmt.Sprintf("an F8_E4M3 weight without its scale: the checkpoint has no %q", ws))
	}
	v, err := l.scalars(ws)
	if err != nil {
		return nil, err
	}
	if n := len(v); n != 1 && n != h.rows() {
		return nil, bad(ws, fmt.Sprintf("%d values for the %d rows of %q; expected one (per tensor) or one per row (per channel)", n, h.rows(), name))
	}
	s.Weight = v
	is := base + ".input_scale"
	switch {
	case src.Has(is) && !s.PerToken:
		v, err := l.scalars(is)
		if err != nil {
			return nil, err
		}
		if len(v) != 1 {
			return nil, bad(is, fmt.Sprintf("%d values; expected one (activations are quantized per tensor)", len(v)))
		}
		s.Input = v[0]
	case q != nil && q.StaticInput:
		return nil, bad(name, fmt.Sprintf("%s (%s) declares static activation scales, but the checkpoint has no %q", q.File, q.Method, is))
	}
	h.FP8 = s
	if err := h.CheckFP8(); err != nil {
		return nil, bad(name, err.Error())
	}
	return s, nil
}

// scalars reads a small checkpoint tensor of scales as float32.
func (l *loader) scalars(name string) ([]float32, error) {
	src := l.m.opt.Weights
	h, err := src.Tensor(name)
	if err != nil {
		return nil, err
	}
	if h.DType == "F8_E4M3" {
		return nil, &WeightError{File: src.Where(name), Tensor: name, Msg: "a scale stored as F8_E4M3; expected F32, F16 or BF16"}
	}
	v, err := h.Float32()
	if err != nil {
		return nil, &WeightError{File: src.Where(name), Tensor: name, Msg: err.Error()}
	}
	return v, nil
}

// kvScales reads layer i's FP8 KV-cache scales (k_scale, v_scale: ModelOpt
// and compressed-tensors name them under self_attn or its k_proj and
// v_proj), 1 where the checkpoint has none.
func (l *loader) kvScales(p string, i int) {
	m := l.m
	if !m.opt.KVFP8 {
		return
	}
	if m.kScale == nil {
		m.kScale, m.vScale = make([]float32, m.cfg.Layers), make([]float32, m.cfg.Layers)
	}
	m.kScale[i], m.vScale[i] = 1, 1
	src := m.opt.Weights
	if src == nil || l.err != nil {
		return
	}
	for _, kv := range []struct {
		dst   *float32
		names []string
	}{
		{&m.kScale[i], []string{p + "self_attn.k_scale", p + "self_attn.k_proj.k_scale"}},
		{&m.vScale[i], []string{p + "self_attn.v_scale", p + "self_attn.v_proj.v_scale"}},
	} {
		for _, n := range kv.names {
			if !src.Has(n) {
				continue
			}
			v, err := l.scalars(n)
			switch {
			case err != nil:
				l.err = err
			case len(v) != 1 || !(v[0] > 0) || v[0] > 3.4e38:
				l.err = &WeightError{File: src.Where(n), Tensor: n, Msg: fmt.Sprintf("%v; expected one positive, finite scale", v)}
			default:
				*kv.dst = v[0]
			}
			break
		}
	}
}

// moe creates a MoE layer's router and stacked experts. Checkpoints name
// experts the Mixtral way (block_sparse_moe.experts.E.w1/w3/w2) or the
// Qwen3 way (mlp.experts.E.gate_proj/up_proj/down_proj).
func (l *loader) moe(p string) (router, gateUp, down Tensor) {
	c := l.m.full
	E, H, F := c.Experts, c.Hidden, c.FFN
	proj := 1 / math.Sqrt(2*float64(c.Layers))
	if l.m.opt.Weights == nil {
		router = l.matrix(p+"mlp.gate.weight", Matrix, []int{E, H}, 1)
		gateUp = l.experts(p+"mlp.experts.gate_up_proj", []int{E, 2 * F, H}, 1, true)
		down = l.experts(p+"mlp.experts.down_proj", []int{E, H, F}, proj, true)
		return
	}
	src := l.m.opt.Weights
	gate, w1, w3, w2 := p+"mlp.gate.weight", ".gate_proj.weight", ".up_proj.weight", ".down_proj.weight"
	ex := p + "mlp.experts."
	if src.Has(p + "block_sparse_moe.gate.weight") {
		gate, w1, w3, w2 = p+"block_sparse_moe.gate.weight", ".w1.weight", ".w3.weight", ".w2.weight"
		ex = p + "block_sparse_moe.experts."
	}
	router = l.matrix(gate, Matrix, []int{E, H}, 1)
	var gu, dn []string
	for e := range E {
		gu = append(gu, fmt.Sprint(ex, e, w1), fmt.Sprint(ex, e, w3))
		dn = append(dn, fmt.Sprint(ex, e, w2))
	}
	up := l.upload
	if l.m.opt.FP8 {
		up = l.uploadFP8
	}
	if h, ok := l.load([]int{2 * F * E, H}, gu...); ok {
		h.Shape = []int{E, 2 * F, H}
		gateUp = l.uploadExperts(ex+"gate_up", h, up)
	}
	// Down projections are [H, F] each; stacking rows gives [E*H, F].
	if h, ok := l.load([]int{E * H, F}, dn...); ok {
		h.Shape = []int{E, H, F}
		down = l.uploadExperts(ex+"down", h, up)
	}
	return
}

// WeightError is a checkpoint tensor that does not fit the model; it
// blames the user's input.
type WeightError struct {
	File, Tensor, Msg string
}

func (e *WeightError) Error() string {
	return fmt.Sprintf("%s: tensor %q: %s", e.File, e.Tensor, e.Msg)
}
func (e *WeightError) BadInput() bool { return true }

// Reserve sizes the activations, the KV cache and the routing tables for a
// run. Activations only grow; the KV cache is reallocated to exactly
// Slots × MaxLen whenever either grows (a run's cache must fit the budget
// MaxKVSlots computed for it), or to exactly Blocks blocks when paged
// (whenever the pool grows or the layout changes). Replaced buffers are
// freed.
func (m *Model) Reserve(c Capacity) error {
	if c.MaxLogitRows <= 0 || c.MaxLogitRows > c.MaxTokens {
		c.MaxLogitRows = c.MaxTokens
	}
	old := m.capa
	cfg, be := m.cfg, m.be
	H, hl := cfg.Hidden, cfg.HeadLayout()
	var err error
	alloc := func(t *Tensor, name string, dt DType, shape ...int) {
		if err != nil {
			return
		}
		if *t != nil {
			m.free(*t)
			*t = nil
		}
		n, e := be.Alloc(name, dt, shape...)
		if e != nil {
			err = fmt.Errorf("allocating %s %v: %w", name, shape, e)
			return
		}
		*t = n
	}
	if c.MaxTokens > old.MaxTokens {
		T := c.MaxTokens
		alloc(&m.x, "residual", Float, T, H)
		alloc(&m.h, "normed", Float, T, H)
		if cfg.MLA() {
			ms := cfg.MLAShape()
			alloc(&m.qkv, "q", Float, T, ms.QWidth())
			alloc(&m.ckv, "compressed_kv", Float, T, ms.Latent+ms.RopeDim)
			if cfg.QLoraRank > 0 {
				alloc(&m.qa, "q_latent", Float, T, cfg.QLoraRank)
			}
			alloc(&m.attn, "attention", Float, T, ms.Heads*ms.VDim)
		} else {
			alloc(&m.qkv, "qkv", Float, T, hl.QKVWidth())
			alloc(&m.attn, "attention", Float, T, cfg.Heads*cfg.HeadDim)
		}
		alloc(&m.delta, "delta", Float, T, H)
		if F := cfg.SharedWidth(); F > 0 {
			alloc(&m.sgu, "shared_gate_up", Float, T, 2*F)
			alloc(&m.sact, "shared_swiglu", Float, T, F)
			alloc(&m.sdelta, "shared_delta", Float, T, H)
		}
		if cfg.MoE() {
			alloc(&m.routerLogits, "router_logits", Float, T, cfg.Experts)
			alloc(&m.idx, "expert_ids", Int32, T, cfg.TopK)
			alloc(&m.wts, "expert_weights", Float, T, cfg.TopK)
			if m.counts == nil {
				alloc(&m.counts, "expert_counts", Int32, cfg.Layers, cfg.Experts)
			}
		}
		if cfg.MoELayers() < cfg.Layers {
			alloc(&m.gu, "gate_up", Float, T, 2*cfg.DenseWidth())
			alloc(&m.act, "swiglu", Float, T, cfg.DenseWidth())
		}
		if err == nil {
			m.capa.MaxTokens = T
		}
	}
	if c.MaxLogitRows > old.MaxLogitRows {
		alloc(&m.g, "logit_hidden", Float, c.MaxLogitRows, H)
		alloc(&m.logits, "logits", Float, c.MaxLogitRows, cfg.Vocab)
		if s := m.shard; s != nil && s.tp > 1 {
			alloc(&s.logits, "logits_shard", Float, c.MaxLogitRows, s.vocab)
		}
		if err == nil {
			m.capa.MaxLogitRows = c.MaxLogitRows
		}
	}
	if err == nil && c.MaxLen > m.ropeLen {
		if m.rope != nil {
			m.free(m.rope)
		}
		m.rope, err = be.Upload("rope_table", Table, HostF32([]int{c.MaxLen, cfg.HeadDim}, RopeTable(cfg, c.MaxLen)))
		m.ropeLen = c.MaxLen
	}
	paged := c.BlockSize > 0
	grow := c.Slots > old.Slots || c.MaxLen > old.MaxLen
	if paged {
		grow = grow || c.BlockSize != old.BlockSize || c.Blocks > old.Blocks
	} else {
		grow = grow || old.BlockSize > 0
	}
	if err == nil && grow {
		if r, ok := be.(Releaser); ok && m.cache != nil {
			r.FreeKVCache(m.cache)
		}
		m.cache = nil
		kc := m.KVConfig(c.Slots, c.MaxLen)
		if paged {
			kc.BlockSize, kc.Blocks = c.BlockSize, c.Blocks
		}
		m.cache, err = be.NewKVCache(kc)
		if err == nil {
			m.capa.Slots, m.capa.MaxLen, m.capa.BlockSize, m.capa.Blocks = c.Slots, c.MaxLen, kc.BlockSize, kc.Blocks
		} else {
			m.capa.Slots, m.capa.MaxLen, m.capa.BlockSize, m.capa.Blocks = 0, 0, 0, 0
		}
	}
	if err == nil && cfg.MoE() {
		err = m.route.reserve(m, m.capa.MaxTokens)
	}
	if err == nil && m.counts != nil {
		be.Zero(m.counts)
	}
	return err
}

// free releases a replaced buffer where the backend can.
func (m *Model) free(t Tensor) {
	if r, ok := m.be.(Releaser); ok {
		r.Free(t)
	}
}

// KVConfig is the KV-cache shape of this model with slots slots of
// capacity positions (an FP8 cache under Options.KVFP8).
func (m *Model) KVConfig(slots, capacity int) KVConfig {
	if m.cfg.MLA() {
		return KVConfig{Layers: m.cfg.Layers, Slots: slots, Capacity: capacity, HeadLayout: HeadLayout{Heads: m.cfg.Heads},
			Latent: m.cfg.KVLoraRank, RopeDim: m.cfg.HeadDim}
	}
	return m.ossKV(KVConfig{Layers: m.cfg.Layers, Slots: slots, Capacity: capacity, HeadLayout: m.cfg.HeadLayout(),
		FP8: m.opt.KVFP8, KScale: m.kScale, VScale: m.vScale})
}

// Pageable reports whether this model's KV cache can be paged on its
// backend (a Pager; MLA's latent cache keeps fixed slots).
func (m *Model) Pageable() bool {
	_, ok := m.be.(Pager)
	return ok && !m.cfg.MLA() && !m.cfg.OSSAttention()
}

// Capacity reports what the model is sized for.
func (m *Model) Capacity() Capacity { return m.capa }

// ErrCapacity is a batch larger than Reserve allowed for.
var ErrCapacity = errors.New("batch exceeds the reserved capacity")

// Forward runs one iteration over b and leaves the logits of b.LogitRows
// on the backend (read them with Argmax or ReadLogits).
//
// A backend may run several of these ops as one kernel. The CUDA backend
// holds one op back so that the next can do its work too
// (engine/cuda/backend/fusion.go). At decode with gemm_plugin disable (up
// to 4 rows, counted after padding to the graph bucket:
// XRUN_CUDA_GEMV_MAXM), a dense layer's nine ops are five kernels:
//
//	ops                                          kernel
//	AddRMSNorm ln1's add                         (in the previous layer's down GEMV)
//	RMSNorm or AddRMSNorm ln1's norm, MatMul qkv 1: QKV GEMV, the norm as its prologue
//	RoPE, Attention                              2: attention, rotating q and k and
//	                                                writing the KV cache first
//	MatMul wo, AddRMSNorm ln2's add              3: output GEMV, the add as its epilogue
//	AddRMSNorm ln2's norm, MatMul gate_up,       4: gate_up GEMV, the norm as its
//	SwiGLU                                          prologue, SwiGLU as its epilogue
//	MatMul down, the next AddRMSNorm's add       5: down GEMV, the add as its epilogue
//	(after the last layer: Add)
//
// and the final RMSNorm is the LM head GEMV's prologue; the embedding is
// gathered in the first layer's QKV GEMV, and the argmax is captured in
// the decode graph behind the LM head. In front of each dense layer's QKV
// projection Forward tells a Prefetcher that the gate_up weight comes
// next; there the CUDA backend forks a side stream that reads its leading
// rows into L2 while kernels 1 to 3 leave the memory mostly idle
// (XRUN_CUDA_L2_PREFETCH; engine/cuda/backend/prefetch.go). With cuBLASLt
// (gemm_plugin auto) or more rows only RoPE is folded: into the decode
// attention kernel, or, where that cannot take it (prefill), into RopeKV
// with the cache write; a dense layer at decode is then eight kernels. On
// MoE layers the router GEMV takes ln2's norm, and the experts' output is
// added by an AddRMSNorm kernel. With dtype fp8 and static input scales (a
// checkpoint's, or calibrated at load), the CUDA backend quantizes the
// QKV, gate_up and down GEMMs' inputs inside the norm or SwiGLU kernel that
// produces them and never writes ln1's output, ln2's (dense layers) or
// SwiGLU's: so no other op may read m.h or m.act after such a GEMM (on MoE
// layers the bf16 router reads m.h first, and that norm runs unfused). XRUN_CUDA_FUSE=0 turns all of this off,
// XRUN_CUDA_FUSE_NORM=0 the norms' part, XRUN_CUDA_ATTN_ROPE=0 the
// folding into attention (engine.Switches). The CPU backend runs every op
// on its own.
func (m *Model) Forward(b *Batch) error {
	T, S := b.NumTokens(), len(b.LogitRows)
	if T == 0 || T > m.capa.MaxTokens || S > m.capa.MaxLogitRows {
		return fmt.Errorf("%w: %d tokens (max %d), %d logit rows (max %d)", ErrCapacity, T, m.capa.MaxTokens, S, m.capa.MaxLogitRows)
	}
	for _, s := range b.Seqs {
		if int(s.Slot) >= m.capa.Slots || int(s.Past+s.Len) > m.capa.MaxLen {
			return fmt.Errorf("%w: slot %d (max %d), length %d (max %d)", ErrCapacity, s.Slot, m.capa.Slots, s.Past+s.Len, m.capa.MaxLen)
		}
		if bs := m.capa.BlockSize; bs > 0 {
			if need := (int(s.Past+s.Len) + bs - 1) / bs; int(s.NBlocks) < need {
				return fmt.Errorf("%w: slot %d has %d KV blocks of %d positions for length %d", ErrCapacity, s.Slot, s.NBlocks, bs, s.Past+s.Len)
			}
			for _, blk := range b.SeqBlocks(s) {
				if blk < 0 || int(blk) >= m.capa.Blocks {
					return fmt.Errorf("%w: KV block %d outside the pool of %d", ErrCapacity, blk, m.capa.Blocks)
				}
			}
		}
	}
	if len(b.Fed) > 0 && !m.Pipelined() {
		return fmt.Errorf("batch feeds %d tokens from the last picks, but backend %s cannot pipeline iterations", len(b.Fed), m.be.Name())
	}
	cfg, be := m.cfg, m.be
	eps := float32(cfg.RMSEps)
	hl := cfg.HeadLayout()
	if err := be.SetBatch(b); err != nil {
		return err
	}
	be.Embed(m.x, m.embed)
	for i, ly := range m.layers {
		if i == 0 {
			be.RMSNorm(m.h, m.x, ly.ln1, T, eps)
		} else {
			be.AddRMSNorm(m.x, m.delta, ly.ln1, m.h, T, eps)
		}
		if cfg.MLA() {
			m.mlaAttention(&ly, i, T)
		} else if cfg.IsOSS() {
			m.ossAttention(&ly, i, T)
		} else {
			if pf, ok := be.(Prefetcher); ok && !cfg.MoELayer(i) {
				pf.Prefetch(ly.gateUp, 2, T, ly.wqkv, ly.wo)
			}
			be.MatMul(m.qkv, m.h, ly.wqkv, T)
			if cfg.QKNorm {
				be.HeadNorm(m.qkv, ly.qNorm, ly.kNorm, hl, eps)
			}
			be.RoPE(m.qkv, m.rope, hl)
			be.Attention(m.attn, m.qkv, m.cache, i)
			be.MatMul(m.delta, m.attn, ly.wo, T)
			m.reduceTP(m.delta, T)
		}
		be.AddRMSNorm(m.x, m.delta, ly.ln2, m.h, T, eps)
		if cfg.MoELayer(i) {
			// The learned router always runs, so its cost stays in the
			// timing whatever the routing mode.
			be.MatMul(m.routerLogits, m.h, ly.router, T)
			m.addBias(m.routerLogits, ly.oss.routerBias, T)
			forced, row := m.route.forced(i, T)
			if cfg.GroupedRouting() {
				m.mla.RouteGrouped(m.idx, m.wts, m.routerLogits, ly.bias, forced, row, T, m.groupRoute(), m.counts, i)
			} else {
				be.Route(m.idx, m.wts, m.routerLogits, forced, row, T, cfg.TopK, cfg.Routing, m.counts, i)
			}
			if ly.oss.experts {
				m.oss.OSSMoE(m.delta, m.h, m.idx, m.wts, ly.gateUp, ly.down, ly.oss.gateUpBias, ly.oss.downBias, T, cfg.TopK, cfg.ExpertGLU())
			} else {
				m.moe(&ly, T)
			}
			if ly.sharedGateUp != nil {
				m.sharedExperts(&ly, T)
			}
		} else {
			be.MatMul(m.gu, m.h, ly.gateUp, T)
			be.SwiGLU(m.act, m.gu, T)
			be.MatMul(m.delta, m.act, ly.down, T)
			m.reduceTP(m.delta, T)
		}
	}
	// Only the sampled rows go through the final norm and the LM head.
	if S > 0 {
		be.Add(m.x, m.delta, T)
		if identityRows(b.LogitRows) {
			// Every row sampled in order (decode): the norm reads the
			// residual itself. Out of place, the GPU's decode GEMV takes
			// it into the LM head's prologue, a gather and a norm kernel
			// fewer per step.
			be.RMSNorm(m.g, m.x, m.finalNorm, S, eps)
		} else {
			be.GatherRows(m.g, m.x)
			be.RMSNorm(m.g, m.g, m.finalNorm, S, eps)
		}
		m.lmHeadRows(S)
	}
	m.lastRows, m.lastLogitRows = T, S
	return nil
}

// identityRows reports whether logit row j is token row j for every j.
func identityRows(rows []int32) bool {
	for j, r := range rows {
		if r != int32(j) {
			return false
		}
	}
	return true
}

// Argmax returns the greedy next token of each logit row of the last
// Forward into dst (len >= rows).
func (m *Model) Argmax(dst []int32) error {
	return m.syncShard(m.be.Argmax(dst[:m.lastLogitRows], m.logits, m.lastLogitRows))
}

// Pipelined reports whether the backend can queue an iteration before the
// previous one's tokens reach the host (ArgmaxStart, Batch.Fed).
func (m *Model) Pipelined() bool {
	_, ok := m.be.(Pipeliner)
	return ok
}

// ArgmaxStart queues the greedy picks of the last Forward's logit rows
// without waiting for them (Pipeliner; Pipelined must be true).
func (m *Model) ArgmaxStart() (int, error) {
	p, ok := m.be.(Pipeliner)
	if !ok {
		return 0, fmt.Errorf("backend %s cannot pipeline iterations", m.be.Name())
	}
	return p.ArgmaxStart(m.logits, m.lastLogitRows)
}

// ArgmaxWait waits for ticket's picks and copies them into dst.
func (m *Model) ArgmaxWait(ticket int, dst []int32) error {
	p, ok := m.be.(Pipeliner)
	if !ok {
		return fmt.Errorf("backend %s cannot pipeline iterations", m.be.Name())
	}
	return m.syncShard(p.ArgmaxWait(ticket, dst))
}

// ReadLogits copies the last Forward's logits ([rows, vocab]) to dst.
func (m *Model) ReadLogits(dst []float32) error {
	return m.be.ReadFloat32(dst[:m.lastLogitRows*m.cfg.Vocab], m.logits, m.lastLogitRows)
}

// ReadResidual copies the last Forward's residual stream ([tokens,
// hidden]) to dst: the hidden state every layer added to, which must stay
// finite (and within fp16 range) at any depth.
func (m *Model) ReadResidual(dst []float32) error {
	return m.be.ReadFloat32(dst[:m.lastRows*m.cfg.Hidden], m.x, m.lastRows)
}

// ExpertCounts copies the tokens routed to each expert of each layer since
// the last call ([layers, experts]) to dst and clears them. Dense models
// report nothing.
func (m *Model) ExpertCounts(dst []int32) error {
	if m.counts == nil {
		return nil
	}
	if err := m.be.ReadInt32(dst[:m.cfg.Layers*m.cfg.Experts], m.counts, m.cfg.Layers); err != nil {
		return err
	}
	m.be.Zero(m.counts)
	return nil
}

// ResetRouting restarts the uniform / zipf routing stream, so every run
// sees the same assignments.
func (m *Model) ResetRouting() { m.route.reset(m.opt) }

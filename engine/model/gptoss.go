package model

import (
	"errors"
	"fmt"
	"math"
)

// The GPT-OSS architecture (openai/gpt-oss-20b and -120b; transformers'
// modeling_gpt_oss.py) departs from the Llama layer in five places, all
// in OSS (zero for every other model):
//
//   - attention sinks: a learned logit per query head that joins the
//     softmax's denominator and weights no value, so a head may attend to
//     nothing: p_j = exp(s_j) / (Σ_i exp(s_i) + exp(sink_h));
//   - sliding-window layers: layer_types marks the layers that attend to
//     the last SlidingWindow positions only (position p sees p-W+1..p);
//     GPT-OSS alternates them with full layers, sliding first. Their KV
//     cache keeps W positions (KVConfig.Window), at p mod W;
//   - biases on the q, k, v and o projections, on the router and on both
//     expert projections;
//   - the experts' clamped SwiGLU (GLU): gate g = min(g, limit), up u =
//     clamp(u, -limit, limit), out = (u + 1) · g · sigmoid(alpha · g),
//     limit 7 and alpha 1.702;
//   - checkpoints keep experts as MXFP4: the loader dequantizes them, or
//     with Options.MXFP4 (moe_weights mxfp4) they stay MXFP4 on the
//     device (mxfp4.go).
//
// YaRN (rope_scaling with truncate false) is the common RopeScaling.
// These ops are OSSBackend's; model.New refuses the features on a backend
// without it (ErrNoOSS).

// OSS holds GPT-OSS's features of a Config (embedded in it).
type OSS struct {
	// SlidingWindow is the window of the sliding layers (0: none).
	SlidingWindow int `json:"sliding_window,omitempty"`
	// LayerTypes is Hugging Face's layer_types: "sliding_attention" or
	// "full_attention" per layer. Nil with a SlidingWindow: alternating,
	// sliding first, GPT-OSS's default.
	LayerTypes []string `json:"layer_types,omitempty"`
	// Sinks adds a learned per-head logit to the softmax's denominator.
	Sinks bool `json:"attention_sinks,omitempty"`
	// AttnBias, RouterBias, ExpertBias: the projections have biases.
	AttnBias   bool `json:"attention_bias,omitempty"`
	RouterBias bool `json:"router_bias,omitempty"`
	ExpertBias bool `json:"expert_bias,omitempty"`
	// SwiGLULimit > 0 makes the experts' activation GPT-OSS's clamped
	// SwiGLU with SwiGLUAlpha (see GLU).
	SwiGLULimit float64 `json:"swiglu_limit,omitempty"`
	SwiGLUAlpha float64 `json:"swiglu_alpha,omitempty"`
	// MXFP4 marks a checkpoint whose experts are stored as MXFP4; the
	// loader dequantizes them to the compute type, unless Options.MXFP4
	// keeps them MXFP4 (mxfp4.go).
	MXFP4 bool `json:"mxfp4_checkpoint,omitempty"`
}

// GPT-OSS's layer_types values.
const (
	SlidingAttention = "sliding_attention"
	FullAttention    = "full_attention"
)

// GLU is an MLP activation over a fused [gate | up] row. The zero value
// is plain SwiGLU: silu(g) · u. With Limit > 0 it is GPT-OSS's: g =
// min(g, Limit), u = clamp(u, -Limit, Limit), (u + 1) · g · sigmoid(Alpha
// · g).
type GLU struct {
	Limit, Alpha float32
}

// Apply is the activation of one gate and up value, the definition every
// backend's kernels are checked against.
func (a GLU) Apply(g, u float32) float32 {
	if a.Limit <= 0 {
		return g / (1 + float32(math.Exp(float64(-g)))) * u
	}
	g = min(g, a.Limit)
	u = max(min(u, a.Limit), -a.Limit)
	return (u + 1) * g / (1 + float32(math.Exp(float64(-a.Alpha*g))))
}

// ErrNoOSS is a backend without OSSBackend asked to run GPT-OSS's
// features.
var ErrNoOSS = errors.New("the backend has no GPT-OSS kernels (attention sinks, sliding-window attention, projection biases, clamped SwiGLU)")

// OSSBackend is implemented by backends that run GPT-OSS's features.
type OSSBackend interface {
	// AddBias: x[r] += bias for r < rows; bias is a Vector of x's width.
	AddBias(x, bias Tensor, rows int)
	// OSSAttention is Attention with attention sinks (sinks: a Vector of
	// one logit per query head; nil: none) over window positions (0: all
	// of them), on a cache made with KVConfig.Ring: each token at position
	// p attends to positions max(0, p-window+1)..p of its sequence, reading
	// those before the sequence's Past from the cache and the rest from
	// qkv; then the batch's keys and values are written to the cache
	// (layer l keeps position p at p mod KVConfig.LayerCapacity(l)).
	OSSAttention(out, qkv, sinks Tensor, cache KVCache, layer, window int)
	// OSSMoE is MoE with expert biases (gateUpBias: a Table [E, 2F] in
	// [gate | up] order, downBias a Table [E, H]; nil: none) and the
	// activation act.
	OSSMoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias Tensor, rows, k int, act GLU)
}

// IsOSS reports whether c has any of GPT-OSS's features.
func (c Config) IsOSS() bool {
	o := c.OSS
	return o.SlidingWindow > 0 || o.Sinks || o.AttnBias || o.RouterBias || o.ExpertBias || o.SwiGLULimit > 0
}

// OSSAttention reports whether attention needs OSSAttention (sinks or a
// window): the KV cache is then a Ring cache.
func (c Config) OSSAttention() bool { return c.Sinks || c.SlidingWindow > 0 }

// OSSExperts reports whether the experts need OSSMoE.
func (c Config) OSSExperts() bool { return c.MoE() && (c.ExpertBias || c.SwiGLULimit > 0) }

// ExpertGLU is the experts' activation.
func (c Config) ExpertGLU() GLU {
	if c.SwiGLULimit <= 0 {
		return GLU{}
	}
	return GLU{Limit: float32(c.SwiGLULimit), Alpha: float32(c.SwiGLUAlpha)}
}

// LayerWindow is layer i's attention window: SlidingWindow on a sliding
// layer, 0 (every position) on a full one.
func (c Config) LayerWindow(i int) int {
	if c.SlidingWindow <= 0 {
		return 0
	}
	if c.LayerTypes == nil {
		if i%2 == 0 {
			return c.SlidingWindow
		}
		return 0
	}
	if i < len(c.LayerTypes) && c.LayerTypes[i] == SlidingAttention {
		return c.SlidingWindow
	}
	return 0
}

// SlidingLayers is how many layers attend through the window.
func (c Config) SlidingLayers() int {
	n := 0
	for i := range c.Layers {
		if c.LayerWindow(i) > 0 {
			n++
		}
	}
	return n
}

// KVElemsAt is how many cache elements a sequence of n positions holds
// over all layers, and so what a decode step attending over them reads:
// KVElemsPerToken·n, but a sliding layer holds at most its window.
func (c Config) KVElemsAt(n float64) float64 {
	if c.SlidingWindow <= 0 || c.MLA() {
		return float64(c.KVElemsPerToken()) * n
	}
	per := 2 * float64(c.KVHeads*c.HeadDim)
	s := float64(c.SlidingLayers())
	return per * ((float64(c.Layers)-s)*n + s*math.Min(n, float64(c.SlidingWindow)))
}

// ossParams is what GPT-OSS's biases and sinks add to Params.
func (c Config) ossParams() int64 {
	var n int64
	h, l := int64(c.Hidden), int64(c.Layers)
	if c.AttnBias {
		n += l * (int64(c.HeadLayout().QKVWidth()) + h)
	}
	if c.Sinks {
		n += l * int64(c.Heads)
	}
	if c.MoE() {
		moe := int64(c.MoELayers())
		if c.RouterBias {
			n += moe * int64(c.Experts)
		}
		if c.ExpertBias {
			n += moe * int64(c.Experts) * (2*int64(c.FFN) + h)
		}
	}
	return n
}

// validateOSS checks the GPT-OSS fields.
func (c Config) validateOSS() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model %q: "+format, append([]any{c.Name}, a...)...)
	}
	o := c.OSS
	switch {
	case !c.IsOSS() && o.LayerTypes == nil && o.SwiGLUAlpha == 0:
		return nil
	case c.MLA():
		return bad("GPT-OSS's attention features do not combine with MLA")
	case o.SlidingWindow < 0:
		return bad("sliding_window %d: want 0 or more", o.SlidingWindow)
	case o.LayerTypes != nil && len(o.LayerTypes) != c.Layers:
		return bad("layer_types has %d entries for %d layers", len(o.LayerTypes), c.Layers)
	case o.LayerTypes != nil && o.SlidingWindow == 0:
		return bad("layer_types needs sliding_window")
	case (o.RouterBias || o.ExpertBias || o.SwiGLULimit > 0) && !c.MoE():
		return bad("router and expert biases and swiglu_limit need experts")
	case o.SwiGLULimit < 0 || math.IsInf(o.SwiGLULimit, 0) || math.IsNaN(o.SwiGLULimit):
		return bad("swiglu_limit %g: want a positive number, or 0 for plain SwiGLU", o.SwiGLULimit)
	case o.SwiGLULimit > 0 && !(o.SwiGLUAlpha > 0):
		return bad("swiglu_alpha %g: want a positive number with swiglu_limit", o.SwiGLUAlpha)
	}
	for i, t := range o.LayerTypes {
		if t != SlidingAttention && t != FullAttention {
			return bad("layer_types[%d] %q: want %q or %q", i, t, SlidingAttention, FullAttention)
		}
	}
	return nil
}

// ossCheck refuses what the GPT-OSS features do not run with.
func (m *Model) ossCheck() error {
	c := m.cfg
	if !c.IsOSS() {
		return nil
	}
	oss, ok := m.be.(OSSBackend)
	if !ok {
		return fmt.Errorf("model %q (%s): %w", c.Name, m.be.Name(), ErrNoOSS)
	}
	m.oss = oss
	switch {
	case m.opt.Parallel.TP != nil || m.opt.Parallel.EP != nil:
		// The biases would need splitting with their projections.
		return fmt.Errorf("model %q: GPT-OSS's features on a tensor- or expert-parallel split are not supported yet", c.Name)
	case m.opt.FP8 && c.OSSExperts():
		return fmt.Errorf("model %q: FP8 GEMMs with GPT-OSS's expert biases are not supported: %w", c.Name, ErrNoFP8)
	case m.opt.KVFP8 && c.OSSAttention():
		return fmt.Errorf("model %q: an FP8 KV cache with GPT-OSS's sinks and sliding window is not supported: %w", c.Name, ErrNoFP8)
	}
	return nil
}

// ossLayer is a layer's GPT-OSS weights (nil where the model has none).
type ossLayer struct {
	qkvBias, oBias, sinks Tensor
	routerBias            Tensor
	gateUpBias, downBias  Tensor
	window                int
	attention, experts    bool // run OSSAttention, OSSMoE
}

// ossAttention creates layer i's attention biases and sinks (Hugging Face
// GptOss names).
func (l *loader) ossAttention(p string, i int, ly *layer) {
	c := l.m.cfg
	a := p + "self_attn."
	ly.oss.window = c.LayerWindow(i)
	ly.oss.attention = c.OSSAttention()
	if c.AttnBias {
		W := c.HeadLayout().QKVWidth()
		ly.oss.qkvBias = l.vector(a+"qkv_proj.bias", W, 0.02, a+"q_proj.bias", a+"k_proj.bias", a+"v_proj.bias")
		ly.oss.oBias = l.vector(a+"o_proj.bias", c.Hidden, 0.02)
	}
	if c.Sinks {
		ly.oss.sinks = l.vector(a+"sinks", c.Heads, 1)
	}
}

// vector creates a bias-like Vector weight: random uniform with standard
// deviation std, or the checkpoint tensors parts (default: name) joined.
func (l *loader) vector(name string, n int, std float64, parts ...string) Tensor {
	if l.m.opt.Weights != nil {
		if len(parts) == 0 {
			parts = []string{name}
		}
		if h, ok := l.load([]int{n}, parts...); ok {
			return l.upload(name, Vector, h)
		}
		return nil
	}
	if l.err != nil {
		return nil
	}
	return l.random(name, Vector, []int{n}, std*math.Sqrt(3))
}

// ossMoE creates a GPT-OSS MoE layer: the router and its bias, and the
// stacked experts and their biases. A checkpoint keeps them as
// mlp.router.{weight,bias} and mlp.experts.{gate_up_proj,down_proj}[_bias]
// with gate_up_proj [E, H, 2F] (gate and up interleaved by column) and
// down_proj [E, F, H], or, MXFP4, as their _blocks and _scales [E, 2F,
// H/32, 16] and [E, H, F/32, 16]; they become the engine's [E, 2F, H]
// ([gate | up] rows) and [E, H, F].
func (l *loader) ossMoE(p string, ly *layer) {
	c := l.m.cfg
	E, H, F := c.Experts, c.Hidden, c.FFN
	proj := 1 / math.Sqrt(2*float64(c.Layers))
	r, ex := p+"mlp.router.", p+"mlp.experts."
	ly.oss.experts = c.OSSExperts()
	ly.router = l.matrix(r+"weight", Matrix, []int{E, H}, 1)
	if c.RouterBias {
		ly.oss.routerBias = l.vector(r+"bias", E, 0.02)
	}
	if l.m.opt.Weights == nil {
		ly.gateUp = l.experts(ex+"gate_up_proj", []int{E, 2 * F, H}, 1, false)
		ly.down = l.experts(ex+"down_proj", []int{E, H, F}, proj, false)
		if c.ExpertBias {
			ly.oss.gateUpBias = l.random(ex+"gate_up_proj_bias", Table, []int{E, 2 * F}, 0.02*math.Sqrt(3))
			ly.oss.downBias = l.random(ex+"down_proj_bias", Table, []int{E, H}, 0.02*math.Sqrt(3))
		}
		return
	}
	if l.err != nil {
		return
	}
	if h, ok := l.ossExpertWeight(ex+"gate_up_proj", []int{E, H, 2 * F}, []int{E, 2 * F, H}, true); ok {
		ly.gateUp = l.uploadExperts(ex+"gate_up_proj", h, l.upload)
	}
	if h, ok := l.ossExpertWeight(ex+"down_proj", []int{E, F, H}, []int{E, H, F}, false); ok {
		ly.down = l.uploadExperts(ex+"down_proj", h, l.upload)
	}
	if c.ExpertBias {
		if h, ok := l.load([]int{E, 2 * F}, ex+"gate_up_proj_bias"); ok {
			h.Data = deinterleave(h.Data, E, 2*F, 1, DTypeSize(h.DType))
			ly.oss.gateUpBias = l.upload(ex+"gate_up_proj_bias", Table, h)
		}
		if h, ok := l.load([]int{E, H}, ex+"down_proj_bias"); ok {
			ly.oss.downBias = l.upload(ex+"down_proj_bias", Table, h)
		}
	}
}

// MXFP4Source is a WeightSource that reads MXFP4 tensors (engine/safetensors'
// Dir): the blocks and scales tensors dequantized to BF16, shaped [...,
// rows, blocks·32].
type MXFP4Source interface {
	MXFP4(blocks, scales string) (HostTensor, error)
}

// ossExpertWeight reads a stacked expert weight name, stored [E, K, N]
// (in·out, transformers' layout) or as MXFP4 _blocks/_scales [E, N, K],
// as the engine's [E, N, K] (want); interleaved gate/up rows (gateUp)
// become [gate | up].
func (l *loader) ossExpertWeight(name string, stored, want []int, gateUp bool) (HostTensor, bool) {
	src := l.m.opt.Weights
	E, N, K := want[0], want[1], want[2]
	var h HostTensor
	if src.Has(name+"_blocks") || !src.Has(name) {
		mx, ok := src.(MXFP4Source)
		if !ok {
			l.err = &WeightError{File: src.Where(name), Tensor: name, Msg: "MXFP4 experts, but the weight source cannot read MXFP4"}
			return HostTensor{}, false
		}
		var err error
		if h, err = mx.MXFP4(name+"_blocks", name+"_scales"); err != nil {
			l.err = err
			return HostTensor{}, false
		}
		if len(h.Shape) != 3 || h.Shape[0] != E || h.Shape[1] != N || h.Shape[2] != K {
			l.err = &WeightError{File: src.Where(name + "_blocks"), Tensor: name + "_blocks", Msg: fmt.Sprintf("dequantizes to %v, config.json implies %v", h.Shape, want)}
			return HostTensor{}, false
		}
	} else {
		var ok bool
		if h, ok = l.load(stored, name); !ok {
			return HostTensor{}, false
		}
		h.Data = transposeLast(h.Data, E, K, N, DTypeSize(h.DType))
	}
	if gateUp {
		h.Data = deinterleave(h.Data, E, N, K, DTypeSize(h.DType))
	}
	h.Shape = []int{E, N, K}
	return h, true
}

// transposeLast turns [b, r, c] elements of size es into [b, c, r].
func transposeLast(d []byte, b, r, c, es int) []byte {
	out := make([]byte, len(d))
	for i := range b {
		base := i * r * c * es
		for x := range r {
			for y := range c {
				copy(out[base+(y*r+x)*es:base+(y*r+x+1)*es], d[base+(x*c+y)*es:])
			}
		}
	}
	return out
}

// deinterleave reorders the n rows (each k elements of size es) of each
// of b blocks from gate, up, gate, up, ... to all gates then all ups.
func deinterleave(d []byte, b, n, k, es int) []byte {
	out := make([]byte, len(d))
	row := k * es
	for i := range b {
		base := i * n * row
		for j := range n {
			dst := j / 2
			if j%2 == 1 {
				dst += n / 2
			}
			copy(out[base+dst*row:base+(dst+1)*row], d[base+j*row:base+(j+1)*row])
		}
	}
	return out
}

// addBias adds bias to the first rows of x, when there is one.
func (m *Model) addBias(x, bias Tensor, rows int) {
	if bias != nil {
		m.oss.AddBias(x, bias, rows)
	}
}

// ossAttention runs a GPT-OSS layer's attention on the normed hidden
// state m.h, leaving o_proj's output (and bias) in m.delta.
func (m *Model) ossAttention(ly *layer, i, T int) {
	be, hl := m.be, m.cfg.HeadLayout()
	be.MatMul(m.qkv, m.h, ly.wqkv, T)
	m.addBias(m.qkv, ly.oss.qkvBias, T)
	be.RoPE(m.qkv, m.rope, hl)
	if ly.oss.attention {
		m.oss.OSSAttention(m.attn, m.qkv, ly.oss.sinks, m.cache, i, ly.oss.window)
	} else {
		be.Attention(m.attn, m.qkv, m.cache, i)
	}
	be.MatMul(m.delta, m.attn, ly.wo, T)
	m.addBias(m.delta, ly.oss.oBias, T)
}

// ossKV completes a KV config for GPT-OSS's attention: a ring cache whose
// sliding layers keep Window positions.
func (m *Model) ossKV(c KVConfig) KVConfig {
	if !m.cfg.OSSAttention() {
		return c
	}
	c.Ring = true
	if w := m.cfg.SlidingWindow; w > 0 {
		c.Window = w
		c.Sliding = make([]bool, m.cfg.Layers)
		for i := range c.Sliding {
			c.Sliding[i] = m.cfg.LayerWindow(i) > 0
		}
	}
	return c
}

// LayerCapacity is how many positions layer l of a cache keeps per slot:
// Capacity, or at most Window on a sliding layer of a Ring cache.
func (c KVConfig) LayerCapacity(l int) int {
	if c.Window > 0 && l < len(c.Sliding) && c.Sliding[l] {
		return min(c.Window, c.Capacity)
	}
	return c.Capacity
}

// SlotBytes is the cache memory one slot of Capacity positions takes when
// elements are elemBytes wide, sliding layers counting their window only.
func (c KVConfig) SlotBytes(elemBytes int) int64 {
	if !c.Ring || c.MLA() {
		return c.KVBytesPerToken(elemBytes) * int64(c.Capacity)
	}
	var pos int64
	for l := range c.Layers {
		pos += int64(c.LayerCapacity(l))
	}
	return pos * int64(2*c.KVHeads*c.HeadDim) * int64(elemBytes)
}

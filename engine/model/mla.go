package model

import (
	"errors"
	"fmt"
	"math"
)

// The DeepSeek-V3 architecture: multi-head latent attention (MLA), grouped
// sigmoid routing with a correction bias, shared experts and dense first
// layers. Its ops beyond the Backend interface are MLABackend's; a backend
// without them cannot run these models (model.New says so: ErrNoMLA).
//
// MLA per layer, for hidden state x (DeepSeek-V2 paper, section 2.1):
//
//	q    = q_b(norm(q_a(x)))           or q_proj(x) without q compression
//	ckv  = kv_a(x) = [c | k_rope]      c: kv_lora_rank, k_rope: qk_rope_head_dim
//	c    = norm(c); rotate k_rope and the rope part of each query head
//	K_h  = [W_UK[h]·c | k_rope], V_h = W_UV[h]·c   (kv_b = [W_UK; W_UV] per head)
//	out  = o_proj(softmax(scale · q_h·K_h) · V_h for each head h)
//
// The cache keeps only [c | k_rope] per position: kv_lora_rank +
// qk_rope_head_dim values per layer (576 for DeepSeek-V3, against 2 · 128
// heads · 192 = 49152 were K and V cached). The plain form decompresses
// K_h and V_h from the cache at every step; the absorbed form folds W_UK
// into the query (q_h·K_h[p] = (W_UK[h]ᵀ·q_nope)·c[p] + q_rope·k_rope[p])
// and W_UV into the output (Σ p·V_h = W_UV[h]·Σ p·c), so attention runs
// over the latent cache directly, as one shared key/value head of
// kv_lora_rank (+ rope) for all query heads.

// ErrNoMLA is a backend without MLABackend asked to run an MLA or
// grouped-routing model.
var ErrNoMLA = errors.New("the backend has no MLA kernels (multi-head latent attention and DeepSeek-V3's grouped routing)")

// MLAShape is the shape of one MLA attention op.
type MLAShape struct {
	Heads   int
	NopeDim int // qk_nope_head_dim: the part of a head W_UK decompresses
	RopeDim int // qk_rope_head_dim: the rotary part, one key for all heads
	VDim    int // v_head_dim
	Latent  int // kv_lora_rank
	// Interleave: rotary pairs are adjacent elements (2i, 2i+1)
	// (rope_interleave), else element i pairs with i + RopeDim/2.
	Interleave bool
	Scale      float32 // softmax scale (Config.MLASoftmaxScale)
	Eps        float32 // kv_a_layernorm's epsilon
}

// QWidth is the width of a query row: every head's nope and rope parts.
func (s MLAShape) QWidth() int { return s.Heads * (s.NopeDim + s.RopeDim) }

// GroupRoute is DeepSeek-V3's routing (RoutingSigmoidGroupTopK*) for one
// layer: k experts of Experts in Groups equal groups.
type GroupRoute struct {
	K, Groups, TopKGroups int
	Renorm                bool    // weights renormalised to sum to one (norm_topk_prob)
	Scale                 float32 // routed_scaling_factor
	// ForcedWeights are the weights of a forced row's k slots, in slot
	// order: what the method gives for the replacement logits of the
	// routing mode (Model.Reserve sets them).
	ForcedWeights []float32
}

// MLABackend is implemented by backends that run the DeepSeek-V3
// architecture (engine/cpu; the CUDA backend does not yet).
type MLABackend interface {
	// MLAAttention is one layer's multi-head latent attention. q is [tokens,
	// s.QWidth()]: per head its nope part, then its rope part; ckv is
	// [tokens, Latent + RopeDim], kv_a's output. For every batch token it
	// RMS-normalises the latent part of ckv in place by kvNorm (s.Eps),
	// rotates the rope part of ckv and of each query head in place by the
	// token's position (table as RoPE's, RopeDim wide), writes [latent |
	// rope key] into cache at (slot, position), then attends causally over
	// the sequence's positions 0..pos with scale s.Scale. kvb is a
	// HeadStack [Heads, NopeDim + VDim, Latent]: per head W_UK's rows, then
	// W_UV's. out is [tokens, Heads·VDim]. With absorb, tokens of
	// sequences that decode one token (Len 1) use the absorbed form;
	// every other token, and all of them without absorb, the plain form.
	// Both compute the same attention.
	MLAAttention(out, q, ckv, kvNorm, kvb, table Tensor, cache KVCache, layer int, s MLAShape, absorb bool)
	// RouteGrouped is Route for DeepSeek-V3's method: with forced == nil it
	// routes each of rows tokens from logits [rows, experts] and the
	// correction bias [experts] (used for the choice only); otherwise
	// forced [>= forcedRow+rows, K] (Int32) holds the chosen experts from
	// row forcedRow, slot j weighted r.ForcedWeights[j]. counts and layer
	// are as Route's.
	RouteGrouped(idx, weights, logits, bias, forced Tensor, forcedRow, rows int, r GroupRoute, counts Tensor, layer int)
}

// MLA reports whether attention is multi-head latent attention.
func (c Config) MLA() bool { return c.KVLoraRank > 0 }

// GroupedRouting reports whether the MoE layers route by DeepSeek-V3's
// grouped sigmoid method.
func (c Config) GroupedRouting() bool {
	return c.Routing == RoutingSigmoidGroupTopKRenorm || c.Routing == RoutingSigmoidGroupTopK
}

// MoELayer reports whether layer i has experts: every layer of a MoE
// model but its first DenseLayers.
func (c Config) MoELayer(i int) bool { return c.MoE() && i >= c.DenseLayers }

// MoELayers is how many layers have experts.
func (c Config) MoELayers() int {
	if !c.MoE() {
		return 0
	}
	return c.Layers - min(c.DenseLayers, c.Layers)
}

// DenseWidth is the intermediate width of the dense layers' MLP: FFN on a
// dense model, DenseFFN on a MoE model's first DenseLayers.
func (c Config) DenseWidth() int {
	if c.MoE() {
		return c.DenseFFN
	}
	return c.FFN
}

// SharedWidth is the intermediate width of a MoE layer's shared experts
// (one MLP); 0 without them.
func (c Config) SharedWidth() int { return c.FFN * c.SharedExperts }

// MLAShape is the model's MLA attention shape.
func (c Config) MLAShape() MLAShape {
	return MLAShape{Heads: c.Heads, NopeDim: c.QKNopeDim, RopeDim: c.HeadDim, VDim: c.VHeadDim, Latent: c.KVLoraRank,
		Interleave: c.RopeInterleave, Scale: float32(c.MLASoftmaxScale()), Eps: float32(c.RMSEps)}
}

// MLASoftmaxScale is an MLA model's attention scale: 1/sqrt(qk_nope +
// qk_rope), times mscale(factor, mscale_all_dim)² under yarn scaling with
// mscale_all_dim set, as DeepSeek-V3 (and transformers) have it.
func (c Config) MLASoftmaxScale() float64 {
	s := 1 / math.Sqrt(float64(c.QKNopeDim+c.HeadDim))
	if r := c.RopeScaling; r != nil && r.Type == "yarn" && r.MscaleAllDim != 0 {
		m := yarnMscale(r.Factor, r.MscaleAllDim)
		s *= m * m
	}
	return s
}

// AttnWeights is the number of attention GEMM weights of one layer.
func (c Config) AttnWeights() int64 {
	h := int64(c.Hidden)
	if !c.MLA() {
		d := int64(c.HeadDim)
		return h*d*int64(c.Heads+2*c.KVHeads) + int64(c.Heads)*d*h
	}
	nh, dn, dr, dv := int64(c.Heads), int64(c.QKNopeDim), int64(c.HeadDim), int64(c.VHeadDim)
	qr, kvr := int64(c.QLoraRank), int64(c.KVLoraRank)
	q := h * nh * (dn + dr)
	if qr > 0 {
		q = h*qr + qr*nh*(dn+dr)
	}
	return q + h*(kvr+dr) + kvr*nh*(dn+dv) + nh*dv*h
}

// KVElemsPerToken is how many cache elements one position of one sequence
// takes over all layers: K and V of every KV head, or MLA's latent and
// rotary key.
func (c Config) KVElemsPerToken() int64 {
	if c.MLA() {
		return int64(c.Layers) * int64(c.KVLoraRank+c.HeadDim)
	}
	return 2 * int64(c.Layers) * int64(c.KVHeads) * int64(c.HeadDim)
}

// AttnFLOPsPerPosition is the attention arithmetic of one token over one
// cached position, all layers: the scores and the weighted sum. For MLA,
// decode tokens attend in the absorbed form (over kv_lora_rank + rope per
// head, summing latents) and prefill tokens in the plain form (over
// qk_nope + rope, summing v_head_dim), as deployments run them; the
// decompression and absorption GEMMs are kv_b's weights, counted as such.
func (c Config) AttnFLOPsPerPosition(decode bool) float64 {
	l, nh := float64(c.Layers), float64(c.Heads)
	if !c.MLA() {
		return 4 * l * nh * float64(c.HeadDim)
	}
	if decode {
		return 2 * l * nh * float64(2*c.KVLoraRank+c.HeadDim)
	}
	return 2 * l * nh * float64(c.QKNopeDim+c.HeadDim+c.VHeadDim)
}

// deepSeekParams is Params for models with MLA, dense first layers or
// shared experts.
func (c Config) deepSeekParams() int64 {
	h := int64(c.Hidden)
	var n int64
	for i := range c.Layers {
		n += c.AttnWeights() + 2*h
		if c.MLA() {
			n += int64(c.QLoraRank + c.KVLoraRank) // q_a and kv_a layernorms
		}
		if !c.MoELayer(i) {
			n += 3 * h * int64(c.DenseWidth())
			continue
		}
		n += int64(c.Experts)*3*h*int64(c.FFN) + h*int64(c.Experts) + 3*h*int64(c.SharedWidth())
		if c.GroupedRouting() {
			n += int64(c.Experts) // correction bias
		}
	}
	emb := int64(c.Vocab) * h
	head := emb
	if c.TieEmbeddings {
		head = 0
	}
	return n + emb + head + h
}

// validateDeepSeek checks the fields of the DeepSeek-V3 architecture.
func (c Config) validateDeepSeek() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model %q: "+format, append([]any{c.Name}, a...)...)
	}
	if c.MLA() {
		switch {
		case c.QLoraRank < 0 || c.QKNopeDim <= 0 || c.VHeadDim <= 0:
			return bad("MLA needs qk_nope_head_dim and v_head_dim > 0 and q_lora_rank >= 0")
		case c.QKNorm:
			return bad("qk-norm is not part of MLA")
		}
	} else if c.QLoraRank != 0 || c.QKNopeDim != 0 || c.VHeadDim != 0 {
		return bad("q_lora_rank, qk_nope_head_dim and v_head_dim need MLA (kv_lora_rank > 0)")
	}
	if c.GroupedRouting() {
		switch {
		case !c.MoE():
			return bad("grouped routing needs experts")
		case c.Groups <= 0 || c.Experts%c.Groups != 0:
			return bad("%d experts do not split into n_group %d equal groups", c.Experts, c.Groups)
		case c.Experts/c.Groups < 2 && c.Groups > 1:
			// A group's score is the sum of its two best experts'.
			return bad("groups of %d expert: the group score needs at least 2", c.Experts/c.Groups)
		case c.TopKGroups <= 0 || c.TopKGroups > c.Groups:
			return bad("topk_group %d outside 1..%d groups", c.TopKGroups, c.Groups)
		case c.TopK > c.TopKGroups*(c.Experts/c.Groups):
			return bad("top-k %d exceeds the %d experts of topk_group %d groups", c.TopK, c.TopKGroups*(c.Experts/c.Groups), c.TopKGroups)
		case !(c.RoutedScale > 0) || math.IsInf(c.RoutedScale, 0):
			return bad("routed_scaling_factor %g: want a positive number", c.RoutedScale)
		}
	} else if c.Groups != 0 || c.TopKGroups != 0 || c.RoutedScale != 0 {
		return bad("n_group, topk_group and routed_scaling_factor need grouped routing")
	}
	switch {
	case c.SharedExperts < 0 || (c.SharedExperts > 0 && !c.MoE()):
		return bad("n_shared_experts %d: want 0, or more on a MoE model", c.SharedExperts)
	case c.DenseLayers < 0 || (c.DenseLayers > 0 && !c.MoE()):
		// More than Layers is a model cut short (engine.WithLayers): all
		// its layers are dense.
		return bad("first_k_dense_replace %d: want 0 or more on a MoE model", c.DenseLayers)
	case c.MoE() && c.DenseLayers > 0 && c.DenseFFN <= 0:
		return bad("dense first layers need their intermediate_size")
	}
	return nil
}

// mlaAttention creates a layer's MLA weights (Hugging Face DeepseekV3 names).
func (l *loader) mlaAttention(p string, ly *layer) {
	c := l.m.cfg
	H, nh, dn, dr, dv, qr, kvr := c.Hidden, c.Heads, c.QKNopeDim, c.HeadDim, c.VHeadDim, c.QLoraRank, c.KVLoraRank
	proj := 1 / math.Sqrt(2*float64(c.Layers))
	a := p + "self_attn."
	if qr > 0 {
		ly.qa = l.matrix(a+"q_a_proj.weight", Matrix, []int{qr, H}, 1)
		ly.qaNorm = l.normWeight(a+"q_a_layernorm.weight", qr)
		ly.wq = l.matrix(a+"q_b_proj.weight", Matrix, []int{nh * (dn + dr), qr}, 1)
	} else {
		ly.wq = l.matrix(a+"q_proj.weight", Matrix, []int{nh * (dn + dr), H}, 1)
	}
	ly.kva = l.matrix(a+"kv_a_proj_with_mqa.weight", Matrix, []int{kvr + dr, H}, 1)
	ly.kvNorm = l.normWeight(a+"kv_a_layernorm.weight", kvr)
	ly.kvb = l.headStack(a+"kv_b_proj.weight", []int{nh, dn + dv, kvr})
	ly.wo = l.matrix(a+"o_proj.weight", Matrix, []int{H, nh * dv}, proj)
}

// headStack creates a HeadStack weight; the checkpoint stores it as one
// [heads·n, k] matrix, the same elements in the same order.
func (l *loader) headStack(name string, shape []int) Tensor {
	if l.m.opt.Weights == nil {
		if l.err != nil {
			return nil
		}
		return l.random(name, HeadStack, shape, math.Sqrt(3/float64(shape[2])))
	}
	h, ok := l.load([]int{shape[0] * shape[1], shape[2]}, name)
	if !ok {
		return nil
	}
	h.Shape = shape
	return l.upload(name, HeadStack, h)
}

// moeExtras creates what a DeepSeek-V3 MoE layer has beyond the routed
// experts: the router's correction bias and the shared experts.
func (l *loader) moeExtras(p string, ly *layer) {
	c := l.m.cfg
	H := c.Hidden
	if c.GroupedRouting() {
		// Random weights get a zero bias: the learned one balances the
		// real router's load, a random one would only add noise.
		name := p + "mlp.gate.e_score_correction_bias"
		if l.m.opt.Weights != nil {
			if h, ok := l.load([]int{c.Experts}, name); ok {
				ly.bias = l.upload(name, Vector, h)
			}
		} else {
			ly.bias = l.upload(name, Vector, HostF32([]int{c.Experts}, make([]float32, c.Experts)))
		}
	}
	if F := c.SharedWidth(); F > 0 {
		s := p + "mlp.shared_experts."
		ly.sharedGateUp = l.matrix(s+"gate_up_proj.weight", Matrix, []int{2 * F, H}, 1, s+"gate_proj.weight", s+"up_proj.weight")
		ly.sharedDown = l.matrix(s+"down_proj.weight", Matrix, []int{H, F}, 1/math.Sqrt(2*float64(c.Layers)))
	}
}

// mlaAttention runs a layer's attention on the normed hidden state m.h,
// leaving o_proj's output in m.delta.
func (m *Model) mlaAttention(ly *layer, i, T int) {
	be, eps := m.be, float32(m.cfg.RMSEps)
	if ly.qa != nil {
		be.MatMul(m.qa, m.h, ly.qa, T)
		be.RMSNorm(m.qa, m.qa, ly.qaNorm, T, eps)
		be.MatMul(m.qkv, m.qa, ly.wq, T)
	} else {
		be.MatMul(m.qkv, m.h, ly.wq, T)
	}
	be.MatMul(m.ckv, m.h, ly.kva, T)
	m.mla.MLAAttention(m.attn, m.qkv, m.ckv, ly.kvNorm, ly.kvb, m.rope, m.cache, i, m.cfg.MLAShape(), !m.opt.MLAPlain)
	be.MatMul(m.delta, m.attn, ly.wo, T)
}

// sharedExperts adds a MoE layer's shared experts of the normed hidden
// state m.h to m.delta.
func (m *Model) sharedExperts(ly *layer, T int) {
	be := m.be
	be.MatMul(m.sgu, m.h, ly.sharedGateUp, T)
	be.SwiGLU(m.sact, m.sgu, T)
	be.MatMul(m.sdelta, m.sact, ly.sharedDown, T)
	be.Add(m.delta, m.sdelta, T)
}

// groupRoute is the model's grouped routing with the forced weights of
// its routing mode.
func (m *Model) groupRoute() GroupRoute {
	c := m.cfg
	return GroupRoute{K: c.TopK, Groups: c.Groups, TopKGroups: c.TopKGroups, Renorm: c.Routing == RoutingSigmoidGroupTopKRenorm,
		Scale: float32(c.RoutedScale), ForcedWeights: m.route.weights}
}

package model

// Routing methods of MoE models: the order of softmax and top-k decides
// which weights the chosen experts get.
const (
	// RoutingSoftmaxTopKRenorm is Mixtral's: softmax over all experts, take
	// the top k, renormalise their probabilities to sum to one.
	RoutingSoftmaxTopKRenorm = "softmax-topk-renorm"
	// RoutingTopKSoftmax is GPT-OSS's and Qwen3-MoE's (norm_topk_prob):
	// take the top k logits, softmax over those k only. Mathematically the
	// same weights as RoutingSoftmaxTopKRenorm; kept apart because the
	// kernels (and their rounding) differ.
	RoutingTopKSoftmax = "topk-softmax"
	// RoutingSoftmaxTopK is Qwen3-MoE with norm_topk_prob false: softmax
	// over all experts, top k, no renormalisation.
	RoutingSoftmaxTopK = "softmax-topk"
	// RoutingSigmoidGroupTopKRenorm is DeepSeek-V3's (noaux_tc with
	// norm_topk_prob): sigmoid scores; the correction bias added for the
	// choice only; the TopKGroups groups with the largest sums of their
	// two best biased scores; the top k of their experts by biased score;
	// weights the unbiased scores of those k, renormalised to sum to one,
	// times RoutedScale (see GroupRoute).
	RoutingSigmoidGroupTopKRenorm = "sigmoid-group-topk-renorm"
	// RoutingSigmoidGroupTopK is the same without the renormalisation
	// (norm_topk_prob false): the weights are the scores times RoutedScale.
	RoutingSigmoidGroupTopK = "sigmoid-group-topk"
)

// RopeScaling describes a rotary-embedding frequency rescaling.
type RopeScaling struct {
	Type            string  `json:"type"` // "llama3" or "yarn"
	Factor          float64 `json:"factor"`
	LowFreqFactor   float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor  float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPos  int     `json:"original_max_position_embeddings,omitempty"`
	BetaFast        float64 `json:"beta_fast,omitempty"`
	BetaSlow        float64 `json:"beta_slow,omitempty"`
	AttentionFactor float64 `json:"attention_factor,omitempty"`
	// Truncate rounds yarn's correction range to whole dimensions; nil means
	// true (transformers' default). GPT-OSS sets it false.
	Truncate *bool `json:"truncate,omitempty"`
	// Mscale and MscaleAllDim are DeepSeek's yarn magnitude factors: with
	// both set (and no AttentionFactor) cos and sin are scaled by
	// mscale(Factor, Mscale) / mscale(Factor, MscaleAllDim), and an MLA
	// model's softmax scale by mscale(Factor, MscaleAllDim)² (see
	// Config.MLASoftmaxScale).
	Mscale       float64 `json:"mscale,omitempty"`
	MscaleAllDim float64 `json:"mscale_all_dim,omitempty"`
}

// Config is the exact shape of a model: everything the engine needs to
// allocate and run it, and what datasets need (tokenizer vocabulary, EOS).
// The engine package re-exports it as engine.ModelConfig.
type Config struct {
	Name   string `json:"name"`
	Family string `json:"family"` // llama, mixtral, gpt-oss, qwen3-moe, deepseek-v3
	// Path is the Hugging Face directory a model was loaded from; empty for
	// zoo models, whose weights are random, seeded and deterministic.
	Path string `json:"path,omitempty"`

	Hidden  int `json:"hidden_size"`
	Layers  int `json:"num_hidden_layers"`
	Heads   int `json:"num_attention_heads"`
	KVHeads int `json:"num_key_value_heads"`
	HeadDim int `json:"head_dim"`
	FFN     int `json:"intermediate_size"` // dense MLP width; for MoE, each expert's

	// Vocab is the number of embedding rows / logits. DatasetVocab is the
	// tokenizer's base vocabulary without added tokens, which is what
	// TensorRT-LLM's prepare_dataset.py draws token ids from.
	Vocab        int `json:"vocab_size"`
	DatasetVocab int `json:"dataset_vocab_size"`
	BOS          int `json:"bos_token_id"`
	EOS          int `json:"eos_token_id"`

	RMSEps        float64      `json:"rms_norm_eps"`
	RopeTheta     float64      `json:"rope_theta"`
	RopeScaling   *RopeScaling `json:"rope_scaling,omitempty"`
	MaxPos        int          `json:"max_position_embeddings"`
	TieEmbeddings bool         `json:"tie_word_embeddings"`
	QKNorm        bool         `json:"qk_norm,omitempty"` // Qwen3: RMSNorm on each head's q and k

	// Mixture of experts; Experts == 0 for dense models.
	Experts int    `json:"num_experts,omitempty"`
	TopK    int    `json:"num_experts_per_tok,omitempty"`
	Routing string `json:"routing,omitempty"`

	// The DeepSeek-V3 architecture (engine/model/mla.go). KVLoraRank > 0
	// makes attention multi-head latent attention (MLA): HeadDim is then
	// qk_rope_head_dim, the rotary part of each query head and the one
	// rotary key all heads share, and KVHeads is unused.
	QLoraRank      int  `json:"q_lora_rank,omitempty"` // 0: queries projected from the hidden state directly
	KVLoraRank     int  `json:"kv_lora_rank,omitempty"`
	QKNopeDim      int  `json:"qk_nope_head_dim,omitempty"`
	VHeadDim       int  `json:"v_head_dim,omitempty"`
	RopeInterleave bool `json:"rope_interleave,omitempty"` // rotary pairs are adjacent elements, not the two halves
	// Grouped routing (RoutingSigmoidGroupTopK*): Experts in Groups equal
	// groups, tokens limited to TopKGroups of them; weights times
	// RoutedScale.
	Groups      int     `json:"n_group,omitempty"`
	TopKGroups  int     `json:"topk_group,omitempty"`
	RoutedScale float64 `json:"routed_scaling_factor,omitempty"`
	// SharedExperts is how many always-active experts of FFN width each
	// MoE layer adds (one MLP of SharedExperts·FFN); DenseLayers is
	// first_k_dense_replace: the first layers have a dense MLP of DenseFFN
	// instead of experts.
	SharedExperts int `json:"n_shared_experts,omitempty"`
	DenseLayers   int `json:"first_k_dense_replace,omitempty"`
	DenseFFN      int `json:"dense_intermediate_size,omitempty"`

	// OSS is GPT-OSS's attention sinks, sliding window, biases and
	// clamped SwiGLU (gptoss.go).
	OSS

	// Simplifications documents where the engine departs from the real
	// architecture (the shapes, and so the cost, are kept).
	Simplifications []string `json:"simplifications,omitempty"`
}

// MoE reports whether the model has mixture-of-experts layers, the only
// models on which routing_mode means anything.
func (c Config) MoE() bool { return c.Experts > 0 }

// Heads returns the attention head layout of the model.
func (c Config) HeadLayout() HeadLayout {
	return HeadLayout{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim}
}

// Params is the number of weights (embedding and LM head included).
func (c Config) Params() int64 {
	if c.MLA() || c.DenseLayers > 0 || c.SharedExperts > 0 {
		return c.deepSeekParams()
	}
	h, d := int64(c.Hidden), int64(c.HeadDim)
	attn := h*d*int64(c.Heads+2*c.KVHeads) + int64(c.Heads)*d*h
	mlp := 3 * h * int64(c.FFN)
	if c.MoE() {
		mlp = int64(c.Experts)*mlp + h*int64(c.Experts)
	}
	per := attn + mlp + 2*h
	emb := int64(c.Vocab) * h
	head := emb
	if c.TieEmbeddings {
		head = 0
	}
	return int64(c.Layers)*per + emb + head + h + c.ossParams()
}

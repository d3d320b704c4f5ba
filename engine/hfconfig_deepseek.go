package engine

import (
	"encoding/json"
	"fmt"
	"math"
)

// hfDeepSeek is what a DeepSeek-V3-architecture config.json adds to the
// common fields (transformers' DeepseekV3Config).
type hfDeepSeek struct {
	QLoraRank  json.RawMessage `json:"q_lora_rank"` // an integer, or null: no query compression
	KVLoraRank *int            `json:"kv_lora_rank"`
	QKNope     *int            `json:"qk_nope_head_dim"`
	QKRope     *int            `json:"qk_rope_head_dim"`
	VHead      *int            `json:"v_head_dim"`
	Routed     *int            `json:"n_routed_experts"`
	Shared     *int            `json:"n_shared_experts"`
	TopK       int             `json:"num_experts_per_tok"`
	Groups     *int            `json:"n_group"`
	TopKGroups *int            `json:"topk_group"`
	Scale      *float64        `json:"routed_scaling_factor"`
	FirstDense *int            `json:"first_k_dense_replace"`
	LayerFreq  *int            `json:"moe_layer_freq"`
	Scoring    *string         `json:"scoring_func"`
	TopKMethod *string         `json:"topk_method"`
	NormTopK   *bool           `json:"norm_topk_prob"`
	Interleave *bool           `json:"rope_interleave"`
	AttnBias   bool            `json:"attention_bias"`
	Quant      json.RawMessage `json:"quantization_config"`
	MoEFFN     int             `json:"moe_intermediate_size"`
	FFN        int             `json:"intermediate_size"`
}

// parseDeepSeek completes c, whose common fields parseHFConfig has read,
// from a DeepSeek-V3-architecture config.json (data, file): MLA, grouped
// sigmoid routing, shared experts and dense first layers. The
// multi-token-prediction layers (num_nextn_predict_layers) are not part of
// inference and are ignored.
func parseDeepSeek(file string, data []byte, c ModelConfig) (ModelConfig, error) {
	bad := func(field, want string) (ModelConfig, error) {
		return ModelConfig{}, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected %s", field, want)}
	}
	var h hfDeepSeek
	if err := json.Unmarshal(data, &h); err != nil {
		// parseHFConfig decoded the same bytes; only these fields' types
		// can be wrong here.
		return ModelConfig{}, &ConfigError{File: file, Msg: err.Error()}
	}
	positive := func(p *int) bool { return p != nil && *p > 0 }
	switch {
	case len(h.Quant) > 0 && string(h.Quant) != "null":
		return bad("quantization_config", "none: quantized (FP8) DeepSeek checkpoints cannot be loaded; use a bf16 or float32 checkpoint, or the zoo's deepseek-v3 (random weights at the real shape)")
	case h.AttnBias:
		return bad("attention_bias", "false (DeepSeek-V3's projections have no biases)")
	case h.Scoring != nil && *h.Scoring != "sigmoid":
		return bad("scoring_func", `"sigmoid" (DeepSeek-V3's router)`)
	case h.TopKMethod != nil && *h.TopKMethod != "noaux_tc":
		return bad("topk_method", `"noaux_tc" (DeepSeek-V3's group-limited routing with a correction bias)`)
	case h.LayerFreq != nil && *h.LayerFreq != 1:
		return bad("moe_layer_freq", "1 (every layer after first_k_dense_replace has experts)")
	case !positive(h.KVLoraRank):
		return bad("kv_lora_rank", "a positive integer")
	case !positive(h.QKNope):
		return bad("qk_nope_head_dim", "a positive integer")
	case !positive(h.QKRope) || *h.QKRope%2 != 0:
		return bad("qk_rope_head_dim", "a positive even integer")
	case !positive(h.VHead):
		return bad("v_head_dim", "a positive integer")
	}
	c.QLoraRank = 0
	if string(h.QLoraRank) != "null" {
		if json.Unmarshal(h.QLoraRank, &c.QLoraRank) != nil || c.QLoraRank < 0 {
			return bad("q_lora_rank", "a non-negative integer, or null (no query compression)")
		}
	}
	c.KVLoraRank, c.QKNopeDim, c.HeadDim, c.VHeadDim = *h.KVLoraRank, *h.QKNope, *h.QKRope, *h.VHead
	c.RopeInterleave = h.Interleave == nil || *h.Interleave // transformers' default: true

	if !positive(h.Routed) {
		return bad("n_routed_experts", "a positive number of experts")
	}
	E := *h.Routed
	c.Experts, c.TopK = E, h.TopK
	switch {
	case c.TopK <= 0 || c.TopK > E:
		return bad("num_experts_per_tok", fmt.Sprintf("an integer in 1..%d", E))
	case !positive(h.Groups) || E%*h.Groups != 0 || (*h.Groups > 1 && E / *h.Groups < 2):
		return bad("n_group", fmt.Sprintf("a divisor of n_routed_experts (%d) leaving at least 2 experts per group", E))
	case h.TopKGroups == nil || *h.TopKGroups < 1 || *h.TopKGroups > *h.Groups:
		return bad("topk_group", fmt.Sprintf("an integer in 1..%d (n_group)", *h.Groups))
	case c.TopK > *h.TopKGroups*(E / *h.Groups):
		return bad("num_experts_per_tok", fmt.Sprintf("at most the %d experts of topk_group groups", *h.TopKGroups*(E / *h.Groups)))
	case h.Scale == nil || !(*h.Scale > 0) || math.IsInf(*h.Scale, 0):
		return bad("routed_scaling_factor", "a positive number")
	case h.Shared == nil || *h.Shared < 0:
		return bad("n_shared_experts", "a non-negative integer")
	case h.FirstDense == nil || *h.FirstDense < 0 || *h.FirstDense > c.Layers:
		return bad("first_k_dense_replace", fmt.Sprintf("an integer in 0..%d (num_hidden_layers)", c.Layers))
	case h.MoEFFN <= 0:
		return bad("moe_intermediate_size", "a positive integer")
	case *h.FirstDense > 0 && h.FFN <= 0:
		return bad("intermediate_size", "a positive integer (the dense first layers' MLP)")
	}
	c.Groups, c.TopKGroups, c.RoutedScale = *h.Groups, *h.TopKGroups, *h.Scale
	c.Routing = RoutingSigmoidGroupTopKRenorm
	if h.NormTopK != nil && !*h.NormTopK {
		c.Routing = RoutingSigmoidGroupTopK
	}
	c.SharedExperts, c.DenseLayers, c.FFN, c.DenseFFN = *h.Shared, *h.FirstDense, h.MoEFFN, h.FFN
	return c, nil
}

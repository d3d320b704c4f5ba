package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ConfigError is a malformed or unsupported Hugging Face config.json; it
// blames the user's input (exit status 2).
type ConfigError struct {
	File string
	Msg  string
}

func (e *ConfigError) Error() string  { return e.File + ": " + e.Msg }
func (e *ConfigError) BadInput() bool { return true }

// hfConfig is the subset of a transformers config.json the engine reads. It
// accepts both the v4 form (rope_theta, rope_scaling at the top level) and
// the v5 form (rope_parameters).
type hfConfig struct {
	Architectures []string        `json:"architectures"`
	ModelType     string          `json:"model_type"`
	Hidden        int             `json:"hidden_size"`
	Layers        int             `json:"num_hidden_layers"`
	Heads         int             `json:"num_attention_heads"`
	KVHeads       *int            `json:"num_key_value_heads"`
	HeadDim       *int            `json:"head_dim"`
	FFN           int             `json:"intermediate_size"`
	MoEFFN        int             `json:"moe_intermediate_size"`
	Vocab         int             `json:"vocab_size"`
	BOS           json.RawMessage `json:"bos_token_id"`
	EOS           json.RawMessage `json:"eos_token_id"`
	RMSEps        float64         `json:"rms_norm_eps"`
	MaxPos        int             `json:"max_position_embeddings"`
	Tie           bool            `json:"tie_word_embeddings"`
	HiddenAct     string          `json:"hidden_act"`

	RopeTheta      *float64        `json:"rope_theta"`
	RopeScaling    json.RawMessage `json:"rope_scaling"`
	RopeParameters json.RawMessage `json:"rope_parameters"`

	LocalExperts *int  `json:"num_local_experts"` // mixtral, gpt-oss
	NumExperts   *int  `json:"num_experts"`       // qwen3-moe
	TopK         int   `json:"num_experts_per_tok"`
	NormTopK     *bool `json:"norm_topk_prob"`
}

type hfRope struct {
	RopeType        string   `json:"rope_type"`
	Type            string   `json:"type"`
	RopeTheta       *float64 `json:"rope_theta"`
	Factor          float64  `json:"factor"`
	LowFreqFactor   float64  `json:"low_freq_factor"`
	HighFreqFactor  float64  `json:"high_freq_factor"`
	OriginalMaxPos  int      `json:"original_max_position_embeddings"`
	BetaFast        float64  `json:"beta_fast"`
	BetaSlow        float64  `json:"beta_slow"`
	AttentionFactor float64  `json:"attention_factor"`
	Truncate        *bool    `json:"truncate"`
	Mscale          float64  `json:"mscale"`
	MscaleAllDim    float64  `json:"mscale_all_dim"`
}

// LoadHFConfig reads dir/config.json into a ModelConfig. Every problem is a
// *ConfigError naming the file and the field.
func LoadHFConfig(dir string) (ModelConfig, error) {
	file := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ModelConfig{}, &ConfigError{File: file, Msg: "not found (a model directory needs config.json)"}
		}
		return ModelConfig{}, &ConfigError{File: file, Msg: err.Error()}
	}
	return parseHFConfig(dir, file, data)
}

// parseHFConfig decodes the contents of config.json (file) of model
// directory dir.
func parseHFConfig(dir, file string, data []byte) (ModelConfig, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return ModelConfig{}, &ConfigError{File: file, Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)}
		case errors.As(err, &te):
			return ModelConfig{}, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected %v, got JSON %s", te.Field, te.Type, te.Value)}
		}
		return ModelConfig{}, &ConfigError{File: file, Msg: err.Error()}
	}
	bad := func(field, want string) (ModelConfig, error) {
		return ModelConfig{}, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected %s", field, want)}
	}
	c := ModelConfig{Name: filepath.Base(filepath.Clean(dir)), Path: dir, Hidden: h.Hidden, Layers: h.Layers,
		Heads: h.Heads, FFN: h.FFN, Vocab: h.Vocab, DatasetVocab: h.Vocab, RMSEps: h.RMSEps,
		MaxPos: h.MaxPos, TieEmbeddings: h.Tie}
	switch h.ModelType {
	case "llama":
		c.Family = "llama"
	case "mixtral":
		c.Family, c.Routing = "mixtral", RoutingSoftmaxTopKRenorm
	case "qwen3_moe":
		c.Family, c.Routing, c.QKNorm = "qwen3-moe", RoutingTopKSoftmax, true
	case "gpt_oss":
		c.Family, c.Routing = "gpt-oss", RoutingTopKSoftmax
	case "deepseek_v3", "kimi_k2": // Kimi K2 is DeepseekV3ForCausalLM under its own name
		c.Family = "deepseek-v3"
	default:
		return bad("model_type", `one of "llama", "mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3", "kimi_k2"`)
	}
	if h.HiddenAct != "" && h.HiddenAct != "silu" && c.Family != "gpt-oss" {
		return bad("hidden_act", `"silu" (SwiGLU)`)
	}
	if c.Hidden <= 0 {
		return bad("hidden_size", "a positive integer")
	}
	if c.Layers <= 0 {
		return bad("num_hidden_layers", "a positive integer")
	}
	if c.Heads <= 0 {
		return bad("num_attention_heads", "a positive integer")
	}
	c.KVHeads = c.Heads
	if h.KVHeads != nil {
		c.KVHeads = *h.KVHeads
	}
	if c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return bad("num_key_value_heads", fmt.Sprintf("a positive divisor of num_attention_heads (%d)", c.Heads))
	}
	c.HeadDim = c.Hidden / c.Heads
	if h.HeadDim != nil && *h.HeadDim > 0 {
		c.HeadDim = *h.HeadDim
	}
	if c.HeadDim <= 0 || c.HeadDim%2 != 0 {
		return bad("head_dim", "a positive even integer")
	}
	if c.Vocab <= 0 {
		return bad("vocab_size", "a positive integer")
	}
	if c.RMSEps <= 0 {
		return bad("rms_norm_eps", "a positive number")
	}
	if c.MaxPos <= 0 {
		c.MaxPos = 4096
	}
	var ok bool
	if c.BOS, ok = firstTokenID(h.BOS); !ok {
		return bad("bos_token_id", "an integer, a list of integers, or null")
	}
	if c.EOS, ok = firstTokenID(h.EOS); !ok {
		return bad("eos_token_id", "an integer, a list of integers, or null")
	}

	// Rotary embedding: v5 keeps everything in rope_parameters, v4 splits
	// rope_theta and rope_scaling.
	var rope hfRope
	ropeField := "rope_scaling"
	if len(h.RopeParameters) > 0 && string(h.RopeParameters) != "null" {
		ropeField = "rope_parameters"
		if err := json.Unmarshal(h.RopeParameters, &rope); err != nil {
			return bad("rope_parameters", "an object")
		}
	} else if len(h.RopeScaling) > 0 && string(h.RopeScaling) != "null" {
		if err := json.Unmarshal(h.RopeScaling, &rope); err != nil {
			return bad("rope_scaling", "an object or null")
		}
	}
	c.RopeTheta = 10000
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	if rope.RopeTheta != nil {
		c.RopeTheta = *rope.RopeTheta
	}
	if c.RopeTheta <= 0 {
		return bad("rope_theta", "a positive number")
	}
	kind := rope.RopeType
	if kind == "" {
		kind = rope.Type
	}
	switch kind {
	case "", "default":
	case "llama3":
		if rope.Factor <= 0 || rope.LowFreqFactor <= 0 || rope.HighFreqFactor <= rope.LowFreqFactor || rope.OriginalMaxPos <= 0 {
			return bad(ropeField, "llama3 scaling with factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0")
		}
		c.RopeScaling = &RopeScaling{Type: "llama3", Factor: rope.Factor, LowFreqFactor: rope.LowFreqFactor,
			HighFreqFactor: rope.HighFreqFactor, OriginalMaxPos: rope.OriginalMaxPos}
	case "yarn":
		if rope.Factor <= 0 || rope.OriginalMaxPos <= 0 {
			return bad(ropeField, "yarn scaling with factor > 0 and original_max_position_embeddings > 0")
		}
		c.RopeScaling = &RopeScaling{Type: "yarn", Factor: rope.Factor, OriginalMaxPos: rope.OriginalMaxPos,
			BetaFast: rope.BetaFast, BetaSlow: rope.BetaSlow, AttentionFactor: rope.AttentionFactor, Truncate: rope.Truncate,
			Mscale: rope.Mscale, MscaleAllDim: rope.MscaleAllDim}
	default:
		return bad(ropeField+".rope_type", `"default", "llama3" or "yarn"`)
	}

	if c.Family == "deepseek-v3" {
		return parseDeepSeek(file, data, c)
	}
	if c.Family != "llama" {
		switch {
		case h.LocalExperts != nil:
			c.Experts = *h.LocalExperts
		case h.NumExperts != nil:
			c.Experts = *h.NumExperts
		}
		if c.Experts <= 0 {
			return bad("num_local_experts", "a positive number of experts for a mixture-of-experts model")
		}
		c.TopK = h.TopK
		if c.TopK <= 0 || c.TopK > c.Experts {
			return bad("num_experts_per_tok", fmt.Sprintf("an integer in 1..%d", c.Experts))
		}
		if c.Family == "qwen3-moe" && h.NormTopK != nil && !*h.NormTopK {
			c.Routing = RoutingSoftmaxTopK
		}
		if h.MoEFFN > 0 {
			c.FFN = h.MoEFFN
		}
	}
	if c.FFN <= 0 {
		return bad("intermediate_size", "a positive integer")
	}
	if c.Family == "gpt-oss" {
		return parseGPTOSS(file, data, c)
	}
	return c, nil
}

// firstTokenID reads a token id field that may be an integer, a list of
// integers (the first is taken) or null (-1).
func firstTokenID(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, true
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return one, true
	}
	var many []int
	if json.Unmarshal(raw, &many) == nil {
		if len(many) == 0 {
			return -1, true
		}
		return many[0], true
	}
	return 0, false
}

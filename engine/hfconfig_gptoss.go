package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/xrun-dev/xrun/engine/model"
)

// hfGPTOSS is what a gpt_oss config.json adds to the common fields
// (transformers' GptOssConfig).
type hfGPTOSS struct {
	Window     *int            `json:"sliding_window"`
	LayerTypes []string        `json:"layer_types"`
	AttnBias   *bool           `json:"attention_bias"`
	Limit      *float64        `json:"swiglu_limit"`
	Quant      json.RawMessage `json:"quantization_config"`
}

// gptOSSAlpha is the sigmoid's slope in GPT-OSS's clamped SwiGLU; the
// models fix it (transformers' GptOssExperts.alpha), configs do not say.
const gptOSSAlpha = 1.702

// parseGPTOSS completes c, whose common fields parseHFConfig has read,
// from a gpt_oss config.json (data, file): attention sinks, the sliding
// window and which layers use it, the biases, the clamped SwiGLU, and
// whether the experts are stored as MXFP4 (quantization_config
// quant_method mxfp4; they are dequantized at load).
func parseGPTOSS(file string, data []byte, c ModelConfig) (ModelConfig, error) {
	bad := func(field, want string) (ModelConfig, error) {
		return ModelConfig{}, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected %s", field, want)}
	}
	var h hfGPTOSS
	if err := json.Unmarshal(data, &h); err != nil {
		return ModelConfig{}, &ConfigError{File: file, Msg: err.Error()}
	}
	o := model.OSS{Sinks: true, AttnBias: true, RouterBias: true, ExpertBias: true, SwiGLULimit: 7, SwiGLUAlpha: gptOSSAlpha}
	if h.AttnBias != nil {
		o.AttnBias = *h.AttnBias
	}
	if h.Limit != nil {
		if !(*h.Limit > 0) {
			return bad("swiglu_limit", "a positive number")
		}
		o.SwiGLULimit = *h.Limit
	}
	if h.Window != nil {
		if *h.Window < 0 {
			return bad("sliding_window", "a positive integer, or null (no sliding layers)")
		}
		o.SlidingWindow = *h.Window
	}
	if h.LayerTypes != nil {
		if len(h.LayerTypes) != c.Layers {
			return bad("layer_types", fmt.Sprintf("one entry per layer (%d)", c.Layers))
		}
		sliding := false
		for i, t := range h.LayerTypes {
			switch t {
			case model.SlidingAttention:
				sliding = true
			case model.FullAttention:
			default:
				return bad(fmt.Sprintf("layer_types[%d]", i), fmt.Sprintf("%q or %q", model.SlidingAttention, model.FullAttention))
			}
		}
		if sliding && o.SlidingWindow == 0 {
			return bad("sliding_window", "a positive integer (layer_types has sliding_attention layers)")
		}
		if o.SlidingWindow > 0 {
			o.LayerTypes = h.LayerTypes
		}
	}
	if len(h.Quant) > 0 && string(h.Quant) != "null" {
		var q struct {
			Method string `json:"quant_method"`
		}
		if json.Unmarshal(h.Quant, &q) != nil || strings.ToLower(q.Method) != "mxfp4" {
			return bad("quantization_config.quant_method", `"mxfp4" (GPT-OSS's MXFP4 experts), or no quantization_config`)
		}
		o.MXFP4 = true
	}
	c.OSS = o
	return c, nil
}

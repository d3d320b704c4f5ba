package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 checkpoints in Hugging Face format declare their quantization in
// config.json's quantization_config, or (ModelOpt's older exports) in
// hf_quant_config.json. Two formats are read, for their FP8 cases:
//
//   - ModelOpt (TensorRT Model Optimizer; NVIDIA's published FP8
//     checkpoints such as nvidia/Llama-3.1-8B-Instruct-FP8): quant_algo
//     "FP8" has E4M3 weights with a per-tensor weight_scale and a static
//     per-tensor input_scale beside each; "FP8_PER_CHANNEL_PER_TOKEN" a
//     weight_scale per output channel and activations quantized per
//     token; kv_cache_quant_algo "FP8" adds k_scale and v_scale per layer.
//     exclude_modules (ignore) lists what stays unquantized.
//   - compressed-tensors (llm-compressor, format "float-quantized"):
//     config_groups whose weights are 8-bit floats per tensor or per
//     channel, whose input_activations are static per tensor (an
//     input_scale per weight) or dynamic (per token or per tensor);
//     kv_cache_scheme an 8-bit float KV cache.
//
// Block-scaled FP8 (DeepSeek's 128×128, compressed-tensors' block or group
// strategies, Hugging Face's "fp8" method) and other bit widths are
// refused. Which weights are quantized is read from the checkpoint itself:
// those stored as F8_E4M3 (each with its scales); a weight stored in
// 16 bits stays unquantized, as the exclusions say.

// QuantConfigFile is ModelOpt's separate quantization config.
const QuantConfigFile = "hf_quant_config.json"

// LoadQuantConfig reads a model directory's quantization config: nil when
// it declares none, a *ConfigError for one xrun cannot run.
func LoadQuantConfig(dir string) (*model.Quant, error) {
	file := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &ConfigError{File: file, Msg: err.Error()}
	}
	var top struct {
		Q json.RawMessage `json:"quantization_config"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, &ConfigError{File: file, Msg: "invalid JSON: " + err.Error()}
	}
	if len(top.Q) > 0 && string(top.Q) != "null" {
		return parseQuantConfig(file, "quantization_config", top.Q)
	}
	file = filepath.Join(dir, QuantConfigFile)
	data, err = os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, &ConfigError{File: file, Msg: err.Error()}
	}
	var hq struct {
		Q json.RawMessage `json:"quantization"`
	}
	if err := json.Unmarshal(data, &hq); err != nil {
		return nil, &ConfigError{File: file, Msg: "invalid JSON: " + err.Error()}
	}
	if len(hq.Q) == 0 || string(hq.Q) == "null" {
		return nil, &ConfigError{File: file, Msg: `field "quantization": expected an object with quant_algo`}
	}
	return parseModelOpt(file, "quantization", hq.Q)
}

// parseQuantConfig reads config.json's quantization_config (field).
func parseQuantConfig(file, field string, raw json.RawMessage) (*model.Quant, error) {
	var q struct {
		Method string `json:"quant_method"`
	}
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected an object: %v", field, err)}
	}
	switch m := strings.ToLower(q.Method); {
	case strings.HasPrefix(m, "modelopt"):
		return parseModelOpt(file, field, raw)
	case m == "compressed-tensors":
		return parseCompressedTensors(file, field, raw)
	}
	return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: quant_method %q is not supported; xrun loads the FP8 checkpoints of ModelOpt (quant_method modelopt, quant_algo FP8) and compressed-tensors (format float-quantized)", field+".quant_method", q.Method)}
}

// parseModelOpt reads ModelOpt's quant_algo and kv_cache_quant_algo
// (kv_cache_scheme in the config.json form).
func parseModelOpt(file, field string, raw json.RawMessage) (*model.Quant, error) {
	var q struct {
		Algo    *string         `json:"quant_algo"`
		KVAlgo  *string         `json:"kv_cache_quant_algo"`
		KVSchem json.RawMessage `json:"kv_cache_scheme"`
	}
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected quant_algo and kv_cache_quant_algo strings: %v", field, err)}
	}
	out := &model.Quant{Method: "modelopt", File: file}
	algo := ""
	if q.Algo != nil {
		algo = strings.ToUpper(*q.Algo)
	}
	switch algo {
	case "FP8":
		out.StaticInput = true
	case "FP8_PER_CHANNEL_PER_TOKEN":
		out.PerToken = true
	default:
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: %q is not supported; expected FP8 or FP8_PER_CHANNEL_PER_TOKEN", field+".quant_algo", algo)}
	}
	if q.KVAlgo != nil {
		switch strings.ToUpper(*q.KVAlgo) {
		case "FP8":
			out.KVCache = true
		case "", "NONE":
		default:
			return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: %q is not supported; expected FP8 or null", field+".kv_cache_quant_algo", *q.KVAlgo)}
		}
	}
	if len(q.KVSchem) > 0 && string(q.KVSchem) != "null" {
		kv, err := floatScheme(file, field+".kv_cache_scheme", q.KVSchem)
		if err != nil {
			return nil, err
		}
		out.KVCache = kv.NumBits == 8
	}
	return out, nil
}

// ctScheme is one compressed-tensors quantization args object.
type ctScheme struct {
	NumBits  int    `json:"num_bits"`
	Type     string `json:"type"`
	Strategy string `json:"strategy"`
	Dynamic  any    `json:"dynamic"` // true, false or "local"
}

// floatScheme reads an 8-bit float scheme (field names it in errors).
func floatScheme(file, field string, raw json.RawMessage) (ctScheme, error) {
	var s ctScheme
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected {num_bits, type, strategy, dynamic}: %v", field, err)}
	}
	if s.NumBits != 8 || s.Type != "float" {
		return s, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: %d-bit %s is not supported; expected num_bits 8, type float (FP8 E4M3)", field, s.NumBits, s.Type)}
	}
	return s, nil
}

// parseCompressedTensors reads compressed-tensors' config_groups and
// kv_cache_scheme.
func parseCompressedTensors(file, field string, raw json.RawMessage) (*model.Quant, error) {
	var q struct {
		Format string `json:"format"`
		Groups map[string]struct {
			Weights json.RawMessage `json:"weights"`
			Input   json.RawMessage `json:"input_activations"`
		} `json:"config_groups"`
		KV json.RawMessage `json:"kv_cache_scheme"`
	}
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: expected format, config_groups and kv_cache_scheme: %v", field, err)}
	}
	bad := func(f, msg string) (*model.Quant, error) {
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("field %q: %s", field+"."+f, msg)}
	}
	switch q.Format {
	case "float-quantized", "naive-quantized":
	default:
		return bad("format", fmt.Sprintf("%q is not supported; expected float-quantized (FP8 weights)", q.Format))
	}
	if len(q.Groups) == 0 {
		return bad("config_groups", "expected at least one group")
	}
	out := &model.Quant{Method: "compressed-tensors", File: file}
	first := true
	for _, name := range slices.Sorted(maps.Keys(q.Groups)) {
		g := q.Groups[name]
		at := "config_groups." + name
		if len(g.Weights) == 0 || string(g.Weights) == "null" {
			return bad(at+".weights", "expected the weights' 8-bit float scheme")
		}
		w, err := floatScheme(file, field+"."+at+".weights", g.Weights)
		if err != nil {
			return nil, err
		}
		if w.Strategy != "tensor" && w.Strategy != "channel" {
			return bad(at+".weights.strategy", fmt.Sprintf("%q is not supported; expected tensor or channel (block-scaled FP8 is not)", w.Strategy))
		}
		if len(g.Input) == 0 || string(g.Input) == "null" {
			return bad(at+".input_activations", "weight-only FP8 is not supported; expected 8-bit float activations")
		}
		in, err := floatScheme(file, field+"."+at+".input_activations", g.Input)
		if err != nil {
			return nil, err
		}
		var static, perToken bool
		switch {
		case in.Dynamic == false && in.Strategy == "tensor":
			static = true
		case in.Dynamic == true && in.Strategy == "token":
			perToken = true
		case in.Dynamic == true && in.Strategy == "tensor":
		default:
			return bad(at+".input_activations", fmt.Sprintf("strategy %q dynamic %v is not supported; expected static per tensor, or dynamic per token or per tensor", in.Strategy, in.Dynamic))
		}
		if !first && (static != out.StaticInput || perToken != out.PerToken) {
			return bad("config_groups", "groups quantize activations differently; expected one scheme")
		}
		out.StaticInput, out.PerToken, first = static, perToken, false
	}
	if len(q.KV) > 0 && string(q.KV) != "null" {
		if _, err := floatScheme(file, field+".kv_cache_scheme", q.KV); err != nil {
			return nil, err
		}
		out.KVCache = true
	}
	return out, nil
}

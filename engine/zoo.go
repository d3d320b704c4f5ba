package engine

import (
	"fmt"
	"sort"

	"github.com/xrun-dev/xrun/engine/model"
)

// ModelConfig is a model's exact shape (see model.Config); RopeScaling its
// rotary scaling. They live in engine/model, which the backends share.
type (
	ModelConfig = model.Config
	RopeScaling = model.RopeScaling
)

// Routing methods of MoE models (see engine/model).
const (
	RoutingSoftmaxTopKRenorm = model.RoutingSoftmaxTopKRenorm
	RoutingTopKSoftmax       = model.RoutingTopKSoftmax
	RoutingSoftmaxTopK       = model.RoutingSoftmaxTopK

	RoutingSigmoidGroupTopKRenorm = model.RoutingSigmoidGroupTopKRenorm
	RoutingSigmoidGroupTopK       = model.RoutingSigmoidGroupTopK
)

// tinyNote marks the test shapes.
const tinyNote = "not a published model: a test shape of its family, small enough for the CPU backend"

// zoo holds the built-in models at their real shapes (from each model's
// Hugging Face config.json) and tiny shapes the CPU backend runs quickly.
// Zoo weights are random (seeded, deterministic, scaled so activations stay
// O(1) at any depth: see engine/model). Departures from an architecture
// are listed in Simplifications; the shapes, and so the cost, are exact.
// Mixtral, Qwen3-MoE and the Llamas have none beyond random weights.
var zoo = map[string]ModelConfig{
	"tinyllama-1.1b": {
		Family: "llama", Hidden: 2048, Layers: 22, Heads: 32, KVHeads: 4, HeadDim: 64, FFN: 5632,
		Vocab: 32000, DatasetVocab: 32000, BOS: 1, EOS: 2, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 2048,
	},
	"llama-3.2-1b": {
		Family: "llama", Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192,
		Vocab: 128256, DatasetVocab: 128000, BOS: 128000, EOS: 128001, RMSEps: 1e-5, RopeTheta: 500000,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
		MaxPos:      131072, TieEmbeddings: true,
	},
	"llama-3.1-8b": {
		Family: "llama", Hidden: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: 128256, DatasetVocab: 128000, BOS: 128000, EOS: 128001, RMSEps: 1e-5, RopeTheta: 500000,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
		MaxPos:      131072,
	},
	"mixtral-8x7b": {
		Family: "mixtral", Hidden: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: 32000, DatasetVocab: 32000, BOS: 1, EOS: 2, RMSEps: 1e-5, RopeTheta: 1e6, MaxPos: 32768,
		Experts: 8, TopK: 2, Routing: RoutingSoftmaxTopKRenorm,
	},
	"gpt-oss-20b": {
		Family: "gpt-oss", Hidden: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, FFN: 2880,
		Vocab: 201088, DatasetVocab: 199998, BOS: 199998, EOS: 200002, RMSEps: 1e-5, RopeTheta: 150000,
		RopeScaling: &RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: new(bool)},
		MaxPos:      131072, Experts: 32, TopK: 4, Routing: RoutingTopKSoftmax,
		// Sinks, the 128-token window of every other layer (sliding
		// first), the biases and the clamped SwiGLU: engine/model/gptoss.go.
		OSS: model.OSS{SlidingWindow: 128, Sinks: true, AttnBias: true, RouterBias: true, ExpertBias: true,
			SwiGLULimit: 7, SwiGLUAlpha: gptOSSAlpha},
		Simplifications: []string{
			"on the CUDA backend experts are fp16/bf16 unless moe_weights is mxfp4 (its MXFP4 expert kernel is right but slower than bf16 experts), so by default they read about four times the bytes deployments read; the cpu engine keeps them MXFP4",
		},
	},
	"qwen3-30b-a3b": {
		Family: "qwen3-moe", Hidden: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FFN: 768,
		Vocab: 151936, DatasetVocab: 151643, BOS: 151643, EOS: 151645, RMSEps: 1e-6, RopeTheta: 1e6,
		MaxPos: 40960, QKNorm: true, Experts: 128, TopK: 8, Routing: RoutingTopKSoftmax,
	},
	// DeepSeek-V3 (and R1, the same shape): MLA, 256 routed experts in 8
	// groups (4 per token), one shared expert, three dense first layers.
	"deepseek-v3": {
		Family: "deepseek-v3", Hidden: 7168, Layers: 61, Heads: 128, KVHeads: 128, HeadDim: 64, FFN: 2048, DenseFFN: 18432,
		Vocab: 129280, DatasetVocab: 128000, BOS: 0, EOS: 1, RMSEps: 1e-6, RopeTheta: 10000, MaxPos: 163840,
		RopeScaling: &RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		QLoraRank:   1536, KVLoraRank: 512, QKNopeDim: 128, VHeadDim: 128, RopeInterleave: true,
		Experts: 256, TopK: 8, Routing: RoutingSigmoidGroupTopKRenorm, Groups: 8, TopKGroups: 4, RoutedScale: 2.5,
		SharedExperts: 1, DenseLayers: 3,
		Simplifications: []string{
			"weights are dense fp16/bf16, not the checkpoint's FP8 (e4m3 with 128x128 block scales)",
			"the multi-token-prediction layer (num_nextn_predict_layers 1) is not run, as in serving without MTP speculative decoding",
		},
	},
	// Moonlight-16B-A3B: the same architecture on one GPU; no query
	// compression, one group, two shared experts, one dense first layer.
	"moonlight-16b-a3b": {
		Family: "deepseek-v3", Hidden: 2048, Layers: 27, Heads: 16, KVHeads: 16, HeadDim: 64, FFN: 1408, DenseFFN: 11264,
		Vocab: 163840, DatasetVocab: 163584, BOS: 163584, EOS: 163586, RMSEps: 1e-5, RopeTheta: 50000, MaxPos: 8192,
		KVLoraRank: 512, QKNopeDim: 128, VHeadDim: 128, RopeInterleave: true,
		Experts: 64, TopK: 6, Routing: RoutingSigmoidGroupTopKRenorm, Groups: 1, TopKGroups: 1, RoutedScale: 2.446,
		SharedExperts: 2, DenseLayers: 1,
	},
	// Tiny shapes for the CPU backend and CI; same families as the real ones.
	"tiny-llama": {
		Family: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 160,
		Vocab: 512, DatasetVocab: 512, BOS: 1, EOS: 2, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096,
		Simplifications: []string{tinyNote},
	},
	"tiny-dense": {
		Family: "llama", Hidden: 256, Layers: 4, Heads: 8, KVHeads: 2, HeadDim: 32, FFN: 704,
		Vocab: 2048, DatasetVocab: 2048, BOS: 1, EOS: 2, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096,
		Simplifications: []string{tinyNote},
	},
	"tiny-moe": {
		Family: "mixtral", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256,
		Vocab: 2048, DatasetVocab: 2048, BOS: 1, EOS: 2, RMSEps: 1e-5, RopeTheta: 1e6, MaxPos: 4096,
		Experts: 8, TopK: 2, Routing: RoutingSoftmaxTopKRenorm,
		Simplifications: []string{tinyNote},
	},
	"tiny-deepseek": {
		Family: "deepseek-v3", Hidden: 128, Layers: 3, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 64, DenseFFN: 256,
		Vocab: 2048, DatasetVocab: 2048, BOS: 1, EOS: 2, RMSEps: 1e-6, RopeTheta: 10000, MaxPos: 4096,
		RopeScaling: &RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 128, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		QLoraRank:   64, KVLoraRank: 32, QKNopeDim: 32, VHeadDim: 32, RopeInterleave: true,
		Experts: 16, TopK: 4, Routing: RoutingSigmoidGroupTopKRenorm, Groups: 4, TopKGroups: 2, RoutedScale: 2.5,
		SharedExperts: 1, DenseLayers: 1,
		Simplifications: []string{tinyNote},
	},
}

// ModelNames lists the zoo's models, sorted.
func ModelNames() []string {
	names := make([]string, 0, len(zoo))
	for n := range zoo {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ZooModel returns a built-in model's configuration.
func ZooModel(name string) (ModelConfig, bool) {
	c, ok := zoo[name]
	if ok {
		c.Name = name
		// Callers get their own copies of the shared parts.
		if c.RopeScaling != nil {
			rs := *c.RopeScaling
			c.RopeScaling = &rs
		}
		c.LayerTypes = append([]string(nil), c.LayerTypes...)
		c.Simplifications = append([]string(nil), c.Simplifications...)
	}
	return c, ok
}

// LookupModel resolves a model name as a spec gives it: a zoo name, or a
// path to a Hugging Face directory holding config.json.
func LookupModel(nameOrPath string) (ModelConfig, error) {
	if c, ok := ZooModel(nameOrPath); ok {
		return c, nil
	}
	c, err := LoadHFConfig(nameOrPath)
	if err != nil {
		return ModelConfig{}, fmt.Errorf("model %q is neither a zoo model (%v) nor a usable model directory: %w", nameOrPath, ModelNames(), err)
	}
	return c, nil
}

// hfNames are the Hugging Face names of the zoo's published models: what
// external engines (TensorRT-LLM, a command's {hf_model}) load for them.
// The tiny test shapes have none.
var hfNames = map[string]string{
	"tinyllama-1.1b":    "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
	"llama-3.2-1b":      "meta-llama/Llama-3.2-1B",
	"llama-3.1-8b":      "meta-llama/Llama-3.1-8B",
	"mixtral-8x7b":      "mistralai/Mixtral-8x7B-v0.1",
	"gpt-oss-20b":       "openai/gpt-oss-20b",
	"qwen3-30b-a3b":     "Qwen/Qwen3-30B-A3B",
	"deepseek-v3":       "deepseek-ai/DeepSeek-V3",
	"moonlight-16b-a3b": "moonshotai/Moonlight-16B-A3B",
}

// HFName is a zoo model's Hugging Face name; "" for a test shape or a
// name outside the zoo.
func HFName(zooName string) string { return hfNames[zooName] }

// HFModels lists the zoo models that have a Hugging Face name, sorted.
func HFModels() []string {
	out := make([]string, 0, len(hfNames))
	for n := range hfNames {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

package engine

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine/model"
)

// Config is one cell's engine configuration, fully resolved by the runner.
type Config struct {
	// Model is a zoo name or a Hugging Face model directory.
	Model string
	// Backend is "cpu" or "cuda" (the runner resolves "auto").
	Backend string
	// Dtype is the compute type: float16, bfloat16 or float32 (the CPU
	// backend always computes in float32), or fp8: FP8 E4M3 GEMMs in
	// TensorRT-LLM's FP8 recipe, the rest in bfloat16 (model.Options.FP8).
	Dtype string
	// KVCacheDtype is auto (the checkpoint's FP8 KV cache where it
	// calibrated one, else the compute type), fp8 (E4M3) or compute (the
	// compute type, whatever the checkpoint calibrated).
	KVCacheDtype string
	// MoEWeights is how a MoE model's experts are kept: auto, bf16 (the
	// compute type: an MXFP4 checkpoint's experts dequantized at load) or
	// mxfp4 (MXFP4 codes and scales, dequantized inside the expert GEMMs;
	// see ResolveMoEWeights).
	MoEWeights string
	// FP8Activations is how dtype fp8's GEMMs scale their input
	// activations (model.FP8Activations): auto (a checkpoint's own scheme;
	// weights quantized at load get static scales calibrated at load, as a
	// ModelOpt checkpoint carries them), static (the checkpoint's
	// input_scale, else calibrated at load) or dynamic (amax/448 of every
	// GEMM's input each iteration, per token where the checkpoint says
	// so). Other dtypes have no FP8 GEMMs: there it has no effect.
	FP8Activations string
	// BatchSize is the most requests in flight (trtllm-bench
	// --max_batch_size); default 2048 as in TensorRT-LLM.
	BatchSize int
	// MaxNumTokens is the most tokens one iteration processes (prefill
	// chunks plus one per decoding request); default 8192.
	MaxNumTokens int
	// GemmPlugin is auto (the vendor / best blocked GEMM) or disable (the
	// engine's own plain GEMM); default auto.
	GemmPlugin string
	// RoutingMode is learned, perfect, uniform or zipf:S (S > 0); default
	// learned. It only matters on MoE models.
	RoutingMode string
	// ProfileWindow is "none" (or empty) or a comma list of iteration spans
	// "A-B" and single iterations "K" (0-based, inclusive, increasing):
	// TLLM_PROFILE_START_STOP's syntax. It applies to runs with
	// RunOptions.Profile.
	ProfileWindow string
	// Seed seeds random weights, uniform/zipf routing and the choice of
	// warm-up requests.
	Seed int
	// Warmup is how many requests run, untimed, before the timed pass;
	// they advance the iteration counter as in TensorRT-LLM.
	Warmup int
	// NumGPUs is how many GPUs the cell uses; "per GPU" metrics divide by
	// it. Default: WorldSize(TP, EP), 1 unsplit.
	NumGPUs int
	// TP and EP split the model over WorldSize(TP, EP) ranks, one per
	// GPU, as trtllm-bench's --tp and --ep do (parallel.go); 0 means 1.
	// NumGPUs defaults to the ranks and may not be fewer.
	TP, EP int
	// KVCacheFreeGPUMemFraction bounds the KV cache on a GPU (0: backend
	// default); unused on the CPU.
	KVCacheFreeGPUMemFraction float64
	// KVCacheBytes bounds the KV cache in bytes (0: the backend's default,
	// 4 GiB on the CPU). Requests in flight are capped so it holds them.
	KVCacheBytes int64
	// Threads caps the CPU backend's goroutines (0: GOMAXPROCS).
	Threads int
	// Device is the GPU ordinal for the cuda backend.
	Device int
	// Layers runs only the model's first Layers layers, each at its exact
	// shape (0: all of them), so that one layer's cost of a model too large
	// for the device can be measured (WithLayers).
	Layers int
	// Load is how requests arrive (arrivals.go): all at once (the zero
	// value, trtllm-bench's offline mode), at a request rate, or from a
	// closed loop of users.
	Load Load `json:"load"`
	// Switches are the engine switches to run under (ParseSwitches); nil:
	// New parses the process's environment. Never part of a plan: a
	// worker's switches are its environment's, recorded per cell.
	Switches *model.Switches `json:"-"`
}

// Defaults of Config's zero values (TensorRT-LLM's where it has one).
const (
	DefaultBatchSize    = 2048
	DefaultMaxNumTokens = 8192
)

// ParamError is an engine parameter outside what the engine accepts; it
// blames the user's input (exit status 2).
type ParamError struct {
	Field string // the spec's name: batch_size, routing_mode, ...
	Value string
	Msg   string // what was expected
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%s: %q: %s", e.Field, e.Value, e.Msg)
}
func (e *ParamError) BadInput() bool { return true }

func (c Config) withDefaults() Config {
	if c.Backend == "" {
		c.Backend = "cpu"
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxNumTokens == 0 {
		c.MaxNumTokens = DefaultMaxNumTokens
	}
	if c.GemmPlugin == "" {
		c.GemmPlugin = "auto"
	}
	if c.TP == 0 {
		c.TP = 1
	}
	if c.EP == 0 {
		c.EP = 1
	}
	if c.NumGPUs == 0 {
		c.NumGPUs = WorldSize(c.TP, c.EP)
	}
	return c
}

func (c Config) validate() error {
	bad := func(field string, v any, msg string) error {
		return &ParamError{Field: field, Value: fmt.Sprint(v), Msg: msg}
	}
	switch {
	case c.BatchSize < 1:
		return bad("batch_size", c.BatchSize, "a positive integer")
	case c.MaxNumTokens < 1:
		return bad("max_num_tokens", c.MaxNumTokens, "a positive integer")
	case c.GemmPlugin != "auto" && c.GemmPlugin != "disable":
		return bad("gemm_plugin", c.GemmPlugin, "auto or disable")
	case c.Warmup < 0:
		return bad("warmup", c.Warmup, "a non-negative number of requests")
	case c.NumGPUs < 1:
		return bad("gpus", c.NumGPUs, "a positive integer")
	case c.TP < 1:
		return bad("tp", c.TP, "a positive integer")
	case c.EP < 1:
		return bad("ep", c.EP, "a positive integer")
	case c.NumGPUs < WorldSize(c.TP, c.EP):
		return bad("gpus_per_cell", c.NumGPUs, fmt.Sprintf("at least the %d GPUs tp %d and ep %d split the model over", WorldSize(c.TP, c.EP), c.TP, c.EP))
	case c.KVCacheBytes < 0:
		return bad("kv_cache_bytes", c.KVCacheBytes, "a non-negative number of bytes")
	case c.Threads < 0:
		return bad("threads", c.Threads, "a non-negative integer")
	case c.Layers < 0:
		return bad("layers", c.Layers, "a positive number of layers, or 0 for all")
	}
	if err := c.Load.validate(); err != nil {
		return err
	}
	switch c.Dtype {
	case "", "auto", "float16", "bfloat16", "float32", "fp8":
	default:
		return bad("dtype", c.Dtype, "float16, bfloat16, float32 or fp8")
	}
	switch c.KVCacheDtype {
	case "", "auto", "fp8", "compute":
	default:
		return bad("kv_cache_dtype", c.KVCacheDtype, "auto, fp8 or compute")
	}
	switch c.MoEWeights {
	case "", "auto", "bf16", "mxfp4":
	default:
		return bad("moe_weights", c.MoEWeights, "auto, bf16 or mxfp4")
	}
	if _, ok := fp8Activations(c.FP8Activations); !ok {
		return bad("fp8_activations", c.FP8Activations, "auto, static or dynamic")
	}
	return nil
}

// fp8Activations maps fp8_activations to the model's scheme ("": auto).
func fp8Activations(v string) (model.FP8Activations, bool) {
	switch v {
	case "", "auto":
		return model.FP8ActAuto, true
	case "static":
		return model.FP8ActStatic, true
	case "dynamic":
		return model.FP8ActDynamic, true
	}
	return 0, false
}

// ResolveMoEWeights is whether a cell keeps its experts as MXFP4
// (moe_weights): mxfp4 asks for it on any MoE model (random zoo experts
// are quantized by model.QuantizeMXFP4Block's rule, identically on every
// backend); bf16 never; auto for what deployments run as MXFP4 (GPT-OSS:
// the zoo's, and MXFP4 checkpoints), but only where MXFP4 experts are
// not slower than bf16 ones: on the cpu backend. The CUDA backend's MXFP4
// expert kernel (moe_mxfp4_tc; a pipelined variant was slower still)
// passed its checks on an H100 but ran
// GPT-OSS-20B at 0.86x / 0.70x of bf16 experts at batch 64 / 256, so
// there auto stays bf16 and mxfp4 must be asked for. mxfp4 on a dense model, or with dtype fp8, is a ParamError.
func ResolveMoEWeights(backend string, mc ModelConfig, dtype, v string) (bool, error) {
	switch v {
	case "", "auto":
		oss := mc.MXFP4 || mc.Family == "gpt-oss" && mc.Path == ""
		return backend == "cpu" && oss && mc.MoE() && dtype != "fp8" && mxfp4Shapes(mc), nil
	case "bf16":
		return false, nil
	case "mxfp4":
	default:
		return false, &ParamError{Field: "moe_weights", Value: v, Msg: "auto, bf16 or mxfp4"}
	}
	switch {
	case !mc.MoE():
		return false, &ParamError{Field: "moe_weights", Value: v, Msg: fmt.Sprintf("model %s has no experts; expected auto or bf16", mc.Name)}
	case dtype == "fp8":
		return false, &ParamError{Field: "moe_weights", Value: v, Msg: "MXFP4 experts with dtype fp8 (W4A8) are not supported; use bfloat16 or float16, or moe_weights bf16"}
	case !mxfp4Shapes(mc):
		return false, &ParamError{Field: "moe_weights", Value: v, Msg: fmt.Sprintf("model %s's hidden size %d and expert width %d must be multiples of %d for MXFP4", mc.Name, mc.Hidden, mc.FFN, model.MXFP4Block)}
	}
	return true, nil
}

// ExpertsReporter is an Engine that says how it keeps a MoE model's
// experts: "mxfp4" or "bf16" (the compute type), moe_weights resolved;
// "" for a dense model.
type ExpertsReporter interface {
	MoEWeights() string
}

func (e *engine) MoEWeights() string {
	if !e.mc.MoE() {
		return ""
	}
	return e.cfg.MoEWeights
}

// mxfp4Shapes reports whether mc's experts split into MXFP4 blocks.
func mxfp4Shapes(mc ModelConfig) bool {
	return mc.Hidden%model.MXFP4Block == 0 && mc.FFN%model.MXFP4Block == 0
}

// WithLayers is mc cut to its first n layers, every one at its exact shape
// (n 0, or all of them: mc itself). What follows the last layer (the final
// norm and the LM head) stays, so an iteration of the cut model costs the
// full model's minus the layers left out: the rooflines, the KV cache and
// the expert loads all follow the cut config. A checkpoint's later layers
// are simply not read. n beyond the model's layers is a ParamError.
func WithLayers(mc ModelConfig, n int) (ModelConfig, error) {
	switch {
	case n == 0 || n == mc.Layers:
		return mc, nil
	case n < 0 || n > mc.Layers:
		return mc, &ParamError{Field: "layers", Value: strconv.Itoa(n),
			Msg: fmt.Sprintf("model %s has %d layers; expected all or an integer from 1 to %d", mc.Name, mc.Layers, mc.Layers)}
	}
	mc.Layers = n
	// DeepSeek-V3's first dense layers: as many as the cut keeps.
	mc.DenseLayers = min(mc.DenseLayers, n)
	// GPT-OSS's layer types: those of the layers kept.
	if mc.LayerTypes != nil {
		mc.LayerTypes = slices.Clone(mc.LayerTypes[:n])
	}
	return mc, nil
}

// ParseRoutingMode reads routing_mode: learned, perfect, uniform or zipf:S
// with S > 0 ("" is learned).
func ParseRoutingMode(s string) (model.Routing, error) {
	switch s {
	case "", "learned":
		return model.Routing{Mode: model.Learned}, nil
	case "perfect":
		return model.Routing{Mode: model.Perfect}, nil
	case "uniform":
		return model.Routing{Mode: model.Uniform}, nil
	}
	if rest, ok := strings.CutPrefix(s, "zipf:"); ok {
		v, err := strconv.ParseFloat(rest, 64)
		if err == nil && v > 0 && !math.IsInf(v, 0) {
			return model.Routing{Mode: model.Zipf, S: v}, nil
		}
	}
	return model.Routing{}, &ParamError{Field: "routing_mode", Value: s, Msg: "learned, perfect, uniform or zipf:S with S > 0"}
}

// Span is a range of engine iterations, First..Last inclusive.
type Span struct{ First, Last int }

// ParseProfileWindow reads TLLM_PROFILE_START_STOP's syntax: "none" or ""
// (no window), or a comma list of spans "A-B" and single iterations "K",
// 0-based, inclusive, increasing and not overlapping.
func ParseProfileWindow(s string) ([]Span, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	bad := func(msg string) ([]Span, error) {
		return nil, &ParamError{Field: "profile_window", Value: s, Msg: msg}
	}
	parts := strings.Split(s, ",")
	// Name the whole window in a message only when it has several spans.
	whole := ""
	if len(parts) > 1 {
		whole = strconv.Quote(s) + ": "
	}
	var spans []Span
	for _, part := range parts {
		part = strings.TrimSpace(part)
		a, b, isSpan := strings.Cut(part, "-")
		first, err1 := strconv.Atoi(strings.TrimSpace(a))
		last, err2 := first, error(nil)
		if isSpan {
			last, err2 = strconv.Atoi(strings.TrimSpace(b))
		}
		switch {
		case err1 != nil || err2 != nil || first < 0 || last < 0:
			return bad(fmt.Sprintf("%s%q is not a span; expected none, A-B or K with non-negative integers (iterations are 0-based)", whole, part))
		case first > last:
			return bad(fmt.Sprintf("%sspan %q ends before it starts; expected A <= B", whole, part))
		case len(spans) > 0 && first <= spans[len(spans)-1].Last:
			return bad(fmt.Sprintf("%sspan %q overlaps or precedes the one before; list spans in increasing order", whole, part))
		}
		spans = append(spans, Span{first, last})
	}
	return spans, nil
}

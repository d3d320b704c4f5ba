package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/xrun-dev/xrun/engine/fp8"
)

// FP8 GEMMs follow TensorRT-LLM's FP8 recipe (ModelOpt's quant_algo FP8):
// the linear layers of attention and the MLP or experts have E4M3 weights
// with a per-tensor scale (per output channel where a checkpoint gives
// them), their input activations are quantized to E4M3 per tensor (with a
// static scale: a checkpoint's input_scale, or one calibrated at load,
// fp8calib.go; else dynamically: amax/448 over the GEMM's rows) or per
// token (a checkpoint whose activations are dynamic per token), as
// Options.FP8Activations says, and the GEMM multiplies E4M3 values with
// float32 accumulation and scales its output by the two scales. The
// embedding, the norms, attention, the MoE router and the LM head stay in
// the compute type.

// FP8Scales are the scales of an E4M3 GEMM weight (HostTensor.FP8).
type FP8Scales struct {
	// Weight dequantizes the codes: one scale for the whole tensor, or one
	// per row (output channel; for an Experts stack, per row of every
	// expert in order).
	Weight []float32
	// Input is the static per-tensor scale of the GEMM's input activations
	// (a checkpoint's input_scale); 0 quantizes them dynamically.
	Input float32
	// PerToken quantizes the input dynamically per row (token) instead.
	PerToken bool
}

// RowScale is row r's weight scale.
func (s *FP8Scales) RowScale(r int) float32 {
	if len(s.Weight) == 1 {
		return s.Weight[0]
	}
	return s.Weight[r]
}

// rows is how many rows h has (the product of all but its last dimension).
func (h HostTensor) rows() int {
	n := 1
	for _, d := range h.Shape[:max(len(h.Shape)-1, 0)] {
		n *= d
	}
	return n
}

// CheckFP8 checks an F8_E4M3 tensor's scales: one, or one per row, all
// positive and finite.
func (h HostTensor) CheckFP8() error {
	if h.DType != "F8_E4M3" {
		return nil
	}
	s := h.FP8
	if s == nil || len(s.Weight) == 0 {
		return errors.New("an F8_E4M3 tensor without its weight scale")
	}
	if n := len(s.Weight); n != 1 && n != h.rows() {
		return fmt.Errorf("%d weight scales for %d rows; expected one (per tensor) or one per row (per channel)", n, h.rows())
	}
	for _, v := range append(slices.Clone(s.Weight), s.Input) {
		if !(v >= 0) || v > 3.4e38 {
			return fmt.Errorf("scale %v; scales must be positive and finite", v)
		}
	}
	for _, v := range s.Weight {
		if v == 0 {
			return errors.New("a weight scale of 0")
		}
	}
	return nil
}

// FP8Codes returns h's codes and scales as a quantized GEMM weight: h
// itself when it is F8_E4M3, else h quantized per tensor (amax/448,
// activations dynamic per tensor), as engines quantize a bf16 checkpoint
// on load.
func (h HostTensor) FP8Codes() ([]uint8, FP8Scales, error) {
	if h.DType == "F8_E4M3" {
		if err := h.CheckFP8(); err != nil {
			return nil, FP8Scales{}, err
		}
		return h.Data, *h.FP8, nil
	}
	f, err := h.Float32()
	if err != nil {
		return nil, FP8Scales{}, err
	}
	s := fp8.Scale(fp8.AbsMax(f))
	q := make([]uint8, len(f))
	fp8.Quantize(q, f, s)
	return q, FP8Scales{Weight: []float32{s}}, nil
}

// FP8GEMMs is implemented by backends that run FP8 GEMMs (dtype fp8; the
// CPU backend as the reference, computing in float32 on E4M3 values).
// Upload of an F8_E4M3 Matrix or Experts weight makes an FP8 GEMM weight;
// MatMul and MoE on one quantize their input as its FP8Scales say.
type FP8GEMMs interface {
	// QuantizeFP8 replaces w, a Matrix or Experts weight in the compute
	// type, by its E4M3 form with one scale per tensor (per expert for
	// Experts), amax/448, whose GEMMs quantize their input dynamically per
	// tensor. w is freed. Random weights are made this way on the device.
	QuantizeFP8(w Tensor) (Tensor, error)
}

// FP8Activations is how FP8 GEMMs scale their input activations
// (Options.FP8Activations, the fp8_activations parameter).
type FP8Activations int

const (
	// FP8ActAuto keeps a checkpoint's own scheme (static input_scale,
	// dynamic per tensor or per token) and gives weights quantized at load
	// (random weights, fp16/bf16 checkpoints) static scales calibrated at
	// load, as a ModelOpt FP8 checkpoint — what TensorRT-LLM deploys —
	// carries them.
	FP8ActAuto FP8Activations = iota
	// FP8ActStatic gives every FP8 GEMM a static per-tensor input scale:
	// the checkpoint's input_scale where it has one, else calibrated at
	// load (Model.calibrateFP8).
	FP8ActStatic
	// FP8ActDynamic quantizes every FP8 GEMM's input with its own amax/448
	// each iteration (per token where the checkpoint says so), ignoring a
	// checkpoint's input_scale.
	FP8ActDynamic
)

// String is the fp8_activations value: auto, static or dynamic.
func (a FP8Activations) String() string {
	switch a {
	case FP8ActAuto:
		return "auto"
	case FP8ActStatic:
		return "static"
	case FP8ActDynamic:
		return "dynamic"
	}
	return fmt.Sprintf("FP8Activations(%d)", int(a))
}

// FP8Calibrator is implemented by FP8GEMMs backends that can calibrate
// static input scales: the model runs its calibration batch between
// CalibrateFP8(true) and CalibrateFP8(false).
type FP8Calibrator interface {
	// CalibrateFP8(true) begins calibration: from then on every FP8 GEMM
	// weight whose input is quantized dynamically per tensor keeps the
	// largest amax of its inputs (its GEMMs still quantize dynamically).
	// CalibrateFP8(false) ends it, after the work queued before it is
	// done: each such weight that saw input gets fp8.Scale(amax) as its
	// static input scale, and its GEMMs quantize with it from then on.
	// Expert stacks (Experts weights) are not calibrated: they keep
	// dynamic scales.
	CalibrateFP8(on bool) error
}

// FP8KV is implemented by backends whose KV cache can hold E4M3 keys and
// values (KVConfig.FP8, kv_cache_dtype fp8).
type FP8KV interface {
	FP8KVCache()
}

// ErrNoFP8 is a model asked to run FP8 GEMMs or an FP8 KV cache on a
// backend without them.
var ErrNoFP8 = errors.New("the backend has no FP8")

// ErrNoFP8Calibration is a model whose FP8 GEMMs need static input scales
// calibrated at load on a backend that is not an FP8Calibrator; it is an
// ErrNoFP8 too.
var ErrNoFP8Calibration = fmt.Errorf("%w calibration of static input scales", ErrNoFP8)

// Quant is how a checkpoint's linear layers are quantized, from its
// quantization config (engine reads ModelOpt's and compressed-tensors').
type Quant struct {
	// Method names the format: "modelopt" or "compressed-tensors".
	Method string
	// File is where the config was read, for messages.
	File string
	// StaticInput: the checkpoint holds input_scale beside each weight
	// (ModelOpt FP8, compressed-tensors with static activations); missing
	// one is an error. Otherwise activations are dynamic: per token with
	// PerToken, else per tensor.
	StaticInput, PerToken bool
	// KVCache: the checkpoint calibrated an FP8 KV cache (k_scale,
	// v_scale per layer), which kv_cache_dtype auto then uses.
	KVCache bool
}

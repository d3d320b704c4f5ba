package runner

import (
	"fmt"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/trtllm"
)

// Which parameters can matter for a cell: those that cannot (routing_mode
// on a dense model, dtype on the cpu engine, a parameter an engine's driver
// ignores) are left out of its identity and collapse, with the reason.

// whenGiven are the parameters in a cell's identity only when the spec
// gives them.
var whenGiven = func() []int {
	var out []int
	for pi, p := range params {
		if p.whenGiven {
			out = append(out, pi)
		}
	}
	return out
}()

// builtinEngine reports whether an engine value runs xrun's own engine.
func builtinEngine(e string) bool { return e == "auto" || e == "cuda" || e == "cpu" }

// externalOnly are the parameters only external engines take.
const externalOnly = 1<<pTrtllmBackend | 1<<pTP | 1<<pPP | 1<<pEP | 1<<pExtraOptions

// notApplicable returns the parameters that cannot matter for p, as a bit
// set, and for an external engine the reasons its driver gives (nil for
// the built-in engine, whose reasons whyNotApplicable writes).
func notApplicable(p *Params, m *engine.ModelConfig, pl driver.Planner) (uint64, map[int]string) {
	var na uint64
	if !m.MoE() {
		na |= 1<<pRoutingMode | 1<<pMoEWeights
	}
	if p.Engine == "cpu" {
		na |= 1 << pKVFraction
		if p.Dtype != "fp8" { // fp8 quantizes the CPU's float32 GEMMs
			na |= 1 << pDtype
		}
	}
	if builtinEngine(p.Engine) {
		na |= externalOnly
	} else {
		// TensorRT-LLM and other engines take experts as the checkpoint
		// has them, and FP8 as a quantized checkpoint.
		na |= 1<<pKVCacheDtype | 1<<pMoEWeights | 1<<pFP8Activations
	}
	if p.Dtype != "fp8" {
		// Only FP8 GEMMs have activation scales.
		na |= 1 << pFP8Activations
	}
	if p.Engine == trtllm.Name {
		// TensorRT-LLM has no option to build or run part of a model.
		na |= 1 << pLayers
	}
	na |= loadNotApplicable(p)
	switch p.Dataset.Kind() {
	case GenNorm:
		na |= 1<<pInputMin | 1<<pInputMax | 1<<pOutputMin | 1<<pOutputMax
	case GenUnif:
		na |= 1<<pInputMean | 1<<pInputStdev | 1<<pOutputMean | 1<<pOutputStdev
	default:
		na |= 1<<pNumRequests | 1<<pInputMean | 1<<pInputStdev | 1<<pOutputMean | 1<<pOutputStdev |
			1<<pInputMin | 1<<pInputMax | 1<<pOutputMin | 1<<pOutputMax |
			1<<pDatasetSeed | 1<<pVocabSize | 1<<pEOSID | 1<<pRandTaskID
	}
	if pl == nil {
		return na, nil
	}
	if p.Engine != "trtllm" {
		na |= 1 << pTrtllmBackend
	}
	why := map[int]string{}
	for path, reason := range pl.Ignored(driverParams(p), m) {
		if pi, ok := paramIndex[path]; ok && na&(1<<pi) == 0 {
			na |= 1 << pi
			why[pi] = reason
		}
	}
	return na, why
}

// driverParams are p by path, as drivers read them.
func driverParams(p *Params) driver.Params {
	out := make(driver.Params, numParams)
	for _, pm := range params {
		v := pm.get(p)
		if d, ok := v.(time.Duration); ok {
			v = formatValue(d)
		}
		out[pm.path] = v
	}
	return out
}

// whyNotApplicable explains, for the plan, why parameter pi cannot matter.
func whyNotApplicable(pi int, p *Params) string {
	switch pi {
	case pRoutingMode:
		return fmt.Sprintf("routing_mode has no effect on dense model %s", p.Model)
	case pDtype:
		return "dtype has no effect on the cpu engine (it computes in float32)"
	case pKVCacheDtype:
		if !builtinEngine(p.Engine) {
			return fmt.Sprintf("kv_cache_dtype has no effect on engine %s (it is xrun's own engine's)", p.Engine)
		}
	case pMoEWeights:
		if !builtinEngine(p.Engine) {
			return fmt.Sprintf("moe_weights has no effect on engine %s (it is xrun's own engine's; TensorRT-LLM keeps experts as the checkpoint has them)", p.Engine)
		}
		return fmt.Sprintf("moe_weights has no effect on dense model %s", p.Model)
	case pFP8Activations:
		if !builtinEngine(p.Engine) {
			return fmt.Sprintf("fp8_activations has no effect on engine %s (it is xrun's own engine's; TensorRT-LLM scales activations as its FP8 checkpoint says)", p.Engine)
		}
		return fmt.Sprintf("fp8_activations has no effect with dtype %s (it is how dtype fp8's GEMMs scale their inputs)", p.Dtype)
	case pKVFraction:
		return "kv_cache_free_gpu_mem_fraction has no effect on the cpu engine"
	case pRequestRate, pBurstiness, pConcurrency, pLoadDuration:
		return whyLoadNotApplicable(pi, p)
	case pLayers:
		if p.Engine == trtllm.Name {
			return "layers has no effect on engine trtllm: TensorRT-LLM has no option to run part of a model"
		}
	case pTrtllmBackend:
		return fmt.Sprintf("trtllm_backend has no effect on engine %s (it is engine trtllm's)", p.Engine)
	case pTP, pPP, pEP, pExtraOptions:
		if pi == pEP && p.EP != 1 && builtinEngine(p.Engine) {
			return fmt.Sprintf("ep has no effect on dense model %s", p.Model)
		}
		if builtinEngine(p.Engine) {
			return fmt.Sprintf("%s has no effect on engine %s (it is for engine trtllm or command)", params[pi].path, p.Engine)
		}
	}
	if p.Dataset.Kind() == GenFile {
		return fmt.Sprintf("%s has no effect on a dataset file", params[pi].path)
	}
	return fmt.Sprintf("%s has no effect on %s", params[pi].path, p.Dataset.Kind())
}

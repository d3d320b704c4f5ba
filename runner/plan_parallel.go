package runner

import (
	"errors"

	"github.com/xrun-dev/xrun/engine"
)

// Tensor and expert parallelism on the built-in engine (engine/parallel.go):
// tp and ep mean what trtllm-bench's --tp and --ep mean, and a cell uses
// engine.WorldSize(tp, ep) GPUs, gpus_per_cell's default.

// builtinEP is the ep a built-in engine's cell runs with: ep has no effect
// on a dense model (as on engine trtllm), so there it is 1.
func builtinEP(p *Params, m *engine.ModelConfig) int {
	if m != nil && !m.MoE() {
		return 1
	}
	return p.EP
}

// parallelGiven is the bits of tp and ep that apply to a built-in
// engine's cell: where the spec gives them (ep only on a MoE model), so
// that the cells of specs without them keep the ids they had before.
func parallelGiven(m *engine.ModelConfig, explicit []bool) uint64 {
	var bits uint64
	if explicit[pTP] {
		bits |= 1 << pTP
	}
	if explicit[pEP] && m.MoE() {
		bits |= 1 << pEP
	}
	return bits
}

// parallelCheck refuses a split the model's shape, the engine or
// gpus_per_cell does not allow, blaming tp, ep or gpus_per_cell. The
// model refuses MLA and GPT-OSS splits (engine.CheckParallel); FP8 GEMMs
// on a split model are refused here too, rather than when the run loads
// the model. Both backends split a cell: the CPU's in-process, the CUDA
// backend's over NCCL (a run without NCCL or without cgo says so when
// the cell starts).
func (d *decoder) parallelCheck(p *Params, m *engine.ModelConfig, vals []int32) error {
	tp, ep := p.TP, builtinEP(p, m)
	if err := engine.CheckParallel(*m, tp, ep); err != nil {
		pi, msg := pTP, err.Error()
		if pe := (*engine.ParamError)(nil); errors.As(err, &pe) {
			msg = pe.Msg
			if pe.Field == "ep" {
				pi = pEP
			}
		}
		n, f := d.blame(vals, pi, pEngine, pModel)
		return d.errAt(n, f, "tp %d, ep %d: %s", tp, ep, msg)
	}
	w := engine.WorldSize(tp, ep)
	switch {
	case w > 1 && p.Dtype == "fp8":
		n, f := d.blame(vals, pDtype, pTP, pEP)
		return d.errAt(n, f, "dtype fp8 with tp %d, ep %d: FP8 GEMMs on a split model are not supported yet (a slice's per-tensor scale is not the whole weight's); use bfloat16, or tp 1 and ep 1", tp, ep)
	case p.GPUsPerCell < w:
		n, f := d.blame(vals, pGPUsPerCell, pTP, pEP)
		return d.errAt(n, f, "gpus_per_cell %d, but tp %d and ep %d split the model over %d GPUs; expected at least %d", p.GPUsPerCell, tp, ep, w, w)
	}
	return nil
}

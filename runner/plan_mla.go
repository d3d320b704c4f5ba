package runner

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine"
)

// mlaCheck refuses at plan time a model of the DeepSeek-V3 architecture
// (multi-head latent attention, grouped routing) on engine cuda, whose
// backend has no MLA kernels yet. On engine auto the backend is chosen
// when the study runs, so the plan warns and autoCudaMLAError keeps the
// error for Cell.CheckBackend, as dtypeCheck does for float32.
func (d *decoder) mlaCheck(p *Params, m *engine.ModelConfig, vals []int32, warn func(string)) error {
	if !engine.NeedsMLA(*m) {
		return nil
	}
	switch p.Engine {
	case "cuda":
		n, f := d.blame(vals, pModel, pEngine)
		return d.errAt(n, f, "engine cuda: %s", engine.NoMLAMessage("CUDA", p.Model))
	case "auto":
		n, f := d.blame(vals, pModel, pEngine)
		warn(fmt.Sprintf("model %s on engine auto (%s, %s): where a GPU is usable the run refuses these cells, as the CUDA backend has no MLA kernels yet; engine cpu runs them anywhere", p.Model, f, d.where(n)))
	}
	return nil
}

// autoCudaMLAError is the error Cell.CheckBackend returns for a cell of
// engine auto whose model the cuda backend cannot run; nil when it can.
func (d *decoder) autoCudaMLAError(p *Params, vals []int32) *SpecError {
	m := d.models[p.Model]
	if p.Engine != "auto" || m == nil || !engine.NeedsMLA(*m) {
		return nil
	}
	n, f := d.blame(vals, pModel, pEngine)
	return d.errAt(n, f, "engine auto, which runs on the cuda backend here: %s", engine.NoMLAMessage("CUDA", p.Model))
}

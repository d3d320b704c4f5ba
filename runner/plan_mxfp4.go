package runner

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// moeWeightsCheck refuses at plan time the moe_weights mxfp4 cells a run
// would fail on (engine.ResolveMoEWeights): MXFP4 experts with dtype fp8,
// on a tp or ep split, or on experts whose sizes do not split into
// 32-value blocks. On the CUDA backend the MXFP4 expert kernel is right
// but slower than bf16 experts (measured on an H100): asking for it there
// warns, since deployments run MXFP4 faster (auto keeps bf16 experts on
// CUDA until it is faster).
func (d *decoder) moeWeightsCheck(p *Params, m *engine.ModelConfig, na uint64, vals []int32, warn func(string)) error {
	if p.MoEWeights != "mxfp4" || na&(1<<pMoEWeights) != 0 {
		return nil
	}
	switch {
	case p.Dtype == "fp8" && na&(1<<pDtype) == 0:
		n, f := d.blame(vals, pMoEWeights, pDtype)
		return d.errAt(n, f, "moe_weights mxfp4 with dtype fp8: MXFP4 experts with FP8 GEMMs (W4A8) are not supported; use bfloat16 or float16, or moe_weights bf16")
	case p.TP > 1 || p.EP > 1:
		n, f := d.blame(vals, pMoEWeights, pTP, pEP)
		return d.errAt(n, f, "moe_weights mxfp4 with tp %d, ep %d: MXFP4 experts on a split are not supported yet; expected tp 1 and ep 1, or moe_weights auto or bf16", p.TP, p.EP)
	case m.Hidden%model.MXFP4Block != 0 || m.FFN%model.MXFP4Block != 0:
		n, f := d.blame(vals, pMoEWeights, pModel)
		return d.errAt(n, f, "moe_weights mxfp4: model %s's hidden size %d and expert width %d must be multiples of %d (MXFP4's block)", p.Model, m.Hidden, m.FFN, model.MXFP4Block)
	}
	if p.Engine == "cuda" || p.Engine == "auto" {
		n, f := d.blame(vals, pMoEWeights)
		warn(fmt.Sprintf("moe_weights mxfp4 on engine %s (%s, %s): the CUDA backend's MXFP4 expert kernel ran GPT-OSS-20B slower than bf16 experts (0.86x at batch 64, 0.70x at 256 on an H100), unlike the MXFP4 kernels deployments run", p.Engine, f, d.where(n)))
	}
	return nil
}

// cellMXFP4 is whether a cell's routed experts are MXFP4 on a GPU, as the
// engine resolves moe_weights there (engine.ResolveMoEWeights: auto is
// bf16 on CUDA while its MXFP4 kernel is slower); false off xrun's
// own engine and where the value is refused.
func cellMXFP4(p *Params, m *engine.ModelConfig) bool {
	if !builtinEngine(p.Engine) || m == nil {
		return false
	}
	backend := "cuda"
	if p.Engine == "cpu" {
		backend = "cpu"
	}
	mx, err := engine.ResolveMoEWeights(backend, *m, p.Dtype, p.MoEWeights)
	return err == nil && mx
}

package runner

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
)

// The checks here refuse at plan time (a *SpecError, exit 2, before
// anything runs) what a cell's run would otherwise fail on: requests
// longer than the model's positions, token ids beyond its vocabulary, and
// float32 or the DeepSeek-V3 architecture (plan_mla.go) on the CUDA
// backend. Model checkpoints are checked where model
// values are decoded (lookupModel).

// tailStdevs is how far into a normal length distribution's upper tail the
// plan looks: 6 stdevs, which one request in a billion passes.
const tailStdevs = 6

// cellChecks runs the plan-time checks on one cell's resolved parameters;
// warn records a caveat that does not stop the study.
func (d *decoder) cellChecks(p *Params, m *engine.ModelConfig, na uint64, vals []int32, warn func(string)) error {
	if err := d.vocabCheck(p, m, vals); err != nil {
		return err
	}
	if err := d.lengthCheck(p, m, vals, warn); err != nil {
		return err
	}
	d.windowCheck(p, vals, warn)
	if err := d.fp8Check(p, m, na, vals, warn); err != nil {
		return err
	}
	if err := d.moeWeightsCheck(p, m, na, vals, warn); err != nil {
		return err
	}
	return d.dtypeCheck(p, na, vals, warn)
}

// blame finds where to point for a problem several parameters make
// together: the first of them the matrix gave this cell (what sets it
// apart from the cells that pass), else the first set in params.
func (d *decoder) blame(vals []int32, pis ...int) (*yaml.Node, string) {
	for _, pi := range pis {
		if vals[pi] >= 0 {
			v := d.vals[vals[pi]]
			return v.node, v.field
		}
	}
	for _, pi := range pis {
		if d.explicit[pi] {
			return d.paramNode[pi], d.paramField[pi]
		}
	}
	return d.rootNode, params[pis[0]].path
}

// vocabCheck refuses token ids the model has no embedding for: a
// generator draws ids from [0, vocab_size), and any engine serving the
// model fails on an id at or beyond its vocabulary. An EOS id is never
// drawn, but one the model's tokenizer does not have is a mistake (the
// dataset generator refuses it).
func (d *decoder) vocabCheck(p *Params, m *engine.ModelConfig, vals []int32) error {
	ds := &p.Dataset
	if ds.Kind() == GenFile {
		return nil
	}
	// Both values default to the model's, so a bad one was written.
	if ds.VocabSize > m.Vocab {
		n, f := d.blame(vals, pVocabSize)
		return d.errAt(n, f, "dataset.vocab_size %d draws token ids up to %d, beyond model %s's vocabulary of %d; set at most %d (its tokenizer's base vocabulary is %d, the default)",
			ds.VocabSize, ds.VocabSize-1, p.Model, m.Vocab, m.Vocab, m.DatasetVocab)
	}
	if limit := max(m.Vocab, ds.VocabSize); ds.EOSID >= limit {
		n, f := d.blame(vals, pEOSID)
		return d.errAt(n, f, "dataset.eos_id %d is not a token of model %s (ids 0 to %d; its EOS is %d, the default)", ds.EOSID, p.Model, limit-1, m.EOS)
	}
	return nil
}

// lengthCheck refuses, on xrun's own engine, a generated dataset whose
// requests are longer than the model's positions (input + output tokens;
// the engine refuses such a request) when the parameters fix the lengths:
// token-norm-dist with stdev 0 (every request has the means) and
// token-unif-dist (the maxima may be drawn). With a stdev the lengths are
// known only once generated; the plan warns when the upper tail passes
// the limit. External engines bring their own limits (trtllm-build sizes
// the engine to the dataset) and are left to them.
func (d *decoder) lengthCheck(p *Params, m *engine.ModelConfig, vals []int32, warn func(string)) error {
	ds := &p.Dataset
	if !builtinEngine(p.Engine) {
		return nil
	}
	switch ds.Kind() {
	case GenNorm:
		if ds.InputStdev > 0 || ds.OutputStdev > 0 {
			// Input and output lengths share one normal draw, so their
			// tails coincide.
			tail := ds.InputMean + tailStdevs*ds.InputStdev + ds.OutputMean + tailStdevs*ds.OutputStdev
			if tail > m.MaxPos {
				warn(fmt.Sprintf("dataset token-norm-dist input %d±%d + output %d±%d tokens on model %s: mean + %d stdevs is %d tokens, more than its %d positions; %s, and a request that long is refused",
					ds.InputMean, ds.InputStdev, ds.OutputMean, ds.OutputStdev, p.Model, tailStdevs, tail, m.MaxPos, tooLong(ds, m.MaxPos)))
			}
			return nil
		}
		if n := ds.InputMean + ds.OutputMean; n > m.MaxPos {
			nd, f := d.blame(vals, pInputMean, pOutputMean, pModel)
			return d.errAt(nd, f, "every request is dataset.input_mean %d + dataset.output_mean %d = %d tokens, more than model %s's %d positions (max_position_embeddings); shorten them or choose a model with a longer context",
				ds.InputMean, ds.OutputMean, n, p.Model, m.MaxPos)
		}
	case GenUnif:
		if n := ds.InputMax + ds.OutputMax; n > m.MaxPos {
			nd, f := d.blame(vals, pInputMax, pOutputMax, pModel)
			return d.errAt(nd, f, "dataset.input_max %d + dataset.output_max %d = %d tokens, more than model %s's %d positions (max_position_embeddings): requests that long may be drawn, and the engine refuses them; lower the maxima or choose a model with a longer context",
				ds.InputMax, ds.OutputMax, n, p.Model, m.MaxPos)
		}
	}
	return nil
}

// tooLong says how many of a normal dataset's requests are expected to be
// longer than limit tokens: input + output is the means plus the sum of
// the stdevs times one standard normal draw (ignoring the rounding up of
// each length, worth at most two tokens).
func tooLong(ds *DatasetParams, limit int) string {
	z := float64(limit-ds.InputMean-ds.OutputMean) / float64(ds.InputStdev+ds.OutputStdev)
	share := 0.5 * math.Erfc(z/math.Sqrt2)
	n := float64(ds.NumRequests)
	if expect := share * n; expect >= 0.5 {
		return fmt.Sprintf("about %.0f of its %d requests are expected to be longer", expect, ds.NumRequests)
	}
	// The chance that any request is: 1 - (1 - share)^n, kept exact for
	// tiny shares.
	return fmt.Sprintf("the chance that one of its %d requests is longer is about %.1g", ds.NumRequests, -math.Expm1(n*math.Log1p(-share)))
}

// checkLengths is lengthCheck for lengths known only once a dataset
// exists (a dataset file, or normal lengths with a stdev): the request on
// line `line` of file, of in input and out output tokens, must fit the
// cell's model. Nil when it does, or when the cell's engine is not xrun's
// own. The error blames the dataset (exit 2).
func checkLengths(c *Cell, file string, line, in, out int) error {
	if !builtinEngine(c.Params.Engine) || in+out <= c.Model.MaxPos {
		return nil
	}
	return &dsets.Error{File: file, Line: line, Msg: fmt.Sprintf("a request of %d input + %d output tokens, more than model %s's %d positions (max_position_embeddings)",
		in, out, c.Params.Model, c.Model.MaxPos)}
}

// dtypeCheck refuses float32 on the cuda engine, whose backend computes in
// float16 or bfloat16 only. On engine auto the backend is chosen when the
// study runs (cuda where a GPU is usable), so the plan warns and keeps the
// error for Cell.CheckBackend.
func (d *decoder) dtypeCheck(p *Params, na uint64, vals []int32, warn func(string)) error {
	if p.Dtype != "float32" || na&(1<<pDtype) != 0 {
		return nil
	}
	switch p.Engine {
	case "cuda":
		n, f := d.blame(vals, pDtype, pEngine)
		return d.errAt(n, f, "dtype float32 on engine cuda: the CUDA backend computes in float16 or bfloat16 only; use dtype float16 or bfloat16, or engine cpu (which computes in float32)")
	case "auto":
		n, f := d.blame(vals, pDtype, pEngine)
		warn(fmt.Sprintf("dtype float32 on engine auto (%s, %s): the CUDA backend computes in float16 or bfloat16 only, so where a GPU is usable the run refuses these cells; engine cpu runs them in float32 anywhere", f, d.where(n)))
	}
	return nil
}

// autoCudaError is the error Cell.CheckBackend returns for a cell of
// engine auto that cannot run on the cuda backend; nil when it can.
func (d *decoder) autoCudaError(p *Params, na uint64, vals []int32) *SpecError {
	if err := d.autoCudaFP8Error(p, na, vals); err != nil {
		return err
	}
	if p.Engine != "auto" || p.Dtype != "float32" || na&(1<<pDtype) != 0 {
		return nil
	}
	n, f := d.blame(vals, pDtype, pEngine)
	return d.errAt(n, f, "dtype float32 on engine auto, which runs on the cuda backend here: the CUDA backend computes in float16 or bfloat16 only; use dtype float16 or bfloat16, or engine cpu (which computes in float32)")
}

// CheckBackend refuses what the backend engine auto resolved to cannot
// run (float32 on cuda), as the plan refuses it for an explicit engine: a
// *SpecError naming the spec's line. The runner calls it for each cell it
// will run once auto is resolved; nil for any other engine or backend.
func (c *Cell) CheckBackend(backend string) error {
	if backend == "cuda" && c.autoCuda != nil {
		return c.autoCuda
	}
	return nil
}

package profile

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine"
)

// Split is how a cell's work was divided over GPUs, so that the roofline
// compares one GPU's share of it with one GPU's ceilings (the whole
// model's work against one GPU would overstate the share of the roofline
// by the GPU count). TP and EP are the built-in engine's tensor and
// expert parallelism: a rank's share is its slice of the model
// (engine.Share). GPUs alone divides the whole work evenly: an external
// engine's split, whose layout xrun does not know. The zero value is one
// GPU.
type Split struct {
	TP, EP int
	GPUs   int
}

// share is a rank's slice of mc under the built-in engine's tp and ep;
// ok is false without them or for a split the model's shape does not
// allow.
func (s Split) share(mc engine.ModelConfig) (engine.RankShare, bool) {
	if max(s.TP, s.EP) <= 1 {
		return engine.RankShare{}, false
	}
	rs, err := engine.Share(mc, max(s.TP, 1), max(s.EP, 1))
	return rs, err == nil
}

// ranks is how many GPUs share mc's work.
func (s Split) ranks(mc engine.ModelConfig) int {
	if rs, ok := s.share(mc); ok {
		return rs.World
	}
	return max(engine.WorldSize(s.TP, s.EP), s.GPUs, 1)
}

// Describe says, for a roofline's basis, how mc's work was divided; ""
// for one GPU.
func (s Split) Describe(mc engine.ModelConfig) string {
	n := s.ranks(mc)
	if n == 1 {
		return ""
	}
	if rs, ok := s.share(mc); ok {
		return fmt.Sprintf("per GPU: rank 0's slice of the model (tp %d, ep %d over %d GPUs) against one GPU's ceilings", rs.TP, rs.EP, n)
	}
	return fmt.Sprintf("per GPU: the work divided evenly over %d GPUs, against one GPU's ceilings", n)
}

// rankShape is shapeOf for one rank of the split: attention, dense MLPs
// and the LM head divided as engine.Share divides them (a replicated KV
// head counted on each rank), the experts of the rank's group at its
// width, a token's expected top-k hits among them, and the router whole.
// A split Share refuses (a model the built-in engine cannot split) or an
// external engine's (GPUs) divides the whole work evenly.
func rankShape(mc engine.ModelConfig, sp Split) shape {
	s := shapeOf(mc)
	n := sp.ranks(mc)
	if n == 1 {
		return s
	}
	rs, ok := sp.share(mc)
	if !ok {
		s.even = float64(n)
		return s
	}
	l := rs.Local(mc)
	s.attn = float64(l.AttnWeights())
	s.head = float64(rs.Vocab) * float64(mc.Hidden)
	s.kvPerToken = float64(rs.KVElemsPerToken(mc))
	s.attGen, s.attCtx = l.AttnFLOPsPerPosition(true), l.AttnFLOPsPerPosition(false)
	s.expert = 3 * float64(mc.Hidden) * float64(l.FFN)
	if mc.MoE() {
		s.expertShare = float64(rs.Experts) / float64(mc.Experts)
		s.topK *= s.expertShare
		s.experts = float64(rs.Experts)
	}
	return s
}

// RankIterationWork is IterationWork for one GPU of split sp.
func RankIterationWork(mc engine.ModelConfig, sp Split, it engine.IterationRecord, genContext float64, elemBytes int) Work {
	return rankShape(mc, sp).work(it, genContext, uniform(float64(elemBytes)), -1)
}

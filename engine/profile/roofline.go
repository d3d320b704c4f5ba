package profile

import (
	"math"

	"github.com/xrun-dev/xrun/engine"
)

// Work is what an iteration must move and compute at the least, by the
// roofline model of ../shared/docs/gpu.md ("Rooflines"): every matmul
// weight read once (for MoE, the experts the batch's tokens reach), the KV
// cache read by each decoding request and written for each new token;
// 2 FLOP per weight per token plus attention's 4 * layers * heads *
// head_dim per cached position. Activations, norms and the embedding
// gather are left out: they are small next to these.
type Work struct {
	Bytes float64
	FLOPs float64
}

// Add sums work.
func (w Work) Add(o Work) Work { return Work{w.Bytes + o.Bytes, w.FLOPs + o.FLOPs} }

// shape holds the per-layer matmul sizes derived from a model once.
type shape struct {
	layers, heads, headDim float64
	attn                   float64 // QKV + output projection weights per layer
	expert                 float64 // one MLP (dense) or one expert's gate, up, down
	experts, topK          float64 // 0, 0 for dense models
	router                 float64
	head                   float64 // LM head weights
	kvPerToken             float64 // elements of K and V per position, all layers
}

func shapeOf(mc engine.ModelConfig) shape {
	h, d := float64(mc.Hidden), float64(mc.HeadDim)
	s := shape{layers: float64(mc.Layers), heads: float64(mc.Heads), headDim: d,
		attn:       h*d*float64(mc.Heads+2*mc.KVHeads) + float64(mc.Heads)*d*h,
		expert:     3 * h * float64(mc.FFN),
		head:       float64(mc.Vocab) * h,
		kvPerToken: 2 * float64(mc.Layers*mc.KVHeads) * d,
	}
	if mc.MoE() {
		s.experts, s.topK, s.router = float64(mc.Experts), float64(mc.TopK), h*float64(mc.Experts)
	}
	return s
}

// IterationWork estimates one iteration's work. genContext is the mean
// number of cached positions a decoding request attends to (the engine
// does not record each request's position per iteration).
func IterationWork(mc engine.ModelConfig, it engine.IterationRecord, genContext float64, elemBytes int) Work {
	s := shapeOf(mc)
	eb := float64(elemBytes)
	tokens := float64(it.CtxTokens + it.GenRequests)
	if tokens == 0 {
		return Work{}
	}
	// Rows that reach the LM head: one per decoding request and at most one
	// per prefill chunk (the chunk that completes its prompt).
	logitRows := float64(it.GenRequests + it.CtxRequests)

	mlpWeights, mlpPerToken := s.expert, s.expert
	if s.experts > 0 {
		// Expected distinct experts hit by tokens*k uniform draws.
		reached := s.experts * (1 - math.Pow(1-s.topK/s.experts, tokens))
		mlpWeights = reached*s.expert + s.router
		mlpPerToken = s.topK*s.expert + s.router
	}
	w := Work{}
	w.Bytes = eb * (s.layers*(s.attn+mlpWeights) + s.head)
	w.FLOPs = 2*tokens*s.layers*(s.attn+mlpPerToken) + 2*logitRows*s.head

	// Attention: a decoding request attends to genContext positions; a
	// prefill chunk of c tokens from position 0 to c/2 on average.
	att := 4 * s.layers * s.heads * s.headDim
	w.FLOPs += att * float64(it.GenRequests) * genContext
	if it.CtxRequests > 0 {
		c := float64(it.CtxTokens) / float64(it.CtxRequests)
		w.FLOPs += att * float64(it.CtxTokens) * c / 2
	}
	w.Bytes += eb * s.kvPerToken * (float64(it.GenRequests)*genContext + tokens)
	return w
}

// meanGenContext is the mean cached length a decoding request attends to
// over its life: its prompt plus half its output.
func meanGenContext(res *engine.Result) float64 {
	if len(res.Requests) == 0 {
		return 0
	}
	var sum float64
	for _, r := range res.Requests {
		sum += float64(r.InputTokens) + float64(r.OutputTokens)/2
	}
	return sum / float64(len(res.Requests))
}

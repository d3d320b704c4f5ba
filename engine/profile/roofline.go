package profile

import (
	"math"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// Work is what an iteration must move and compute at the least, by the
// roofline model of bench/GPU.md ("Rooflines"): every matmul
// weight read once (for MoE, the experts the batch's tokens reach), the KV
// cache read by each decoding request and written for each new token;
// 2 FLOP per weight per token plus attention's 4 * layers * heads *
// head_dim per cached position (MLA: its latent cache and the arithmetic
// of the absorbed form at decode, the plain form at prefill; see
// ModelConfig.AttnFLOPsPerPosition). Activations, norms and the embedding
// gather are left out: they are small next to these.
//
// Under dtype fp8 (Device.FP8) the linear layers of attention and the MLP
// or experts are E4M3: their weights count one byte each and their FLOPs
// (FP8FLOPs, a part of FLOPs) run at the FP8 tensor cores' ceiling; the LM
// head, the router and attention stay in bf16, and the KV cache counts
// Device.KVElemBytes a value. With MXFP4 experts (Device.MXFP4Experts,
// moe_weights mxfp4) the routed experts' weights count 4.25 bits each
// (model.MXFP4BitsPerWeight: a 4-bit value and an 8-bit scale per 32);
// their GEMMs still run in the compute type, so their FLOPs do not change.
type Work struct {
	Bytes    float64
	FLOPs    float64
	FP8FLOPs float64
}

// Add sums work.
func (w Work) Add(o Work) Work {
	return Work{w.Bytes + o.Bytes, w.FLOPs + o.FLOPs, w.FP8FLOPs + o.FP8FLOPs}
}

// precision is the element sizes an iteration's bytes are counted in and
// whether its GEMM FLOPs are FP8.
type precision struct {
	gemm, other, kv float64 // bytes: linear-layer weights, LM head and router, KV cache
	expert          float64 // bytes: routed experts' weights
	fp8             bool
}

func uniform(eb float64) precision { return precision{eb, eb, eb, eb, false} }

// Formats are how a pass stored its weights and KV cache, which its
// roofline counts bytes and FLOPs by: dtype fp8's E4M3 linear layers,
// kv_cache_dtype fp8's E4M3 KV cache, moe_weights mxfp4's routed experts.
type Formats struct {
	FP8, KVFP8, MXFP4Experts bool
}

// WithFormats is d counting a pass of formats f. The CPU backend keeps
// FP8 GEMM weights as the float32 values of their codes and multiplies
// them in float32 (engine/cpu/fp8.go), so there dtype fp8 moves neither
// bytes nor FLOPs; its FP8 KV cache and MXFP4 experts are stored packed
// as on a GPU.
func (d Device) WithFormats(f Formats) Device {
	d.FP8 = f.FP8 && d.Name != "cpu"
	d.KVElemBytes = 0
	if f.KVFP8 {
		d.KVElemBytes = 1
	}
	d.MXFP4Experts = f.MXFP4Experts
	return d
}

// precisionOf is d's: ElemBytes, or FP8 weights and KVElemBytes.
func precisionOf(d Device) precision {
	p := uniform(float64(d.ElemBytes))
	if d.FP8 {
		p.gemm, p.expert, p.fp8 = 1, 1, true
	}
	if d.KVElemBytes > 0 {
		p.kv = float64(d.KVElemBytes)
	}
	if d.MXFP4Experts {
		p.expert = model.MXFP4BitsPerWeight / 8
	}
	return p
}

// shape holds the per-layer matmul sizes derived from a model once.
type shape struct {
	layers         float64
	attn           float64 // QKV (MLA: q, kv_a, kv_b) + output projection weights per layer
	expert         float64 // one MLP (dense) or one expert's gate, up, down
	experts, topK  float64 // 0, 0 for dense models
	router         float64
	head           float64 // LM head weights
	kvPerToken     float64 // elements of K and V (MLA: latent and rotary key) per position, all layers
	attGen, attCtx float64 // attention FLOPs per token per cached position, all layers: decode, prefill
	slide, window  float64 // GPT-OSS: the share of layers attending through a window, and the window (window.go)

	// DeepSeek-V3: the first denseLayers layers have a dense MLP of dense
	// weights instead of experts, and every MoE layer has shared experts
	// of shared weights. Both 0 for other models.
	denseLayers, dense, shared float64

	// One GPU of a split (split.go): the share of the model's experts a
	// rank holds, which scales a count of experts reached over all of
	// them (0: all); even > 1 divides the whole work evenly over that
	// many GPUs instead.
	expertShare, even float64
}

func shapeOf(mc engine.ModelConfig) shape {
	h := float64(mc.Hidden)
	s := shape{layers: float64(mc.Layers),
		attn:       float64(mc.AttnWeights()),
		expert:     3 * h * float64(mc.FFN),
		head:       float64(mc.Vocab) * h,
		kvPerToken: float64(mc.KVElemsPerToken()),
		attGen:     mc.AttnFLOPsPerPosition(true),
		attCtx:     mc.AttnFLOPsPerPosition(false),
		slide:      slidingShare(mc),
		window:     float64(mc.SlidingWindow),
	}
	if mc.MoE() {
		s.experts, s.topK, s.router = float64(mc.Experts), float64(mc.TopK), h*float64(mc.Experts)
		s.denseLayers = float64(mc.Layers - mc.MoELayers())
		s.dense, s.shared = 3*h*float64(mc.DenseWidth()), 3*h*float64(mc.SharedWidth())
	}
	return s
}

// IterationWork estimates one iteration's work. genContext is the mean
// number of cached positions a decoding request attends to (the engine
// does not record each request's position per iteration). On MoE models
// the experts reached are estimated as the expected number that
// tokens*top_k uniform draws hit; IterationWorkTouched takes the count
// the router actually produced.
func IterationWork(mc engine.ModelConfig, it engine.IterationRecord, genContext float64, elemBytes int) Work {
	return shapeOf(mc).work(it, genContext, uniform(float64(elemBytes)), -1)
}

// IterationWorkTouched is IterationWork with the experts the iteration's
// tokens reached, summed over the MoE layers (an expert that received a
// token in two layers counts twice): their weights are what the
// iteration must read. Negative means unknown (estimated as in
// IterationWork); dense models ignore it.
func IterationWorkTouched(mc engine.ModelConfig, it engine.IterationRecord, genContext float64, elemBytes, touched int) Work {
	return shapeOf(mc).work(it, genContext, uniform(float64(elemBytes)), float64(touched))
}

// RankIterationWorkOn is RankIterationWork with the element sizes of
// dev (ElemBytes, and its formats: WithFormats), experts reached
// estimated: what the plan's estimate takes, so that it counts every
// weight as the cell roofline and the diagnosis do.
func RankIterationWorkOn(mc engine.ModelConfig, sp Split, it engine.IterationRecord, genContext float64, dev Device) Work {
	return rankShape(mc, sp).work(it, genContext, precisionOf(dev), -1)
}

// HeldWeightBytes is the memory one rank of split sp holds for mc's
// weights at dev's element sizes, held being how many weights it holds in
// all (engine.RankShare.HeldParams: the embedding, norms and a tied LM
// head included). The linear layers of attention and of the dense MLPs
// and shared experts count the roofline's linear width, the routed
// experts its expert width, everything else (embedding, norms, routers,
// LM head) ElemBytes; under FP8 each linear weight also holds a float32
// scale (per tensor: QKV, output, gate/up, down; per expert for the
// routed experts' stacks), as engine/model quantizes them.
func HeldWeightBytes(mc engine.ModelConfig, sp Split, held float64, dev Device) float64 {
	s, p := rankShape(mc, sp), precisionOf(dev)
	linear, routed := s.layers*s.attn, 0.0
	tensors := 2 * s.layers // attention's QKV and output
	if s.experts == 0 {
		linear += s.layers * s.expert
		tensors += 2 * s.layers
	} else {
		moe := s.layers - s.denseLayers
		linear += s.denseLayers*s.dense + moe*s.shared
		routed = moe * s.experts * s.expert
		tensors += 2*s.denseLayers + 2*moe*s.experts
		if s.shared > 0 {
			tensors += 2 * moe
		}
	}
	b := p.gemm*linear + p.expert*routed + p.other*(held-linear-routed)
	if p.fp8 {
		b += 4 * tensors
	}
	return b
}

func (s shape) work(it engine.IterationRecord, genContext float64, p precision, touched float64) Work {
	tokens := float64(it.CtxTokens + it.GenRequests)
	if tokens == 0 {
		return Work{}
	}
	// Rows that reach the LM head: one per decoding request and at most one
	// per prefill chunk (the chunk that completes its prompt).
	logitRows := float64(it.GenRequests + it.CtxRequests)

	// MLP weights read (all layers) and used per token (one layer).
	mlpWeights, mlpPerToken := s.layers*s.expert, s.expert
	routers := 0.0 // router weights, all layers (in mlpWeights)
	routed := 0.0  // routed experts' weights read, all layers (in mlpWeights)
	if s.experts > 0 {
		moe := s.layers - s.denseLayers
		routers = moe * s.router
		if touched >= 0 && s.expertShare > 0 {
			// A rank's group holds its share of the experts reached, on
			// average over the groups.
			touched *= s.expertShare
		}
		if touched < 0 {
			// Expected distinct experts hit by tokens*k uniform draws.
			touched = moe * s.experts * (1 - math.Pow(1-s.topK/s.experts, tokens))
		}
		routed = touched * s.expert
		mlpWeights = routed + moe*s.router
		mlpPerToken = s.topK*s.expert + s.router
		if s.denseLayers > 0 || s.shared > 0 {
			// Per token over all layers, folded into one layer's worth.
			mlpWeights += s.denseLayers*s.dense + moe*s.shared
			mlpPerToken = (moe*(mlpPerToken+s.shared) + s.denseLayers*s.dense) / s.layers
		}
	}
	w := Work{}
	w.Bytes = p.gemm*(s.layers*s.attn+mlpWeights-routers-routed) + p.expert*routed + p.other*(routers+s.head)
	w.FLOPs = 2*tokens*s.layers*(s.attn+mlpPerToken) + 2*logitRows*s.head
	if p.fp8 {
		w.FP8FLOPs = 2*tokens*s.layers*(s.attn+mlpPerToken) - 2*tokens*routers
	}

	// Attention: a decoding request attends to genContext positions; a
	// prefill chunk of c tokens from position 0 to c/2 on average.
	w.FLOPs += s.attGen * float64(it.GenRequests) * s.seen(genContext)
	if it.CtxRequests > 0 {
		c := float64(it.CtxTokens) / float64(it.CtxRequests)
		w.FLOPs += s.attCtx * float64(it.CtxTokens) * s.seen(c/2)
	}
	w.Bytes += p.kv * s.kvPerToken * (float64(it.GenRequests)*s.seen(genContext) + tokens)
	if s.even > 1 {
		w = Work{w.Bytes / s.even, w.FLOPs / s.even, w.FP8FLOPs / s.even}
	}
	return w
}

// Time is the least time w takes on the device: the longer of moving its
// bytes at the bandwidth ceiling and doing its FLOPs at the arithmetic
// one; memoryBound says which. Zero ceilings give 0.
func (d Device) Time(w Work) (seconds float64, memoryBound bool) {
	if d.PeakBytesPerSec <= 0 || d.PeakFLOPs <= 0 {
		return 0, false
	}
	mem, comp := w.Bytes/d.PeakBytesPerSec, w.FLOPs/d.PeakFLOPs
	if w.FP8FLOPs > 0 && d.PeakFP8FLOPs > 0 {
		comp = (w.FLOPs-w.FP8FLOPs)/d.PeakFLOPs + w.FP8FLOPs/d.PeakFP8FLOPs
	}
	return max(mem, comp), mem >= comp
}

// Floor is the roofline's time floor of a run: every iteration takes at
// least Device.Time of its work, and iterations follow one another, so
// the run takes at least their sum. Summing per iteration (rather than
// taking the whole run's bytes and FLOPs at once) keeps a memory-bound
// decode step from hiding behind a compute-bound prefill.
type Floor struct {
	Seconds float64
	// MemoryBoundSeconds is the part of Seconds from iterations whose
	// bytes, not FLOPs, set their floor.
	MemoryBoundSeconds float64
	Work               Work
	Iterations         int
	// MemoryBoundIterations counts those iterations.
	MemoryBoundIterations int
	// MeasuredSeconds is the iterations' recorded spans summed
	// (IterationRecord.Duration), and MemoryBoundMeasuredSeconds the part
	// of it from the memory-bound ones: against Seconds and
	// MemoryBoundSeconds they say which kind of iteration the time to the
	// floor was lost in (decode steps, mostly memory-bound, or prompt
	// chunks, mostly compute-bound).
	MeasuredSeconds            float64
	MemoryBoundMeasuredSeconds float64
}

// RunFloor sums the floor over iters. touched gives, per iteration index,
// the experts its tokens reached summed over the MoE layers (nil, or an
// iteration missing from it: estimated); genContext is as in
// IterationWork; dev.ElemBytes sizes weights and KV cache.
func RunFloor(mc engine.ModelConfig, iters []engine.IterationRecord, touched map[int]int, genContext float64, dev Device) Floor {
	return RunFloorSplit(mc, Split{}, iters, touched, genContext, dev)
}

// RunFloorSplit is RunFloor on one GPU of split sp: each iteration's
// floor is a rank's share of its work against one GPU's ceilings (the
// ranks run it at once).
func RunFloorSplit(mc engine.ModelConfig, sp Split, iters []engine.IterationRecord, touched map[int]int, genContext float64, dev Device) Floor {
	s, p := rankShape(mc, sp), precisionOf(dev)
	var f Floor
	for _, it := range iters {
		t := -1.0
		if n, ok := touched[it.Index]; ok {
			t = float64(n)
		}
		w := s.work(it, genContext, p, t)
		sec, mem := dev.Time(w)
		f.Seconds += sec
		f.MeasuredSeconds += it.Duration.Seconds()
		if mem {
			f.MemoryBoundSeconds += sec
			f.MemoryBoundIterations++
			f.MemoryBoundMeasuredSeconds += it.Duration.Seconds()
		}
		f.Work = f.Work.Add(w)
		f.Iterations++
	}
	return f
}

// TouchedExperts counts, per iteration index, the experts that received
// at least one token, summed over the MoE layers: the experts whose
// weights the iteration read.
func TouchedExperts(l *engine.ExpertLoad) map[int]int {
	if l == nil || l.Layers == 0 || l.Experts == 0 {
		return nil
	}
	out := make(map[int]int, len(l.Iterations))
	for i, iter := range l.Iterations {
		n := 0
		for layer := range l.Layers {
			for _, c := range l.At(i, layer) {
				if c > 0 {
					n++
				}
			}
		}
		out[iter] = n
	}
	return out
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

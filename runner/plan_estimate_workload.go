package runner

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
)

// workload is what the roofline needs of a cell: the model, the engine's
// limits and the requests' sizes.
type workload struct {
	engine     string
	mc         engine.ModelConfig
	elemBytes  int
	batch      int
	maxTokens  int
	warmup     int
	kvFraction float64
	ownGEMM    bool // gemm_plugin disable on xrun's own engine
	// paging is how the run will hold its KV cache (the zero value: the
	// engine's default switches).
	paging kvPaging
	// formats are how xrun's own engine stores the weights and KV cache
	// (dtype fp8, kv_cache_dtype fp8, moe_weights mxfp4: plan_mxfp4.go);
	// the memory and the roofline count them as engine/profile does.
	formats profile.Formats
	// requests, input and output are the dataset's count and lengths (the
	// mean, or the unif midpoint); maxLen the longest request.
	requests, input, output, maxLen int
	// split is how the GPUs of a cell share a pass's work: a rank's
	// slice of the model on xrun's own engine (tp, ep; share), the work
	// evenly over tp x pp GPUs on an external one.
	split profile.Split
	share engine.RankShare
}

// splitWorkload sets w's split from the cell's tp, ep and pp on engine
// eng. A split the model's shape does not allow on xrun's engine is the
// spec's error (parallelCheck); here it counts as unsplit.
func (w *workload) splitWorkload(eng string, tp, ep, pp int) {
	tp, ep, pp = max(tp, 1), max(ep, 1), max(pp, 1)
	w.split, w.share = profile.Split{}, engine.RankShare{}
	if !builtinEngine(eng) {
		w.split.GPUs = tp * pp
		return
	}
	if s, err := engine.Share(w.mc, tp, ep); err == nil {
		w.split, w.share = profile.Split{TP: tp, EP: ep}, s
	}
}

// kvPaging is what the KV-cache switches the run reads (XRUN_KV_PAGED,
// XRUN_CUDA_KV_PAGED, XRUN_KV_BLOCK) say about paging on xrun's CUDA
// engine: mode "auto" (or ""), "1" or "0"; block positions a block (0: the
// default).
type kvPaging struct {
	mode  string
	block int
}

// pagingFrom reads the KV-cache switches from getenv (nil: the defaults),
// as the engine will.
func pagingFrom(getenv func(string) string) kvPaging {
	if getenv == nil {
		return kvPaging{}
	}
	sw := engine.ParseSwitches(getenv)
	pg := kvPaging{mode: sw.CUDAKVPaged, block: sw.KVBlock}
	if !sw.KVPaged {
		pg.mode = "0"
	}
	return pg
}

// cellWorkload is a plan cell's workload; why says why there is none.
func cellWorkload(c *Cell) (workload, string) {
	p := &c.Params
	w := workload{engine: p.Engine, mc: *c.Model, elemBytes: 2, batch: p.BatchSize, maxTokens: p.MaxNumTokens,
		warmup: p.Warmup, kvFraction: p.KVCacheFreeGPUMemFraction,
		ownGEMM: builtinEngine(p.Engine) && p.GemmPlugin == "disable"}
	w.splitWorkload(p.Engine, p.TP, p.EP, p.PP)
	if builtinEngine(p.Engine) {
		// FP8 is xrun's own engine's (plan_fp8.go); a tool's dtype is its own.
		w.formats = profile.Formats{FP8: p.Dtype == "fp8" && c.na&(1<<pDtype) == 0,
			KVFP8:        p.KVCacheDtype == "fp8" && c.na&(1<<pKVCacheDtype) == 0,
			MXFP4Experts: cellMXFP4(p, c.Model)}
	}
	if p.Dtype == "float32" {
		w.elemBytes = 4
	}
	if w.kvFraction == 0 || c.na&(1<<pKVFraction) != 0 {
		w.kvFraction = 0.9
	}
	d := &p.Dataset
	switch d.Kind() {
	case GenNorm:
		w.requests, w.input, w.output = d.NumRequests, d.InputMean, d.OutputMean
		w.maxLen = normLongest(d.InputMean, d.InputStdev, d.OutputMean, d.OutputStdev, c.Model.MaxPos)
	case GenUnif:
		w.requests, w.input, w.output = d.NumRequests, (d.InputMin+d.InputMax)/2, (d.OutputMin+d.OutputMax)/2
		w.maxLen = d.InputMax + d.OutputMax
	default:
		return w, "with a dataset file: its requests' lengths are read at run time"
	}
	return w, ""
}

// flatWorkload is the workload of a measured cell from its parameters in
// results.json; ok is false when they do not say enough (a model
// directory, a dataset file).
func flatWorkload(p results.Params) (workload, bool) {
	str := func(k string) string {
		if v, ok := p[k].(string); ok {
			return v
		}
		if d, ok := params[paramIndex[k]].def.(string); ok {
			return d
		}
		return ""
	}
	num := func(k string) float64 {
		switch v := p[k].(type) {
		case int:
			return float64(v)
		case int64:
			return float64(v)
		case float64:
			return v
		}
		switch d := params[paramIndex[k]].def.(type) {
		case int:
			return float64(d)
		case float64:
			return d
		}
		return 0
	}
	mc, ok := engine.ZooModel(str("model"))
	if !ok {
		return workload{}, false
	}
	// A cell of its model's first layers (results.json has layers only then).
	if n := int(num("layers")); n > 0 {
		var err error
		if mc, err = engine.WithLayers(mc, n); err != nil {
			return workload{}, false
		}
	}
	eng := str("engine")
	w := workload{engine: eng, mc: mc, elemBytes: 2, batch: int(num("batch_size")), maxTokens: int(num("max_num_tokens")),
		warmup: int(num("warmup")), kvFraction: num("kv_cache_free_gpu_mem_fraction"),
		ownGEMM: builtinEngine(eng) && str("gemm_plugin") == "disable"}
	w.splitWorkload(eng, int(num("tp")), int(num("ep")), int(num("pp")))
	if str("dtype") == "float32" {
		w.elemBytes = 4
	}
	if builtinEngine(eng) {
		// A measured cell's formats, as its own roofline counted them
		// (cellRoofline): its times scale by a roofline of the same bytes.
		w.formats = flatFormats(p, mc)
	}
	n := int(num("dataset.num_requests"))
	switch str("dataset.generator") {
	case GenNorm:
		in, out := int(num("dataset.input_mean")), int(num("dataset.output_mean"))
		w.requests, w.input, w.output = n, in, out
		w.maxLen = normLongest(in, int(num("dataset.input_stdev")), out, int(num("dataset.output_stdev")), mc.MaxPos)
	case GenUnif:
		inLo, inHi, outLo, outHi := int(num("dataset.input_min")), int(num("dataset.input_max")), int(num("dataset.output_min")), int(num("dataset.output_max"))
		w.requests, w.input, w.output, w.maxLen = n, (inLo+inHi)/2, (outLo+outHi)/2, inHi+outHi
	default:
		return workload{}, false
	}
	return w, w.requests > 0 && w.input > 0 && w.output > 0 && w.batch > 0 && w.maxTokens > 0
}

// normLongest is the longest request token-norm-dist is taken to draw:
// the means, plus tailStdevs stdevs when they vary (as the plan's length
// check looks), and never beyond the model's positions (the engine
// refuses a longer request).
func normLongest(in, inSD, out, outSD, maxPos int) int {
	n := in + out + tailStdevs*(inSD+outSD)
	if maxPos > 0 {
		n = min(n, maxPos)
	}
	return n
}

// derate is the factor on the efficiency for the workload's GEMM path, at
// a batch of that many requests in flight.
func (w workload) derate(batch int) float64 {
	if w.ownGEMM && !w.mc.MoE() && batch >= ownGEMMMinBatch {
		return ownGEMMDerate
	}
	return 1
}

// simulation is a cell's roofline: the floor, in seconds, of one timed
// pass and of its warm-up, on the GPU simulated.
type simulation struct {
	pass, warmup float64
	// iters and warmIters are the passes' engine iterations (the
	// warm-up's come first: a profile window counts from them).
	iters, warmIters int
	// comm and warmComm are the seconds of a split cell's collectives
	// (collectiveTime), apart: they are not the roofline's, and no
	// efficiency scales them.
	comm, warmComm float64
	// shapes is the roofline floor of the engine's warming of its decode
	// batch sizes (engine.warmShapes), once a cell: a prefill of one
	// token and 3 decodes at every CUDA graph bucket up to slots.
	shapes float64
	// slots are the requests in flight at most; the warm-up has
	// min(slots, warmup) of them.
	slots, warm int
}

func (s simulation) warmBatch() int { return min(s.slots, s.warm) }

// simulate runs the workload's schedule on dev, which has memory bytes;
// why says why it cannot run there.
func (w workload) simulate(dev profile.Device, memory float64) (simulation, string) {
	// As the engine (and TensorRT-LLM's capacity scheduler): no more
	// requests in flight than the KV cache holds whole (see plan_memory.go).
	m := w.memory(memory)
	switch {
	case m.Weights+m.Workspace >= memory:
		return simulation{}, fmt.Sprintf("too large for the GPU: %s's weights take %.1f GiB, it has %.1f GiB (and workspaces take more)",
			w.mc.Name, gib(m.Weights), gib(memory))
	case !m.Fits:
		return simulation{}, fmt.Sprintf("too large for the GPU: its KV cache cannot hold one request of %d tokens beside %s's weights", w.maxLen, w.mc.Name)
	}
	s := simulation{slots: m.InFlight, warm: w.warmup}
	// Each iteration's floor is one GPU's share of its work (the GPUs of
	// a split cell run it at once); communication is left out (see
	// splitNote).
	s.pass, s.iters, s.comm = w.serve(dev, w.requests, s.slots)
	s.warmup, s.warmIters, s.warmComm = w.serve(dev, w.warmup, s.slots)
	if builtinEngine(w.engine) {
		s.shapes = w.warmShapes(dev, s.slots)
	}
	return s, ""
}

// warmShapes is the floor of the engine's warming of decode batch sizes
// (engine/warm.go) on the CUDA backend's graph buckets (powers of two to
// 16, then multiples of 16) up to slots, collectives included.
func (w workload) warmShapes(dev profile.Device, slots int) float64 {
	dev.ElemBytes = w.elemBytes
	dev = dev.WithFormats(w.formats)
	iter := func(it engine.IterationRecord, genContext float64) float64 {
		sec, _ := dev.Time(profile.RankIterationWorkOn(w.mc, w.split, it, genContext, dev))
		return sec + w.collectiveTime(it)
	}
	t := 0.0
	for _, b := range cuda.GraphBuckets(slots) {
		t += iter(engine.IterationRecord{CtxTokens: b, CtxRequests: b}, 0) + 3*iter(engine.IterationRecord{GenRequests: b}, 3)
	}
	return t
}

// windowShare is how much of a pass (its warm-up included) runs by the
// end of the last span (xrun's own engine stops its profiled pass there).
func (s simulation) windowShare(spans []engine.Span) float64 {
	n := s.iters + s.warmIters
	if len(spans) == 0 || n <= 0 {
		return 1
	}
	return min(1, float64(spans[len(spans)-1].Last+1)/float64(n))
}

// serve is the roofline floor of n requests served slots at a time, in
// waves: with every request of the same lengths, those admitted together
// prefill together (in chunks of max_num_tokens), then decode together
// and leave together; its iterations, and the seconds of its collectives.
func (w workload) serve(dev profile.Device, n, slots int) (float64, int, float64) {
	if n <= 0 || slots <= 0 {
		return 0, 0, 0
	}
	t, iters, comm := w.wave(dev, slots)
	waves := float64(n / slots)
	t, iters, comm = waves*t, n/slots*iters, waves*comm
	if r := n % slots; r > 0 {
		rt, ri, rc := w.wave(dev, r)
		t, iters, comm = t+rt, iters+ri, comm+rc
	}
	return t, iters, comm
}

// wave is the floor of k requests admitted together, its iterations, and
// the seconds of its collectives.
func (w workload) wave(dev profile.Device, k int) (float64, int, float64) {
	dev.ElemBytes = w.elemBytes
	dev = dev.WithFormats(w.formats)
	comm := 0.0
	iter := func(it engine.IterationRecord, genContext float64) float64 {
		sec, _ := dev.Time(profile.RankIterationWorkOn(w.mc, w.split, it, genContext, dev))
		comm += w.collectiveTime(it)
		return sec
	}
	chunk := func(tokens int) engine.IterationRecord {
		reqs := min(max((tokens+w.input-1)/w.input, 1), k)
		return engine.IterationRecord{CtxTokens: tokens, CtxRequests: reqs}
	}
	prompt := k * w.input
	full := prompt / w.maxTokens
	t := float64(full) * iter(chunk(w.maxTokens), 0)
	comm *= float64(full)
	n := full
	if r := prompt % w.maxTokens; r > 0 {
		t += iter(chunk(r), 0)
		n++
	}
	// The prefill gives each request its first token; each decode
	// iteration one more, over a cache of the prompt and half the output
	// on average.
	if w.output > 1 {
		before := comm
		t += float64(w.output-1) * iter(engine.IterationRecord{GenRequests: k}, float64(w.input)+float64(w.output)/2)
		comm = before + float64(w.output-1)*(comm-before)
		n += w.output - 1
	}
	return t, n, comm
}

// The collectives' cost on xrun's own engine split over GPUs, modelled as
// a latency per call plus its bytes over a bus bandwidth (a ring moves
// 2(n-1)/n of an all-reduce's bytes and (n-1)/n of an all-gather's). The
// latency is from one measurement: Llama-3.1-8B at tp 2, batch 64, on two
// H100s over NVLink (NCCL 2.28) spent 450 us an iteration in 65
// collectives (64 all-reduces of 512 KiB and the LM head's all-gather),
// about 7 us a call, of which about 1.5 at the bandwidth taken here. GPUs
// linked by PCIe alone would be slower.
const (
	collectiveLatency = 5.5e-6 // seconds a call
	collectiveBusBW   = 360e9  // bytes a second
)

// collectiveTime is the seconds of one iteration's collectives on a split
// cell of xrun's own engine (0 unsplit or on an external engine): an
// all-reduce of the iteration's rows after every layer's attention (tp)
// and MLP (tp; the experts' over the whole world where they are split),
// and the LM head's all-gather of the sampled rows' logits (tp).
func (w workload) collectiveTime(it engine.IterationRecord) float64 {
	tp, ep := max(w.split.TP, 1), max(w.split.EP, 1)
	world := max(tp, ep)
	rows := float64(it.CtxTokens + it.GenRequests)
	if world <= 1 || rows == 0 {
		return 0
	}
	call := func(n int, bytes, ring float64) float64 {
		return collectiveLatency + ring*float64(n-1)/float64(n)*bytes/collectiveBusBW
	}
	hidden := rows * float64(w.mc.Hidden) * float64(w.elemBytes)
	layers, dense := w.mc.Layers, w.mc.Layers
	if w.mc.MoE() {
		dense = min(w.mc.DenseLayers, layers)
	}
	t := 0.0
	if tp > 1 {
		t += float64(layers+dense) * call(tp, hidden, 2)
		sampled := float64(it.GenRequests + it.CtxRequests)
		t += call(tp, sampled*float64(w.mc.Vocab)*4, 1)
	}
	if moe := layers - dense; moe > 0 {
		t += float64(moe) * call(world, hidden, 2)
	}
	return t
}

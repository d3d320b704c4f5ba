package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// Engine serves datasets on one model, loaded once.
type Engine interface {
	// Run serves reqs once, the way trtllm-bench throughput does offline:
	// the warm-up requests first, untimed, then every request submitted at
	// once. It returns when all are done, ctx is cancelled (promptly, at
	// the next iteration; the error wraps ctx.Err()), or, with
	// RunOptions.StopAfterWindow, after the last profiled iteration.
	Run(ctx context.Context, reqs []datasets.Request, opts RunOptions) (*Result, error)
	// Model is the model's shape.
	Model() ModelConfig
	// Backend names the backend and its GEMM path, e.g.
	// "cpu/cpu_gemm_blocked_avx2_6x16".
	Backend() string
	// Close frees the backend.
	Close() error
}

// RunOptions configure one pass.
type RunOptions struct {
	// Profile opens the configured profile window (all iterations when
	// the window is none): per-op timings go to Result.Ops. Profiled passes
	// are separate from timed ones; their throughput is not reported.
	Profile bool
	// StopAfterWindow ends a profiled pass after the window's last
	// iteration; the Result is then Partial and has no Metrics.
	StopAfterWindow bool
	// Hooks observe iterations and windows (e.g. to sample GPU telemetry).
	Hooks Hooks
}

// Hooks are optional callbacks at iteration boundaries, called on the
// goroutine running the engine.
type Hooks struct {
	IterationStart func(index int, name string)
	IterationEnd   func(rec IterationRecord)
	WindowStart    func(iteration int)
	WindowStop     func(iteration int)
}

// RequestRecord is one timed request. Times are since the run started
// (the warm-up included); Start is when it was submitted (all at once,
// after the warm-up; under a request_rate, its scheduled arrival, as a
// user's clock starts then), FirstToken when its first generated token
// existed, End when its last did.
type RequestRecord struct {
	TaskID int           `json:"task_id"`
	Start  time.Duration `json:"start_ns"`
	// Sent is when the request left the load generator, on Start's
	// clock; zero means at Start. A client (engine openai) that held an
	// arrived request back, waiting for a free slot of its in-flight
	// bound, sends it after its Start: the latencies count that wait, as
	// the built-in engine's queue does, and the achieved rate is of the
	// sends (ServingMetrics).
	Sent         time.Duration `json:"sent_ns,omitempty"`
	FirstToken   time.Duration `json:"first_token_ns"`
	End          time.Duration `json:"end_ns"`
	InputTokens  int           `json:"input_tokens"`
	OutputTokens int           `json:"output_tokens"`
	OutputIDs    []int32       `json:"output_ids"`
	// TokenTimes are when each output token reached the host (or, from a
	// server, the client), on the same clock as Start: recorded under
	// load (Config.Load online) and by streaming clients, for the
	// inter-token latency; nil offline.
	TokenTimes []time.Duration `json:"token_times_ns,omitempty"`
}

// IterationRecord is one engine iteration.
type IterationRecord struct {
	Index       int           `json:"iteration"`
	CtxRequests int           `json:"ctx_requests"` // requests with a prefill chunk
	CtxTokens   int           `json:"ctx_tokens"`
	GenRequests int           `json:"gen_requests"` // requests decoding one token
	Start       time.Duration `json:"start_ns"`
	Duration    time.Duration `json:"duration_ns"`
	Warmup      bool          `json:"warmup"`
	Profiled    bool          `json:"profiled"`
}

// Name is the iteration's profiler range name.
func (r IterationRecord) Name() string {
	return fmt.Sprintf("iteration %d: %d ctx reqs, %d ctx tokens, %d gen reqs", r.Index, r.CtxRequests, r.CtxTokens, r.GenRequests)
}

// OpRecord is one timed operation of a profile window.
type OpRecord = model.OpRecord

// Result is what one Run produced.
type Result struct {
	Backend string
	// Requests are the timed requests, in dataset order.
	Requests []RequestRecord
	// Iterations are all iterations, warm-up ones flagged.
	Iterations []IterationRecord
	// Metrics has MetricKeys, MaxInFlightKey, KVBlocksKey, PeakInFlightKey
	// and, on a backend that counts them, PlansBuiltKey and PlanMsKey (nil
	// for a Partial result).
	Metrics map[string]float64
	// ExpertLoad is set for MoE models.
	ExpertLoad *ExpertLoad
	// Ops are the per-operation timings of profiled iterations.
	Ops []OpRecord
	// Windows are the profiled spans (when profiled).
	Windows []Span
	// Partial marks a pass stopped after its profile window.
	Partial bool
	// MaxInFlight is the most requests the run could hold at once:
	// batch_size, or fewer when the KV cache could not hold that many.
	MaxInFlight int

	// What an external engine's profiled pass left (engine/driver): the
	// window's kernel summary as a kernels.csv file in the cell's
	// directory (Ops are empty then), other files it left there (an Nsight
	// Systems report, a trace), by name, and caveats for the diagnosis.
	KernelSummary string
	Files         []string
	Notes         []string
}

// backends builds model backends by name. "cpu" is built in; others (the
// CUDA backend) are added with RegisterBackend by the program that links
// them, so this package does not depend on them.
var (
	backendsMu sync.Mutex
	backends   = map[string]func(model.BackendOptions) (model.Backend, error){
		"cpu": func(o model.BackendOptions) (model.Backend, error) { return cpu.New(o) },
	}
)

// RegisterBackend makes a backend available to New under name.
func RegisterBackend(name string, newBackend func(model.BackendOptions) (model.Backend, error)) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = newBackend
}

type engine struct {
	mu      sync.Mutex
	cfg     Config
	mc      ModelConfig
	be      model.Backend
	m       rankModel // a *model.Model, or the ranks of a split one
	windows []Span
	sw      model.Switches
	// warmed is the capacity whose decode batch sizes were last warmed
	// (warmShapes).
	warmed model.Capacity
}

// New loads (or creates) the model's weights on the configured backend.
func New(ctx context.Context, cfg Config) (Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	routing, err := ParseRoutingMode(cfg.RoutingMode)
	if err != nil {
		return nil, err
	}
	windows, err := ParseProfileWindow(cfg.ProfileWindow)
	if err != nil {
		return nil, err
	}
	mc, err := LookupModel(cfg.Model)
	if err != nil {
		return nil, err
	}
	if mc, err = WithLayers(mc, cfg.Layers); err != nil {
		return nil, err
	}
	backendsMu.Lock()
	newBackend, ok := backends[cfg.Backend]
	backendsMu.Unlock()
	if !ok {
		return nil, &ParamError{Field: "engine", Value: cfg.Backend, Msg: "cpu or cuda (this program has no " + cfg.Backend + " backend)"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var src *safetensors.Dir
	var quant *model.Quant
	if mc.Path != "" {
		// GPT-OSS's MXFP4 experts are dequantized at load (hfconfig_gptoss.go).
		if !mc.MXFP4 {
			if quant, err = LoadQuantConfig(mc.Path); err != nil {
				return nil, err
			}
		}
		if src, err = safetensors.OpenDir(mc.Path); err != nil {
			return nil, err
		}
		defer src.Close()
	}
	fp8, kvFP8 := cfg.Dtype == "fp8", cfg.KVCacheDtype == "fp8" || (cfg.KVCacheDtype == "" || cfg.KVCacheDtype == "auto") && quant != nil && quant.KVCache
	if (fp8 || kvFP8) && mc.MLA() {
		field := map[bool]string{true: "dtype", false: "kv_cache_dtype"}[fp8]
		return nil, &ParamError{Field: field, Value: "fp8", Msg: fmt.Sprintf("model %s is an MLA model (DeepSeek-V3), whose block-scaled FP8 is not supported; use float16 or bfloat16", mc.Name)}
	}
	mxfp4, err := ResolveMoEWeights(cfg.Backend, mc, cfg.Dtype, cfg.MoEWeights)
	if err != nil {
		return nil, err
	}
	if mxfp4 && WorldSize(cfg.TP, cfg.EP) > 1 {
		// A split's expert slices are not MXFP4 yet: auto falls back.
		if cfg.MoEWeights == "mxfp4" {
			return nil, &ParamError{Field: "moe_weights", Value: "mxfp4", Msg: "MXFP4 experts on a tp or ep split are not supported yet; expected auto or bf16"}
		}
		mxfp4 = false
	}
	// What ran, for the cell's record (ExpertsReporter).
	cfg.MoEWeights = "bf16"
	if mxfp4 {
		cfg.MoEWeights = "mxfp4"
	}
	dtype := cfg.Dtype
	if fp8 {
		// TensorRT-LLM's FP8 recipe: what is not an FP8 GEMM runs in bf16.
		dtype = "bfloat16"
	}
	// The switches are read once, here, and passed down from here on.
	var sw model.Switches
	if cfg.Switches != nil {
		sw = *cfg.Switches
	} else {
		sw = ParseSwitches(os.Getenv)
	}
	bsw := sw
	bopt := model.BackendOptions{Gemm: cfg.GemmPlugin, Dtype: dtype, Threads: cfg.Threads, Device: cfg.Device,
		KVCacheBytes: cfg.KVCacheBytes, KVCacheFraction: cfg.KVCacheFreeGPUMemFraction, Switches: &bsw}
	acts, _ := fp8Activations(cfg.FP8Activations)
	opt := model.Options{Seed: uint64(cfg.Seed), Routing: routing, MLAPlain: !sw.MLAAbsorb, FP8: fp8, KVFP8: kvFP8,
		FP8Activations: acts, Quant: quant, MXFP4: mxfp4}
	if src != nil {
		opt.Weights = src
	}
	if WorldSize(cfg.TP, cfg.EP) > 1 {
		// Tensor / expert parallelism: a backend and a model slice per
		// rank (parallel.go).
		return newSplitEngine(ctx, cfg, mc, newBackend, bopt, opt, windows, sw)
	}
	be, err := newBackend(bopt)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	m, err := model.New(be, mc, opt)
	if err != nil {
		be.Close()
		if errors.Is(err, model.ErrNoMLA) {
			return nil, noMLAError(cfg.Backend, mc)
		}
		if errors.Is(err, model.ErrNoOSS) {
			return nil, &ParamError{Field: "engine", Value: cfg.Backend, Msg: fmt.Sprintf("model %s has GPT-OSS's attention sinks, sliding window, biases and clamped SwiGLU, which the %s backend cannot run; run it on engine cpu", mc.Name, be.Name())}
		}
		if errors.Is(err, model.ErrNoMXFP4) {
			return nil, &ParamError{Field: "moe_weights", Value: "mxfp4", Msg: fmt.Sprintf("the %s backend (%s) has no MXFP4 expert kernels; expected auto or bf16", cfg.Backend, be.Name())}
		}
		if errors.Is(err, model.ErrNoFP8) {
			return nil, noFP8Error(cfg, be, mc, kvFP8, err)
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		be.Close()
		return nil, err
	}
	return &engine{cfg: cfg, mc: mc, be: be, m: m, windows: windows, sw: sw}, nil
}

func (e *engine) Model() ModelConfig { return e.mc }
func (e *engine) Backend() string    { return e.be.Name() }
func (e *engine) Close() error       { return e.be.Close() }

// errStopped ends a pass after its profile window.
var errStopped = errors.New("stopped after the profile window")

// Run serves reqs once; see Engine.
func (e *engine) Run(ctx context.Context, reqs []datasets.Request, opts RunOptions) (*Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(reqs) == 0 {
		return nil, &ParamError{Field: "dataset", Value: "", Msg: "at least one request"}
	}
	maxLen, prompt := 0, 0
	for i, r := range reqs {
		if len(r.InputIDs) == 0 || r.OutputTokens < 1 {
			return nil, &datasets.Error{File: "dataset", Msg: fmt.Sprintf("request %d (task_id %d): needs at least one input token and one output token (has %d and %d)", i, r.TaskID, len(r.InputIDs), r.OutputTokens)}
		}
		if n := len(r.InputIDs) + r.OutputTokens; n > e.mc.MaxPos {
			return nil, &datasets.Error{File: "dataset", Msg: fmt.Sprintf("request %d (task_id %d): %d input + %d output tokens exceed the model's %d positions", i, r.TaskID, len(r.InputIDs), r.OutputTokens, e.mc.MaxPos)}
		}
		maxLen = max(maxLen, len(r.InputIDs)+r.OutputTokens)
		prompt += len(r.InputIDs)
	}
	if err := datasets.CheckVocab(reqs, e.mc.Vocab); err != nil {
		return nil, err
	}
	// Like TensorRT-LLM's capacity scheduler, admit no more requests at once
	// than the KV cache can hold whole: fixed slots of the longest, or,
	// paged, the blocks each request's length needs (kvblocks.go). The
	// activations come first, so that the cache is sized by the memory
	// they leave.
	if err := e.reserveActivations(min(e.cfg.MaxNumTokens, prompt+min(e.cfg.BatchSize, len(reqs))), min(e.cfg.BatchSize, len(reqs))); err != nil {
		return nil, err
	}
	fit := e.cfg.BatchSize
	pool, blockSize := e.kvPaging(reqs, maxLen)
	switch kb, ok := e.be.(model.KVBudget); {
	case pool != nil:
		fit = pool.blocks
	case ok:
		fit = kb.MaxKVSlots(e.m.KVConfig(0, maxLen))
	}
	if fit < 1 || pool != nil && pool.blocks < BlocksFor(maxLen, 0, blockSize) {
		kc := e.m.KVConfig(0, maxLen)
		per := kc.KVBytesPerToken(kc.ElemBytes(kvComputeBytes(e.cfg.Backend))) * int64(maxLen)
		return nil, &ParamError{Field: "dataset", Value: fmt.Sprint(maxLen, " tokens"),
			Msg: fmt.Sprintf("a request this long needs about %d MiB of KV cache, more than the %s backend's budget", per>>20, e.cfg.Backend)}
	}
	slots := min(e.cfg.BatchSize, len(reqs), fit)
	if pool != nil {
		// Never more blocks than the requests in flight can hold at once.
		pool.blocks = min(pool.blocks, slots*BlocksFor(maxLen, 0, blockSize))
	}
	capa := model.Capacity{
		MaxTokens:    min(e.cfg.MaxNumTokens, prompt+slots),
		MaxLogitRows: slots,
		Slots:        slots,
		MaxLen:       maxLen,
	}
	if pool != nil {
		capa.BlockSize, capa.Blocks = blockSize, pool.blocks
	}
	capa.MaxLogitRows = min(capa.MaxLogitRows, capa.MaxTokens)
	if err := e.m.Reserve(capa); err != nil {
		return nil, e.reserveError(err)
	}
	if err := e.warmShapes(ctx, capa, pool); err != nil {
		return nil, err
	}
	e.m.ResetRouting()
	st := &runState{e: e, opts: opts, t0: time.Now(), batch: &model.Batch{}, next: make([]int32, capa.MaxLogitRows), slots: slots, kv: pool}
	if e.mc.MoE() {
		st.load = &ExpertLoad{Layers: e.mc.Layers, Experts: e.mc.Experts, DenseLayers: min(e.mc.DenseLayers, e.mc.Layers)}
		st.counts = make([]int32, e.mc.Layers*e.mc.Experts)
		// Discard counts a failed earlier run may have left.
		if err := e.m.ExpertCounts(st.counts); err != nil {
			return nil, err
		}
	}
	if opts.Profile {
		st.windows = e.windows
		if len(st.windows) == 0 {
			st.windows = []Span{{0, int(^uint(0) >> 1)}}
		}
		e.be.StartProfile(st.t0)
	}

	res := &Result{Backend: e.be.Name(), MaxInFlight: slots}
	err := st.serve(ctx, warmupRequests(reqs, e.cfg.Warmup, e.cfg.Seed), true)
	pc, counts := e.be.(model.PlanCounter)
	var plans0 int
	var spent0 time.Duration
	if counts {
		plans0, spent0 = pc.GEMMPlans()
	}
	if err == nil {
		st.records = make([]RequestRecord, len(reqs))
		err = st.serve(ctx, reqs, false)
	}
	st.closeWindow()
	if opts.Profile {
		res.Ops = e.be.Ops()
		res.Windows = e.windows
	}
	res.Iterations = st.iters
	if st.load != nil {
		st.load.summarise()
		res.ExpertLoad = st.load
	}
	switch {
	case errors.Is(err, errStopped):
		res.Requests, res.Partial = st.finished(), true
		return res, nil
	case err != nil:
		return nil, err
	}
	res.Requests = st.records
	res.Metrics = ComputeMetrics(res.Requests, e.cfg.NumGPUs)
	res.Metrics[MaxInFlightKey] = float64(slots)
	res.Metrics[KVBlocksKey] = float64(capa.Blocks)
	res.Metrics[PeakInFlightKey] = float64(peakInFlight(st.iters))
	if counts {
		plans, spent := pc.GEMMPlans()
		res.Metrics[PlansBuiltKey] = float64(plans - plans0)
		res.Metrics[PlanMsKey] = float64(spent-spent0) / float64(time.Millisecond)
	}
	return res, nil
}

// reserveActivations allocates the activations of iterations of up to
// tokens tokens and logit rows (no more than the tokens), before the KV
// cache is sized: kv_cache_free_gpu_mem_fraction is of the memory free
// after the weights and the runtime buffers, as in TensorRT-LLM, and the
// plan's memory check counts them so. The cache keeps its size.
func (e *engine) reserveActivations(tokens, rows int) error {
	c := e.m.Capacity()
	c.MaxTokens, c.MaxLogitRows = max(c.MaxTokens, tokens), max(c.MaxLogitRows, min(rows, tokens))
	if err := e.m.Reserve(c); err != nil {
		return e.reserveError(err)
	}
	return nil
}

// PlansBuiltKey and PlanMsKey are the GEMM plans a timed pass built (the
// backend's model.PlanCounter: shapes it met for the first time there,
// e.g. a new mix of prompts and decodes) and the host time they took,
// which the pass's timings include.
const (
	PlansBuiltKey = "gemm_plans_built"
	PlanMsKey     = "gemm_plan_ms"
)

// MaxInFlightKey is Result.MaxInFlight among a pass's metrics: the most
// requests it could hold at once (batch_size, or what the KV cache held).
const MaxInFlightKey = "max_in_flight"

// KVBlocksKey is the paged KV cache's blocks among a pass's metrics (of
// XRUN_KV_BLOCK positions); 0 where it kept a fixed slot per request.
const KVBlocksKey = "kv_cache_blocks"

// PeakInFlightKey is the most requests one timed iteration of a pass
// served (prefill chunks and decodes): what max_in_flight allowed and the
// cache held in fact, which a paged cache decides as requests come and go.
const PeakInFlightKey = "peak_in_flight"

// peakInFlight is the most requests one timed iteration of its served.
func peakInFlight(its []IterationRecord) int {
	n := 0
	for _, it := range its {
		if !it.Warmup {
			n = max(n, it.CtxRequests+it.GenRequests)
		}
	}
	return n
}

// warmupRequests picks n requests like trtllm-bench's warm-up (random
// choice with replacement, shuffled), seeded so runs repeat.
func warmupRequests(reqs []datasets.Request, n, seed int) []datasets.Request {
	if n <= 0 {
		return nil
	}
	rng := newRand(uint64(seed) ^ 0x7761726d7570) // "warmup"
	out := make([]datasets.Request, n)
	for i := range out {
		out[i] = reqs[rng.IntN(len(reqs))]
	}
	return out
}

// kvPaging is the paged cache's pool for a run whose longest request has
// maxLen tokens, sized by the backend's budget (model.Pager), and its
// block size; nil where the cache keeps fixed slots (XRUN_KV_PAGED=0, a
// backend without paging, an MLA model, or a backend that pages only
// where it pays and here it does not: pagingPays).
func (e *engine) kvPaging(reqs []datasets.Request, maxLen int) (*kvPool, int) {
	if !e.sw.KVPaged || !e.m.Pageable() {
		return nil, 0
	}
	size := e.sw.KVBlock
	if size <= 0 {
		size = Switches.KVBlock.Int(func(string) string { return "" })
	}
	kc := e.m.KVConfig(0, maxLen)
	kc.BlockSize = size
	blocks := e.be.(model.Pager).MaxKVBlocks(kc)
	if pw, ok := e.be.(model.PagesWhenBound); ok && pw.PagesWhenBound() && !e.pagingPays(reqs, maxLen, blocks, size) {
		return nil, 0
	}
	return newKVPool(blocks, size), size
}

// pagingPays says whether paging reqs in blocks blocks of size positions
// pays against fixed slots of maxLen positions (model.KVBudget), counting
// every request at the dataset's mean length in blocks (PagingPays).
func (e *engine) pagingPays(reqs []datasets.Request, maxLen, blocks, size int) bool {
	kb, ok := e.be.(model.KVBudget)
	if !ok {
		return true
	}
	var need int64
	for i := range reqs {
		need += int64(BlocksFor(len(reqs[i].InputIDs), reqs[i].OutputTokens, size))
	}
	paged := int64(blocks) * int64(len(reqs)) / max(need, 1)
	return PagingPays(min(e.cfg.BatchSize, len(reqs)), kb.MaxKVSlots(e.m.KVConfig(0, maxLen)), int(min(paged, 1<<30)))
}

// PagingPays is the rule by which a backend that pages only where it pays
// (model.PagesWhenBound) is paged, shared with xrun plan's estimate: a run
// that can take want requests at once, of which fixed slots of the longest
// request hold fixed and the paged cache about paged, is paged where paged
// is at least 5 % more than fixed (at most want). Where fixed slots hold
// every request the run can take paging cannot admit more; where the
// lengths do not vary it admits about as many (a block's rounding can
// make it fewer). The margin is what the paged attention costs where both
// hold the batch: 1.1 % of output throughput on an H100
// (bench/specs/paged-quick.yaml's 128/128 row, Llama-3.1-8B FP8, batch
// 2048), which a few more requests in flight do not win back.
func PagingPays(want, fixed, paged int) bool {
	return fixed < want && int64(min(paged, want))*20 >= int64(fixed)*21
}

// noFP8Error is the refusal of FP8 (dtype fp8 or kv_cache_dtype fp8) on a
// backend without it, err model.New's: what the backend lacks decides
// which parameter is blamed. The CUDA backend has FP8 GEMMs, not for all
// weights (a checkpoint's FP8 experts with a static input scale), and no
// FP8 KV cache.
func noFP8Error(cfg Config, be model.Backend, mc ModelConfig, kv bool, err error) error {
	_, gemms := be.(model.FP8GEMMs)
	_, kvOK := be.(model.FP8KV)
	field, what := "dtype", "FP8 GEMMs"
	if kv && !kvOK {
		field, what = "kv_cache_dtype", "FP8 KV cache"
	}
	msg := fmt.Sprintf("%s fp8 needs the %s backend's %s, which it does not have (%s)", field, cfg.Backend, what, be.Name())
	switch {
	case field == "dtype" && gemms && errors.Is(err, model.ErrNoFP8Calibration):
		acts := cfg.FP8Activations
		if acts == "" {
			acts = "auto"
		}
		return &ParamError{Field: "fp8_activations", Value: acts, Msg: fmt.Sprintf("fp8_activations %s gives model %s static FP8 input scales calibrated at load, which the %s backend (%s) cannot calibrate; expected dynamic", acts, mc.Name, cfg.Backend, be.Name())}
	case field == "dtype" && gemms:
		// It has FP8 GEMMs, not for something of this model: err says what.
		msg = fmt.Sprintf("dtype fp8 on the %s backend cannot run all of model %s (%v); run it in bfloat16", cfg.Backend, mc.Name, err)
	}
	return &ParamError{Field: field, Value: "fp8", Msg: msg}
}

// reserveError is Reserve's err, where the backend refused the KV cache's
// FP8 (a cache it has no attention kernels for: model.FP8KV backends check
// when the cache is made), as the spec error naming kv_cache_dtype that
// New gives for what it refuses.
func (e *engine) reserveError(err error) error {
	if !errors.Is(err, model.ErrNoFP8) {
		return err
	}
	return &ParamError{Field: "kv_cache_dtype", Value: "fp8", Msg: fmt.Sprintf("kv_cache_dtype fp8 on the %s backend (%s) cannot run model %s (%v); expected auto", e.cfg.Backend, e.be.Name(), e.mc.Name, err)}
}

// kvComputeBytes is the width of a KV cache element in the compute type
// of backend: float32 on the CPU, fp16/bf16 on a GPU (float32 is refused
// there).
func kvComputeBytes(backend string) int {
	if backend == "cpu" {
		return 4
	}
	return 2
}

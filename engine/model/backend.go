package model

import (
	"errors"
	"fmt"
	"time"
)

// Tensor is an opaque handle to memory a Backend owns (host memory on the
// CPU, device memory on CUDA). The model never reads or writes through it;
// it only passes handles back to the backend that made them.
//
// Every tensor is row-major. Activations are allocated once with room for
// the largest iteration (MaxTokens rows) and ops take the number of valid
// rows, so addresses never change between iterations (what CUDA graphs
// need).
type Tensor interface {
	Shape() []int
}

// DType is an activation or index buffer's element type. Backends choose
// the storage of Float (float32 on the CPU, fp16/bf16 on CUDA).
type DType int

const (
	Float DType = iota // the backend's compute type
	Int32
)

// WeightKind tells a backend how a weight will be used, so it can store it
// in the layout that op wants (the CPU backend packs GEMM operands into
// panels; a CUDA backend may keep tables in fp32).
type WeightKind int

const (
	// Vector is a [n] weight: norm scales.
	Vector WeightKind = iota
	// Table is a [rows, cols] weight read by row: the embedding, the RoPE
	// cos/sin table.
	Table
	// Matrix is an [n, k] right operand of MatMul: y = x · Wᵀ, the layout
	// of a Hugging Face nn.Linear weight.
	Matrix
	// Experts is an [experts, n, k] stack of Matrix weights used by MoE.
	Experts
	// HeadStack is an [heads, n, k] stack of per-head matrices read both
	// as y = x·Wᵀ and as y = x·W: MLA's kv_b_proj, [heads, qk_nope + v,
	// kv_lora_rank], whose key rows the absorbed form folds into the
	// query (MLABackend).
	HeadStack
)

// CheckShape reports whether shape fits a weight of this kind: the number
// of dimensions the kind implies, every size positive. Every backend checks
// Upload and Random with it, so they reject the same shapes alike.
func (k WeightKind) CheckShape(shape []int) error {
	want := map[WeightKind]int{Vector: 1, Table: 2, Matrix: 2, Experts: 3, HeadStack: 3}[k]
	if len(shape) != want {
		return fmt.Errorf("shape %v: want %d dimensions", shape, want)
	}
	for _, d := range shape {
		if d <= 0 {
			return fmt.Errorf("shape %v: sizes must be positive", shape)
		}
	}
	return nil
}

// HostTensor is a weight in host memory as a checkpoint stores it.
type HostTensor struct {
	Shape []int
	DType string // "F32", "F16", "BF16" or "F8_E4M3" (safetensors names)
	Data  []byte // little-endian, row-major
	// FP8Scales dequantize an F8_E4M3 tensor (value = code × scale), and
	// say how a GEMM on it quantizes its activations; nil otherwise.
	FP8 *FP8Scales
}

// HeadLayout is the attention head layout of a fused QKV row: Heads query
// heads, then KVHeads key heads, then KVHeads value heads, each HeadDim
// wide.
type HeadLayout struct {
	Heads, KVHeads, HeadDim int
}

// QKVWidth is the width of a fused QKV row.
func (h HeadLayout) QKVWidth() int { return (h.Heads + 2*h.KVHeads) * h.HeadDim }

// KVConfig sizes a KV cache: Slots fixed-size slots of Capacity positions,
// one slot per request in flight, held from admission to completion; or,
// paged (BlockSize > 0, a Pager's cache), a pool of Blocks blocks of
// BlockSize positions that requests hold as many of as their lengths need
// (Batch.Blocks lists each sequence's), Slots and Capacity then bounding
// only the requests in flight and their length.
type KVConfig struct {
	Layers   int
	Slots    int
	Capacity int
	// BlockSize and Blocks page the cache (0: fixed slots).
	BlockSize, Blocks int
	// FP8 stores keys and values as FP8 E4M3 with one scale per layer for
	// K and one for V (KScale, VScale; nil means 1 for every layer): a
	// value v is stored as E4M3(v / scale) (kv_cache_dtype fp8; FP8KV).
	FP8            bool
	KScale, VScale []float32
	HeadLayout
	// Latent and RopeDim shape an MLA cache (DeepSeek-V3): each position
	// of each layer holds the compressed latent (kv_lora_rank values) and
	// the one rotary key every head shares (qk_rope_head_dim values), and
	// HeadLayout's K and V heads are not stored. Both 0 for a K/V cache.
	Latent, RopeDim int
	// Ring is GPT-OSS's cache (OSSBackend.OSSAttention): layer l keeps
	// position p at p mod LayerCapacity(l), and the layers Sliding marks
	// keep only the last Window positions (gptoss.go).
	Ring    bool
	Window  int
	Sliding []bool
}

// MLA reports whether c is an MLA cache (Latent > 0).
func (c KVConfig) MLA() bool { return c.Latent > 0 }

// KVCache is a backend-owned key/value cache; a backend chooses its layout
// (the CPU's is in engine/cpu) as long as Attention reads what it wrote.
type KVCache interface {
	Config() KVConfig
}

// Paged reports whether c is a paged cache (BlockSize > 0).
func (c KVConfig) Paged() bool { return c.BlockSize > 0 }

// ElemBytes is the width of a cached element on a backend whose compute
// type is computeBytes wide: 1 under FP8.
func (c KVConfig) ElemBytes(computeBytes int) int {
	if c.FP8 {
		return 1
	}
	return computeBytes
}

// KVBytesPerToken is the cache memory one position of one slot takes when
// elements are elemBytes wide: K and V for every layer and KV head, or an
// MLA cache's latent and rotary key for every layer.
func (c KVConfig) KVBytesPerToken(elemBytes int) int64 {
	if c.MLA() {
		return int64(c.Layers*(c.Latent+c.RopeDim)) * int64(elemBytes)
	}
	return int64(2*c.Layers*c.KVHeads*c.HeadDim) * int64(elemBytes)
}

// ShapeWarmer is a backend whose iterations at some decode batch sizes
// first build what later ones reuse (a CUDA graph per padded batch, GEMM
// plans chosen by timing): the engine runs those sizes before a run's
// timed requests, so that no timed iteration pays for building them.
type ShapeWarmer interface {
	// DecodeBatches are the decode batch sizes, up to slots, whose
	// iterations build something of their own; the engine runs a few
	// decode iterations at each.
	DecodeBatches(slots int) []int
}

// Prefetcher is a backend that can start reading a weight into a cache
// before the op that multiplies by it, while the ops in between leave the
// memory idle (the CUDA backend's L2 at decode). Forward calls it for a
// dense layer's gate_up weight in front of the layer's QKV projection; a
// backend decides whether and how much (it may do nothing).
type Prefetcher interface {
	// Prefetch: w is multiplied by rows rows soon, its rows read as parts
	// equal blocks side by side (2: a fused gate_up's gate and up halves,
	// row j of each read together), after ops that read the weights
	// between (which may push a prefetch out of a cache again).
	Prefetch(w Tensor, parts, rows int, between ...Tensor)
}

// PlanCounter is a backend that builds something per GEMM shape the first
// time the shape runs (the CUDA backend's cuBLASLt plans: descriptors, the
// heuristic's query, and for decode shapes the timing of its candidates):
// how many it has built so far and the host time they took. The engine
// counts the ones built during a timed pass, which paid for them there.
type PlanCounter interface {
	GEMMPlans() (built int, spent time.Duration)
}

// RandomSlicer is a backend that makes a slice of a random weight (a split
// model's shard) where it lives, as Random makes a whole one: without it
// the slice is filled on the host and uploaded, which for a model of tens
// of billions of weights takes minutes a rank.
type RandomSlicer interface {
	// RandomSlice creates a weight of shape whose elements are the runs'
	// elements of the full random weight (seed, scale): RandomRuns' values.
	RandomSlice(name string, kind WeightKind, shape []int, seed uint64, scale float32, runs []RandomRun) (Tensor, error)
}

// RandomRun is a block of a slice of a random weight: Rows rows of Cols
// elements, row r being the full weight's elements from Src + r*Stride,
// stored from element Dst + r*Cols of the slice.
type RandomRun struct{ Dst, Src, Rows, Cols, Stride int64 }

// RandomRuns fills dst with the runs of the random weight (seed, scale):
// RandomSlice's values.
func RandomRuns(dst []float32, runs []RandomRun, seed uint64, scale float32) {
	for _, r := range runs {
		for i := range r.Rows {
			at := r.Dst + i*r.Cols
			RandomFill(dst[at:at+r.Cols], seed, r.Src+i*r.Stride, scale)
		}
	}
}

// Backend is everything the model needs from a device. It has two phases:
// set-up (Upload, Random, Alloc, NewKVCache, Write*) which may allocate and
// fail, and iterations (SetBatch, then ops, then Argmax), which must not
// allocate device memory and may be captured as a CUDA graph per batch
// shape.
//
// Ops are asynchronous as far as the caller can tell: they return nothing,
// a backend records the first failure, and the next synchronising call
// (Argmax, Read*, ExpertCounts via ReadInt32) reports it. Only those calls
// move data to the host, once per iteration.
//
// A Backend is used by one goroutine at a time.
type Backend interface {
	// Name identifies the backend and its GEMM path in reports, e.g.
	// "cpu/gemm=blocked-avx2".
	Name() string

	// Upload copies a weight to the backend, converting from the host
	// dtype. name is for errors and memory reports.
	Upload(name string, kind WeightKind, h HostTensor) (Tensor, error)
	// Random creates a weight filled by RandomFill(seed, scale): the same
	// values on every backend, generated where the weight lives.
	Random(name string, kind WeightKind, shape []int, seed uint64, scale float32) (Tensor, error)
	// Alloc creates an activation or index buffer (contents undefined).
	Alloc(name string, dt DType, shape ...int) (Tensor, error)
	// NewKVCache creates a KV cache.
	NewKVCache(c KVConfig) (KVCache, error)
	// WriteInt32 and WriteFloat32 copy host data into the first rows of t.
	WriteInt32(t Tensor, src []int32) error
	WriteFloat32(t Tensor, src []float32) error

	// SetBatch hands the backend the iteration's token layout (one
	// host-to-device copy). Ops that take no row count use it.
	SetBatch(b *Batch) error

	// Embed gathers out[i] = table[b.Tokens[i]] for every batch token.
	Embed(out, table Tensor)
	// RMSNorm: out[r] = x[r] / rms(x[r]) * w for r < rows. out may be x.
	RMSNorm(out, x, w Tensor, rows int, eps float32)
	// AddRMSNorm: residual[r] += delta[r]; out[r] = RMSNorm(residual[r]).
	AddRMSNorm(residual, delta, w, out Tensor, rows int, eps float32)
	// Add: dst[r] += src[r].
	Add(dst, src Tensor, rows int)
	// MatMul: out[rows, n] = x[rows, k] · wᵀ, w a Matrix [n, k]. This is
	// the GEMM that gemm_plugin switches.
	MatMul(out, x, w Tensor, rows int)
	// HeadNorm is Qwen3's qk-norm: RMSNorm over HeadDim of every query
	// head (scale qw) and key head (scale kw) of each batch token's fused
	// QKV row, in place.
	HeadNorm(qkv, qw, kw Tensor, h HeadLayout, eps float32)
	// RoPE rotates the query and key heads of each batch token's fused QKV
	// row in place by its position. table is [positions, HeadDim]: cos in
	// the first half, sin in the second (rotate-half convention).
	RoPE(qkv, table Tensor, h HeadLayout)
	// Attention writes the batch's keys and values into the cache (slot
	// and positions from the batch), then computes causal grouped-query
	// attention of every batch token over its sequence's cached positions
	// 0..pos, scale 1/sqrt(HeadDim). out is [tokens, Heads*HeadDim].
	Attention(out, qkv Tensor, cache KVCache, layer int)
	// SwiGLU: out[r] = silu(gateUp[r][:n]) * gateUp[r][n:], n = out width.
	SwiGLU(out, gateUp Tensor, rows int)
	// Route picks k experts for each of rows tokens and their weights.
	// With forced == nil it routes from logits [rows, experts] by method
	// (RoutingSoftmaxTopKRenorm, RoutingTopKSoftmax, RoutingSoftmaxTopK).
	// Otherwise forced [>= forcedRow+rows, k] (Int32) holds the chosen
	// experts starting at row forcedRow, each with weight 1/k: exactly what
	// TensorRT-LLM's +10/-10 replacement logits give under any of the
	// methods. counts [layers, experts] (Int32) gets row layer incremented
	// once per (token, chosen expert). idx is Int32 [rows, k], weights
	// Float [rows, k].
	Route(idx, weights, logits, forced Tensor, forcedRow, rows, k int, method string, counts Tensor, layer int)
	// MoE: out[t] = Σ_j weights[t][j] · down_e(silu(gate_e(x[t])) · up_e(x[t]))
	// with e = idx[t][j]; gateUp is Experts [E, 2F, H] (gate rows first),
	// down Experts [E, H, F].
	MoE(out, x, idx, weights, gateUp, down Tensor, rows, k int)
	// GatherRows: out[j] = x[b.LogitRows[j]].
	GatherRows(out, x Tensor)
	// Argmax writes the index of the largest of each of rows logits rows
	// to dst (lowest index on ties): the iteration's one device-to-host
	// copy and synchronisation point. It reports any failure of the ops
	// before it.
	Argmax(dst []int32, logits Tensor, rows int) error
	// ReadFloat32 / ReadInt32 copy the first rows of t to the host (tests,
	// expert counts) and synchronise. Zero clears t.
	ReadFloat32(dst []float32, t Tensor, rows int) error
	ReadInt32(dst []int32, t Tensor, rows int) error
	Zero(t Tensor)

	Profiler

	// Close frees everything the backend allocated.
	Close() error
}

// Pipeliner is implemented by backends that can queue an iteration while
// the one before it still runs (both of ours). With Argmax every
// iteration ends in a synchronisation, and the device idles while the
// host reads the tokens back, schedules and queues the next iteration:
// at batch 1 on a GPU that is a tenth of the step. The engine instead
// starts iteration i's picks, queues iteration i+1 with the picks fed to
// it on the device (Batch.Fed), and only then waits for iteration i's
// tokens, as TensorRT-LLM's overlap scheduler does.
type Pipeliner interface {
	// ArgmaxStart queues Argmax's work (each of rows logit rows' greedy
	// pick, copied towards the host) and returns without waiting: a
	// ticket for ArgmaxWait. The next SetBatch may feed these picks. At
	// most two tickets may be outstanding; the oldest is waited for first.
	ArgmaxStart(logits Tensor, rows int) (int, error)
	// ArgmaxWait waits for ticket's picks and copies them to dst (len(dst)
	// of them, at most its rows). It reports any failure of the ops before
	// them, as Argmax does.
	ArgmaxWait(ticket int, dst []int32) error
}

// KVBudget is implemented by backends whose KV-cache memory is bounded
// (both of ours): MaxKVSlots is how many slots of c's shape (c.Slots
// ignored) fit the budget (BackendOptions.KVCacheBytes, or on CUDA
// KVCacheFraction of free device memory). Like TensorRT-LLM's capacity
// scheduler, the engine then admits no more requests at once. Without it,
// batch_size alone bounds them.
type KVBudget interface {
	MaxKVSlots(c KVConfig) int
}

// Pager is implemented by backends whose KV cache can be paged (the
// CPU's): NewKVCache honours KVConfig.BlockSize, Attention reads each
// sequence's positions through its block table (Batch.Blocks), and
// MaxKVBlocks is how many blocks of c.BlockSize positions fit the budget
// (c.Blocks and c.Slots ignored). The engine then admits requests while
// the blocks their lengths need are free, so the batch is bounded by the
// tokens in the cache, not by slots of the longest request. A backend
// without it keeps the fixed slots (the CUDA backend under
// XRUN_CUDA_KV_PAGED=0).
type Pager interface {
	MaxKVBlocks(c KVConfig) int
}

// PagesWhenBound is implemented by Pagers whose paged cache costs time
// where fixed slots would hold the same requests (the CUDA backend's
// paged attention reads through block tables). Where PagesWhenBound is
// true the engine pages a run only where paging admits more requests at
// once than fixed slots of its longest request (engine.pagingPays).
type PagesWhenBound interface {
	PagesWhenBound() bool
}

// Releaser is implemented by backends that can free memory before Close:
// the model frees buffers and caches it replaces when a later run needs
// them larger.
type Releaser interface {
	Free(t Tensor)
	FreeKVCache(c KVCache)
}

// Profiler is the profiling hook a backend implements. The engine calls it
// at iteration boundaries, the way TensorRT-LLM checks
// TLLM_PROFILE_START_STOP at the top of every executor iteration:
//   - StartProfile(epoch): once per run, before any iteration; op records
//     are timed relative to epoch.
//   - WindowStart / WindowStop: around the profiled iterations (CUDA:
//     cuProfilerStart / cuProfilerStop and CUPTI activity on/off; CPU:
//     timing every op).
//   - IterationStart / IterationEnd: one named range per iteration (CUDA:
//     an NVTX range), e.g. "iteration 120: 2 ctx reqs, 64 ctx tokens, 62
//     gen reqs".
//   - Ops: drains the per-operation records of the windows so far (CPU:
//     each op call timed on the host; CUDA: CUPTI kernel records).
type Profiler interface {
	StartProfile(epoch time.Time)
	WindowStart()
	WindowStop()
	IterationStart(index int, name string)
	IterationEnd(index int)
	Ops() []OpRecord
}

// OpRecord is one timed operation ("kernel") in a profile window.
type OpRecord struct {
	Name      string        `json:"name"`      // e.g. "cpu_gemm_blocked_avx2"
	Iteration int           `json:"iteration"` // engine iteration it ran in
	Start     time.Duration `json:"start_ns"`  // since the run's epoch
	Duration  time.Duration `json:"duration_ns"`

	// The rest is what a GPU profiler (CUPTI) knows besides the time; the
	// CPU backend leaves it zero.

	// Kind is OpKernel (also when empty), OpMemcpy or OpMemset.
	Kind string `json:"kind,omitempty"`
	// Stream is the CUDA stream the op ran on (0 on the CPU).
	Stream uint32 `json:"stream,omitempty"`
	// Grid and Block are a kernel's launch dimensions (x, y, z).
	Grid  [3]uint32 `json:"grid,omitzero"`
	Block [3]uint32 `json:"block,omitzero"`
	// Bytes is what a copy or memset moved; Copy is a copy's direction
	// ("HtoD", "DtoH", "DtoD", ...).
	Bytes int64  `json:"bytes,omitempty"`
	Copy  string `json:"copy,omitempty"`
}

// Op kinds of OpRecord.Kind.
const (
	OpKernel = "kernel"
	OpMemcpy = "memcpy"
	OpMemset = "memset"
)

// BackendOptions configure a backend constructor (cpu.New, cuda.New).
type BackendOptions struct {
	// Gemm is the gemm_plugin axis: "auto" (the best GEMM: cuBLASLt on
	// CUDA, the blocked parallel GEMM on CPU) or "disable" (the engine's
	// own plain GEMM kernel).
	Gemm string
	// Dtype is the compute type asked for ("float16", "bfloat16",
	// "float32"); the CPU backend always computes in float32.
	Dtype string
	// Threads caps CPU parallelism (0: GOMAXPROCS).
	Threads int
	// Device is the GPU ordinal (CUDA).
	Device int
	// KVCacheBytes is the KV-cache budget in bytes (0: the backend's
	// default; the CPU's is DefaultCPUKVCacheBytes).
	KVCacheBytes int64
	// KVCacheFraction is kv_cache_free_gpu_mem_fraction: the share of free
	// device memory the KV cache may take (CUDA; 0: 0.9).
	KVCacheFraction float64
	// Switches are the engine switches in effect (engine.New passes the
	// ones it parsed); nil: the backend parses the process's environment
	// once, when it opens (engine.ParseSwitches). The CPU backend reads
	// none.
	Switches *Switches
}

// PickTickets is a Pipeliner's ticket bookkeeping, shared by the
// backends: ticket t uses buffer slot t%2, at most two are outstanding,
// and they are waited for in order. Rows is each slot's pick count.
type PickTickets struct {
	Rows    [2]int
	started int // tickets handed out
	waited  int // tickets waited for: the oldest outstanding is this one
}

// Next is the ticket the next ArgmaxStart takes, or an error while two
// are outstanding. The ticket counts once Started is called.
func (p *PickTickets) Next() (int, error) {
	if p.started-p.waited >= 2 {
		return 0, fmt.Errorf("argmax: two picks already outstanding (tickets %d and %d)", p.waited, p.waited+1)
	}
	return p.started, nil
}

// Started records ticket Next() of rows picks as handed out.
func (p *PickTickets) Started(rows int) {
	p.Rows[p.started%2] = rows
	p.started++
}

// Wait checks that ticket is the oldest outstanding and that it has at
// least want picks, and counts it as waited for; it returns its slot.
func (p *PickTickets) Wait(ticket, want int) (int, error) {
	if ticket != p.waited || ticket >= p.started {
		return 0, fmt.Errorf("argmax: wait for ticket %d, the oldest outstanding is %d of %d", ticket, p.waited, p.started)
	}
	if want > p.Rows[ticket%2] {
		return 0, fmt.Errorf("argmax: %d ids wanted, ticket %d has %d", want, ticket, p.Rows[ticket%2])
	}
	p.waited++
	return ticket % 2, nil
}

// Last is the slot and pick count of the latest ticket handed out (the
// picks a batch's Fed rows read), or an error before the first.
func (p *PickTickets) Last() (slot, rows int, err error) {
	if p.started == 0 {
		return 0, 0, errors.New("no ArgmaxStart before it")
	}
	s := (p.started - 1) % 2
	return s, p.Rows[s], nil
}

// Outstanding is how many tickets are handed out and not waited for.
func (p *PickTickets) Outstanding() int { return p.started - p.waited }

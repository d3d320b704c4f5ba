//go:build cgo && linux

package backend

import (
	"errors"
	"fmt"
	"os"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/profile/cupti"
)

// DefaultKVFreeFraction is the share of the free device memory (after
// weights and workspaces) the KV cache may take unless
// BackendOptions.KVCacheFraction says otherwise, as TensorRT-LLM's
// kv_cache_free_gpu_mem_fraction.
const DefaultKVFreeFraction = 0.9

// Backend runs the model on one GPU. Every CUDA call happens on the
// device's locked thread: ops are posted there without waiting (so the
// caller queues an iteration ahead of the thread issuing it), and the
// synchronising calls (Argmax, Read*) wait for everything before them.
type Backend struct {
	dev  *cuda.Device
	dt   cuda.DType
	gemm string // "auto" (cuBLASLt) or "disable" (own GEMM)
	opt  model.BackendOptions
	blas *cuda.BlasLt
	ceil *engine.Ceilings // measured at New for a GPU without known ones

	// Touched only on the GPU's thread.
	err   error
	owned []cuda.Buffer
	hosts []cuda.HostBuffer

	cache            *kvCache
	minRows, maxRows int              // first dimensions of the live Float activations
	acts             map[*tensor]bool // the live Float activations (Alloc, until Free)

	// Batch layout: int32 arrays in one device buffer, written through
	// one pinned staging buffer with one host-to-device copy.
	lay      cuda.Buffer
	layHost  cuda.HostBuffer
	layEvent *cuda.Event
	ids      cuda.Buffer
	// picks holds pickSlots slots of pickStride ids in page-locked
	// memory the argmax writes (pickHost).
	picks      cuda.HostBuffer
	pickStride int
	cur        batchLayout
	pipe       pipeState

	// The switches (model.Switches), fixed at New but for graphsOn, which
	// a failed capture turns off.
	graphsOn   bool   // decode graphs (XRUN_CUDA_GRAPHS)
	splitOn    bool   // split-K decode attention (XRUN_CUDA_ATTN_SPLIT)
	fuseOn     bool   // deferred ops fused into the op that consumes them (XRUN_CUDA_FUSE; fusion.go)
	normFuse   bool   // RMSNorms into the decode GEMV's prologue (XRUN_CUDA_FUSE_NORM)
	fp8Fuse    bool   // FP8 GEMM inputs quantized by the norm or SwiGLU producing them (XRUN_CUDA_FP8_FUSE)
	gemmEpi    bool   // SwiGLU and residual-add epilogues on the own GEMM above the GEMV's rows (XRUN_CUDA_GEMM_EPILOGUE)
	ropeFold   string // RoPE and the cache write folded into decode attention: "auto", "1", "0" (XRUN_CUDA_ATTN_ROPE)
	moeLibrary bool   // gemm_plugin auto's eager expert GEMMs on cuBLASLt (XRUN_CUDA_MOE_LT)
	gemvRows   int    // the largest M of the own GEMM's GEMV (cuda.GemvRowsFor)
	epiRows    int    // the smallest M of the own GEMM's epilogues, 0: none (cuda.GPU.EpilogueRows)
	ceilForce  bool   // ceilings measured on a known GPU too (XRUN_MEASURE_CEILINGS)
	attnXL     string // prefill attention's rows a block: "auto", "64", "128" (XRUN_CUDA_ATTN_PREFILL_ROWS)
	attnWG     bool   // prefill attention on the warpgroup MMA (cuda.GPU.AttnWG)
	attnTC     string // the tensor-core attention's configuration, "auto" or "0" (XRUN_CUDA_ATTN_TC)

	// l2 reads gate_up rows into L2 early (XRUN_CUDA_L2_PREFETCH; prefetch.go).
	l2 l2Prefetch

	// prof is the CUPTI session of a profiled pass, nil otherwise.
	prof     *cupti.Session
	pend     *pending // an op held back for fusion (caller's goroutine only)
	attnWork cuda.Buffer
	attnCnt  cuda.Buffer // split attention's counters (zero between launches)
	launched bool        // the replayed graph was launched at SetBatch
	graphs   map[graphKey]*graphState
	sms      int // the GPU's multiprocessors
	mode     mode
	bucket   *graphState
	ops      int // ops seen this iteration (checked against the graph)
	capOps   []func(*cuda.GPU) error

	memWeights, memActs int64
	tmp                 []int32 // host layout scratch

	fp8 fp8Scratch // FP8 GEMM inputs (fp8.go)
	// kvBudgetBytes is the KV budget measured when the cache was first
	// sized; kvBudget keeps to it (memory.go).
	kvBudgetBytes int64
}

type kind int

const (
	kFloat kind = iota // the compute dtype
	kInt32
)

// tensor is a handle over device memory.
type tensor struct {
	name  string
	shape []int
	kind  kind
	buf   cuda.Buffer
	f32   cuda.Buffer // float32 copy of small F32 tables (the RoPE table)
	// q makes buf an FP8 GEMM weight's E4M3 codes (fp8.go); rnd is how a
	// Random weight was filled, so that QuantizeFP8 can quantize the
	// float32 values rather than their fp16/bf16 rounding.
	q   *fp8Weight
	rnd *randomFill
}

func (t *tensor) Shape() []int { return t.shape }
func (t *tensor) cols() int    { return t.shape[len(t.shape)-1] }
func (t *tensor) rows() int    { return t.shape[0] }

func ft(t model.Tensor) *tensor {
	if t == nil {
		return nil
	}
	return t.(*tensor)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// kvCache holds K and V, each [layer][slot][kv head][capacity][head dim],
// with one slot more than asked for: the scratch slot padded decode rows
// write to.
type kvCache struct {
	c          model.KVConfig
	k, v       cuda.Buffer
	layerBytes int
	shape      cuda.AttnShape
	// paged holds a paged cache's block tables (paged_cuda.go); nil for
	// fixed slots.
	paged *kvPages
}

func (c *kvCache) Config() model.KVConfig { return c.c }

// Shape is the logical shape of K (and of V): [layers, slots, kv heads,
// capacity, head dim].
func (c *kvCache) Shape() []int {
	return []int{c.c.Layers, c.c.Slots, c.c.KVHeads, c.c.Capacity, c.c.HeadDim}
}

// New opens GPU o.Device, compiles (or loads from the disk cache) every
// kernel and creates the GEMM library handle and workspaces, so nothing is
// compiled or allocated later behind a timed iteration.
func New(o model.BackendOptions) (model.Backend, error) {
	dts := o.Dtype
	if dts == "" {
		dts = "float16"
	}
	dt, err := cuda.ParseDType(dts)
	if err != nil {
		return nil, fmt.Errorf("cuda backend computes in float16 or bfloat16: %w", err)
	}
	gemm := o.Gemm
	if gemm == "" {
		gemm = "auto"
	}
	if gemm != "auto" && gemm != "disable" {
		return nil, fmt.Errorf("cuda backend: gemm_plugin %q, want auto or disable", gemm)
	}
	// The switches are read once, by engine.New or else here, and passed
	// on to the device.
	var sw model.Switches
	if o.Switches != nil {
		sw = *o.Switches
	} else {
		sw = engine.ParseSwitches(os.Getenv)
	}
	dev, err := cuda.Open(o.Device, cuda.WithSwitches(sw))
	if err != nil {
		return nil, err
	}
	b := &Backend{dev: dev, dt: dt, gemm: gemm, opt: o, graphs: map[graphKey]*graphState{},
		graphsOn: sw.CUDAGraphs, splitOn: sw.CUDAAttnSplit, fuseOn: sw.CUDAFuse, normFuse: sw.CUDAFuseNorm, l2: l2Prefetch{percent: sw.CUDAL2Prefetch}, fp8Fuse: sw.CUDAFP8Fuse, gemmEpi: sw.CUDAGemmEpi,
		ropeFold: sw.CUDAAttnRope, moeLibrary: sw.CUDAMoELibrary, gemvRows: cuda.GemvRowsFor(sw), ceilForce: sw.MeasureCeilings,
		attnXL: sw.CUDAAttnXL, attnTC: sw.CUDAAttnTC}
	err = dev.Do(func(g *cuda.GPU) error {
		if err := g.LoadKernels(); err != nil {
			return err
		}
		b.attnWG = g.AttnWG()
		b.sms = g.Info.SMs
		b.epiRows = g.EpilogueRows()
		// Before weights and KV cache take the memory the measurement
		// borrows. Only the roofline needs it: a failure costs the
		// roofline, not the cell.
		c, err := ceilingsFor(g, dt, b.ceilForce)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cuda backend: no roofline for this GPU (%s): %v\n", g.Info.Name, err)
		}
		b.ceil = c
		if gemm == "auto" {
			bl, err := g.BlasLt()
			if err != nil {
				return err
			}
			b.blas = bl
		}
		ev, err := g.NewEvent()
		b.layEvent = ev
		if err != nil {
			return err
		}
		for i := range b.pipe.done {
			if b.pipe.done[i], err = g.NewEvent(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		dev.Close()
		return nil, err
	}
	if pagedOptIn(sw) {
		return pagedBackend{b, sw.CUDAKVPaged == "auto"}, nil
	}
	return b, nil
}

// Name is "cuda/cublaslt" or "cuda/own_mma" (gemm_plugin auto / disable).
func (b *Backend) Name() string {
	if b.gemm == "auto" {
		return "cuda/cublaslt"
	}
	return "cuda/own_mma"
}

// Close frees everything and releases the GPU.
func (b *Backend) Close() error {
	err := b.dev.Do(func(g *cuda.GPU) error {
		errs := []error{g.Stream.Sync()}
		b.dropGraphs()
		for _, buf := range b.owned {
			errs = append(errs, g.Free(buf))
		}
		for _, h := range b.hosts {
			errs = append(errs, g.FreeHost(h))
		}
		errs = append(errs, b.layEvent.Close(), b.l2.close())
		for _, ev := range b.pipe.done {
			if ev != nil {
				errs = append(errs, ev.Close())
			}
		}
		b.owned, b.hosts = nil, nil
		return errors.Join(errs...)
	})
	return errors.Join(err, b.dev.Close())
}

// MemoryPlan reports the bytes held for weights, activations and the KV
// cache.
func (b *Backend) MemoryPlan() (weights, activations, kv int64) {
	if b.cache != nil {
		kv = int64(b.cache.k.Bytes + b.cache.v.Bytes) // an MLA cache has no v
	}
	return b.memWeights, b.memActs, kv
}

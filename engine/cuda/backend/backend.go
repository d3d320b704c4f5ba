//go:build cgo && linux

package backend

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

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
	minRows, maxRows int // first dimensions of the Float activations

	// Batch layout: int32 arrays in one device buffer, written through
	// one pinned staging buffer with one host-to-device copy.
	lay      cuda.Buffer
	layHost  cuda.HostBuffer
	layEvent *cuda.Event
	ids      cuda.Buffer
	idsHost  cuda.HostBuffer
	cur      batchLayout
	pipe     pipeState

	graphsOn bool
	splitOn  bool

	// prof is the CUPTI session of a profiled pass, nil otherwise.
	prof     *cupti.Session
	fuseOn   bool     // deferred ops fused into the op that consumes them
	normFuse bool     // RMSNorms into the decode GEMV's prologue (XRUN_CUDA_FUSE_NORM=0: off)
	pend     *pending // an op held back for fusion (caller's goroutine only)
	attnWork cuda.Buffer
	attnCnt  cuda.Buffer // split attention's counters (zero between launches)
	launched bool        // the replayed graph was launched at SetBatch
	graphs   map[int]*graphState
	mode     mode
	bucket   *graphState
	ops      int // ops seen this iteration (checked against the graph)
	capOps   []func(*cuda.GPU) error

	memWeights, memActs int64
	tmp                 []int32 // host layout scratch
}

// pending is an op held back so the next op can do its work too: RoPE
// (fused with the cache write at the start of Attention, or, at decode,
// folded into the attention kernel itself) and, on the own GEMM's decode
// path (rows <= cuda.GemvRows()), every GEMM and RMSNorm: an RMSNorm is
// folded into the GEMM that reads its output (the GEMM's prologue), and a
// GEMM into the SwiGLU or residual add that reads its output (the GEMM's
// epilogue), so that a dense layer at decode is QKV (norm in front),
// attention (RoPE and the cache write in front), output projection
// (+ residual), gate_up (norm in front, SwiGLU behind) and down
// (+ residual): five kernels instead of nine. Any other op, and every
// synchronising call, first queues the held-back op as it is.
type pending struct {
	kind  pendKind
	qkv   *tensor // RoPE
	table *tensor
	h     model.HeadLayout
	lay   batchLayout
	out   *tensor // GEMM: out = x w^T; norm: out = RMSNorm(res) * nw
	x, w  *tensor
	rows  int
	res   *tensor // norm, or a GEMM's norm prologue (then x is the norm's out)
	nw    *tensor
	eps   float32
}

type pendKind int

const (
	pendRope pendKind = iota
	pendGemm
	pendNorm
)

// mode is how the current iteration's ops run.
type mode int

const (
	eager   mode = iota // queued as they come
	capture             // recorded into the bucket's graph
	replay              // skipped: the bucket's graph replays them at the sync point
)

// graphState is one decode batch-size bucket: captured on its second
// iteration (the first runs eagerly, building every cuBLASLt plan and
// loading every kernel it needs), replayed from then on.
type graphState struct {
	seen  int
	graph *cuda.Graph
	ops   int
}

// batchLayout locates this iteration's arrays inside lay.
type batchLayout struct {
	tokens, pos, slot, logit, itemsS, itemsL cuda.Buffer
	nTok, nLogit, nS, nL                     int
	rowsS, splitsS                           int  // the decode items' kernel size and key split
	pad                                      bool // rows padded to a graph bucket
	realLogit                                int  // logit rows the caller asked for
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
	dev, err := cuda.Open(o.Device)
	if err != nil {
		return nil, err
	}
	b := &Backend{dev: dev, dt: dt, gemm: gemm, opt: o, graphs: map[int]*graphState{},
		graphsOn: engine.Switches.CUDAGraphs.On(), splitOn: engine.Switches.CUDAAttnSplit.On(),
		fuseOn: engine.Switches.CUDAFuse.On(), normFuse: engine.Switches.CUDAFuseNorm.On()}
	err = dev.Do(func(g *cuda.GPU) error {
		if err := g.LoadKernels(); err != nil {
			return err
		}
		// Before weights and KV cache take the memory the measurement
		// borrows. Only the roofline needs it: a failure costs the
		// roofline, not the cell.
		c, err := ceilingsFor(g, dt)
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
		errs = append(errs, b.layEvent.Close())
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
		kv = int64(b.cache.k.Bytes) * 2
	}
	return b.memWeights, b.memActs, kv
}

// ---- set-up: may allocate ----

func (b *Backend) alloc(g *cuda.GPU, bytes int) (cuda.Buffer, error) {
	buf, err := g.Alloc(bytes)
	if err == nil {
		b.owned = append(b.owned, buf)
	}
	return buf, err
}

func (b *Backend) allocHost(g *cuda.GPU, bytes int) (cuda.HostBuffer, error) {
	h, err := g.AllocHost(bytes)
	if err == nil {
		b.hosts = append(b.hosts, h)
	}
	return h, err
}

// f32TableMax bounds the tables also kept in float32 (the RoPE table is
// [positions, head dim]; an embedding from an F32 checkpoint may be
// large, and only the RoPE kernel reads float32).
const f32TableMax = 1 << 24

// Upload converts a checkpoint tensor to the compute dtype on the host and
// copies it over; F32 tables of moderate size also keep a float32 copy.
func (b *Backend) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	if err := kind.CheckShape(h.Shape); err != nil {
		return nil, err
	}
	n := numel(h.Shape)
	t := &tensor{name: name, shape: slices.Clone(h.Shape), kind: kFloat}
	var bits []byte
	var f32 []float32
	switch {
	case h.DType == "F16" && b.dt == cuda.F16, h.DType == "BF16" && b.dt == cuda.BF16:
		if len(h.Data) != n*2 {
			return nil, fmt.Errorf("%d bytes for shape %v of %s", len(h.Data), h.Shape, h.DType)
		}
		bits = h.Data
	default:
		f, err := h.Float32()
		if err != nil {
			return nil, err
		}
		enc := b.dt.Encode(f)
		bits = u16Bytes(enc)
		if kind == model.Table && h.DType == "F32" && n <= f32TableMax {
			f32 = f
		}
	}
	err := b.dev.Do(func(g *cuda.GPU) error {
		buf, err := b.alloc(g, n*b.dt.Size())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t.buf = buf
		if err := g.Stream.Upload(buf, bits); err != nil {
			return err
		}
		b.memWeights += int64(buf.Bytes)
		if f32 != nil {
			fb, err := b.alloc(g, n*4)
			if err != nil {
				return err
			}
			t.f32 = fb
			b.memWeights += int64(fb.Bytes)
			return cuda.UploadSlice(g.Stream, fb, f32)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Random fills a weight on the device with model.RandomFill's values.
func (b *Backend) Random(name string, kind model.WeightKind, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	if err := kind.CheckShape(shape); err != nil {
		return nil, err
	}
	t := &tensor{name: name, shape: slices.Clone(shape), kind: kFloat}
	err := b.dev.Do(func(g *cuda.GPU) error {
		buf, err := b.alloc(g, numel(shape)*b.dt.Size())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t.buf = buf
		b.memWeights += int64(buf.Bytes)
		return g.RandomFill(g.Stream, b.dt, buf, seed, 0, scale)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Alloc creates an activation or index buffer. Captured graphs hold
// addresses, so a new buffer (the model growing) drops them.
func (b *Backend) Alloc(name string, dt model.DType, shape ...int) (model.Tensor, error) {
	if len(shape) == 0 {
		return nil, fmt.Errorf("%s: no shape", name)
	}
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("%s: shape %v: sizes must be positive", name, shape)
		}
	}
	t := &tensor{name: name, shape: slices.Clone(shape), kind: kFloat}
	size := b.dt.Size()
	if dt == model.Int32 {
		t.kind, size = kInt32, 4
	}
	err := b.dev.Do(func(g *cuda.GPU) error {
		b.dropGraphs()
		buf, err := b.alloc(g, numel(shape)*size)
		t.buf = buf
		b.memActs += int64(buf.Bytes)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t.kind == kFloat {
		if b.minRows == 0 || shape[0] < b.minRows {
			b.minRows = shape[0]
		}
		b.maxRows = max(b.maxRows, shape[0])
	}
	return t, nil
}

// NewKVCache allocates the cache, refusing one larger than KVFreeFraction
// of the memory still free, and sizes the batch layout buffers for the
// largest activation.
func (b *Backend) NewKVCache(c model.KVConfig) (model.KVCache, error) {
	a := cuda.AttnShape{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim}
	if c.Layers <= 0 || c.Slots <= 0 || c.Capacity <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("KV cache %+v: sizes must be positive, heads a multiple of KV heads", c)
	}
	if c.HeadDim%8 != 0 {
		return nil, fmt.Errorf("KV cache: head dim %d is not a multiple of 8", c.HeadDim)
	}
	layer := (c.Slots + 1) * c.KVHeads * c.Capacity * c.HeadDim * b.dt.Size()
	kc := &kvCache{c: c, layerBytes: layer, shape: a}
	err := b.dev.Do(func(g *cuda.GPU) error {
		b.dropGraphs()
		if b.cache != nil { // replaced: give its memory back first
			b.freeOwned(g, b.cache.k, b.cache.v)
			b.cache = nil
		}
		if err := b.ensureLayout(g, max(b.maxRows, c.Slots)); err != nil {
			return err
		}
		budget, err := b.kvBudget(g)
		if err != nil {
			return err
		}
		need := 2 * int64(layer) * int64(c.Layers)
		if need > budget {
			return fmt.Errorf("KV cache of %d slots (+1 scratch) x %d positions x %d layers needs %.2f GiB; the budget is %.2f GiB (weights %.2f GiB, activations %.2f GiB)",
				c.Slots, c.Capacity, c.Layers, gib(need), gib(budget), gib(b.memWeights), gib(b.memActs))
		}
		if b.attnWork.Bytes == 0 {
			// Split decode launches have at most 2 blocks per multiprocessor.
			if b.attnWork, err = b.alloc(g, cuda.AttnWorkBytes(2*g.Info.SMs, cuda.AttnRowsSmall, 128)); err != nil {
				return err
			}
			if b.attnCnt, err = b.alloc(g, cuda.AttnCounterBytes(2*g.Info.SMs)); err != nil {
				return err
			}
			if err := g.Stream.Zero(b.attnCnt); err != nil {
				return err
			}
		}
		if kc.k, err = b.alloc(g, layer*c.Layers); err != nil {
			return err
		}
		if kc.v, err = b.alloc(g, layer*c.Layers); err != nil {
			return err
		}
		b.cache = kc
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kc, nil
}

// kvBudget is BackendOptions.KVCacheBytes, or the fraction of the device
// memory free now (the current cache counted as free: it is replaced).
func (b *Backend) kvBudget(g *cuda.GPU) (int64, error) {
	if b.opt.KVCacheBytes > 0 {
		return b.opt.KVCacheBytes, nil
	}
	frac := b.opt.KVCacheFraction
	if frac <= 0 {
		frac = DefaultKVFreeFraction
	}
	free, _, err := g.MemInfo()
	if err != nil {
		return 0, err
	}
	if b.cache != nil {
		free += uint64(b.cache.k.Bytes) * 2
	}
	return int64(frac * float64(free)), nil
}

// MaxKVSlots is how many slots of c's capacity fit the KV budget (one slot
// is kept back as the padding rows' scratch slot).
func (b *Backend) MaxKVSlots(c model.KVConfig) int {
	per := c.KVBytesPerToken(b.dt.Size()) * int64(c.Capacity)
	if per <= 0 {
		return 0
	}
	var budget int64
	if err := b.dev.Do(func(g *cuda.GPU) (err error) { budget, err = b.kvBudget(g); return }); err != nil {
		return 0
	}
	return int(max(0, min(budget/per-1, 1<<30)))
}

// Free releases a tensor's or KV cache's device memory now. Graphs that
// might hold its address are dropped.
func (b *Backend) Free(t model.Tensor) {
	_ = b.dev.Do(func(g *cuda.GPU) error {
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		b.dropGraphs()
		switch x := t.(type) {
		case *tensor:
			b.freeOwned(g, x.buf, x.f32)
			x.buf, x.f32 = cuda.Buffer{}, cuda.Buffer{}
		case *kvCache:
			b.freeOwned(g, x.k, x.v)
			x.k, x.v = cuda.Buffer{}, cuda.Buffer{}
			if b.cache == x {
				b.cache = nil
			}
		}
		return nil
	})
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

func (b *Backend) freeOwned(g *cuda.GPU, bufs ...cuda.Buffer) {
	for _, f := range bufs {
		for i, o := range b.owned {
			if o == f {
				g.Free(o)
				b.owned = slices.Delete(b.owned, i, i+1)
				break
			}
		}
	}
}

// layoutInts is the batch layout's size for rows tokens: tokens,
// positions and slots per token, logit rows, and up to two items of four
// ints per token.
func layoutInts(rows int) int { return 3*rows + rows + 8*rows + 64 }

// ensureLayout sizes the layout, argmax and staging buffers for rows.
func (b *Backend) ensureLayout(g *cuda.GPU, rows int) error {
	n := layoutInts(rows) * 4
	if b.lay.Bytes >= n {
		return nil
	}
	if n := b.pipe.Outstanding(); n > 0 {
		// The picks in flight live in b.ids and the pinned pick buffers.
		return fmt.Errorf("batch layout grows to %d rows while %d picks are outstanding", rows, n)
	}
	if err := g.Stream.Sync(); err != nil {
		return err
	}
	b.dropGraphs()
	b.freeOwned(g, b.lay, b.ids)
	for i, h := range b.hosts {
		if h == b.layHost || h == b.idsHost || h == b.pipe.host[0] || h == b.pipe.host[1] {
			g.FreeHost(h)
			b.hosts[i] = cuda.HostBuffer{}
		}
	}
	var err error
	if b.lay, err = b.alloc(g, n); err != nil {
		return err
	}
	if b.ids, err = b.alloc(g, rows*4); err != nil {
		return err
	}
	if b.layHost, err = b.allocHost(g, n); err != nil {
		return err
	}
	if b.idsHost, err = b.allocHost(g, rows*4); err != nil {
		return err
	}
	for i := range b.pipe.host {
		if b.pipe.host[i], err = b.allocHost(g, rows*4); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) dropGraphs() {
	for _, gs := range b.graphs {
		if gs.graph != nil {
			gs.graph.Close()
		}
	}
	clear(b.graphs)
}

// WriteInt32 copies src into the first elements of t.
func (b *Backend) WriteInt32(t model.Tensor, src []int32) error {
	d := ft(t)
	if d.kind != kInt32 || len(src)*4 > d.buf.Bytes {
		return fmt.Errorf("%s: writing %d int32 into %v", d.name, len(src), d.shape)
	}
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if len(src) == 0 {
			return nil
		}
		return cuda.UploadSlice(g.Stream, d.buf.Slice(0, len(src)*4), src)
	})
}

// WriteFloat32 converts src to the tensor's dtype and copies it in.
func (b *Backend) WriteFloat32(t model.Tensor, src []float32) error {
	d := ft(t)
	if d.kind != kFloat || len(src)*b.dt.Size() > d.buf.Bytes {
		return fmt.Errorf("%s: writing %d floats into %v", d.name, len(src), d.shape)
	}
	enc := b.dt.Encode(src)
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if len(src) == 0 {
			return nil
		}
		return cuda.UploadSlice(g.Stream, d.buf.Slice(0, len(enc)*2), enc)
	})
}

// ---- reading back: synchronising ----

// ReadFloat32 copies the first rows of t to dst.
func (b *Backend) ReadFloat32(dst []float32, t model.Tensor, rows int) error {
	s := ft(t)
	n := rows * s.cols()
	if s.kind != kFloat || n > len(dst) || n*b.dt.Size() > s.buf.Bytes {
		return fmt.Errorf("%s: reading %d rows of %v into %d floats", s.name, rows, s.shape, len(dst))
	}
	bits := make([]uint16, n)
	b.release()
	err := b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if n == 0 {
			return g.Stream.Sync()
		}
		return cuda.DownloadSlice(g.Stream, bits, s.buf.Slice(0, n*2))
	})
	if err != nil {
		return err
	}
	for i, v := range bits {
		dst[i] = b.dt.ToFloat32(v)
	}
	return nil
}

// ReadInt32 copies the first rows of t to dst.
func (b *Backend) ReadInt32(dst []int32, t model.Tensor, rows int) error {
	s := ft(t)
	n := rows * s.cols()
	if s.kind != kInt32 || n > len(dst) || n*4 > s.buf.Bytes {
		return fmt.Errorf("%s: reading %d rows of %v into %d int32", s.name, rows, s.shape, len(dst))
	}
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if n == 0 {
			return g.Stream.Sync()
		}
		return cuda.DownloadSlice(g.Stream, dst[:n], s.buf.Slice(0, n*4))
	})
}

// Argmax finishes the iteration (replaying or capturing its graph), picks
// each row's greedy token on the device and copies the ids back: the
// iteration's one device-to-host copy and synchronisation.
func (b *Backend) Argmax(dst []int32, logits model.Tensor, rows int) error {
	l := ft(logits)
	if rows > len(dst) {
		return fmt.Errorf("argmax: %d rows into %d ids", rows, len(dst))
	}
	b.release()
	return b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if n := b.pickRows(rows); n > 0 && (n*4 > b.ids.Bytes || n*4 > b.idsHost.Len()) {
			// Argmax without a batch layout this large (ops checked on
			// their own): a sync point, so the buffers may grow here.
			if err := b.ensureLayout(g, max(n, b.maxRows)); err != nil {
				return err
			}
		}
		if err := b.queuePicks(g, l, rows, b.idsHost); err != nil {
			return err
		}
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		decodeIDs(dst[:rows], b.idsHost)
		return nil
	})
}

// pickRows is how many logit rows an Argmax of rows computes: in a padded
// decode iteration the padding rows too, which costs nothing.
func (b *Backend) pickRows(rows int) int {
	if b.cur.pad && rows == b.cur.realLogit {
		return b.cur.nLogit
	}
	return rows
}

// queuePicks queues the greedy picks of rows logit rows into b.ids and
// the copy of the first rows of them into host (Argmax, ArgmaxStart).
func (b *Backend) queuePicks(g *cuda.GPU, l *tensor, rows int, host cuda.HostBuffer) error {
	n := b.pickRows(rows)
	if n*4 > b.ids.Bytes || rows*4 > host.Len() {
		return fmt.Errorf("argmax: %d rows, room for %d", n, min(b.ids.Bytes, host.Len())/4)
	}
	if n == 0 {
		return nil
	}
	if err := g.Argmax(g.Stream, b.dt, b.ids, l.buf, n, l.cols()); err != nil {
		return err
	}
	return g.Stream.DownloadAsync(host, b.ids, rows*4)
}

// decodeIDs reads len(dst) little-endian int32 ids from host.
func decodeIDs(dst []int32, host cuda.HostBuffer) {
	src := host.Bytes()
	for i := range dst {
		dst[i] = int32(uint32(src[4*i]) | uint32(src[4*i+1])<<8 | uint32(src[4*i+2])<<16 | uint32(src[4*i+3])<<24)
	}
}

// flush runs on the GPU's thread at a synchronisation point: it ends a
// capture and launches the graph (or replays the bucket's graph), then
// returns (and clears) the first failure of the ops before it. Later ops
// of the iteration run eagerly on the padded layout.
func (b *Backend) flush(g *cuda.GPU) error {
	switch b.mode {
	case capture:
		failed := b.err != nil
		gr, err := g.Stream.EndCapture(failed)
		switch {
		case err == nil && gr != nil:
			b.bucket.graph, b.bucket.ops = gr, b.ops
			err = gr.Launch(g.Stream)
		case err == nil:
			err = b.err
		}
		if err != nil {
			// The captured work never ran: turn graphs off and run the
			// iteration's ops eagerly, so a capture problem costs speed,
			// not the run.
			fmt.Fprintf(os.Stderr, "cuda backend: decode graphs turned off, capturing %d rows failed: %v\n", b.cur.nTok, err)
			b.graphsOn, b.err = false, nil
			for _, fn := range b.capOps {
				if err := fn(g); err != nil {
					b.err = err
					break
				}
			}
		}
		b.capOps = b.capOps[:0]
	case replay:
		if b.ops != b.bucket.ops && b.err == nil {
			b.err = fmt.Errorf("iteration queued %d ops, its graph holds %d", b.ops, b.bucket.ops)
		} else if !b.launched {
			if err := b.bucket.graph.Launch(g.Stream); err != nil && b.err == nil {
				b.err = err
			}
		}
	}
	b.launched = false
	b.mode = eager
	err := b.err
	b.err = nil
	return err
}

// Zero clears t.
func (b *Backend) Zero(t model.Tensor) {
	d := ft(t)
	b.op(func(g *cuda.GPU) error { return g.Stream.Zero(d.buf) })
}

// ---- the iteration ----

// bucketFor is the padded decode batch a graph is captured for: powers of
// two up to 16, then multiples of 16 (at most 1/16 of padding rows).
func bucketFor(n int) int {
	if n <= 16 {
		p := 1
		for p < n {
			p *= 2
		}
		return p
	}
	return (n + 15) / 16 * 16
}

// SetBatch validates the layout, writes it (padded to a graph bucket for
// decode iterations) into pinned memory and queues its one copy to the
// device; a decode iteration whose bucket has a graph skips its ops from
// here on and replays the graph at Argmax.
func (b *Backend) SetBatch(bt *model.Batch) error {
	b.release()
	// Without a KV cache (ops checked on their own) the batch has no
	// attention items and no graphs.
	c := b.cache
	T, S := len(bt.Tokens), len(bt.LogitRows)
	if len(bt.Positions) != T {
		return fmt.Errorf("batch: %d tokens, %d positions", T, len(bt.Positions))
	}
	covered := 0
	decode := T > 0 && len(bt.Seqs) == T && S == T
	for _, s := range bt.Seqs {
		if s.Start != int32(covered) || s.Len <= 0 {
			return fmt.Errorf("batch: sequences must cover the tokens in order (sequence at %d of %d tokens, expected %d)", s.Start, s.Len, covered)
		}
		if s.Slot < 0 || s.Past < 0 {
			return fmt.Errorf("batch: slot %d, positions %d..%d: negative", s.Slot, s.Past, s.Past+s.Len-1)
		}
		if c != nil && (int(s.Slot) >= c.c.Slots || int(s.Past+s.Len) > c.c.Capacity) {
			return fmt.Errorf("batch: slot %d, positions %d..%d outside the KV cache (%d slots x %d)", s.Slot, s.Past, s.Past+s.Len-1, c.c.Slots, c.c.Capacity)
		}
		covered += int(s.Len)
		decode = decode && s.Len == 1
	}
	if covered != T {
		return fmt.Errorf("batch: sequences cover %d of %d tokens", covered, T)
	}
	for i, r := range bt.LogitRows {
		if r < 0 || int(r) >= T || decode && int(r) != i {
			decode = false
			if r < 0 || int(r) >= T {
				return fmt.Errorf("batch: logit row %d of %d tokens", r, T)
			}
		}
	}
	rows := T
	var gs *graphState
	if decode && b.graphsOn && b.minRows > 0 && c != nil {
		rows = min(bucketFor(T), b.minRows)
		gs = b.graphs[rows]
		if gs == nil {
			gs = &graphState{}
			b.graphs[rows] = gs
		}
	}
	G, perL, scratch := 0, 0, int32(0)
	if c != nil {
		G = c.c.Heads / c.c.KVHeads
		perL = cuda.AttnItemTokens(c.shape, cuda.AttnRowsLarge)
		scratch = int32(c.c.Slots)
	}

	// Host layout: tokens, positions, slots [rows], logit rows [rows or S],
	// small items, large items.
	nLogit := S
	if gs != nil {
		nLogit = rows
	}
	var small, large []int32
	smallRows := 0
	lay := b.tmp[:0]
	lay = append(lay, bt.Tokens...)
	for i, id := range bt.Tokens {
		if id < 0 {
			return fmt.Errorf("batch: token id %d at row %d", id, i)
		}
	}
	if len(bt.Fed) > 0 {
		_, picks, err := b.pipe.Last()
		if err != nil {
			return fmt.Errorf("batch: %d fed tokens: %w", len(bt.Fed), err)
		}
		for _, f := range bt.Fed {
			if f.Row < 0 || int(f.Row) >= T || f.Pick < 0 || int(f.Pick) >= picks {
				return fmt.Errorf("batch: fed token at row %d from pick %d (%d tokens, %d picks)", f.Row, f.Pick, T, picks)
			}
			lay[f.Row] = -1 - f.Pick
		}
	}
	for range rows - T {
		lay = append(lay, 0)
	}
	lay = append(lay, bt.Positions...)
	for range rows - T {
		lay = append(lay, 0)
	}
	for _, s := range bt.Seqs {
		for range s.Len {
			lay = append(lay, s.Slot)
		}
	}
	for range rows - T {
		lay = append(lay, scratch)
	}
	lay = append(lay, bt.LogitRows...)
	for i := S; i < nLogit; i++ {
		lay = append(lay, int32(i))
	}
	for _, s := range bt.Seqs {
		if c == nil {
			break
		}
		if int(s.Len)*G <= cuda.AttnRowsSmall {
			small = append(small, s.Start, s.Len, s.Slot, s.Past)
			smallRows = max(smallRows, int(s.Len)*G)
			continue
		}
		for t0 := int32(0); t0 < s.Len; t0 += int32(perL) {
			large = append(large, s.Start+t0, min(int32(perL), s.Len-t0), s.Slot, s.Past+t0)
		}
	}
	for i := T; i < rows; i++ {
		small = append(small, int32(i), 1, scratch, 0)
		smallRows = max(smallRows, G)
	}
	rowsS := cuda.AttnRowsSmall
	if c != nil && smallRows <= cuda.AttnRowsTiny && c.c.HeadDim >= 32 {
		rowsS = cuda.AttnRowsTiny
	}
	// The kernels read items as int4: 16-byte aligned.
	for len(lay)%4 != 0 {
		lay = append(lay, 0)
	}
	offS := len(lay)
	lay = append(lay, small...)
	offL := len(lay)
	lay = append(lay, large...)
	b.tmp = lay

	var setErr error
	err := b.dev.Do(func(g *cuda.GPU) error {
		if b.mode != eager { // an iteration never synchronised: finish it
			if err := b.flush(g); err != nil {
				setErr = err
			}
		}
		if err := b.ensureLayout(g, max(rows, b.maxRows)); err != nil {
			return err
		}
		n := len(lay) * 4
		if n > b.lay.Bytes {
			return fmt.Errorf("batch layout of %d bytes, room for %d", n, b.lay.Bytes)
		}
		// The previous copy out of the staging buffer must be done.
		if err := b.layEvent.Sync(); err != nil {
			return err
		}
		copy(b.layHost.Bytes(), i32Bytes(lay))
		if err := g.Stream.UploadAsync(b.lay, b.layHost, n); err != nil {
			return err
		}
		if err := b.layEvent.Record(g.Stream); err != nil {
			return err
		}
		at := func(off, cnt int) cuda.Buffer {
			if cnt == 0 {
				return cuda.Buffer{Ptr: b.lay.Ptr}
			}
			return b.lay.Slice(off*4, cnt*4)
		}
		b.cur = batchLayout{
			tokens: at(0, rows), pos: at(rows, rows), slot: at(2*rows, rows), logit: at(3*rows, nLogit),
			itemsS: at(offS, len(small)), itemsL: at(offL, len(large)),
			nTok: rows, nLogit: nLogit, nS: len(small) / 4, nL: len(large) / 4, pad: gs != nil, realLogit: S,
			rowsS: rowsS, splitsS: 1,
		}
		if b.splitOn && c != nil {
			b.cur.splitsS = g.AttnSplits(b.cur.nS, c.shape)
		}
		b.ops, b.bucket, b.mode = 0, gs, eager
		switch {
		case gs == nil:
		case gs.graph != nil:
			// Start the GPU now: the host walks the (skipped) ops meanwhile.
			b.mode = replay
			if err := gs.graph.Launch(g.Stream); err != nil {
				return err
			}
			b.launched = true
		case gs.seen > 0:
			if err := g.Stream.BeginCapture(); err != nil {
				return err
			}
			b.mode = capture
		default:
			gs.seen++
		}
		return nil
	})
	if err == nil {
		err = setErr
	}
	return err
}

// op queues fn on the GPU's thread. In replay mode the bucket's graph
// already holds it; after a failure the rest of the iteration is skipped
// and the failure is reported at the next synchronising call.
func (b *Backend) op(fn func(g *cuda.GPU) error) {
	b.release()
	b.ops++
	switch b.mode {
	case replay:
		return
	case capture:
		b.capOps = append(b.capOps, fn)
	}
	b.dev.Post(func(g *cuda.GPU) {
		if b.err != nil {
			return
		}
		if err := fn(g); err != nil {
			b.err = err
		}
	}, func(err error) {
		if b.err == nil {
			b.err = err
		}
	})
}

// release queues the held-back op, if any, on its own.
func (b *Backend) release() {
	p := b.pend
	if p == nil {
		return
	}
	b.pend = nil
	switch p.kind {
	case pendRope:
		b.rope(p.qkv, p.table, p.h, p.lay)
	case pendNorm:
		b.rmsnorm(p.out, p.res, p.nw, p.rows, p.eps)
	case pendGemm:
		if p.res == nil {
			b.matmul(p.out, p.x, p.w, p.rows)
			return
		}
		b.gemv(p, p.out, cuda.GemvFusion{})
	}
}

// take returns the held-back op if it is a RoPE of t, or a GEMM or norm
// into t over rows, and releases any other.
func (b *Backend) take(kind pendKind, t *tensor, rows int) *pending {
	p := b.pend
	if p != nil && p.kind == kind && (kind == pendRope && p.qkv == t || kind != pendRope && p.out == t && p.rows == rows) {
		b.pend = nil
		return p
	}
	b.release()
	return nil
}

// takeGemm returns the held-back GEMM into t over rows if fits says the
// consumer can fold it in, and releases anything else.
func (b *Backend) takeGemm(t *tensor, rows int, fits func(*pending) bool) *pending {
	if p := b.pend; p != nil && p.kind == pendGemm && p.out == t && p.rows == rows && fits(p) {
		b.pend = nil
		return p
	}
	b.release()
	return nil
}

// plainGemm: a held-back GEMM without a norm prologue (one that may take
// the residual add as its epilogue).
func plainGemm(p *pending) bool { return p.res == nil }

// gemvFusing is whether ops over rows rows are held back for the decode
// GEMV fusions (see pending).
func (b *Backend) gemvFusing(rows int) bool {
	return b.fuseOn && b.blas == nil && rows <= cuda.GemvRows()
}

// gemv queues the held-back GEMM p, with its norm prologue if it has one
// and the epilogue fu, into y.
func (b *Backend) gemv(p *pending, y *tensor, fu cuda.GemvFusion) {
	b.op(func(g *cuda.GPU) error {
		n, k := p.w.shape[0], p.w.shape[1]
		if fu.GLU {
			n /= 2
		}
		if p.x.cols() != k || y.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v (fused: %+v)", p.w.name, p.x.cols(), y.cols(), p.w.shape, fu)
		}
		var x cuda.Buffer
		if p.res != nil {
			fu.Norm = &cuda.GemvNorm{Residual: p.res.buf, Weight: p.nw.buf, Out: p.x.buf, Eps: p.eps}
		} else {
			x = p.x.buf
		}
		return g.GemmFused(g.Stream, b.dt, y.buf, x, p.w.buf, p.rows, n, k, fu)
	})
}

// rows is the row count an op runs on: the caller's, or the bucket's in a
// padded decode iteration.
func (b *Backend) rows(r int) int {
	if b.cur.pad {
		return b.cur.nTok
	}
	return r
}

// Embed gathers the batch tokens' embedding rows.
func (b *Backend) Embed(out, table model.Tensor) {
	o, tb := ft(out), ft(table)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		// Fed tokens (-1 - j) read pick j of the last ArgmaxStart from
		// b.ids: captured graphs keep the pointer, which only changes
		// when the layout grows (and drops them).
		return g.EmbeddingFed(g.Stream, b.dt, o.buf, tb.buf, lay.tokens, b.ids, lay.nTok, tb.cols(), tb.rows())
	})
}

// RMSNorm normalises rows of x into out.
func (b *Backend) RMSNorm(out, x, w model.Tensor, rows int, eps float32) {
	o, xi, wi := ft(out), ft(x), ft(w)
	rows = b.rows(rows)
	// An in-place norm is not held back: the GEMM's prologue would write
	// the rows other blocks are still reading.
	if b.gemvFusing(rows) && b.normFuse && o != xi {
		b.release()
		b.pend = &pending{kind: pendNorm, out: o, res: xi, nw: wi, rows: rows, eps: eps}
		return
	}
	b.rmsnorm(o, xi, wi, rows, eps)
}

func (b *Backend) rmsnorm(o, x, w *tensor, rows int, eps float32) {
	b.op(func(g *cuda.GPU) error {
		return g.RMSNorm(g.Stream, b.dt, o.buf, x.buf, w.buf, rows, x.cols(), eps)
	})
}

// AddRMSNorm: residual += delta, out = RMSNorm(residual).
func (b *Backend) AddRMSNorm(residual, delta, w, out model.Tensor, rows int, eps float32) {
	r, d, wi, o := ft(residual), ft(delta), ft(w), ft(out)
	rows = b.rows(rows)
	// On the decode path the GEMM that produced delta adds it to the
	// residual itself, and the norm waits for the GEMM that reads out.
	if p := b.takeGemm(d, rows, plainGemm); p != nil {
		b.gemv(p, r, cuda.GemvFusion{Residual: true})
		b.pend = &pending{kind: pendNorm, out: o, res: r, nw: wi, rows: rows, eps: eps}
		if !b.normFuse {
			b.release()
		}
		return
	}
	b.op(func(g *cuda.GPU) error {
		return g.AddRMSNorm(g.Stream, b.dt, o.buf, r.buf, d.buf, wi.buf, rows, r.cols(), eps)
	})
}

// Add: dst += src over rows.
func (b *Backend) Add(dst, src model.Tensor, rows int) {
	d, s := ft(dst), ft(src)
	rows = b.rows(rows)
	if p := b.takeGemm(s, rows, plainGemm); p != nil {
		b.gemv(p, d, cuda.GemvFusion{Residual: true})
		return
	}
	b.op(func(g *cuda.GPU) error { return g.Add(g.Stream, b.dt, d.buf, s.buf, rows*d.cols()) })
}

// MatMul is the gemm_plugin GEMM: cuBLASLt (auto) or the own kernel. On
// the own GEMM's decode path it is held back (see pending), taking a
// held-back RMSNorm of x into its prologue.
func (b *Backend) MatMul(out, x, w model.Tensor, rows int) {
	o, xi, wt := ft(out), ft(x), ft(w)
	rows = b.rows(rows)
	if b.gemvFusing(rows) {
		p := &pending{kind: pendGemm, out: o, x: xi, w: wt, rows: rows}
		if n := b.take(pendNorm, xi, rows); n != nil {
			p.res, p.nw, p.eps = n.res, n.nw, n.eps
		}
		b.pend = p
		return
	}
	b.matmul(o, xi, wt, rows)
}

func (b *Backend) matmul(o, xi, wt *tensor, rows int) {
	n, k := wt.shape[0], wt.shape[1]
	b.op(func(g *cuda.GPU) error {
		if xi.cols() != k || o.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v", wt.name, xi.cols(), o.cols(), wt.shape)
		}
		if b.blas != nil {
			return b.blas.Matmul(g.Stream, b.dt, o.buf, xi.buf, wt.buf, rows, n, k)
		}
		return g.Gemm(g.Stream, b.dt, o.buf, xi.buf, wt.buf, rows, n, k)
	})
}

func attnShape(h model.HeadLayout) cuda.AttnShape {
	return cuda.AttnShape{Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim}
}

// HeadNorm is Qwen3's qk-norm.
func (b *Backend) HeadNorm(qkv, qw, kw model.Tensor, h model.HeadLayout, eps float32) {
	q, qn, kn := ft(qkv), ft(qw), ft(kw)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		return g.HeadNorm(g.Stream, b.dt, q.buf, qn.buf, kn.buf, lay.nTok, attnShape(h), eps)
	})
}

// RoPE rotates the query and key heads by each token's position.
func (b *Backend) RoPE(qkv, table model.Tensor, h model.HeadLayout) {
	q, tb := ft(qkv), ft(table)
	if b.fuseOn && h.HeadDim%16 == 0 {
		b.release()
		b.pend = &pending{kind: pendRope, qkv: q, table: tb, h: h, lay: b.cur}
		return
	}
	b.rope(q, tb, h, b.cur)
}

func (b *Backend) rope(q, tb *tensor, h model.HeadLayout, lay batchLayout) {
	b.op(func(g *cuda.GPU) error {
		if tb.f32.Bytes == 0 {
			return fmt.Errorf("rope: table %s has no float32 copy (upload it as F32)", tb.name)
		}
		W := q.cols()
		off := h.Heads * h.HeadDim * b.dt.Size()
		k := q.buf.Slice(off, q.buf.Bytes-off)
		return g.Rope(g.Stream, b.dt, q.buf, k, lay.pos, tb.f32, lay.nTok, h.Heads, h.KVHeads, h.HeadDim, W, W)
	})
}

// ropeFoldOn is XRUN_CUDA_ATTN_ROPE, read once: "0" keeps RoPE and the
// cache write in a kernel of their own (RopeKV) in front of the decode
// attention, instead of folded into it (see Attention).
var ropeFoldOn = engine.Switches.CUDAAttnRope.On()

// Attention writes the batch's keys and values into the cache, then runs
// the decode items (a few query rows per block) and the prefill items
// (chunks of up to 64 query rows) over it. With a held-back RoPE (see
// pending) and only decode items (every token in one, no prefill chunk),
// the decode attention kernel does the rotation and the cache write itself
// (cuda.AttnLaunch.Rope), with either gemm_plugin and at any batch: one
// kernel less per layer, and the attention streams its cached keys while
// the QKV projection finishes.
func (b *Backend) Attention(out, qkv model.Tensor, cache model.KVCache, layer int) {
	o, q, c := ft(out), ft(qkv), cache.(*kvCache)
	lay := b.cur
	p := b.take(pendRope, q, 0)
	b.op(func(g *cuda.GPU) error {
		k := c.k.Slice(layer*c.layerBytes, c.layerBytes)
		v := c.v.Slice(layer*c.layerBytes, c.layerBytes)
		small := cuda.AttnLaunch{Items: lay.itemsS, N: lay.nS, Rows: lay.rowsS, Splits: lay.splitsS, Work: b.attnWork}
		if b.fuseOn {
			small.Counters = b.attnCnt
		}
		if p != nil && p.table.f32.Bytes == 0 {
			return fmt.Errorf("rope: table %s has no float32 copy (upload it as F32)", p.table.name)
		}
		if p != nil && ropeFoldOn && lay.nL == 0 && lay.nS > 0 && g.AttnFoldsRope(c.shape, small) {
			small.Rope = p.table.f32
		}
		switch {
		case small.Rope.Ptr != 0:
		case p != nil:
			if err := g.RopeKV(g.Stream, b.dt, k, v, q.buf, lay.pos, lay.slot, p.table.f32, lay.nTok, c.c.Capacity, c.shape); err != nil {
				return err
			}
		default:
			if err := g.KVWrite(g.Stream, b.dt, k, v, q.buf, lay.pos, lay.slot, lay.nTok, c.c.Capacity, c.shape); err != nil {
				return err
			}
		}
		if err := g.Attention(g.Stream, b.dt, o.buf, q.buf, k, v, c.c.Capacity, c.shape, small); err != nil {
			return err
		}
		large := cuda.AttnLaunch{Items: lay.itemsL, N: lay.nL, Rows: cuda.AttnRowsLarge, Splits: 1}
		return g.Attention(g.Stream, b.dt, o.buf, q.buf, k, v, c.c.Capacity, c.shape, large)
	})
}

// SwiGLU: out = silu(gate) * up over the halves of a fused gate_up row.
func (b *Backend) SwiGLU(out, gateUp model.Tensor, rows int) {
	o, gu := ft(out), ft(gateUp)
	rows = b.rows(rows)
	glu := func(p *pending) bool { return gu.cols() == 2*o.cols() && p.w.shape[0] == gu.cols() }
	if p := b.takeGemm(gu, rows, glu); p != nil {
		b.gemv(p, o, cuda.GemvFusion{GLU: true})
		return
	}
	b.swiglu(o, gu, rows)
}

func (b *Backend) swiglu(o, gu *tensor, rows int) {
	b.op(func(g *cuda.GPU) error {
		F := o.cols()
		if gu.cols() != 2*F {
			return fmt.Errorf("swiglu: gate_up has %d columns, out %d", gu.cols(), F)
		}
		up := gu.buf.Slice(F*b.dt.Size(), gu.buf.Bytes-F*b.dt.Size())
		return g.SwiGLU(g.Stream, b.dt, o.buf, gu.buf, up, rows, F, 2*F)
	})
}

// GatherRows: out[j] = x[LogitRows[j]].
func (b *Backend) GatherRows(out, x model.Tensor) {
	o, xi := ft(out), ft(x)
	lay := b.cur
	b.op(func(g *cuda.GPU) error {
		return g.GatherRows(g.Stream, b.dt, o.buf, xi.buf, lay.logit, lay.nLogit, xi.cols())
	})
}

// Route picks each token's experts on the device (moe.go).
func (b *Backend) Route(idx, weights, logits, forced model.Tensor, forcedRow, rows, k int, method string, counts model.Tensor, layer int) {
	b.route(idx, weights, logits, forced, forcedRow, rows, k, method, counts, layer)
}

// MoE runs the experts on the routed tokens and combines them (moe.go).
func (b *Backend) MoE(out, x, idx, weights, gateUp, down model.Tensor, rows, k int) {
	b.moe(out, x, idx, weights, gateUp, down, rows, k)
}

// ---- profiler ----

// StartProfile opens CUPTI for a profiled pass. It is called only for the
// profiled pass, after the timed repeats, because a loaded CUPTI slows every
// launch (gpu.md). Where CUPTI is unusable (no libcupti, or nsys / ncu
// already attached) the pass still runs and cupti.Notes says why its
// profile has no kernels; cuProfilerStart/Stop still bracket the window
// for the outside profiler.
func (b *Backend) StartProfile(epoch time.Time) {
	s, err := cupti.Open()
	if err != nil {
		b.prof = nil
		return
	}
	if !s.Stats().Verified {
		// Check the record layout once per process on a kernel of known
		// name before trusting any record.
		name := "random_fill_f16"
		if b.dt == cuda.BF16 {
			name = "random_fill_bf16"
		}
		err := b.dev.Do(func(g *cuda.GPU) error {
			buf, err := g.Alloc(1 << 12)
			if err != nil {
				return err
			}
			defer g.Free(buf)
			return s.SelfTest(func() error {
				if err := g.RandomFill(g.Stream, b.dt, buf, 1, 0, 1); err != nil {
					return err
				}
				return g.Stream.Sync()
			}, name)
		})
		cupti.RecordSelfTest(err)
		if err != nil {
			b.prof = nil
			return
		}
	}
	s.Begin(epoch)
	b.prof = s
}

// WindowStart opens the span an outside nsys / ncu records, and CUPTI's
// records. The engine calls it at the top of an iteration, after the last
// one's synchronising Argmax, so no earlier launch is still queued.
func (b *Backend) WindowStart() {
	b.dev.Post(func(g *cuda.GPU) { _ = g.ProfilerStart() }, func(error) {})
	if b.prof != nil {
		_ = b.prof.Start()
	}
}

// WindowStop closes both, at an iteration boundary too.
func (b *Backend) WindowStop() {
	if b.prof != nil {
		_ = b.prof.Stop()
	}
	b.dev.Post(func(g *cuda.GPU) { _ = g.ProfilerStop() }, func(error) {})
}

// IterationStart marks the iteration's start on CUPTI's clock, so records
// are attributed to it, and opens the iteration's NVTX range when a
// profiler attached a tool. The range is pushed on the GPU's thread, in
// order with the iteration's launches, because NVTX ranges belong to a
// thread and nsys lays them over the kernels that thread launched. The
// engine calls this in every iteration of a profiled pass, inside the
// window and out (`nsys -c cudaProfilerApi` keeps only the window's); timed
// passes never call it. Without a tool it costs one atomic load.
func (b *Backend) IterationStart(i int, name string) {
	if b.prof != nil {
		b.prof.Mark(i)
	}
	if cuda.NVTXEnabled() {
		b.dev.Post(func(*cuda.GPU) { cuda.RangePush(name) }, func(error) {})
	}
}

// IterationEnd closes the iteration's NVTX range once the iteration is
// queued (with overlap the next one is queued before this one's tokens
// are back, and ranges must not nest); CUPTI needs nothing: the next
// mark ends the iteration, and inside a window iterations run
// synchronously.
func (b *Backend) IterationEnd(int) {
	if cuda.NVTXEnabled() {
		b.dev.Post(func(*cuda.GPU) { cuda.RangePop() }, func(error) {})
	}
}

// Ops drains the profiled pass's kernel, copy and memset records.
func (b *Backend) Ops() []model.OpRecord {
	if b.prof == nil {
		return nil
	}
	_ = b.dev.Do(func(g *cuda.GPU) error { return g.Stream.Sync() })
	ops, _ := b.prof.Drain()
	b.prof = nil
	return ops
}

package cpu

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// Backend is the float32 CPU backend. It implements model.Backend.
type Backend struct {
	opt     model.BackendOptions
	blocked bool // gemm_plugin auto
	pool    *pool

	batch   *model.Batch
	tokSlot []int32 // per batch token: its sequence's KV slot
	tokSeq  []int32 // per batch token: its sequence's index in the batch
	items   []attnItem
	fp8     fp8Scratch

	// Per-op task structs, reused so dispatching allocates nothing.
	gemmT   gemmTask
	rowT    rowTask
	attnT   attnTask
	moeT    moeTask
	fillT   fillTask
	sliceT  sliceTask
	routeT  routeTask
	argmaxT argmaxTask

	scratch16 [][]float32 // per worker: a ragged C tile
	attn      []attnScratch
	moe       moeScratch

	// MLA and grouped routing (mla.go, route_grouped.go).
	mlaPrepT    mlaPrepTask
	mlaT        mlaTask
	mlaItems    []mlaItem
	mlaScratch  []mlaScratch
	groupRouteT groupRouteTask

	oss   ossState     // GPT-OSS (gptoss.go)
	mxfp4 mxfp4Scratch // MXFP4 experts (mxfp4.go)

	prof profiler
	err  error // first failure of an op, reported at the next sync

	pipe pipeline
}

// pipeline is the Pipeliner's state. The CPU runs every op when it is
// called, so a started pick is already made; keeping its tickets and fed
// tokens anyway lets the engine's overlapped schedule run (and be tested)
// on this backend exactly as on the GPU.
type pipeline struct {
	model.PickTickets
	picks [2][]int32 // ticket t's picks in picks[t%2]
	fed   model.Batch
	tok   []int32 // fed.Tokens: the batch's ids with the fed ones filled in
}

// Option names of the GEMM paths.
const (
	GemmAuto    = "auto"
	GemmDisable = "disable"
)

// New creates a CPU backend.
func New(opt model.BackendOptions) (*Backend, error) {
	switch opt.Gemm {
	case "", GemmAuto:
		opt.Gemm = GemmAuto
	case GemmDisable:
	default:
		return nil, fmt.Errorf("gemm_plugin %q: want auto or disable", opt.Gemm)
	}
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	b := &Backend{opt: opt, blocked: opt.Gemm == GemmAuto, pool: newPool(threads)}
	for range threads {
		b.scratch16 = append(b.scratch16, make([]float32, mr*nr))
		b.attn = append(b.attn, attnScratch{})
	}
	return b, nil
}

// Name reports the backend and its GEMM kernel.
func (b *Backend) Name() string { return "cpu/" + b.gemmName() }

func (b *Backend) gemmName() string {
	if b.blocked {
		return gemmKernelName()
	}
	return "cpu_gemm_plain"
}

// Threads is the number of goroutines ops run on.
func (b *Backend) Threads() int { return b.pool.workers }

// Close stops the worker goroutines.
func (b *Backend) Close() error {
	b.pool.close()
	return nil
}

// tensor is the CPU backend's tensor: float32 or int32 host memory, plus a
// packed copy for GEMM weights under gemm auto (the plain copy is then
// dropped). An FP8 GEMM weight (q set) holds the E4M3 values of its codes,
// unscaled, which float32 represents exactly.
type tensor struct {
	name  string
	shape []int
	f     []float32
	i     []int32
	pk    []*packed // one per matrix (Experts: one per expert)
	q     *fp8Weight
	mx    *model.MXFP4 // MXFP4 experts (mxfp4.go)
}

func (t *tensor) Shape() []int { return t.shape }

func (t *tensor) cols() int { return t.shape[len(t.shape)-1] }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func ft(t model.Tensor) *tensor {
	if t == nil {
		return nil
	}
	return t.(*tensor)
}

// Upload converts a host weight to float32 (and packs GEMM weights). An
// F8_E4M3 Matrix or Experts weight becomes an FP8 GEMM weight.
func (b *Backend) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	if err := kind.CheckShape(h.Shape); err != nil {
		return nil, err
	}
	if h.DType == "F8_E4M3" {
		return b.uploadFP8(name, kind, h)
	}
	f, err := h.Float32()
	if err != nil {
		return nil, err
	}
	return b.weight(name, kind, slices.Clone(h.Shape), f), nil
}

// Random creates a weight with model.RandomFill values, filled in parallel.
func (b *Backend) Random(name string, kind model.WeightKind, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	if err := kind.CheckShape(shape); err != nil {
		return nil, err
	}
	f := make([]float32, numel(shape))
	t := &b.fillT
	*t = fillTask{dst: f, seed: seed, scale: scale}
	b.pool.run(t, (len(f)+fillChunk-1)/fillChunk)
	return b.weight(name, kind, slices.Clone(shape), f), nil
}

// RandomSlice creates a split model's slice of a random weight, its rows
// filled in parallel as Random's chunks.
func (b *Backend) RandomSlice(name string, kind model.WeightKind, shape []int, seed uint64, scale float32, runs []model.RandomRun) (model.Tensor, error) {
	if err := kind.CheckShape(shape); err != nil {
		return nil, err
	}
	f := make([]float32, numel(shape))
	t := &b.sliceT
	for _, r := range runs {
		if r.Cols <= 0 || r.Rows <= 0 || r.Dst+r.Rows*r.Cols > int64(len(f)) {
			return nil, fmt.Errorf("%s: run %+v outside its slice of %d elements", name, r, len(f))
		}
		*t = sliceTask{dst: f, blk: r, rows: max(1, fillChunk/int(r.Cols)), seed: seed, scale: scale}
		b.pool.run(t, (int(r.Rows)+t.rows-1)/t.rows)
	}
	return b.weight(name, kind, slices.Clone(shape), f), nil
}

// sliceTask fills chunk c of one run: rows rows of it.
type sliceTask struct {
	dst   []float32
	blk   model.RandomRun
	rows  int
	seed  uint64
	scale float32
}

func (t *sliceTask) run(c, _ int) {
	r := t.blk
	lo := int64(c * t.rows)
	for i := lo; i < min(lo+int64(t.rows), r.Rows); i++ {
		at := r.Dst + i*r.Cols
		model.RandomFill(t.dst[at:at+r.Cols], t.seed, r.Src+i*r.Stride, t.scale)
	}
}

const fillChunk = 1 << 16

type fillTask struct {
	dst   []float32
	seed  uint64
	scale float32
}

func (t *fillTask) run(c, _ int) {
	lo := c * fillChunk
	hi := min(lo+fillChunk, len(t.dst))
	model.RandomFill(t.dst[lo:hi], t.seed, int64(lo), t.scale)
}

func (b *Backend) weight(name string, kind model.WeightKind, shape []int, f []float32) *tensor {
	t := &tensor{name: name, shape: shape, f: f}
	if !b.blocked {
		return t
	}
	switch kind {
	case model.Matrix:
		t.pk = []*packed{packWeight(f, shape[0], shape[1])}
		t.f = nil
	case model.Experts:
		n, k := shape[1], shape[2]
		for e := range shape[0] {
			t.pk = append(t.pk, packWeight(f[e*n*k:(e+1)*n*k], n, k))
		}
		t.f = nil
	}
	return t
}

// Alloc creates a zeroed buffer.
func (b *Backend) Alloc(name string, dt model.DType, shape ...int) (model.Tensor, error) {
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("%s: shape %v: sizes must be positive", name, shape)
		}
	}
	t := &tensor{name: name, shape: slices.Clone(shape)}
	if dt == model.Int32 {
		t.i = make([]int32, numel(shape))
	} else {
		t.f = make([]float32, numel(shape))
	}
	return t, nil
}

// WriteInt32 copies src into the start of t.
func (b *Backend) WriteInt32(t model.Tensor, src []int32) error {
	d := ft(t)
	if len(src) > len(d.i) {
		return fmt.Errorf("%s: writing %d int32 into %d", d.name, len(src), len(d.i))
	}
	copy(d.i, src)
	return nil
}

// WriteFloat32 copies src into the start of t.
func (b *Backend) WriteFloat32(t model.Tensor, src []float32) error {
	d := ft(t)
	if len(src) > len(d.f) {
		return fmt.Errorf("%s: writing %d floats into %d", d.name, len(src), len(d.f))
	}
	copy(d.f, src)
	return nil
}

// ReadFloat32 copies the first rows of t to dst.
func (b *Backend) ReadFloat32(dst []float32, t model.Tensor, rows int) error {
	if err := b.takeErr(); err != nil {
		return err
	}
	s := ft(t)
	copy(dst, s.f[:rows*s.cols()])
	return nil
}

// ReadInt32 copies the first rows of t to dst.
func (b *Backend) ReadInt32(dst []int32, t model.Tensor, rows int) error {
	if err := b.takeErr(); err != nil {
		return err
	}
	s := ft(t)
	copy(dst, s.i[:rows*s.cols()])
	return nil
}

func (b *Backend) takeErr() error {
	err := b.err
	b.err = nil
	return err
}

// Zero clears t.
func (b *Backend) Zero(t model.Tensor) {
	s := ft(t)
	clear(s.f)
	clear(s.i)
}

// kvCache holds, per (layer, unit, KV head), a unit of positions: a slot
// of capacity positions rounded up to 16, or, paged, a block. K is stored
// in panels of 16 positions [pos/16][head dim][16], so the GEMM
// micro-kernel computes q·Kᵀ straight from the cache, and V row-major
// [pos][head dim], the layout P·V wants. Under FP8 the elements are E4M3
// codes (k8, v8) with one scale per layer for K and one for V.
type kvCache struct {
	c      model.KVConfig
	pad    int // capacity rounded up to 16: the longest sequence attention sees
	unit   int // positions per storage unit: pad, or the block size
	units  int // slots, or blocks
	k, v   []float32
	k8, v8 []uint8
	ks, vs []float32 // per layer (FP8)
}

func (c *kvCache) Config() model.KVConfig { return c.c }

// DefaultKVCacheBytes is the CPU backend's KV-cache budget unless
// BackendOptions.KVCacheBytes says otherwise.
const DefaultKVCacheBytes = 4 << 30

func (b *Backend) kvBudget() int64 {
	if b.opt.KVCacheBytes > 0 {
		return b.opt.KVCacheBytes
	}
	return DefaultKVCacheBytes
}

// MaxKVSlots is how many slots of c's capacity fit the budget (float32
// elements, or one byte each under FP8).
func (b *Backend) MaxKVSlots(c model.KVConfig) int {
	if c.Ring {
		return b.maxOSSSlots(c)
	}
	pad := int64((c.Capacity + nr - 1) / nr * nr)
	if c.MLA() {
		pad = int64(c.Capacity) // the MLA cache is not padded
	}
	per := c.KVBytesPerToken(c.ElemBytes(4)) * pad
	if per <= 0 {
		return 0
	}
	return int(min(b.kvBudget()/per, 1<<30))
}

// MaxKVBlocks is how many blocks of c.BlockSize positions fit the budget
// (model.Pager).
func (b *Backend) MaxKVBlocks(c model.KVConfig) int {
	per := c.KVBytesPerToken(c.ElemBytes(4)) * int64(c.BlockSize)
	if per <= 0 || c.MLA() {
		return 0
	}
	return int(min(b.kvBudget()/per, 1<<30))
}

// FP8KVCache marks the backend as keeping E4M3 caches (model.FP8KV).
func (b *Backend) FP8KVCache() {}

// Free drops the backend's hold on a tensor; the garbage collector does
// the rest.
func (b *Backend) Free(t model.Tensor) {
	if x, ok := t.(*tensor); ok {
		x.f, x.i, x.pk, x.mx = nil, nil, nil, nil
	}
}

// FreeKVCache drops a KV cache.
func (b *Backend) FreeKVCache(c model.KVCache) {
	switch x := c.(type) {
	case *kvCache:
		x.k, x.v, x.k8, x.v8 = nil, nil, nil, nil
	case *mlaCache:
		x.rows = nil
	case *ossCache:
		x.k, x.v = nil, nil
	}
}

// at is the offset of (layer, unit, head) in the cache's K and V.
func (c *kvCache) at(layer, unit, head int) int {
	return ((layer*c.units+unit)*c.c.KVHeads + head) * c.unit * c.c.HeadDim
}

// locate is where position p of a sequence lives: its unit (the slot, or
// the block its table lists) and the offset in it.
func (c *kvCache) locate(slot int32, blocks []int32, p int) (unit, off int) {
	if c.c.BlockSize == 0 {
		return int(slot), p
	}
	return int(blocks[p/c.unit]), p % c.unit
}

// direct reports whether attention reads the cache in place: one float32
// slot per sequence. Paged and FP8 caches are gathered (and dequantized)
// into the worker's scratch first, in the same layout, so every layout
// computes with the same values in the same order.
func (c *kvCache) direct() bool { return c.c.BlockSize == 0 && !c.c.FP8 }

// attnScratch is one worker's attention scratch; kg and vg take a
// gathered sequence's K panels and V rows.
type attnScratch struct {
	q, s, o []float32
	sum     []float32
	kg, vg  []float32
}

// NewKVCache allocates a KV cache and the attention scratch it implies.
func (b *Backend) NewKVCache(c model.KVConfig) (model.KVCache, error) {
	if c.Ring {
		return b.newOSSCache(c)
	}
	if c.MLA() {
		if c.Paged() || c.FP8 {
			return nil, fmt.Errorf("KV cache: MLA's latent cache is neither paged nor FP8 on the CPU backend")
		}
		return b.newMLACache(c)
	}
	pad := (c.Capacity + nr - 1) / nr * nr
	kc := &kvCache{c: c, pad: pad, unit: pad, units: c.Slots}
	if c.Paged() {
		if c.BlockSize%nr != 0 {
			return nil, fmt.Errorf("KV cache: block size %d is not a multiple of %d (the attention kernel's panel)", c.BlockSize, nr)
		}
		kc.unit, kc.units = c.BlockSize, c.Blocks
	}
	n := c.Layers * kc.units * c.KVHeads * kc.unit * c.HeadDim
	if n <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("KV cache %+v: sizes must be positive, heads a multiple of KV heads", c)
	}
	if c.FP8 {
		kc.k8, kc.v8 = make([]uint8, n), make([]uint8, n)
		kc.ks, kc.vs = layerScales(c.KScale, c.Layers), layerScales(c.VScale, c.Layers)
	} else {
		kc.k, kc.v = make([]float32, n), make([]float32, n)
	}
	rows := attnBlock(c.HeadLayout, pad) * (c.Heads / c.KVHeads)
	for w := range b.attn {
		a := &b.attn[w]
		if len(a.s) < rows*pad {
			a.s = make([]float32, rows*pad)
		}
		if len(a.q) < rows*c.HeadDim {
			a.q, a.o, a.sum = make([]float32, rows*c.HeadDim), make([]float32, rows*c.HeadDim), make([]float32, rows)
		}
		if !kc.direct() && len(a.kg) < pad*c.HeadDim {
			a.kg, a.vg = make([]float32, pad*c.HeadDim), make([]float32, pad*c.HeadDim)
		}
	}
	return kc, nil
}

// layerScales is one scale per layer: s, or 1 for every layer when s is
// nil.
func layerScales(s []float32, layers int) []float32 {
	out := make([]float32, layers)
	for i := range out {
		out[i] = 1
		if i < len(s) && s[i] > 0 {
			out[i] = s[i]
		}
	}
	return out
}

// SetBatch records the iteration's layout and plans the attention work.
func (b *Backend) SetBatch(bt *model.Batch) error {
	if len(bt.Fed) > 0 {
		p := &b.pipe
		slot, n, err := p.Last()
		if err != nil {
			return fmt.Errorf("batch: %d fed tokens: %w", len(bt.Fed), err)
		}
		last := p.picks[slot][:n]
		p.tok = append(p.tok[:0], bt.Tokens...)
		p.fed = *bt
		p.fed.Tokens = p.tok
		for _, f := range bt.Fed {
			if f.Row < 0 || int(f.Row) >= len(bt.Tokens) || f.Pick < 0 || int(f.Pick) >= len(last) {
				return fmt.Errorf("batch: fed token at row %d from pick %d (%d tokens, %d picks)", f.Row, f.Pick, len(bt.Tokens), len(last))
			}
			p.fed.Tokens[f.Row] = last[f.Pick]
		}
		bt = &p.fed
	}
	b.batch = bt
	b.tokSlot, b.tokSeq = b.tokSlot[:0], b.tokSeq[:0]
	for i, s := range bt.Seqs {
		for range s.Len {
			b.tokSlot = append(b.tokSlot, s.Slot)
			b.tokSeq = append(b.tokSeq, int32(i))
		}
	}
	if len(b.tokSlot) != len(bt.Tokens) || len(bt.Positions) != len(bt.Tokens) {
		return fmt.Errorf("batch: %d tokens, %d positions, sequences cover %d", len(bt.Tokens), len(bt.Positions), len(b.tokSlot))
	}
	return nil
}

// profiler times every op while a window is open.
type profiler struct {
	epoch time.Time
	on    bool
	iter  int
	ops   []model.OpRecord
}

func (b *Backend) StartProfile(epoch time.Time) {
	b.prof = profiler{epoch: epoch}
}
func (b *Backend) WindowStart()                       { b.prof.on = true }
func (b *Backend) WindowStop()                        { b.prof.on = false }
func (b *Backend) IterationStart(index int, _ string) { b.prof.iter = index }
func (b *Backend) IterationEnd(int)                   {}

// Ops drains the op records.
func (b *Backend) Ops() []model.OpRecord {
	ops := b.prof.ops
	b.prof.ops = nil
	return ops
}

// begin and end bracket an op; they cost a branch when no window is open.
func (b *Backend) begin() time.Time {
	if !b.prof.on {
		return time.Time{}
	}
	return time.Now()
}

func (b *Backend) end(name string, t0 time.Time) {
	if !b.prof.on {
		return
	}
	now := time.Now()
	b.prof.ops = append(b.prof.ops, model.OpRecord{Name: name, Iteration: b.prof.iter,
		Start: t0.Sub(b.prof.epoch), Duration: now.Sub(t0)})
}

var (
	_ model.Backend      = (*Backend)(nil)
	_ model.KVBudget     = (*Backend)(nil)
	_ model.RandomSlicer = (*Backend)(nil)
	_ model.Pager        = (*Backend)(nil)
	_ model.FP8GEMMs     = (*Backend)(nil)
	_ model.FP8KV        = (*Backend)(nil)
	_ model.Releaser     = (*Backend)(nil)
	_ model.MLABackend   = (*Backend)(nil)
)

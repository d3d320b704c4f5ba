//go:build cgo && linux

package backend

import (
	"fmt"
	"slices"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// alloc and allocHost take memory the backend owns until Close (or
// freeOwned).
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
	if h.DType == "F8_E4M3" {
		return b.uploadFP8(name, kind, h)
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
	t := &tensor{name: name, shape: slices.Clone(shape), kind: kFloat, rnd: &randomFill{seed: seed, scale: scale}}
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

var _ model.RandomSlicer = (*Backend)(nil)

// RandomSlice makes a split model's slice of a random weight on the
// device, one launch per run (model.RandomSlicer).
func (b *Backend) RandomSlice(name string, kind model.WeightKind, shape []int, seed uint64, scale float32, runs []model.RandomRun) (model.Tensor, error) {
	if err := kind.CheckShape(shape); err != nil {
		return nil, err
	}
	// No rnd: FP8 requantizes from it as a whole weight (and split
	// models run no FP8).
	t := &tensor{name: name, shape: slices.Clone(shape), kind: kFloat}
	n, es := numel(shape), b.dt.Size()
	err := b.dev.Do(func(g *cuda.GPU) error {
		buf, err := b.alloc(g, n*es)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t.buf = buf
		b.memWeights += int64(buf.Bytes)
		for _, r := range runs {
			if r.Dst < 0 || r.Rows <= 0 || r.Cols <= 0 || r.Dst+r.Rows*r.Cols > int64(n) {
				return fmt.Errorf("%s: run %+v outside its slice of %d elements", name, r, n)
			}
			blk := buf.Slice(int(r.Dst)*es, int(r.Rows*r.Cols)*es)
			if err := g.RandomFillRows(g.Stream, b.dt, blk, int(r.Rows), int(r.Cols), seed, r.Src, r.Stride, scale); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
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
	size, rows := b.dt.Size(), shape[0]
	if dt == model.Int32 {
		t.kind, size = kInt32, 4
	} else {
		// Rows to spare past the largest batch, which the own GEMM's last
		// row tile reads instead of having them filled with zeros (slower).
		rows = cuda.GemmInputRows(rows)
	}
	err := b.dev.Do(func(g *cuda.GPU) error {
		b.dropGraphs()
		buf, err := b.alloc(g, rows*numel(shape[1:])*size)
		t.buf = buf
		b.memActs += int64(buf.Bytes)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t.kind == kFloat {
		if b.acts == nil {
			b.acts = map[*tensor]bool{}
		}
		b.acts[t] = true
		b.actRows()
	}
	return t, nil
}

// actRows sets minRows and maxRows from the live Float activations: a
// decode batch is padded to no more rows than the smallest holds.
func (b *Backend) actRows() {
	b.minRows, b.maxRows = 0, 0
	for t := range b.acts {
		if b.minRows == 0 || t.shape[0] < b.minRows {
			b.minRows = t.shape[0]
		}
		b.maxRows = max(b.maxRows, t.shape[0])
	}
}

// FreeKVCache gives back a KV cache the model dropped (model.Releaser).
func (b *Backend) FreeKVCache(c model.KVCache) {
	if kc, ok := c.(*kvCache); ok {
		b.free(kc)
	}
}

// The model frees what Reserve replaces, so that a replaced activation's
// rows no longer bound the padding of decode batches (actRows): a model
// calibrated on a short batch first (engine/model/fp8calib.go) would
// otherwise pad every later decode batch to that batch's one logit row.
var _ model.Releaser = (*Backend)(nil)

// NewKVCache allocates the cache, refusing one larger than KVFreeFraction
// of the memory still free, and sizes the batch layout buffers for the
// largest activation. A paged cache (c.BlockSize > 0) is c.Blocks blocks
// and the scratch one instead of slots, with its block tables (paged.go).
func (b *Backend) NewKVCache(c model.KVConfig) (model.KVCache, error) {
	if c.MLA() {
		return b.newMLACache(c) // mla.go
	}
	a := cuda.AttnShape{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim}
	if c.Layers <= 0 || c.Slots <= 0 || c.Capacity <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("KV cache %+v: sizes must be positive, heads a multiple of KV heads", c)
	}
	if c.HeadDim%8 != 0 {
		return nil, fmt.Errorf("KV cache: head dim %d is not a multiple of 8", c.HeadDim)
	}
	if err := b.checkFP8KV(c); err != nil { // kv_fp8.go
		return nil, err
	}
	es := c.ElemBytes(b.dt.Size())
	layer := (c.Slots + 1) * c.KVHeads * c.Capacity * c.HeadDim * es
	if c.Paged() {
		// Blocks (+1 scratch) in place of slots (paged.go).
		if err := checkPaged(c); err != nil {
			return nil, err
		}
		layer = (c.Blocks + 1) * c.KVHeads * c.BlockSize * c.HeadDim * es
	}
	kc := &kvCache{c: c, layerBytes: layer, shape: a}
	all := layer * c.Layers
	if c.Ring {
		all = ringBytes(c, b.dt.Size()) // GPT-OSS's ring cache (gptoss.go)
	}
	err := b.dev.Do(func(g *cuda.GPU) error {
		b.dropGraphs()
		if b.cache != nil { // replaced: give its memory back first
			b.freeOwned(g, b.cache.k, b.cache.v)
			b.freePages(g, b.cache.paged)
			b.cache = nil
		}
		if err := b.ensureLayout(g, max(b.maxRows, c.Slots)); err != nil {
			return err
		}
		budget, err := b.kvBudget(g, false)
		if err != nil {
			return err
		}
		need := 2 * int64(all)
		if need > budget && c.Paged() {
			return fmt.Errorf("KV cache of %d blocks (+1 scratch) x %d positions x %d layers needs %.2f GiB; the budget is %.2f GiB (weights %.2f GiB, activations %.2f GiB)",
				c.Blocks, c.BlockSize, c.Layers, gib(need), gib(budget), gib(b.memWeights), gib(b.memActs))
		}
		if need > budget {
			return fmt.Errorf("KV cache of %d slots (+1 scratch) x %d positions x %d layers needs %.2f GiB; the budget is %.2f GiB (weights %.2f GiB, activations %.2f GiB)",
				c.Slots, c.Capacity, c.Layers, gib(need), gib(budget), gib(b.memWeights), gib(b.memActs))
		}
		if b.attnWork.Bytes == 0 {
			if b.attnWork, err = b.alloc(g, cuda.AttnSplitWorkBytes(g.Info.SMs)); err != nil {
				return err
			}
			if b.attnCnt, err = b.alloc(g, cuda.AttnSplitCounterBytes(g.Info.SMs)); err != nil {
				return err
			}
			if err := g.Stream.Zero(b.attnCnt); err != nil {
				return err
			}
		}
		if kc.k, err = b.alloc(g, all); err != nil {
			return err
		}
		if kc.v, err = b.alloc(g, all); err != nil {
			return err
		}
		if c.Paged() {
			if kc.paged, err = b.newPages(g, c); err != nil {
				return err
			}
		}
		b.cache = kc
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kc, nil
}

// kvBudget is BackendOptions.KVCacheBytes, or KVFreeFraction of the
// device memory free (the current cache counted as free: it is replaced).
// The engine sizes the cache (MaxKVSlots, maxKVBlocks: size true) after
// reserving its activations, TensorRT-LLM's meaning (the memory free
// after the weights and runtime buffers), and the budget measured then
// stands for the backend's life, so that every run of a cell holds as
// many requests at once: measured again, it would shrink by what the
// first run left behind (captured graphs, the FP8 GEMMs' input scratch),
// and a cell's first repeat would run more requests at once than the
// others. A cache allocated before any sizing (FP8 calibration at load)
// is checked against the memory free then.
func (b *Backend) kvBudget(g *cuda.GPU, size bool) (int64, error) {
	if b.opt.KVCacheBytes > 0 {
		return b.opt.KVCacheBytes, nil
	}
	if b.kvBudgetBytes > 0 {
		return b.kvBudgetBytes, nil
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
		free += uint64(b.cache.k.Bytes + b.cache.v.Bytes) // an MLA cache has no v
	}
	budget := int64(frac * float64(free))
	if size {
		b.kvBudgetBytes = budget
	}
	return budget, nil
}

// MaxKVSlots is how many slots of c's capacity fit the KV budget (one slot
// is kept back as the padding rows' scratch slot).
func (b *Backend) MaxKVSlots(c model.KVConfig) int {
	per := c.SlotBytes(c.ElemBytes(b.dt.Size())) // a ring's sliding layers count their window only
	if per <= 0 {
		return 0
	}
	var budget int64
	err := b.dev.Do(func(g *cuda.GPU) (err error) {
		budget, err = b.kvBudget(g, true)
		return
	})
	if err != nil {
		return 0
	}
	return int(max(0, min(budget/per-1, 1<<30)))
}

// Free releases a tensor's or KV cache's device memory now. Graphs that
// might hold its address are dropped.
func (b *Backend) Free(t model.Tensor) { b.free(t) }

func (b *Backend) free(t any) {
	b.release()
	act := false
	if x, ok := t.(*tensor); ok && b.acts[x] {
		act = true
		delete(b.acts, x)
		b.actRows()
	}
	_ = b.dev.Do(func(g *cuda.GPU) error {
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		b.dropGraphs()
		switch x := t.(type) {
		case *tensor:
			if act {
				b.memActs -= int64(x.buf.Bytes)
			}
			b.freeOwned(g, x.buf, x.f32)
			x.buf, x.f32 = cuda.Buffer{}, cuda.Buffer{}
			if x.q != nil {
				b.freeOwned(g, x.q.scales)
				x.q = nil
			}
		case *kvCache:
			b.freeOwned(g, x.k, x.v)
			b.freePages(g, x.paged)
			x.k, x.v, x.paged = cuda.Buffer{}, cuda.Buffer{}, nil
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

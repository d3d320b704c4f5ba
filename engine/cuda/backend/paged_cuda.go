//go:build cgo && linux

package backend

import (
	"fmt"
	"slices"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// kvPages is a paged cache's block tables (paged.go): on the device, in a
// Go mirror that SetBatch packs, and in the pinned buffer the upload goes
// through; dirty are the mirror's rows the device does not have yet.
type kvPages struct {
	sh    tableShape
	tab   []int32
	dev   cuda.Buffer
	host  cuda.HostBuffer
	dirty dirtyRows
}

// pages is what the attention kernels need of c's paging; the zero value
// for a contiguous cache.
func (c *kvCache) pages() cuda.KVPages {
	if c.paged == nil {
		return cuda.KVPages{}
	}
	return cuda.KVPages{Tables: c.paged.dev, Stride: c.paged.sh.stride, BlockSize: c.paged.sh.blockSize}
}

// checkPaged refuses what the paged kernels cannot serve: GPT-OSS's ring
// cache (its sink attention keeps fixed slots, as on the CPU) and block
// sizes that are not powers of two (the kernels shift and mask). An FP8
// cache pages as a 16-bit one does (kvWrite, attention_tc_f8.cu's _paged
// kernels).
func checkPaged(c model.KVConfig) error {
	switch {
	case c.Ring:
		return fmt.Errorf("KV cache: GPT-OSS's ring cache is not paged (model.Pageable)")
	case c.BlockSize&(c.BlockSize-1) != 0 || c.Blocks <= 0:
		return fmt.Errorf("KV cache: %d blocks of %d positions (a power of two, at least one block)", c.Blocks, c.BlockSize)
	}
	return nil
}

// newPages allocates and fills c's block tables (every entry the scratch
// block) on g's thread.
func (b *Backend) newPages(g *cuda.GPU, c model.KVConfig) (*kvPages, error) {
	sh := tableShape{blockSize: c.BlockSize, stride: pagedStride(c.Capacity, c.BlockSize), slots: c.Slots, blocks: c.Blocks}
	p := &kvPages{sh: sh, tab: make([]int32, (sh.slots+1)*sh.stride)}
	initTables(p.tab, sh)
	var err error
	if p.dev, err = b.alloc(g, 4*len(p.tab)); err != nil {
		return nil, err
	}
	if p.host, err = b.allocHost(g, 4*len(p.tab)); err != nil {
		return nil, err
	}
	return p, g.Stream.Upload(p.dev, i32Bytes(p.tab))
}

// freePages gives p's memory back (a cache replaced or freed).
func (b *Backend) freePages(g *cuda.GPU, p *kvPages) {
	if p == nil {
		return
	}
	b.freeOwned(g, p.dev)
	if i := slices.Index(b.hosts, p.host); i >= 0 {
		g.FreeHost(p.host)
		b.hosts = slices.Delete(b.hosts, i, i+1)
	}
}

// upload queues the copy of p's dirty rows (packed by SetBatch) to the
// device through the start of the pinned buffer, which the caller made sure
// no copy still reads (SetBatch's layEvent); they are clean once queued.
func (p *kvPages) upload(g *cuda.GPU) error {
	lo, hi := p.dirty.lo*p.sh.stride, p.dirty.hi*p.sh.stride
	if hi <= lo {
		return nil
	}
	n := copy(p.host.Bytes(), i32Bytes(p.tab[lo:hi]))
	if err := g.Stream.UploadAsync(p.dev.Slice(4*lo, n), p.host, n); err != nil {
		return err
	}
	p.dirty = dirtyRows{}
	return nil
}

// kvWrite queues the batch's keys and values into layer k, v of c: KVWrite,
// or KVWritePaged into a paged cache; ropeKV the same for RopeKV.
func (b *Backend) kvWrite(g *cuda.GPU, c *kvCache, layer int, k, v, qkv cuda.Buffer, lay batchLayout) error {
	if c.c.FP8 {
		var p cuda.KVPages
		if c.paged != nil {
			p = c.pages()
		}
		return g.KVWriteFP8(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, lay.nTok, c.c.Capacity, p, c.shape, c.fp8(layer))
	}
	if c.paged != nil {
		return g.KVWritePaged(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, lay.nTok, c.pages(), c.shape)
	}
	return g.KVWrite(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, lay.nTok, c.c.Capacity, c.shape)
}

func (b *Backend) ropeKV(g *cuda.GPU, c *kvCache, layer int, k, v, qkv, table cuda.Buffer, lay batchLayout) error {
	if c.c.FP8 {
		var p cuda.KVPages
		if c.paged != nil {
			p = c.pages()
		}
		return g.RopeKVFP8(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, table, lay.nTok, c.c.Capacity, p, c.shape, c.fp8(layer))
	}
	if c.paged != nil {
		return g.RopeKVPaged(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, table, lay.nTok, c.pages(), c.shape)
	}
	return g.RopeKV(g.Stream, b.dt, k, v, qkv, lay.pos, lay.slot, table, lay.nTok, c.c.Capacity, c.shape)
}

// maxKVBlocks is how many blocks of c.BlockSize positions fit the KV budget
// (kvBudget: BackendOptions.KVCacheBytes, or kv_cache_free_gpu_mem_fraction
// of the memory free after weights and workspaces, TensorRT-LLM's meaning),
// one kept back as the scratch block.
func (b *Backend) maxKVBlocks(c model.KVConfig) int {
	if c.BlockSize <= 0 {
		return 0
	}
	per := c.KVBytesPerToken(c.ElemBytes(b.dt.Size())) * int64(c.BlockSize)
	var budget int64
	err := b.dev.Do(func(g *cuda.GPU) (err error) {
		budget, err = b.kvBudget(g, true)
		return
	})
	if err != nil {
		return 0
	}
	return pagedBlocks(budget, per)
}

// pagedBackend is the Backend offering the engine its paged KV cache
// (model.Pager): New returns it instead of the Backend when paging is
// asked for on CUDA (pagedOptIn). Every other interface is the Backend's.
// whenBound (XRUN_CUDA_KV_PAGED=auto) asks the engine to page only where
// paging admits more requests (model.PagesWhenBound): the paged decode
// attention reads through block tables, 2-4 % slower than fixed slots'
// at Llama-3.1-8B's shapes on an H100.
type pagedBackend struct {
	*Backend
	whenBound bool
}

// MaxKVBlocks is model.Pager's: maxKVBlocks.
func (p pagedBackend) MaxKVBlocks(c model.KVConfig) int { return p.maxKVBlocks(c) }

// PagesWhenBound is model.PagesWhenBound's.
func (p pagedBackend) PagesWhenBound() bool { return p.whenBound }

var (
	_ model.Pager          = pagedBackend{}
	_ model.PagesWhenBound = pagedBackend{}
)

// pagedOptIn says whether New offers the paged cache: XRUN_KV_PAGED, and
// XRUN_CUDA_KV_PAGED other than 0. Both are recorded with every cell.
func pagedOptIn(sw model.Switches) bool { return sw.KVPaged && sw.CUDAKVPaged != "0" }

// asBackend is the Backend behind be (itself, or a pagedBackend's).
func asBackend(be model.Backend) (*Backend, bool) {
	switch b := be.(type) {
	case *Backend:
		return b, true
	case pagedBackend:
		return b.Backend, true
	}
	return nil, false
}

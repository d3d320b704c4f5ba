package engine

import (
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/model"
)

// The paged KV cache's bookkeeping (XRUN_KV_PAGED, a model.Pager
// backend): a pool of fixed-size blocks, XRUN_KV_BLOCK positions each
// (32, TensorRT-LLM's tokens_per_block default), and a block table per
// request in flight. As TensorRT-LLM's capacity scheduler under its
// default policy (GUARANTEED_NO_EVICT), a request is admitted only when
// the blocks for its whole length (prompt and output, whose lengths the
// dataset fixes) are free, and holds them until its last token; requests
// are admitted first come first served, a request that does not fit yet
// holding back those behind it. So the requests in flight are bounded by
// the tokens they keep in the cache, not by slots of the longest
// request: varied lengths fit more of them than fixed slots do.
// kv_cache_free_gpu_mem_fraction keeps its meaning: it sizes the budget
// the pool is cut from (on the CPU, Config.KVCacheBytes).

// kvPool is a paged cache's blocks on the host.
type kvPool struct {
	size   int     // positions per block
	blocks int     // the pool
	free   []int32 // free blocks, taken from the end
	// claimed are the blocks of the request pagedFeed admitted last, until
	// the scheduler gives them to its inflight (claim).
	claimed []int32
}

func newKVPool(blocks, size int) *kvPool { return &kvPool{size: size, blocks: blocks} }

// BlocksFor is how many blocks a request of in prompt and out output
// tokens holds: its cached positions, the prompt and every output token
// but the last (which is never fed back).
func BlocksFor(in, out, size int) int {
	return (max(in+out-1, 1) + size - 1) / size
}

func (p *kvPool) need(r *datasets.Request) int {
	return BlocksFor(len(r.InputIDs), r.OutputTokens, p.size)
}

// reset frees every block, lowest first out.
func (p *kvPool) reset() {
	p.free = p.free[:0]
	for b := p.blocks - 1; b >= 0; b-- {
		p.free = append(p.free, int32(b))
	}
	p.claimed = nil
}

// take removes n free blocks (the caller checked there are n).
func (p *kvPool) take(n int) []int32 {
	out := make([]int32, n)
	copy(out, p.free[len(p.free)-n:])
	p.free = p.free[:len(p.free)-n]
	return out
}

// claim hands over the blocks of the request admitted last; nil without
// a pool.
func (p *kvPool) claim() []int32 {
	if p == nil {
		return nil
	}
	b := p.claimed
	p.claimed = nil
	return b
}

// release frees a finished request's blocks.
func (p *kvPool) release(a *inflight) {
	if p == nil {
		return
	}
	p.free = append(p.free, a.blocks...)
	a.blocks = nil
}

// table gives the sequence b added last a's block table.
func (p *kvPool) table(b *model.Batch, a *inflight) {
	if p != nil {
		b.SetBlocks(a.blocks)
	}
}

// wrap makes fd admit a request only when its blocks are free, with every
// block free at the start of a phase; fd itself without a pool.
func (p *kvPool) wrap(fd feed) feed {
	if p == nil {
		return fd
	}
	p.reset()
	return &pagedFeed{feed: fd, pool: p}
}

// pagedFeed holds back the next request until the pool has its blocks.
type pagedFeed struct {
	feed
	pool  *kvPool
	held  *datasets.Request
	index int
	start time.Duration
}

func (f *pagedFeed) pending() bool { return f.held != nil || f.feed.pending() }

func (f *pagedFeed) next(now time.Duration) (*datasets.Request, int, time.Duration, bool) {
	if f.held == nil {
		r, index, start, ok := f.feed.next(now)
		if !ok {
			return nil, 0, 0, false
		}
		f.held, f.index, f.start = r, index, start
	}
	n := f.pool.need(f.held)
	if n > len(f.pool.free) {
		return nil, 0, 0, false
	}
	f.pool.claimed = f.pool.take(n)
	r := f.held
	f.held = nil
	return r, f.index, f.start, true
}

package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

func TestBlocksFor(t *testing.T) {
	for _, c := range []struct{ in, out, size, want int }{
		{1, 1, 32, 1},  // one cached position
		{32, 1, 32, 1}, // the prompt fills the block; the token sampled is never cached
		{32, 2, 32, 2},
		{128, 128, 32, 8}, // 255 positions
		{128, 129, 32, 8},
		{128, 130, 32, 9},
		{5, 12, 16, 1},
	} {
		if got := BlocksFor(c.in, c.out, c.size); got != c.want {
			t.Errorf("BlocksFor(%d, %d, %d) = %d, want %d", c.in, c.out, c.size, got, c.want)
		}
	}
}

// listFeed feeds requests in order, all at once.
type listFeed struct {
	reqs []datasets.Request
	i    int
}

func (f *listFeed) pending() bool { return f.i < len(f.reqs) }
func (f *listFeed) next(time.Duration) (*datasets.Request, int, time.Duration, bool) {
	if f.i == len(f.reqs) {
		return nil, 0, 0, false
	}
	f.i++
	return &f.reqs[f.i-1], f.i - 1, 0, true
}
func (f *listFeed) wait(context.Context, time.Duration) error { return nil }
func (f *listFeed) token(*inflight, time.Duration)            {}

// TestPagedFeedFirstComeFirstServed: a request whose blocks are not free
// waits, and holds back those behind it until they are.
func TestPagedFeedFirstComeFirstServed(t *testing.T) {
	req := func(in, out int) datasets.Request {
		return datasets.Request{InputIDs: make([]int32, in), OutputTokens: out}
	}
	p := newKVPool(4, 16)
	fd := p.wrap(&listFeed{reqs: []datasets.Request{req(20, 5), req(40, 9), req(2, 2)}})
	r, i, _, ok := fd.next(0)
	if !ok || i != 0 || len(r.InputIDs) != 20 {
		t.Fatalf("first: %v %d %v", r, i, ok)
	}
	a := &inflight{req: r, blocks: p.claim()}
	if len(a.blocks) != 2 || len(p.free) != 2 {
		t.Fatalf("first holds %v, %d free", a.blocks, len(p.free))
	}
	// The second needs 3 blocks: it waits, and the third (1 block, which
	// would fit) waits behind it.
	if _, _, _, ok := fd.next(0); ok {
		t.Fatal("admitted a request whose blocks are not free")
	}
	if _, _, _, ok := fd.next(0); ok || !fd.pending() {
		t.Fatal("a later request overtook the one held back")
	}
	p.release(a)
	if r, i, _, ok := fd.next(0); !ok || i != 1 || len(p.claim()) != 3 {
		t.Fatalf("after the release: %v %d %v", r, i, ok)
	}
	if _, _, _, ok := fd.next(0); !ok {
		t.Fatal("the last request does not fit the last block")
	}
	if fd.pending() {
		t.Fatal("pending after every request")
	}
}

// pagedRun runs reqs on model with the KV cache paged (block size bs) or
// in fixed slots (bs 0).
func pagedRun(t *testing.T, cfg Config, bs int, reqs []datasets.Request) *Result {
	t.Helper()
	sw := DefaultSwitches()
	sw.KVPaged, sw.KVBlock = bs > 0, bs
	cfg.Switches = &sw
	res, err := newEngine(t, cfg).Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// variedRequests are requests from a few tokens to a few hundred, so that
// sequences span many blocks and end mid-block.
func variedRequests(n int) []datasets.Request {
	var reqs []datasets.Request
	for i := range n {
		in := 1 + (i*53)%150
		ids := make([]int32, in)
		for j := range ids {
			ids[j] = int32((i*31 + j*7 + 3) % 500)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: 1 + (i*29)%40})
	}
	return reqs
}

// TestPagedMatchesContiguous: the whole model gives the same tokens with
// the cache paged (blocks of 16 and 32 positions, handed out in whatever
// order requests come and go) as in fixed slots, dense and MoE, float32
// and FP8, with chunked prefill and the overlap scheduler.
func TestPagedMatchesContiguous(t *testing.T) {
	reqs := variedRequests(14)
	for _, cfg := range []Config{
		{Model: "tiny-llama", BatchSize: 5, MaxNumTokens: 48, Warmup: 2},
		{Model: "tiny-moe", BatchSize: 4, MaxNumTokens: 64, RoutingMode: "uniform"},
		{Model: "tiny-dense", BatchSize: 6, MaxNumTokens: 96, KVCacheDtype: "fp8"},
	} {
		want := pagedRun(t, cfg, 0, reqs)
		for _, bs := range []int{16, 32} {
			got := pagedRun(t, cfg, bs, reqs)
			if len(got.Iterations) != len(want.Iterations) {
				t.Errorf("%s, blocks of %d: %d iterations, %d in slots", cfg.Model, bs, len(got.Iterations), len(want.Iterations))
			}
			for i := range reqs {
				if !slices.Equal(got.Requests[i].OutputIDs, want.Requests[i].OutputIDs) {
					t.Errorf("%s, blocks of %d: request %d: %v paged, %v in slots", cfg.Model, bs, i, got.Requests[i].OutputIDs, want.Requests[i].OutputIDs)
				}
			}
		}
	}
}

// fewShortRequests are 11 short requests behind one long one (200
// positions), or, uniform, 12 long ones.
func fewShortRequests(uniform bool) []datasets.Request {
	var reqs []datasets.Request
	for i := range 12 {
		in, out := 6+i%5, 4
		if i == 0 || uniform {
			in, out = 180, 20 // one long request sets the slots' length
		}
		ids := make([]int32, in)
		for j := range ids {
			ids[j] = int32((i*37 + j*11) % 500)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: out})
	}
	return reqs
}

// TestPagedAdmitsMore: under a KV budget that fixed slots of the longest
// request fill with 2 requests, the paged cache holds the short requests
// by the tokens they keep, so more run at once; the tokens are the same.
func TestPagedAdmitsMore(t *testing.T) {
	reqs := fewShortRequests(false)
	// tiny-llama keeps 512 bytes per position; a slot of 200 positions
	// (padded to 208) takes 104 KiB: the budget holds 2 slots, or 26 blocks
	// of 16 positions (8 KiB each).
	cfg := Config{Model: "tiny-llama", BatchSize: 16, KVCacheBytes: 2 * 208 * 512}
	slots := pagedRun(t, cfg, 0, reqs)
	paged := pagedRun(t, cfg, 16, reqs)
	most := func(r *Result) int {
		m := 0
		for _, it := range r.Iterations {
			m = max(m, it.CtxRequests+it.GenRequests)
		}
		return m
	}
	if slots.MaxInFlight != 2 || most(slots) != 2 {
		t.Fatalf("fixed slots: %d in flight at most (%d seen), want 2", slots.MaxInFlight, most(slots))
	}
	for _, r := range []*Result{slots, paged} {
		if got := r.Metrics[PeakInFlightKey]; got != float64(most(r)) {
			t.Errorf("peak_in_flight %v, the iterations' most %d", got, most(r))
		}
	}
	// The long request holds 13 blocks, each short one a single block:
	// all 12 fit at once.
	if got := most(paged); got != 12 {
		t.Errorf("paged: %d requests in flight at most, want all 12 (fixed slots: 2)", got)
	}
	if len(paged.Iterations) >= len(slots.Iterations) {
		t.Errorf("paged: %d iterations, fixed slots %d: admitting more should take fewer", len(paged.Iterations), len(slots.Iterations))
	}
	for i := range reqs {
		if !slices.Equal(paged.Requests[i].OutputIDs, slots.Requests[i].OutputIDs) {
			t.Errorf("request %d: %v paged, %v in slots", i, paged.Requests[i].OutputIDs, slots.Requests[i].OutputIDs)
		}
	}
}

// whenBoundBackend is the CPU backend asking to be paged only where
// paging admits more (model.PagesWhenBound), as the CUDA backend does
// under XRUN_CUDA_KV_PAGED=auto.
type whenBoundBackend struct{ *cpu.Backend }

func (whenBoundBackend) PagesWhenBound() bool { return true }

var registerWhenBound = sync.OnceFunc(func() {
	RegisterBackend("whenbound-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		if err != nil {
			return nil, err
		}
		return whenBoundBackend{b}, nil
	})
})

// TestPagesWhenBound: a backend that pages only where it pays
// (pagingPays) pages the short requests behind a long one under a budget
// of two slots of the long one's length (all 12 run at once), and keeps
// fixed slots where they hold every request (the default budget) or where
// the lengths are all alike (paging admits no more); the pass's
// kv_cache_blocks metric says which. A backend without the preference
// pages whenever XRUN_KV_PAGED is on.
func TestPagesWhenBound(t *testing.T) {
	registerWhenBound()
	tight := int64(2 * 208 * 512) // TestPagedAdmitsMore's: 2 slots, 26 blocks of 16
	for _, c := range []struct {
		name     string
		backend  string
		budget   int64
		uniform  bool
		paged    bool
		inFlight int
	}{
		{"varied/tight", "whenbound-test", tight, false, true, 12},
		{"varied/roomy", "whenbound-test", 0, false, false, 12},
		{"uniform/tight", "whenbound-test", tight, true, false, 2},
		{"varied/roomy/always", "cpu", 0, false, true, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Model: "tiny-llama", Backend: c.backend, BatchSize: 16, KVCacheBytes: c.budget}
			res := pagedRun(t, cfg, 16, fewShortRequests(c.uniform))
			blocks := res.Metrics[KVBlocksKey]
			if (blocks > 0) != c.paged {
				t.Errorf("kv_cache_blocks %v: paged %t, want %t", blocks, blocks > 0, c.paged)
			}
			if res.MaxInFlight != c.inFlight {
				t.Errorf("MaxInFlight %d, want %d", res.MaxInFlight, c.inFlight)
			}
		})
	}
}

// TestRanksPagesWhenBound: a split cell's ranks ask to be paged only where
// it pays when their backends do (the CUDA backend's under auto), and
// page whenever XRUN_KV_PAGED says where they do not (the CPU's).
func TestRanksPagesWhenBound(t *testing.T) {
	for _, when := range []bool{false, true} {
		p := &ranks{}
		for range 2 {
			b, err := cpu.New(model.BackendOptions{Gemm: "auto", Dtype: "float32"})
			if err != nil {
				t.Fatal(err)
			}
			r := startRank()
			r.be = model.Backend(b)
			if when {
				r.be = whenBoundBackend{b}
			}
			p.rs = append(p.rs, r)
		}
		got := (&ranksBackend{Backend: p.rs[0].be, p: p}).PagesWhenBound()
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
		if got != when {
			t.Errorf("ranks of backends asking %t: PagesWhenBound %t", when, got)
		}
	}
}

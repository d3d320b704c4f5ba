//go:build cgo && linux

package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// pagedScript is script's kind of run with prefill chunks that cross block
// edges: prompts of 40 (two chunks: positions 0..23 and 24..39), 9 and 70
// tokens, a mixed iteration, decode of 3 sequences (bucket 4: eager,
// captured, replayed, replayed), two more prompts (one of 33 positions:
// past two blocks of 16), then decode of 5 (bucket 8) four times.
func pagedScript(vocab int) []step {
	tok := func(seed, n int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32((seed*7919 + i*104729) % vocab)
		}
		return v
	}
	var s []step
	s = append(s, step{{0, 0, tok(1, 24)}, {1, 0, tok(2, 9)}})
	s = append(s, step{{0, 24, tok(3, 16)}, {1, 9, tok(4, 1)}, {2, 0, tok(5, 70)}})
	for i := range 4 {
		s = append(s, step{{0, 40 + i, tok(6+i, 1)}, {1, 10 + i, tok(9+i, 1)}, {2, 70 + i, tok(12+i, 1)}})
	}
	s = append(s, step{{3, 0, tok(20, 33)}, {4, 0, tok(21, 3)}, {0, 44, tok(22, 1)}})
	for i := range 4 {
		s = append(s, step{{0, 45 + i, tok(30+i, 1)}, {1, 14 + i, tok(40+i, 1)}, {2, 74 + i, tok(50+i, 1)}, {3, 33 + i, tok(60+i, 1)}, {4, 3 + i, tok(70+i, 1)}})
	}
	return s
}

// pagedCapacity is newModel's capacity (8 slots of 128 positions) with
// the cache paged in blocks of bs positions: enough blocks for every slot
// and a few spare.
func pagedCapacity(bs int) model.Capacity {
	return model.Capacity{MaxTokens: 256, MaxLogitRows: 64, Slots: 8, MaxLen: 128, BlockSize: bs, Blocks: 8*128/bs + 5}
}

// slotTables gives each of c's slots a block table for its whole length,
// drawn from the pool in a random order.
func slotTables(r *rand.Rand, c model.Capacity) map[int][]int32 {
	per := (c.MaxLen + c.BlockSize - 1) / c.BlockSize
	perm := r.Perm(c.Blocks)
	tables := map[int][]int32{}
	for s := range c.Slots {
		for _, b := range perm[s*per : (s+1)*per] {
			tables[s] = append(tables[s], int32(b))
		}
	}
	return tables
}

// runBatch runs one scripted iteration (with the sequences' block tables
// where tables is not nil) and returns its logits and greedy picks.
func runBatch(t testing.TB, m *model.Model, s step, tables map[int][]int32) ([]float32, []int32) {
	t.Helper()
	var b model.Batch
	for _, q := range s {
		b.Add(q.slot, q.past, q.toks, true)
		if tables != nil {
			b.SetBlocks(tables[q.slot])
		}
	}
	if err := m.Forward(&b); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(s)*m.Config().Vocab)
	if err := m.ReadLogits(out); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, len(s))
	if err := m.Argmax(ids); err != nil {
		t.Fatal(err)
	}
	return out, ids
}

// fixedLt are the switches with cuBLASLt's algorithms taken from its
// heuristic rather than chosen by timing (XRUN_CUDA_LT_TUNE=0): two
// backends then run the same GEMMs, so that paged and contiguous differ in
// their attention kernels alone.
func fixedLt() *model.Switches {
	sw := engine.DefaultSwitches()
	sw.CUDALtTune = false
	return &sw
}

func newFixedBackend(t testing.TB, gemm, dtype string) model.Backend {
	t.Helper()
	return newBackendWith(t, gemm, dtype, fixedLt())
}

// newBackendWith opens a backend with the switches sw, closed at the
// test's end.
func newBackendWith(t testing.TB, gemm, dtype string, sw *model.Switches) model.Backend {
	t.Helper()
	be, err := New(model.BackendOptions{Gemm: gemm, Dtype: dtype, Switches: sw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	})
	return be
}

// TestPagedMatchesContiguous runs the same iterations on a model whose
// cache is paged (blocks of 16 and 32 positions, drawn in a random order)
// and on one with fixed slots, on one GPU, and requires the same greedy
// tokens and logits within 1e-3 at every iteration: tiny-llama (heads of
// 16: the CUDA-core attention kernels) in fp16 and bf16, and a
// TinyLlama-1.1B-shaped model cut to two layers (32 x 4 heads of 64: the
// tensor-core kernels, RoPE folded into decode attention), both GEMM
// paths; prefill chunks that cross block edges, decode graphs captured
// and replayed.
func TestPagedMatchesContiguous(t *testing.T) {
	needGPU(t)
	tiny, _ := engine.ZooModel("tiny-llama")
	tl, _ := engine.ZooModel("tinyllama-1.1b")
	tl.Layers = 2
	for _, c := range []struct {
		name   string
		cfg    model.Config
		dtypes []string
	}{{"tiny-llama", tiny, []string{"float16", "bfloat16"}}, {"tinyllama-1.1b-2layers", tl, []string{"float16"}}} {
		for _, dt := range c.dtypes {
			for _, gemm := range []string{"auto", "disable"} {
				for _, bs := range []int{16, 32} {
					t.Run(fmt.Sprintf("%s/%s/%s/block%d", c.name, dt, gemm, bs), func(t *testing.T) {
						contig := newModel(t, newFixedBackend(t, gemm, dt), c.cfg, nil)
						paged, err := model.New(newFixedBackend(t, gemm, dt), c.cfg, model.Options{Seed: 7})
						if err != nil {
							t.Fatal(err)
						}
						capa := pagedCapacity(bs)
						if err := paged.Reserve(capa); err != nil {
							t.Fatal(err)
						}
						seed := rand.Uint64()
						t.Logf("block order seed %d", seed)
						tables := slotTables(rand.New(rand.NewPCG(seed, 1)), capa)
						for i, s := range pagedScript(c.cfg.Vocab) {
							want, wantIDs := runBatch(t, contig, s, nil)
							got, ids := runBatch(t, paged, s, tables)
							if e := cpu.RelErr(got, want); !(e <= 1e-3) {
								t.Errorf("iteration %d (%d sequences): paged logits off the contiguous ones by %.3g (bound 1e-3)", i, len(s), e)
							}
							for j := range ids {
								if ids[j] != wantIDs[j] {
									t.Errorf("iteration %d, sequence %d (slot %d): paged token %d, contiguous %d", i, j, s[j].slot, ids[j], wantIDs[j])
								}
							}
						}
					})
				}
			}
		}
	}
}

// pagedRun serves reqs on the cuda backend, paged or not as
// XRUN_CUDA_KV_PAGED's value mode says ("0": XRUN_KV_PAGED off too; "1":
// paged; "auto": where paging pays), under a KV budget of
// budget bytes (0: the default), with a cache of kv_cache_dtype kv ("":
// the model's), cuBLASLt's algorithms fixed (fixedLt) and the switches
// tweak sets, and returns the result.
func pagedRun(t *testing.T, name string, mode string, batch int, budget int64, kv string, reqs []datasets.Request, tweak ...func(*model.Switches)) *engine.Result {
	t.Helper()
	sw := fixedLt()
	sw.KVPaged, sw.CUDAKVPaged = mode != "0", mode
	for _, f := range tweak {
		f(sw)
	}
	e, err := engine.New(context.Background(), engine.Config{Model: name, Backend: "cuda", BatchSize: batch, Warmup: 2, Dtype: "float16",
		KVCacheBytes: budget, KVCacheDtype: kv, Switches: sw})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != len(reqs) {
		t.Fatalf("%d requests served, want %d", len(res.Requests), len(reqs))
	}
	for i, r := range res.Requests {
		if len(r.OutputIDs) != reqs[i].OutputTokens {
			t.Errorf("request %d: %d tokens, want %d", i, len(r.OutputIDs), reqs[i].OutputTokens)
		}
	}
	return res
}

// peakInFlight is the most requests one iteration of res served.
func peakInFlight(res *engine.Result) int {
	n := 0
	for _, it := range res.Iterations {
		n = max(n, it.CtxRequests+it.GenRequests)
	}
	return n
}

func variedRequests(t *testing.T, vocab, eos int) ([]datasets.Request, int) {
	t.Helper()
	p := datasets.Params{Dist: datasets.NormDist, NumRequests: 48, InputMean: 40, InputStdev: 30, OutputMean: 24, OutputStdev: 16,
		Seed: datasets.DefaultSeed, VocabSize: vocab, EOSID: eos}
	reqs, err := datasets.GenerateAll(p)
	if err != nil {
		t.Fatal(err)
	}
	maxLen := 0
	for _, r := range reqs {
		maxLen = max(maxLen, len(r.InputIDs)+r.OutputTokens)
	}
	return reqs, maxLen
}

// TestPagedEngineTokens serves the same varied requests through the engine
// (the runner's path: chunked prefill, the overlap scheduler feeding picks
// on the device, decode graphs) with the paged cache and with fixed slots,
// the budget large enough that both admit the same requests at the same
// iterations: every request's tokens must be the same.
func TestPagedEngineTokens(t *testing.T) {
	needGPU(t)
	// Heads of 16 and 32 (the CUDA-core kernels) and TinyLlama-1.1B's 32 x
	// 4 of 64 (the tensor-core ones, RoPE folded into decode attention).
	for _, name := range []string{"tiny-llama", "tiny-dense", "tinyllama-1.1b"} {
		t.Run(name, func(t *testing.T) {
			cfg, _ := engine.ZooModel(name)
			reqs, _ := variedRequests(t, cfg.DatasetVocab, cfg.EOS)
			samePagedTokens(t, reqs, pagedRun(t, name, "0", 16, 0, "", reqs), pagedRun(t, name, "1", 16, 0, "", reqs))
		})
	}
}

// samePagedTokens checks that the paged run admitted requests as the
// contiguous one did and gave every request the same tokens.
func samePagedTokens(t *testing.T, reqs []datasets.Request, contig, paged *engine.Result) {
	t.Helper()
	if a, b := peakInFlight(contig), peakInFlight(paged); a != b {
		t.Errorf("peak requests in flight: contiguous %d, paged %d; the same budget should admit alike", a, b)
	}
	for i := range reqs {
		want, got := contig.Requests[i].OutputIDs, paged.Requests[i].OutputIDs
		for j := range min(len(want), len(got)) {
			if want[j] != got[j] {
				t.Errorf("request %d token %d: paged %d, contiguous %d", i, j, got[j], want[j])
				break
			}
		}
	}
}

// TestPagedEngineTokensFP8KV: as TestPagedEngineTokens over an FP8 cache
// (kv_cache_dtype fp8: attention_tc_f8.cu's _paged kernels, the decode
// ones converting the codes in registers, _f8r, and decoding them in
// shared memory, _f8) on TinyLlama-1.1B, whose attention is on the tensor
// cores: paged and contiguous give the same tokens.
func TestPagedEngineTokensFP8KV(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tinyllama-1.1b")
	reqs, _ := variedRequests(t, cfg.DatasetVocab, cfg.EOS)
	for _, regs := range []bool{true, false} {
		t.Run(map[bool]string{true: "f8r", false: "f8"}[regs], func(t *testing.T) {
			form := func(sw *model.Switches) { sw.CUDAAttnF8Regs = regs }
			samePagedTokens(t, reqs, pagedRun(t, "tinyllama-1.1b", "0", 16, 0, "fp8", reqs, form), pagedRun(t, "tinyllama-1.1b", "1", 16, 0, "fp8", reqs, form))
		})
	}
}

// TestPagedAdmitsMore: under a KV budget of five slots of the longest
// request, fixed slots hold at most four requests at once (one slot is the
// padding rows' scratch); paged, the same bytes hold as many requests as
// their own lengths fit, more of them for varied lengths.
func TestPagedAdmitsMore(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tiny-llama")
	reqs, maxLen := variedRequests(t, cfg.DatasetVocab, cfg.EOS)
	perToken := int64(2*cfg.Layers*cfg.KVHeads*cfg.HeadDim) * 2 // fp16 K and V
	budget := 5 * int64(maxLen) * perToken
	contig := pagedRun(t, "tiny-llama", "0", 64, budget, "", reqs)
	paged := pagedRun(t, "tiny-llama", "1", 64, budget, "", reqs)
	a, b := peakInFlight(contig), peakInFlight(paged)
	t.Logf("longest request %d positions, budget %d bytes: at most %d requests in flight with fixed slots (MaxInFlight %d), %d paged (MaxInFlight %d)",
		maxLen, budget, a, contig.MaxInFlight, b, paged.MaxInFlight)
	if a > 4 {
		t.Errorf("fixed slots held %d requests at once under a budget of 4 slots and the scratch one", a)
	}
	if b <= a {
		t.Errorf("paged: at most %d requests in flight, fixed slots %d; paging should admit more of these varied lengths", b, a)
	}
	// XRUN_CUDA_KV_PAGED=auto pages here (paging admits more), and keeps
	// fixed slots where the default budget holds the whole batch.
	for _, c := range []struct {
		budget int64
		paged  bool
	}{{budget, true}, {0, false}} {
		res := pagedRun(t, "tiny-llama", "auto", 64, c.budget, "", reqs)
		if blocks := res.Metrics[engine.KVBlocksKey]; (blocks > 0) != c.paged {
			t.Errorf("auto, budget %d: kv_cache_blocks %v, want paged %t", c.budget, blocks, c.paged)
		}
		if c.paged && res.MaxInFlight != paged.MaxInFlight {
			t.Errorf("auto, budget %d: MaxInFlight %d, paged %d", c.budget, res.MaxInFlight, paged.MaxInFlight)
		}
	}
}

// TestPagedOptIn: the CUDA backend offers its paged cache (model.Pager)
// with XRUN_KV_PAGED on and XRUN_CUDA_KV_PAGED other than 0, asking to be
// paged only where it pays (model.PagesWhenBound) under auto, the
// default.
func TestPagedOptIn(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		paged       bool
		cuda        string
		pager, when bool
	}{{true, "0", false, false}, {false, "1", false, false}, {true, "1", true, false}, {true, "auto", true, true}, {false, "auto", false, false}} {
		t.Run(fmt.Sprintf("paged=%t/cuda=%s", c.paged, c.cuda), func(t *testing.T) {
			sw := engine.ParseSwitches(func(string) string { return "" })
			sw.KVPaged, sw.CUDAKVPaged = c.paged, c.cuda
			be, err := New(model.BackendOptions{Gemm: "auto", Dtype: "float16", Switches: &sw})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			if _, ok := be.(model.Pager); ok != c.pager {
				t.Errorf("model.Pager: %t, want %t", ok, c.pager)
			}
			if pw, ok := be.(model.PagesWhenBound); (ok && pw.PagesWhenBound()) != c.when {
				t.Errorf("model.PagesWhenBound: %t, want %t", ok && pw.PagesWhenBound(), c.when)
			}
			if b, ok := asBackend(be); !ok || b == nil {
				t.Errorf("asBackend(%T): no Backend", be)
			}
		})
	}
}

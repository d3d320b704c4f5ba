package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestSplitMatchesUnsplit runs the zoo's tiny dense and MoE models split
// every way tp and ep allow, through the scheduler (in-flight batching,
// paged KV cache, overlapped iterations, expert counts), and checks every
// request's tokens and the expert loads equal the unsplit engine's, and
// that per-GPU metrics divide by the GPUs the split uses.
func TestSplitMatchesUnsplit(t *testing.T) {
	reqs := mixedRequests(8)
	run := func(t *testing.T, cfg Config) *Result {
		t.Helper()
		e := newEngine(t, cfg)
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, c := range []struct {
		model  string
		tp, ep []int
	}{
		{"tiny-llama", []int{2, 4}, []int{1, 1}},
		{"tiny-moe", []int{2, 4, 2, 4, 4, 1, 1, 2}, []int{1, 1, 2, 4, 2, 2, 4, 4}},
	} {
		t.Run(c.model, func(t *testing.T) {
			base := Config{Model: c.model, BatchSize: 3, MaxNumTokens: 24, Warmup: 1, Seed: 5, Threads: 1}
			want := run(t, base)
			for i, tp := range c.tp {
				ep := c.ep[i]
				cfg := base
				cfg.TP, cfg.EP = tp, ep
				t.Run(strings.Join([]string{"tp", itoa(tp), "-ep", itoa(ep)}, ""), func(t *testing.T) {
					got := run(t, cfg)
					for j, r := range got.Requests {
						if !slices.Equal(r.OutputIDs, want.Requests[j].OutputIDs) {
							t.Errorf("request %d: tokens %v, unsplit %v", r.TaskID, r.OutputIDs, want.Requests[j].OutputIDs)
						}
					}
					if len(got.Iterations) != len(want.Iterations) {
						t.Errorf("%d iterations, unsplit %d", len(got.Iterations), len(want.Iterations))
					}
					if want.ExpertLoad != nil && !slices.Equal(got.ExpertLoad.Counts, want.ExpertLoad.Counts) {
						t.Errorf("expert counts %v, unsplit %v", got.ExpertLoad.Counts, want.ExpertLoad.Counts)
					}
					gpus := float64(WorldSize(tp, ep))
					if a, b := got.Metrics["output_throughput_per_gpu_tok_s"], got.Metrics["system_output_throughput_tok_s"]/gpus; a != b {
						t.Errorf("per-GPU throughput %v, want total / %v GPUs = %v", a, gpus, b)
					}
				})
			}
		})
	}
}

// TestSplitCheckpointMatchesGolden splits the golden checkpoints (read
// whole, sliced per rank) and checks transformers' greedy tokens.
func TestSplitCheckpointMatchesGolden(t *testing.T) {
	for _, c := range []struct {
		name   string
		tp, ep int
	}{{"tiny-llama", 2, 1}, {"tiny-llama", 4, 1}, {"tiny-mixtral", 2, 1}, {"tiny-mixtral", 2, 2}, {"tiny-mixtral", 1, 4}} {
		t.Run(c.name+"/tp"+itoa(c.tp)+"-ep"+itoa(c.ep), func(t *testing.T) {
			dir := filepath.Join("testdata", "hf", c.name)
			cases := backendtest.ReadGolden(t, dir)
			var reqs []datasets.Request
			for i, g := range cases {
				reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: g.Input, OutputTokens: len(g.Greedy)})
			}
			e := newEngine(t, Config{Model: dir, BatchSize: 2, MaxNumTokens: 8, TP: c.tp, EP: c.ep, Threads: 1})
			res, err := e.Run(context.Background(), reqs, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range cases {
				checkTokens(t, c.name, i, res.Requests[i].OutputIDs, g.Greedy)
			}
		})
	}
}

// TestSplitProfile: a split cell's profile is rank 0's ops, its
// collectives among them.
func TestSplitProfile(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 2, TP: 2, ProfileWindow: "1-2"})
	res, err := e.Run(context.Background(), mixedRequests(3), RunOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	its, names := map[int]bool{}, map[string]int{}
	for _, op := range res.Ops {
		its[op.Iteration] = true
		names[op.Name]++
	}
	if len(res.Ops) == 0 || !its[1] || !its[2] || len(its) != 2 {
		t.Errorf("%d ops over iterations %v; want iterations 1 and 2", len(res.Ops), its)
	}
	// Per iteration and layer: the all-reduces after o and down; per
	// iteration that samples: the all-gather of the logits.
	if names["cpu_comm_allreduce"] != 2*2*2 || names["cpu_comm_allgather"] != 2 {
		t.Errorf("communication ops %v; want 8 all-reduces and 2 all-gathers", names)
	}
}

// fakeGPU is a backend registered under another name than cpu: a split
// there needs collectives the program does not have.
func fakeGPU(o model.BackendOptions) (model.Backend, error) { return cpu.New(o) }

func TestSplitErrors(t *testing.T) {
	RegisterBackend("test-gpu", fakeGPU)
	for _, c := range []struct {
		cfg          Config
		field, inMsg string
	}{
		{Config{Model: "tiny-llama", TP: -1}, "tp", "positive"},
		{Config{Model: "tiny-llama", EP: -2}, "ep", "positive"},
		{Config{Model: "tiny-moe", TP: 4, EP: 3}, "ep", "a divisor of tp 4"},
		{Config{Model: "tiny-llama", TP: 2, NumGPUs: 1}, "gpus_per_cell", "at least the 2 GPUs"},
		{Config{Model: "tiny-llama", TP: 8}, "tp", "4 attention heads (num_attention_heads), not a multiple of tp 8"},
		{Config{Model: "tiny-llama", TP: 3}, "tp", "num_attention_heads"},
		{Config{Model: "tiny-llama", TP: 2, EP: 2}, "ep", "is dense"},
		{Config{Model: "tiny-moe", EP: 16}, "ep", "8 experts (num_experts), not a multiple of ep 16"},
		{Config{Model: "tiny-deepseek", TP: 2}, "tp", "DeepSeek-V3"},
		{Config{Model: "tiny-moe", TP: 2, Dtype: "fp8"}, "dtype", "split model"},
		{Config{Model: "tiny-llama", TP: 2, Backend: "test-gpu"}, "tp", "NCCL"},
		{Config{Model: "tiny-moe", EP: 2, Backend: "test-gpu"}, "ep", "NCCL"},
	} {
		_, err := New(context.Background(), c.cfg)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != c.field || !strings.Contains(pe.Msg, c.inMsg) || !pe.BadInput() {
			t.Errorf("%+v: %v; want a ParamError on %s saying ...%s...", c.cfg, err, c.field, c.inMsg)
		}
	}
}

// TestSplitServes: a split engine serves online (Server) with the
// unsplit engine's tokens.
func TestSplitServes(t *testing.T) {
	reqs := mixedRequests(4)
	want, err := newEngine(t, Config{Model: "tiny-moe", BatchSize: 2, MaxNumTokens: 16}).Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newEngine(t, Config{Model: "tiny-moe", BatchSize: 2, MaxNumTokens: 16, TP: 2, EP: 2}).(Server)
	in := make(chan *Submission)
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), in, ServeOptions{MaxSeqLen: 64}) }()
	for i, r := range reqs {
		sub := NewSubmission(r.InputIDs, r.OutputTokens)
		in <- sub
		var ids []int32
		for tok := range sub.Tokens {
			ids = append(ids, tok.ID)
		}
		if sub.Err() != nil || !slices.Equal(ids, want.Requests[i].OutputIDs) {
			t.Errorf("request %d: tokens %v (err %v), unsplit offline %v", i, ids, sub.Err(), want.Requests[i].OutputIDs)
		}
	}
	close(in)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestRegisterCollectives: a backend whose program registers collectives
// for it runs split cells (as the CUDA backend will over NCCL).
func TestRegisterCollectives(t *testing.T) {
	RegisterBackend("test-gpu-collectives", fakeGPU)
	RegisterCollectives("test-gpu-collectives", func(n int) (model.CollectiveGroup, error) { return cpu.NewGroup(n), nil })
	reqs := mixedRequests(3)
	want, err := newEngine(t, Config{Model: "tiny-moe", BatchSize: 2}).Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := newEngine(t, Config{Model: "tiny-moe", BatchSize: 2, TP: 2, EP: 2, Backend: "test-gpu-collectives"}).Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Requests {
		if !slices.Equal(r.OutputIDs, want.Requests[i].OutputIDs) {
			t.Errorf("request %d: tokens %v, unsplit %v", i, r.OutputIDs, want.Requests[i].OutputIDs)
		}
	}
	RegisterCollectives("test-gpu-failing", func(n int) (model.CollectiveGroup, error) { return nil, errors.New("no libnccl.so.2") })
	RegisterBackend("test-gpu-failing", fakeGPU)
	if _, err := New(context.Background(), Config{Model: "tiny-llama", TP: 2, Backend: "test-gpu-failing"}); err == nil || !strings.Contains(err.Error(), "no libnccl.so.2") {
		t.Errorf("collectives that cannot be made: %v", err)
	}
}

// unwrapGroup is cpu.Group for backends wrapping a CPU backend
// (measuringBackend): in-process collectives join the CPU backend inside.
type unwrapGroup struct{ model.CollectiveGroup }

func (g unwrapGroup) Join(rank int, be model.Backend) (model.Collective, error) {
	if m, ok := be.(measuringBackend); ok {
		be = m.Backend
	}
	return g.CollectiveGroup.Join(rank, be)
}

// TestSplitCeilings: a split cell passes on the ceilings its ranks'
// backend measured (one GPU's, what the roofline divides a rank's share
// of the work by), as an unsplit one does.
func TestSplitCeilings(t *testing.T) {
	RegisterBackend("measuring-split-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		return measuringBackend{b}, err
	})
	RegisterCollectives("measuring-split-test", func(n int) (model.CollectiveGroup, error) { return unwrapGroup{cpu.NewGroup(n)}, nil })
	e := newEngine(t, Config{Model: "tiny-llama", Backend: "measuring-split-test", BatchSize: 1, TP: 2, Threads: 1})
	cr, ok := e.(CeilingsReporter)
	if !ok {
		t.Fatal("the split engine is no CeilingsReporter")
	}
	if got := cr.Ceilings(); got != measured {
		t.Errorf("ceilings %+v, want the ranks' backend's %+v", got, measured)
	}
}

// TestSplitKVBudgetLeastRank: a split cell admits what every rank's KV
// budget holds, the least of them, not rank 0's alone (a rank's GPU may
// have less memory free; on CUDA each rank's cache keeps to the budget it
// was sized by). Rank 1 here holds 2 slots of the longest request, or 14
// blocks of 16 positions: not the long request (13 blocks) and every
// short one (a block each) at once.
func TestSplitKVBudgetLeastRank(t *testing.T) {
	var reqs []datasets.Request
	for i := range 12 {
		in, out := 6+i%5, 4
		if i == 0 {
			in, out = 180, 20
		}
		ids := make([]int32, in)
		for j := range ids {
			ids[j] = int32((i*37 + j*11) % 500)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: out})
	}
	mc, err := LookupModel("tiny-llama")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Share(mc, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	perPos := s.KVElemsPerToken(mc) * 4 // float32 on the CPU
	for _, c := range []struct {
		block  int
		budget int64
	}{
		{0, 2 * 208 * perPos}, // slots of 200 positions, padded to 208
		{16, 14 * 16 * perPos},
	} {
		RegisterBackend("kv-uneven-test", func(o model.BackendOptions) (model.Backend, error) {
			if o.Device == 1 {
				o.KVCacheBytes = c.budget
			}
			return cpu.New(o)
		})
		RegisterCollectives("kv-uneven-test", func(n int) (model.CollectiveGroup, error) { return cpu.NewGroup(n), nil })
		sw := DefaultSwitches()
		sw.KVPaged, sw.KVBlock = c.block > 0, c.block
		cfg := Config{Model: "tiny-llama", Backend: "kv-uneven-test", BatchSize: 16, TP: 2, Threads: 1, Switches: &sw}
		res, err := newEngine(t, cfg).Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		for _, it := range res.Iterations {
			most = max(most, it.CtxRequests+it.GenRequests)
		}
		switch {
		case c.block == 0 && (res.MaxInFlight != 2 || most != 2):
			t.Errorf("fixed slots: %d in flight at most (%d seen); rank 1's budget holds 2", res.MaxInFlight, most)
		case c.block > 0 && most >= len(reqs):
			t.Errorf("blocks of %d: %d requests in flight at once; rank 1's 14 blocks cannot hold them all", c.block, most)
		}
	}
}

// TestSplitNoFP8KV: a split cell asking for an FP8 KV cache on a backend
// without one is refused as the unsplit cell is, blaming kv_cache_dtype
// (the user's input), not with the model's internal error.
func TestSplitNoFP8KV(t *testing.T) {
	RegisterBackend("measuring-split-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		return measuringBackend{b}, err // no FP8KV
	})
	RegisterCollectives("measuring-split-test", func(n int) (model.CollectiveGroup, error) { return unwrapGroup{cpu.NewGroup(n)}, nil })
	for _, tp := range []int{1, 2} {
		_, err := New(context.Background(), Config{Model: "tiny-llama", Backend: "measuring-split-test", BatchSize: 1, TP: tp, KVCacheDtype: "fp8", Threads: 1})
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != "kv_cache_dtype" || !pe.BadInput() {
			t.Errorf("tp %d: %v; want a ParamError on kv_cache_dtype", tp, err)
		}
	}
}

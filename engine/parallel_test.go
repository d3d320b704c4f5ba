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

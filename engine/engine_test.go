package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/model"
)

func newEngine(t *testing.T, cfg Config) Engine {
	t.Helper()
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// mixedRequests are requests of varied lengths; ids stay below 500 so any
// tiny model's vocabulary holds them.
func mixedRequests(n int) []datasets.Request {
	var reqs []datasets.Request
	for i := range n {
		in := 3 + (i*7)%29
		ids := make([]int32, in)
		for j := range ids {
			ids[j] = int32((i*131 + j*17 + 5) % 500)
		}
		reqs = append(reqs, datasets.Request{TaskID: 100 + i, InputIDs: ids, OutputTokens: 1 + (i*5)%9})
	}
	return reqs
}

func TestRunSchedulesInFlight(t *testing.T) {
	const bs, mnt, warmup = 3, 16, 2
	reqs := mixedRequests(10)
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: bs, MaxNumTokens: mnt, Warmup: warmup, Seed: 7})
	res, err := e.Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != len(reqs) {
		t.Fatalf("%d records, want %d", len(res.Requests), len(reqs))
	}
	var timedIn, timedGen, ctxTok, genReqs int
	start := res.Requests[0].Start
	for i, r := range res.Requests {
		q := reqs[i]
		if r.TaskID != q.TaskID || r.OutputTokens != q.OutputTokens || len(r.OutputIDs) != q.OutputTokens || r.InputTokens != len(q.InputIDs) {
			t.Errorf("request %d: %+v", i, r)
		}
		if r.Start != start || r.FirstToken <= r.Start || r.End < r.FirstToken {
			t.Errorf("request %d times: start %v first %v end %v", i, r.Start, r.FirstToken, r.End)
		}
		timedIn += len(q.InputIDs)
		timedGen += q.OutputTokens - 1
	}
	sawTimed := false
	for i, it := range res.Iterations {
		if it.Index != i {
			t.Fatalf("iteration %d has index %d", i, it.Index)
		}
		if it.Warmup && sawTimed {
			t.Fatal("warm-up iteration after a timed one")
		}
		if !it.Warmup {
			if !sawTimed && it.Start < start {
				t.Errorf("timed requests submitted at %v, before warm-up ended (%v)", start, it.Start)
			}
			sawTimed = true
			ctxTok += it.CtxTokens
			genReqs += it.GenRequests
		} else if i == 0 && it.Index != 0 {
			t.Error("warm-up does not start the iteration count")
		}
		if it.CtxTokens+it.GenRequests > mnt || it.CtxRequests+it.GenRequests > bs {
			t.Errorf("iteration %d over budget: %+v", i, it)
		}
	}
	if !res.Iterations[0].Warmup || ctxTok != timedIn || genReqs != timedGen {
		t.Errorf("timed iterations carried %d prompt tokens and %d decode steps, want %d and %d", ctxTok, genReqs, timedIn, timedGen)
	}
	if len(res.Metrics) != len(MetricKeys)+3 || res.Metrics["num_requests"] != 10 {
		t.Errorf("metrics %v", res.Metrics)
	}
	if res.MaxInFlight != bs || res.Metrics[MaxInFlightKey] != bs {
		t.Errorf("max in flight %d (metric %v), want batch_size %d", res.MaxInFlight, res.Metrics[MaxInFlightKey], bs)
	}
	if res.ExpertLoad != nil || res.Ops != nil {
		t.Error("dense timed run has expert load or ops")
	}

	// Greedy outputs do not depend on how requests were batched or chunked:
	// every op computes each row the same way whatever else is in the batch.
	for _, cfg := range []Config{
		{Model: "tiny-llama", BatchSize: 1, Seed: 7},
		{Model: "tiny-llama", BatchSize: 64, MaxNumTokens: 5, Seed: 7, GemmPlugin: "auto"},
	} {
		other, err := newEngine(t, cfg).Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			if !slices.Equal(other.Requests[i].OutputIDs, res.Requests[i].OutputIDs) {
				t.Errorf("%+v: request %d generated %v, want %v", cfg, i, other.Requests[i].OutputIDs, res.Requests[i].OutputIDs)
			}
		}
	}
}

// TestRunHFDirMatchesGolden serves the reference prompts through the
// scheduler (tiny chunks, shared batches) from a Hugging Face directory.
func TestRunHFDirMatchesGolden(t *testing.T) {
	for _, name := range []string{"tiny-llama", "tiny-mixtral"} {
		dir := filepath.Join("testdata", "hf", name)
		cases := backendtest.ReadGolden(t, dir)
		var reqs []datasets.Request
		for i, c := range cases {
			reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: c.Input, OutputTokens: len(c.Greedy)})
		}
		e := newEngine(t, Config{Model: dir, BatchSize: 2, MaxNumTokens: 4, Warmup: 1})
		if e.Model().Path != dir {
			t.Errorf("model path %q", e.Model().Path)
		}
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			checkTokens(t, name+" engine", i, res.Requests[i].OutputIDs, c.Greedy)
		}
	}
}

func TestExpertLoadByRoutingMode(t *testing.T) {
	// Prompts of 3..9 tokens give iterations of many token counts; tiny-moe
	// has 8 experts, top-2.
	var reqs []datasets.Request
	for i := range 12 {
		ids := make([]int32, 3+i%7)
		for j := range ids {
			ids[j] = int32((i*37 + j*11) % 2000)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: 6})
	}
	loads := map[string]*ExpertLoad{}
	for _, mode := range []string{"learned", "perfect", "uniform", "zipf:2"} {
		e := newEngine(t, Config{Model: "tiny-moe", BatchSize: 6, MaxNumTokens: 20, RoutingMode: mode, Warmup: 1})
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := res.ExpertLoad
		if l == nil || l.Layers != 2 || l.Experts != 8 || len(l.Iterations) != len(res.Iterations) {
			t.Fatalf("%s: expert load %+v", mode, l)
		}
		for i, it := range res.Iterations {
			tokens := it.CtxTokens + it.GenRequests
			for layer := range l.Layers {
				c := l.At(i, layer)
				var sum int32
				for _, v := range c {
					sum += v
				}
				if int(sum) != 2*tokens {
					t.Fatalf("%s iteration %d layer %d: %d routed, want %d", mode, i, layer, sum, 2*tokens)
				}
				if mode == "perfect" && (2*tokens)%8 == 0 && maxOverMean(c) != 1 {
					t.Errorf("perfect, iteration %d (%d tokens) layer %d: counts %v", i, tokens, layer, c)
				}
			}
		}
		loads[mode] = l
	}
	if slices.Equal(loads["learned"].Counts, loads["perfect"].Counts) {
		t.Error("learned and perfect routing gave the same expert loads")
	}
	// Perfect is only exactly balanced when tokens·k fills whole rounds of
	// experts (the assignment restarts at expert 0 every iteration, as in
	// TensorRT-LLM); it still beats the learned router overall.
	if loads["learned"].MaxOverMean <= loads["perfect"].MaxOverMean || loads["learned"].TotalMaxOverMean <= loads["perfect"].TotalMaxOverMean {
		t.Errorf("max/mean learned %.3f, perfect %.3f (total %.3f)", loads["learned"].MaxOverMean, loads["perfect"].MaxOverMean, loads["perfect"].TotalMaxOverMean)
	}
	if loads["zipf:2"].TotalMaxOverMean <= loads["uniform"].TotalMaxOverMean {
		t.Errorf("zipf:2 total max/mean %.3f not above uniform's %.3f", loads["zipf:2"].TotalMaxOverMean, loads["uniform"].TotalMaxOverMean)
	}
}

func TestPerfectRoutingBalanced(t *testing.T) {
	// Whenever tokens·k is a multiple of the experts, every expert gets the
	// same number of tokens: (t·k + j) mod E cycles through all experts.
	for _, c := range []struct{ tokens, k, experts int }{{4, 2, 8}, {12, 2, 8}, {1, 8, 8}, {5, 4, 20}, {32, 8, 128}, {3, 4, 32}} {
		counts := make([]int32, c.experts)
		for tok := range c.tokens {
			seen := map[int]bool{}
			for j := range c.k {
				e := model.BalancedExpert(tok, j, c.k, c.experts)
				if seen[e] {
					t.Fatalf("%+v: token %d routed twice to expert %d", c, tok, e)
				}
				seen[e] = true
				counts[e]++
			}
		}
		if (c.tokens*c.k)%c.experts == 0 && maxOverMean(counts) != 1 {
			t.Errorf("%+v: counts %v", c, counts)
		}
	}
}

func TestProfileWindow(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 4, Warmup: 1, ProfileWindow: "1-2,4"})
	reqs := mixedRequests(6)
	var events []string
	hooks := Hooks{
		WindowStart: func(i int) { events = append(events, "start@"+itoa(i)) },
		WindowStop:  func(i int) { events = append(events, "stop@"+itoa(i)) },
	}
	var names []string
	hooks.IterationStart = func(_ int, name string) { names = append(names, name) }
	res, err := e.Run(context.Background(), reqs, RunOptions{Profile: true, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start@1", "stop@3", "start@4", "stop@5"}; !slices.Equal(events, want) {
		t.Errorf("window events %v, want %v", events, want)
	}
	if !strings.HasPrefix(names[0], "iteration 0: 1 ctx reqs, ") || !strings.HasSuffix(names[0], ", 0 gen reqs") {
		t.Errorf("range name %q", names[0])
	}
	perIter := map[int]map[string]bool{}
	for _, op := range res.Ops {
		if perIter[op.Iteration] == nil {
			perIter[op.Iteration] = map[string]bool{}
		}
		perIter[op.Iteration][op.Name] = true
		if op.Duration < 0 || op.Start < 0 {
			t.Errorf("op %+v", op)
		}
	}
	if len(perIter) != 3 || !perIter[1]["cpu_attention"] || !perIter[2][e.(*engine).be.Name()[len("cpu/"):]] || !perIter[4]["cpu_argmax"] {
		t.Errorf("ops by iteration: %v", perIter)
	}
	for _, it := range res.Iterations {
		if it.Profiled != (it.Index == 1 || it.Index == 2 || it.Index == 4) {
			t.Errorf("iteration %d profiled = %v", it.Index, it.Profiled)
		}
	}

	// A profile-only pass stops after the window.
	part, err := e.Run(context.Background(), reqs, RunOptions{Profile: true, StopAfterWindow: true})
	if err != nil {
		t.Fatal(err)
	}
	if !part.Partial || part.Metrics != nil || part.Iterations[len(part.Iterations)-1].Index != 4 {
		t.Errorf("partial pass: partial %v, metrics %v, %d iterations", part.Partial, part.Metrics, len(part.Iterations))
	}
	// An unprofiled pass records no ops.
	plain, _ := e.Run(context.Background(), reqs, RunOptions{})
	if len(plain.Ops) != 0 {
		t.Errorf("unprofiled pass has %d ops", len(plain.Ops))
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestRunCancel(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	_, err := e.Run(ctx, mixedRequests(20), RunOptions{Hooks: Hooks{IterationEnd: func(IterationRecord) {
		if n++; n == 3 {
			cancel()
		}
	}}})
	// With overlap the iteration queued before the cancel still
	// completes (and is recorded); nothing after it runs.
	if !errors.Is(err, context.Canceled) || n < 3 || n > 4 {
		t.Errorf("error %v after %d iterations", err, n)
	}
	// The engine serves again after a cancelled run.
	if _, err := e.Run(context.Background(), mixedRequests(3), RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

type badInput interface{ BadInput() bool }

func TestNewErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Model: "tiny-llama", RoutingMode: "zipf:0"}, "routing_mode"},
		{Config{Model: "tiny-llama", RoutingMode: "balanced"}, "routing_mode"},
		{Config{Model: "tiny-llama", ProfileWindow: "5-2"}, "profile_window"},
		{Config{Model: "tiny-llama", ProfileWindow: "3-5,4"}, "profile_window"},
		{Config{Model: "tiny-llama", GemmPlugin: "cublas"}, "gemm_plugin"},
		{Config{Model: "tiny-llama", BatchSize: -1}, "batch_size"},
		{Config{Model: "tiny-llama", Dtype: "int4"}, "dtype"},
		{Config{Model: "tiny-llama", Backend: "tpu"}, "tpu"},
		{Config{Model: "no-such-model"}, "tinyllama-1.1b"},
	} {
		_, err := New(ctx, c.cfg)
		var bi badInput
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &bi) || !bi.BadInput() {
			t.Errorf("%+v: error %v, want a bad-input error mentioning %q", c.cfg, err, c.want)
		}
	}

	// Model directories: a copy of tiny-llama with one thing broken.
	src := filepath.Join("testdata", "hf", "tiny-llama")
	cfgJSON, _ := os.ReadFile(filepath.Join(src, "config.json"))
	weights, _ := os.ReadFile(filepath.Join(src, "model.safetensors"))
	for _, c := range []struct {
		name    string
		config  []byte
		weights []byte
		want    []string
	}{
		{"malformed config", []byte(`{"model_type": "llama",`), weights, []string{"config.json", "invalid JSON"}},
		{"truncated safetensors", cfgJSON, weights[:1000], []string{"model.safetensors", "header length"}},
		{"garbage safetensors", cfgJSON, []byte("definitely not a checkpoint"), []string{"model.safetensors"}},
		{"wrong shape", []byte(strings.Replace(string(cfgJSON), `"intermediate_size": 160`, `"intermediate_size": 128`, 1)), weights,
			[]string{"model.safetensors", "gate_proj", "shape"}},
		{"missing tensor", []byte(strings.Replace(string(cfgJSON), `"num_hidden_layers": 2`, `"num_hidden_layers": 3`, 1)), weights,
			[]string{"model.safetensors", "model.layers.2"}},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), c.config, 0o644)
		os.WriteFile(filepath.Join(dir, "model.safetensors"), c.weights, 0o644)
		_, err := New(ctx, Config{Model: dir})
		var bi badInput
		if err == nil || !errors.As(err, &bi) || !bi.BadInput() {
			t.Errorf("%s: error %v is not bad input", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestRunRejectsBadRequests(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-llama"})
	for _, c := range []struct {
		req  datasets.Request
		want string
	}{
		{datasets.Request{TaskID: 9, InputIDs: []int32{1}, OutputTokens: 0}, "task_id 9"},
		{datasets.Request{TaskID: 8, InputIDs: nil, OutputTokens: 3}, "task_id 8"},
		{datasets.Request{TaskID: 7, InputIDs: []int32{1, 512}, OutputTokens: 3}, "512"},
		{datasets.Request{TaskID: 6, InputIDs: make([]int32, 4000), OutputTokens: 100}, "4096 positions"},
	} {
		_, err := e.Run(context.Background(), []datasets.Request{c.req}, RunOptions{})
		var bi badInput
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &bi) {
			t.Errorf("%+v: error %v, want bad input mentioning %q", c.req.TaskID, err, c.want)
		}
	}
}

func TestKVBudgetCapsInFlight(t *testing.T) {
	reqs := mixedRequests(8)
	// Fixed slots (the paged cache's admission: kvblocks_test.go).
	sw := DefaultSwitches()
	sw.KVPaged = false
	full := newEngine(t, Config{Model: "tiny-llama", BatchSize: 8, Switches: &sw})
	want, err := full.Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// tiny-llama keeps 512 bytes of K and V per position; the longest
	// request needs 40 positions, padded to 48: 24 KiB a slot.
	small := newEngine(t, Config{Model: "tiny-llama", BatchSize: 8, KVCacheBytes: 2*24<<10 + 100, Switches: &sw})
	got, err := small.Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want.MaxInFlight != 8 || got.MaxInFlight != 2 || got.Metrics[MaxInFlightKey] != 2 {
		t.Fatalf("in flight: %d and %d (metric %v), want 8 and 2", want.MaxInFlight, got.MaxInFlight, got.Metrics[MaxInFlightKey])
	}
	for _, it := range got.Iterations {
		if it.CtxRequests+it.GenRequests > 2 {
			t.Fatalf("iteration %+v has more than 2 requests", it)
		}
	}
	for i := range reqs {
		if !slices.Equal(got.Requests[i].OutputIDs, want.Requests[i].OutputIDs) {
			t.Errorf("request %d differs under a small KV budget", i)
		}
	}
	for _, paged := range []bool{false, true} {
		sw.KVPaged = paged
		tiny := newEngine(t, Config{Model: "tiny-llama", KVCacheBytes: 1000, Switches: &sw})
		if _, err := tiny.Run(context.Background(), reqs, RunOptions{}); err == nil || !strings.Contains(err.Error(), "KV cache") {
			t.Errorf("paged %v: no slot fits: %v", paged, err)
		}
	}
}

// A run's schedule and outputs depend on its own dataset only, not on what
// earlier runs of the same engine reserved.
func TestRunIndependentOfHistory(t *testing.T) {
	short := mixedRequests(5)
	var long []datasets.Request
	for i := range 12 {
		ids := make([]int32, 60+i)
		for j := range ids {
			ids[j] = int32((i + j*3) % 500)
		}
		long = append(long, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: 20})
	}
	fresh, err := newEngine(t, Config{Model: "tiny-moe", BatchSize: 16, MaxNumTokens: 64, RoutingMode: "uniform"}).Run(context.Background(), short, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, Config{Model: "tiny-moe", BatchSize: 16, MaxNumTokens: 64, RoutingMode: "uniform"})
	if _, err := e.Run(context.Background(), long, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := e.Run(context.Background(), short, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Iterations) != len(fresh.Iterations) || again.MaxInFlight != fresh.MaxInFlight {
		t.Fatalf("%d iterations (%d in flight) after a long run, %d (%d) fresh", len(again.Iterations), again.MaxInFlight, len(fresh.Iterations), fresh.MaxInFlight)
	}
	for i := range short {
		if !slices.Equal(again.Requests[i].OutputIDs, fresh.Requests[i].OutputIDs) {
			t.Errorf("request %d: %v after a long run, %v fresh", i, again.Requests[i].OutputIDs, fresh.Requests[i].OutputIDs)
		}
	}
	if !slices.Equal(again.ExpertLoad.Counts, fresh.ExpertLoad.Counts) {
		t.Error("uniform routing differs after a long run")
	}
}

// TestOverlapMatchesSync: queueing each iteration before the previous
// one's tokens are read (the CPU backend pipelines too) changes nothing
// but timing: the same schedule, the same tokens.
func TestOverlapMatchesSync(t *testing.T) {
	run := func(off bool) *Result {
		sw := DefaultSwitches()
		sw.Overlap = !off
		e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 3, MaxNumTokens: 16, Warmup: 2, Switches: &sw})
		res, err := e.Run(context.Background(), mixedRequests(12), RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sync, over := run(true), run(false)
	if len(sync.Iterations) != len(over.Iterations) {
		t.Fatalf("%d iterations with overlap, %d without", len(over.Iterations), len(sync.Iterations))
	}
	for i, a := range sync.Iterations {
		b := over.Iterations[i]
		if a.Index != b.Index || a.CtxRequests != b.CtxRequests || a.CtxTokens != b.CtxTokens || a.GenRequests != b.GenRequests {
			t.Errorf("iteration %d: %+v with overlap, %+v without", i, b, a)
		}
		if i > 0 && b.Start < over.Iterations[i-1].Start+over.Iterations[i-1].Duration {
			t.Errorf("iteration %d starts before the one before it ends", i)
		}
	}
	for i, r := range sync.Requests {
		if !slices.Equal(r.OutputIDs, over.Requests[i].OutputIDs) {
			t.Errorf("request %d: tokens %v with overlap, %v without", r.TaskID, over.Requests[i].OutputIDs, r.OutputIDs)
		}
	}
}

// The too-long-request message sizes the KV cache at the backend's own
// element width: 4 bytes on the CPU, 2 on a GPU (it said twice the MiB
// on CUDA).
func TestKVComputeBytes(t *testing.T) {
	if kvComputeBytes("cpu") != 4 || kvComputeBytes("cuda") != 2 {
		t.Errorf("cpu %d, cuda %d", kvComputeBytes("cpu"), kvComputeBytes("cuda"))
	}
}

package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// warmRecorder is the CPU backend as a model.ShapeWarmer warming batches
// of 1, 2, 4 and 8, recording the size of every iteration's batch.
type warmRecorder struct {
	*cpu.Backend
	mu      sync.Mutex
	iters   int   // SetBatch calls
	decodes []int // each decode iteration's sequences, in order
}

var warmRec struct {
	sync.Mutex
	last *warmRecorder
}

var registerWarm = sync.OnceFunc(func() {
	RegisterBackend("warm-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		if err != nil {
			return nil, err
		}
		r := &warmRecorder{Backend: b}
		warmRec.Lock()
		warmRec.last = r
		warmRec.Unlock()
		return r, nil
	})
})

func (r *warmRecorder) DecodeBatches(slots int) []int {
	var out []int
	for _, n := range []int{1, 2, 4, 8} {
		if n <= slots {
			out = append(out, n)
		}
	}
	return out
}

func (r *warmRecorder) SetBatch(b *model.Batch) error {
	r.mu.Lock()
	r.iters++
	decode := len(b.Seqs) > 0
	for _, s := range b.Seqs {
		decode = decode && s.Len == 1 && s.Past > 0
	}
	if decode {
		r.decodes = append(r.decodes, len(b.Seqs))
	}
	r.mu.Unlock()
	return r.Backend.SetBatch(b)
}

func (r *warmRecorder) counts() (int, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.iters, slices.Clone(r.decodes)
}

// TestWarmShapes: a backend's decode batch sizes are warmed once per
// capacity, before the run's own warm-up, in iterations no result sees:
// the tokens, the schedule and the expert load are those of a run without
// them, and the switch turns them off.
func TestWarmShapes(t *testing.T) {
	registerWarm()
	for _, c := range []struct{ model, routing string }{{"tiny-llama", ""}, {"tiny-moe", "perfect"}} {
		reqs := mixedRequests(10)
		base := Config{Model: c.model, BatchSize: 8, Warmup: 2, RoutingMode: c.routing}
		want, err := newEngine(t, base).Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := base
		cfg.Backend = "warm-test"
		e := newEngine(t, cfg)
		warmRec.Lock()
		rec := warmRec.last
		warmRec.Unlock()
		got, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		iters, decodes := rec.counts()
		warm := iters - len(got.Iterations)
		if len(got.Iterations) != len(want.Iterations) || warm <= 0 {
			t.Fatalf("%s: %d iterations recorded (%d without warming), %d SetBatch calls", c.model, len(got.Iterations), len(want.Iterations), iters)
		}
		// The warm iterations come first: every size decoded warmDecodes
		// times there.
		warmDecodesSeen := map[int]int{}
		for _, n := range decodes[:min(len(decodes), warm)] {
			warmDecodesSeen[n]++
		}
		for _, n := range []int{1, 2, 4, 8} {
			if warmDecodesSeen[n] < warmDecodes {
				t.Errorf("%s: batch of %d decoded %d times while warming, want %d (%v)", c.model, n, warmDecodesSeen[n], warmDecodes, decodes)
			}
		}
		for i := range reqs {
			if !slices.Equal(got.Requests[i].OutputIDs, want.Requests[i].OutputIDs) {
				t.Errorf("%s: request %d's tokens differ after warming", c.model, i)
			}
		}
		for i, it := range got.Iterations {
			w := want.Iterations[i]
			if it.Index != w.Index || it.CtxTokens != w.CtxTokens || it.GenRequests != w.GenRequests || it.Warmup != w.Warmup {
				t.Fatalf("%s: iteration %d is %+v, %+v without warming", c.model, i, it, w)
			}
		}
		if (got.ExpertLoad == nil) != (want.ExpertLoad == nil) ||
			got.ExpertLoad != nil && (got.ExpertLoad.MaxOverMean != want.ExpertLoad.MaxOverMean || got.ExpertLoad.TotalMaxOverMean != want.ExpertLoad.TotalMaxOverMean || !slices.Equal(got.ExpertLoad.Counts, want.ExpertLoad.Counts)) {
			t.Errorf("%s: expert load %+v, %+v without warming", c.model, got.ExpertLoad, want.ExpertLoad)
		}
		// The same capacity again: nothing more to warm.
		again, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rec.counts(); n != iters+len(again.Iterations) {
			t.Errorf("%s: a second run of the same capacity warmed again (%d SetBatch calls for %d iterations)", c.model, n-iters, len(again.Iterations))
		}
	}

	// Off: no iteration but the run's.
	sw := DefaultSwitches()
	sw.WarmShapes = false
	e := newEngine(t, Config{Model: "tiny-llama", Backend: "warm-test", BatchSize: 8, Switches: &sw})
	warmRec.Lock()
	rec := warmRec.last
	warmRec.Unlock()
	res, err := e.Run(context.Background(), mixedRequests(6), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rec.counts(); n != len(res.Iterations) {
		t.Errorf("XRUN_WARM_SHAPES=0: %d SetBatch calls for %d iterations", n, len(res.Iterations))
	}
}

// TestServeWarmsShapes: a served engine warms its batch sizes before it
// takes a request.
func TestServeWarmsShapes(t *testing.T) {
	registerWarm()
	e := newEngine(t, Config{Model: "tiny-llama", Backend: "warm-test", BatchSize: 4})
	warmRec.Lock()
	rec := warmRec.last
	warmRec.Unlock()
	in := make(chan *Submission)
	close(in)
	if err := e.(Server).Serve(context.Background(), in, ServeOptions{MaxSeqLen: 64}); err != nil {
		t.Fatal(err)
	}
	_, decodes := rec.counts()
	for _, n := range []int{1, 2, 4} {
		if c := slices.Index(decodes, n); c < 0 {
			t.Errorf("batch of %d never decoded: %v", n, decodes)
		}
	}
}

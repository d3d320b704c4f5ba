package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/model"
)

// The scheduler does in-flight batching the way trtllm-bench throughput
// runs offline: every request of a phase is submitted at once; at most
// batch_size are in flight (each holds a KV slot from admission to its last
// token), admitted first come first served; each iteration gives one token
// to every decoding request, then fills what is left of max_num_tokens
// with prefill chunks of the requests still reading their prompt, in
// admission order (chunked prefill: a prompt may take several
// iterations). The iteration that completes a prompt yields the request's
// first token; every request generates exactly its output_tokens (greedy,
// EOS ignored).

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7872756e)) }

// runState is one Run's bookkeeping across its warm-up and timed phases.
type runState struct {
	e     *engine
	opts  RunOptions
	t0    time.Time
	batch *model.Batch
	next  []int32
	slots int // KV slots this run may use: its most requests in flight

	iter    int
	iters   []IterationRecord
	records []RequestRecord // timed phase, dataset order
	done    []bool

	windows   []Span
	winActive bool

	load   *ExpertLoad
	counts []int32
}

// inflight is a request being served.
type inflight struct {
	req       *datasets.Request
	index     int // in records; -1 in the warm-up
	slot      int
	prefilled int
	out       []int32
	start     time.Duration
	first     time.Duration
}

func (st *runState) serve(ctx context.Context, reqs []datasets.Request, warmup bool) error {
	if len(reqs) == 0 {
		return nil
	}
	// The model may hold more slots or tokens than this run asked for (an
	// earlier run reserved them); the schedule depends on this run only.
	capa := st.e.m.Capacity()
	free := make([]int, 0, st.slots)
	for s := st.slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	if !warmup {
		st.done = make([]bool, len(reqs))
	}
	submitted := time.Since(st.t0)
	var act []*inflight
	var sampled []*inflight
	queue := 0
	for queue < len(reqs) || len(act) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("engine stopped at iteration %d: %w", st.iter, err)
		}
		st.checkWindow()
		for len(act) < st.e.cfg.BatchSize && queue < len(reqs) && len(free) > 0 {
			a := &inflight{req: &reqs[queue], index: -1, slot: free[len(free)-1], start: submitted}
			if !warmup {
				a.index = queue
			}
			free = free[:len(free)-1]
			act = append(act, a)
			queue++
		}

		b := st.batch
		b.Reset()
		sampled = sampled[:0]
		rec := IterationRecord{Index: st.iter, Warmup: warmup, Profiled: st.winActive}
		budget := min(st.e.cfg.MaxNumTokens, capa.MaxTokens)
		for _, a := range act {
			if p := len(a.req.InputIDs); a.prefilled == p && budget > 0 {
				b.Add(a.slot, p+len(a.out)-1, a.out[len(a.out)-1:], true)
				budget--
				rec.GenRequests++
				sampled = append(sampled, a)
			}
		}
		for _, a := range act {
			p := len(a.req.InputIDs)
			if a.prefilled == p || budget == 0 {
				continue
			}
			n := min(p-a.prefilled, budget)
			last := a.prefilled+n == p
			b.Add(a.slot, a.prefilled, a.req.InputIDs[a.prefilled:a.prefilled+n], last)
			a.prefilled += n
			budget -= n
			rec.CtxRequests++
			rec.CtxTokens += n
			if last {
				sampled = append(sampled, a)
			}
		}

		name := ""
		if st.opts.Profile || st.opts.Hooks.IterationStart != nil {
			name = rec.Name()
		}
		if st.opts.Profile {
			st.e.be.IterationStart(rec.Index, name)
		}
		if st.opts.Hooks.IterationStart != nil {
			st.opts.Hooks.IterationStart(rec.Index, name)
		}
		start := time.Since(st.t0)
		err := st.e.m.Forward(b)
		if err == nil {
			err = st.e.m.Argmax(st.next)
		}
		if err == nil && st.load != nil {
			err = st.e.m.ExpertCounts(st.counts)
			st.load.add(st.iter, warmup, st.counts)
		}
		now := time.Since(st.t0)
		if err != nil {
			return fmt.Errorf("iteration %d: %w", st.iter, err)
		}
		rec.Start, rec.Duration = start, now-start
		if st.opts.Profile {
			st.e.be.IterationEnd(rec.Index)
		}

		for i, a := range sampled {
			a.out = append(a.out, st.next[i])
			if len(a.out) == 1 {
				a.first = now
			}
			if len(a.out) == a.req.OutputTokens {
				free = append(free, a.slot)
				if a.index >= 0 {
					st.records[a.index] = RequestRecord{TaskID: a.req.TaskID, Start: a.start, FirstToken: a.first, End: now,
						InputTokens: len(a.req.InputIDs), OutputTokens: len(a.out), OutputIDs: a.out}
					st.done[a.index] = true
				}
			}
		}
		kept := act[:0]
		for _, a := range act {
			if len(a.out) < a.req.OutputTokens {
				kept = append(kept, a)
			}
		}
		clear(act[len(kept):])
		act = kept

		st.iters = append(st.iters, rec)
		if st.opts.Hooks.IterationEnd != nil {
			st.opts.Hooks.IterationEnd(rec)
		}
		st.iter++
		if st.opts.StopAfterWindow && len(st.windows) > 0 && st.iter > st.windows[len(st.windows)-1].Last {
			return errStopped
		}
	}
	return nil
}

// checkWindow is TensorRT-LLM's check at the top of every iteration: stop
// if the previous iteration ended a span, then start if this one begins
// one.
func (st *runState) checkWindow() {
	for _, s := range st.windows {
		if st.winActive && s.Last == st.iter-1 {
			st.stopWindow()
		}
	}
	for _, s := range st.windows {
		if !st.winActive && s.First == st.iter {
			st.winActive = true
			st.e.be.WindowStart()
			if st.opts.Hooks.WindowStart != nil {
				st.opts.Hooks.WindowStart(st.iter)
			}
		}
	}
}

func (st *runState) stopWindow() {
	st.winActive = false
	st.e.be.WindowStop()
	if st.opts.Hooks.WindowStop != nil {
		st.opts.Hooks.WindowStop(st.iter)
	}
}

// closeWindow stops a window still open when the run ends.
func (st *runState) closeWindow() {
	if st.winActive {
		st.stopWindow()
	}
}

// finished returns the timed requests that completed (a partial pass).
func (st *runState) finished() []RequestRecord {
	var out []RequestRecord
	for i, d := range st.done {
		if d {
			out = append(out, st.records[i])
		}
	}
	return out
}

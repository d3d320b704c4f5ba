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
// runs offline: every request of a phase is submitted at once (under a
// Load, each when it arrives; the engine idles while none is in flight:
// arrivals.go); at most
// batch_size are in flight (each holds a KV slot from admission to its last
// token), admitted first come first served; each iteration gives one token
// to every decoding request, then fills what is left of max_num_tokens
// with prefill chunks of the requests still reading their prompt, in
// admission order (chunked prefill: a prompt may take several
// iterations). The iteration that completes a prompt yields the request's
// first token; every request generates exactly its output_tokens (greedy,
// EOS ignored).

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7872756e)) }

// Overlap: where the backend can (model.Pipeliner), iteration i+1 is
// queued before iteration i's tokens are read back. The schedule never
// depends on token values (every request generates exactly its
// output_tokens), so the host knows at queue time which requests finish,
// which slots free up and who is admitted next; only the next decode
// token of each request sampled in iteration i is unknown, and the
// backend feeds it to iteration i+1 on the device (model.Batch.Fed). The
// device then goes from one iteration to the next without waiting for the
// host's read-back, bookkeeping and launch, which at batch 1 on a GPU is
// about a tenth of the step; TensorRT-LLM's PyTorch flow does the same
// (its overlap scheduler). Token ids, the schedule and the outputs are
// exactly those of the synchronous loop. Iterations run synchronously
// inside a profile window (records are attributed to iterations by time),
// around a window's edges, on MoE models (the expert counts are read every
// iteration) and with XRUN_OVERLAP=0.

// runState is one Run's bookkeeping across its warm-up and timed phases.
type runState struct {
	e     *engine
	opts  RunOptions
	t0    time.Time
	batch *model.Batch
	next  []int32
	slots int     // KV slots this run may use: its most requests in flight
	kv    *kvPool // the paged KV cache's blocks; nil for fixed slots

	iter    int
	iters   []IterationRecord
	records []RequestRecord // timed phase, dataset order
	done    []bool

	windows   []Span
	winActive bool

	load   *ExpertLoad
	counts []int32

	// feed is where the phase's requests come from (arrivals.go);
	// serving keeps no iteration records (a server runs for days).
	feed    feed
	serving bool

	flights  [2]flight     // the iteration being queued and the one in flight
	waited   []int32       // the ids of the iteration in flight, once read
	lastDone time.Duration // when the last iteration's tokens reached the host
}

// inflight is a request being served.
type inflight struct {
	req       *datasets.Request
	index     int // in records; -1 in the warm-up
	slot      int
	prefilled int
	gen       int     // tokens scheduled: sampled by a queued iteration
	out       []int32 // tokens read back (gen of them, or gen-1 while one is in flight)
	lastIter  int     // the iteration that sampled its latest token
	pick      int     // its row among that iteration's picks
	start     time.Duration
	first     time.Duration
	blocks    []int32         // its KV blocks (a paged cache)
	times     []time.Duration // when each token was read back, under load
}

// flight is a queued iteration whose tokens the host has not read yet.
type flight struct {
	rec     IterationRecord
	sampled []*inflight
	ticket  int
	queued  time.Duration
}

func (st *runState) serve(ctx context.Context, reqs []datasets.Request, warmup bool) error {
	if len(reqs) == 0 {
		return nil
	}
	if !warmup {
		st.done = make([]bool, len(reqs))
	}
	// The warm-up is offline whatever the load: it only warms up.
	var l Load
	if !warmup {
		l = st.e.cfg.Load
	}
	return st.run(ctx, newDatasetFeed(reqs, !warmup, time.Since(st.t0), l), warmup)
}

// run serves what fd feeds until it has nothing more and nothing is in
// flight.
func (st *runState) run(ctx context.Context, fd feed, warmup bool) (err error) {
	fd = st.kv.wrap(fd) // a paged cache admits by free blocks (kvblocks.go)
	st.feed = fd
	// The model may hold more slots or tokens than this run asked for (an
	// earlier run reserved them); the schedule depends on this run only.
	capa := st.e.m.Capacity()
	free := make([]int, 0, st.slots)
	for s := st.slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	// XRUN_OVERLAP=0: every iteration synchronous, for an A/B.
	pipe := st.e.sw.Overlap && st.load == nil && st.e.m.Pipelined()
	var pend *flight // queued, tokens not read yet
	defer func() {
		// An early return leaves nothing outstanding on the backend.
		if pend != nil {
			if e := st.complete(pend); err == nil {
				err = e
			}
		}
	}()
	var act []*inflight
	for fd.pending() || len(act) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("engine stopped at iteration %d: %w", st.iter, err)
		}
		if pend != nil && st.windowEdge() {
			// Windows open and close on an idle device.
			f := pend
			pend = nil
			if err := st.complete(f); err != nil {
				return err
			}
		}
		st.checkWindow()
		now := time.Since(st.t0)
		for len(act) < st.e.cfg.BatchSize && len(free) > 0 {
			r, index, start, ok := fd.next(now)
			if !ok {
				break
			}
			act = append(act, &inflight{req: r, index: index, slot: free[len(free)-1], start: start, lastIter: -1, blocks: st.kv.claim()})
			free = free[:len(free)-1]
		}
		if len(act) == 0 {
			// Under load, nothing has arrived: the iteration in flight
			// finishes (its completions may free users), then the engine
			// idles until the next arrival.
			if pend != nil {
				f := pend
				pend = nil
				if err := st.complete(f); err != nil {
					return err
				}
			} else if err := fd.wait(ctx, now); err != nil {
				return fmt.Errorf("engine stopped at iteration %d: %w", st.iter, err)
			}
			continue
		}

		b := st.batch
		b.Reset()
		f := &st.flights[st.iter%2]
		f.sampled = f.sampled[:0]
		f.rec = IterationRecord{Index: st.iter, Warmup: warmup, Profiled: st.winActive}
		rec := &f.rec
		budget := min(st.e.cfg.MaxNumTokens, capa.MaxTokens)
		for _, a := range act {
			p := len(a.req.InputIDs)
			if a.prefilled != p || budget == 0 {
				continue
			}
			if pend != nil && a.lastIter == pend.rec.Index {
				b.AddFed(a.slot, p+a.gen-1, a.pick)
			} else {
				b.Add(a.slot, p+a.gen-1, a.out[a.gen-1:a.gen], true)
			}
			st.kv.table(b, a)
			budget--
			rec.GenRequests++
			f.sampled = append(f.sampled, a)
		}
		for _, a := range act {
			p := len(a.req.InputIDs)
			if a.prefilled == p || budget == 0 {
				continue
			}
			n := min(p-a.prefilled, budget)
			last := a.prefilled+n == p
			b.Add(a.slot, a.prefilled, a.req.InputIDs[a.prefilled:a.prefilled+n], last)
			st.kv.table(b, a)
			a.prefilled += n
			budget -= n
			rec.CtxRequests++
			rec.CtxTokens += n
			if last {
				f.sampled = append(f.sampled, a)
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
		f.queued = time.Since(st.t0)
		sync := !pipe || st.winActive
		err := st.e.m.Forward(b)
		if err == nil {
			if sync {
				err = st.e.m.Argmax(st.next)
			} else {
				f.ticket, err = st.e.m.ArgmaxStart()
			}
		}
		if err == nil && st.load != nil {
			err = st.e.m.ExpertCounts(st.counts)
			st.load.add(st.iter, warmup, st.counts)
		}
		if err != nil {
			return fmt.Errorf("iteration %d: %w", st.iter, err)
		}
		if st.opts.Profile {
			// The NVTX range closes once the iteration is queued, so that
			// ranges never nest when the next one is queued before this
			// one's tokens are back.
			st.e.be.IterationEnd(rec.Index)
		}

		// What the schedule needs is known now: who finishes with this
		// iteration, and so which slots the next one may fill.
		for i, a := range f.sampled {
			a.gen++
			a.lastIter, a.pick = rec.Index, i
			if a.gen == a.req.OutputTokens {
				free = append(free, a.slot)
				st.kv.release(a)
			}
		}
		kept := act[:0]
		for _, a := range act {
			if a.gen < a.req.OutputTokens {
				kept = append(kept, a)
			}
		}
		clear(act[len(kept):])
		act = kept

		if pend != nil {
			old := pend
			pend = nil
			if err := st.complete(old); err != nil {
				return err
			}
		}
		if sync {
			st.finish(f, st.next)
		} else {
			pend = f
		}
		st.iter++
		if st.opts.StopAfterWindow && len(st.windows) > 0 && st.iter > st.windows[len(st.windows)-1].Last {
			return errStopped
		}
	}
	return nil
}

// complete waits for a queued iteration's tokens and records them.
func (st *runState) complete(f *flight) error {
	if cap(st.waited) < len(f.sampled) {
		st.waited = make([]int32, len(st.next))
	}
	ids := st.waited[:len(f.sampled)]
	if err := st.e.m.ArgmaxWait(f.ticket, ids); err != nil {
		return fmt.Errorf("iteration %d: %w", f.rec.Index, err)
	}
	st.finish(f, ids)
	return nil
}

// finish records an iteration whose tokens (ids, one per sampled request)
// are on the host. Its span starts when it was queued or, if later, when
// the iteration before it finished: with overlap the device starts it
// then, and consecutive spans do not overlap.
func (st *runState) finish(f *flight, ids []int32) {
	now := time.Since(st.t0)
	rec := f.rec
	rec.Start = max(f.queued, st.lastDone)
	rec.Duration = now - rec.Start
	st.lastDone = now
	for i, a := range f.sampled {
		a.out = append(a.out, ids[i])
		if len(a.out) == 1 {
			a.first = now
		}
		if st.e.cfg.Load.Online() && a.index >= 0 {
			a.times = append(a.times, now)
		}
		if len(a.out) == a.req.OutputTokens && a.index >= 0 {
			st.records[a.index] = RequestRecord{TaskID: a.req.TaskID, Start: a.start, FirstToken: a.first, End: now,
				InputTokens: len(a.req.InputIDs), OutputTokens: len(a.out), OutputIDs: a.out, TokenTimes: a.times}
			st.done[a.index] = true
		}
		st.feed.token(a, now)
	}
	if !st.serving {
		st.iters = append(st.iters, rec)
	}
	if st.opts.Hooks.IterationEnd != nil {
		st.opts.Hooks.IterationEnd(rec)
	}
}

// windowEdge reports whether the iteration about to be queued opens or
// closes a profile window (checkWindow's conditions).
func (st *runState) windowEdge() bool {
	for _, s := range st.windows {
		if st.winActive && s.Last == st.iter-1 || !st.winActive && s.First == st.iter {
			return true
		}
	}
	return false
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

package cpu

import (
	"sync"
	"sync/atomic"
)

// task is a parallel loop body: chunk c of a job, run by worker w (0 is the
// calling goroutine), so bodies can use per-worker scratch. Ops keep their
// task structs in the Backend and pass pointers, so dispatching a job
// allocates nothing.
type task interface {
	run(c, w int)
}

// pool runs jobs on a fixed set of goroutines; the caller is worker 0 and
// works too. Chunks are claimed from an atomic counter, so uneven chunks
// balance themselves.
type pool struct {
	workers int
	wake    []chan struct{}
	wg      sync.WaitGroup
	job     task
	chunks  int64
	next    atomic.Int64
}

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1)}
	for w := 1; w < p.workers; w++ {
		ch := make(chan struct{})
		p.wake = append(p.wake, ch)
		go func() {
			for range ch {
				p.loop(w)
				p.wg.Done()
			}
		}()
	}
	return p
}

func (p *pool) loop(w int) {
	for {
		c := p.next.Add(1) - 1
		if c >= p.chunks {
			return
		}
		p.job.run(int(c), w)
	}
}

// run executes chunks 0..n-1 of t and returns when all are done.
func (p *pool) run(t task, n int) {
	if n <= 1 || p.workers == 1 {
		for c := range n {
			t.run(c, 0)
		}
		return
	}
	p.job, p.chunks = t, int64(n)
	p.next.Store(0)
	helpers := min(p.workers-1, n-1)
	p.wg.Add(helpers)
	for i := range helpers {
		p.wake[i] <- struct{}{}
	}
	p.loop(0)
	p.wg.Wait()
	p.job = nil
}

func (p *pool) close() {
	for _, ch := range p.wake {
		close(ch)
	}
	p.wake = nil
}

// split returns how many chunks to cut n items into so that each chunk
// carries at least minWork units of work (work per item given) and all
// workers get a few chunks when there is enough.
func (p *pool) split(n int, workPerItem, minWork int) int {
	if n <= 0 {
		return 0
	}
	total := n * max(workPerItem, 1)
	chunks := min(n, total/max(minWork, 1), 4*p.workers)
	return max(chunks, 1)
}

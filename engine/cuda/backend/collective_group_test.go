//go:build cgo && linux

package backend

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// testGroup is a Group whose ranks have no GPU: enough for its host-side
// rendezvous and failure bookkeeping, which need no NCCL.
func testGroup(n int, joined ...int) *Group {
	g := &Group{n: n, ranks: make([]*Rank, n)}
	g.cond = sync.NewCond(&g.mu)
	for _, i := range joined {
		g.ranks[i] = &Rank{g: g, rank: i}
	}
	return g
}

// barrierAll calls Barrier on every rank at once and returns their errors.
func barrierAll(g *Group) []error {
	errs := make([]error, g.n)
	var wg sync.WaitGroup
	for i, r := range g.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Barrier()
		}()
	}
	wg.Wait()
	return errs
}

// TestGroupBarrier: Barrier returns once every rank has called it, again
// and again; an Abort wakes a rank waiting for the others with the
// failure, which every later Barrier reports until Reset clears it.
func TestGroupBarrier(t *testing.T) {
	g := testGroup(3, 0, 1, 2)
	for round := range 3 {
		for i, err := range barrierAll(g) {
			if err != nil {
				t.Fatalf("round %d rank %d: %v", round, i, err)
			}
		}
	}
	// One rank waits alone; the others' failure releases it.
	done := make(chan error, 1)
	go func() { done <- g.ranks[0].Barrier() }()
	for arrived := 0; arrived == 0; runtime.Gosched() {
		g.mu.Lock()
		arrived = g.arrived
		g.mu.Unlock()
	}
	select {
	case err := <-done:
		t.Fatalf("Barrier returned (%v) before the other ranks came", err)
	default:
	}
	fail := errors.New("rank 2: out of memory")
	g.Abort(fail)
	if err := <-done; !errors.Is(err, fail) {
		t.Fatalf("waiting rank: %v, want the abort's error", err)
	}
	for i, err := range barrierAll(g) {
		if !errors.Is(err, fail) {
			t.Errorf("after Abort, rank %d: %v", i, err)
		}
	}
	// Without NCCL communicators to re-make (these ranks have none), a
	// Reset of a group with every rank is exercised on GPUs
	// (TestParallel*); here: a group one of whose ranks never joined keeps
	// failing rather than waiting for it.
	h := testGroup(2, 0)
	h.Abort(fail)
	h.Reset()
	if err := h.ranks[0].Barrier(); err == nil || !strings.Contains(err.Error(), "rank 1 never joined") {
		t.Errorf("Reset without rank 1: Barrier %v", err)
	}
	// A Reset that follows no Abort just readies the rendezvous.
	k := testGroup(2, 0, 1)
	k.err = fail
	k.Reset()
	for i, err := range barrierAll(k) {
		if err != nil {
			t.Errorf("after a plain Reset, rank %d: %v", i, err)
		}
	}
}

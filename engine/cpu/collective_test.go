package cpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// onRanks runs f on n ranks of a new group at once.
func onRanks(n int, f func(c *Comm, be *Backend)) *Group {
	g := NewGroup(n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			be, _ := New(model.BackendOptions{Threads: 1})
			defer be.Close()
			f(g.Comm(r), be)
		})
	}
	wg.Wait()
	return g
}

func TestAllReduceSum(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		got := make([][]float32, n)
		onRanks(n, func(c *Comm, be *Backend) {
			x, _ := be.Alloc("x", model.Float, 3, 5)
			v := make([]float32, 15)
			for i := range v {
				// Values whose float32 sums depend on the order.
				v[i] = float32(c.Rank()+1) * (1 + float32(i)*1e-7) * []float32{1e8, 1, -1e8, 3}[c.Rank()%4]
			}
			be.WriteFloat32(x, v)
			c.AllReduceSum(x, 2) // the third row stays this rank's
			if err := c.Barrier(); err != nil {
				t.Error(err)
			}
			got[c.Rank()] = make([]float32, 15)
			be.ReadFloat32(got[c.Rank()], x, 3)
		})
		for i := range 10 {
			var want float64
			for r := range n {
				want += float64(float32(r+1) * (1 + float32(i)*1e-7) * []float32{1e8, 1, -1e8, 3}[r%4])
			}
			for r := range n {
				if got[r][i] != float32(want) {
					t.Fatalf("%d ranks: rank %d element %d = %v, want %v", n, r, i, got[r][i], float32(want))
				}
			}
		}
		for r := range n {
			if want := float32(r+1) * (1 + float32(10)*1e-7) * []float32{1e8, 1, -1e8, 3}[r%4]; got[r][10] != want {
				t.Errorf("%d ranks: rank %d row 2 changed: %v, want %v", n, r, got[r][10], want)
			}
		}
	}
}

func TestAllGather(t *testing.T) {
	const n, rows, w = 3, 2, 4
	got := make([][]float32, n)
	onRanks(n, func(c *Comm, be *Backend) {
		in, _ := be.Alloc("in", model.Float, 4, w)
		out, _ := be.Alloc("out", model.Float, 4, n*w)
		v := make([]float32, 4*w)
		for i := range v {
			v[i] = float32(100*c.Rank() + i)
		}
		be.WriteFloat32(in, v)
		c.AllGather(out, in, rows)
		if err := c.Barrier(); err != nil {
			t.Error(err)
		}
		got[c.Rank()] = make([]float32, rows*n*w)
		be.ReadFloat32(got[c.Rank()], out, rows)
	})
	var want []float32
	for row := range rows {
		for r := range n {
			for j := range w {
				want = append(want, float32(100*r+row*w+j))
			}
		}
	}
	for r := range n {
		if !slices.Equal(got[r], want) {
			t.Errorf("rank %d: %v, want %v", r, got[r], want)
		}
	}
}

// TestCollectiveFailures: ranks that disagree, a bad buffer and an abort
// end every rank's call, and each rank's Barrier says why.
func TestCollectiveFailures(t *testing.T) {
	check := func(name string, errs []error, want string) {
		t.Helper()
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: rank %d: %v, want ...%s...", name, r, err, want)
			}
		}
	}
	errs := make([]error, 2)
	onRanks(2, func(c *Comm, be *Backend) {
		x, _ := be.Alloc("x", model.Float, 4, 4)
		c.AllReduceSum(x, 1+c.Rank()) // rank 1 sums two rows
		errs[c.Rank()] = c.Barrier()
	})
	check("mismatch", errs, "called all-reduce on 4 values")

	onRanks(2, func(c *Comm, be *Backend) {
		x, _ := be.Alloc("x", model.Int32, 4, 4)
		if c.Rank() == 0 {
			c.AllReduceSum(x, 1)
		} else {
			y, _ := be.Alloc("y", model.Float, 4, 4)
			c.AllReduceSum(y, 1)
		}
		errs[c.Rank()] = c.Barrier()
	})
	check("int buffer", errs, "want a Float [rows, cols] buffer")

	boom := errors.New("rank 1 ran out of memory")
	onRanks(3, func(c *Comm, be *Backend) {
		x, _ := be.Alloc("x", model.Float, 4, 4)
		if c.Rank() == 1 {
			c.g.Abort(boom)
		} else {
			c.AllReduceSum(x, 4) // would wait for rank 1 for ever
		}
		if err := c.Barrier(); !errors.Is(err, boom) {
			t.Errorf("abort: rank %d: %v", c.Rank(), err)
		}
	})
}

// TestCollectiveMismatchThenMore: ranks that disagree go on with more
// calls, as a model's ops do until its next Barrier. The group must have
// failed before any rank returns from the call they disagree on, so no rank
// reads (or sums into) what another publishes for its next call: rank 0's
// next call here has the shape rank 1's first one had. Run under -race.
func TestCollectiveMismatchThenMore(t *testing.T) {
	for range 50 {
		errs := make([]error, 2)
		kept := make([]bool, 2)
		onRanks(2, func(c *Comm, be *Backend) {
			x, _ := be.Alloc("x", model.Float, 2, 4)
			be.WriteFloat32(x, []float32{1, 1, 1, 1, 1, 1, 1, 1})
			if c.Rank() == 0 {
				c.AllReduceSum(x, 1) // rank 1 sums two rows
			}
			y, _ := be.Alloc("y", model.Float, 2, 4)
			be.WriteFloat32(y, []float32{1, 1, 1, 1, 1, 1, 1, 1})
			c.AllReduceSum(y, 2)
			errs[c.Rank()] = c.Barrier()
			v := make([]float32, 8)
			be.ReadFloat32(v, y, 2)
			kept[c.Rank()] = slices.Equal(v, []float32{1, 1, 1, 1, 1, 1, 1, 1})
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "called all-reduce on 4 values") {
				t.Fatalf("rank %d: %v, want the mismatch", r, err)
			}
		}
		if !kept[0] {
			t.Fatal("rank 0's call after the mismatch was summed into by rank 1")
		}
	}
}

// TestCollectiveBarrierMismatch: a rank at a Barrier while another is in
// an all-reduce fails both, whichever arrives last.
func TestCollectiveBarrierMismatch(t *testing.T) {
	for range 50 {
		errs := make([]error, 2)
		onRanks(2, func(c *Comm, be *Backend) {
			if c.Rank() == 0 {
				x, _ := be.Alloc("x", model.Float, 1, 4)
				c.AllReduceSum(x, 1)
			}
			errs[c.Rank()] = c.Barrier()
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "called barrier") {
				t.Fatalf("rank %d: %v, want the mismatch", r, err)
			}
		}
	}
}

// TestGroupReset: after a failure and Reset, the group serves new calls.
func TestGroupReset(t *testing.T) {
	g := NewGroup(2)
	g.Abort(errors.New("a failed iteration"))
	if err := g.Comm(0).Barrier(); err == nil {
		t.Fatal("aborted group: Barrier succeeded")
	}
	g.Reset()
	got := make([]float32, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			be, _ := New(model.BackendOptions{Threads: 1})
			defer be.Close()
			x, _ := be.Alloc("x", model.Float, 1, 1)
			be.WriteFloat32(x, []float32{float32(r + 1)})
			c := g.Comm(r)
			c.AllReduceSum(x, 1)
			if err := c.Barrier(); err != nil {
				t.Error(err)
			}
			v := make([]float32, 1)
			be.ReadFloat32(v, x, 1)
			got[r] = v[0]
		})
	}
	wg.Wait()
	if got[0] != 3 || got[1] != 3 {
		t.Errorf("after Reset: %v, want 3 on both ranks", got)
	}
}

// BenchmarkAllReduce is one decode step's all-reduce of a 4096-wide
// hidden state for 64 tokens over 2 and 4 in-process ranks.
func BenchmarkAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprint(n, "ranks"), func(b *testing.B) {
			g := NewGroup(n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for r := range n {
				be, _ := New(model.BackendOptions{Threads: 1})
				defer be.Close()
				x, _ := be.Alloc("x", model.Float, 64, 4096)
				c := g.Comm(r)
				wg.Go(func() {
					<-start
					for range b.N {
						c.AllReduceSum(x, 64)
					}
				})
			}
			b.SetBytes(64 * 4096 * 4)
			b.ResetTimer()
			close(start)
			wg.Wait()
		})
	}
}

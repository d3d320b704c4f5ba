package cpu

import (
	"fmt"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// Group is an in-process collective group: the ranks of a split model
// as goroutines of one process, each with its own CPU backend, exchanging
// through shared memory. Every call is two rendezvous: the ranks publish
// their buffers, each rank computes its share of the result (a contiguous
// part of the elements) and writes it to every rank's buffer, and the
// ranks wait for each other before returning, so no rank changes a buffer
// another still reads.
//
// Sums run over the ranks in rank order in float64, rounded once, so the
// result is the same on every rank and from run to run, and as close to
// the unsplit model's single float32 GEMM as a sum can be.
type Group struct {
	n    int
	mu   sync.Mutex
	cond *sync.Cond
	// The barrier: arrivals in this generation.
	arrived, gen int
	err          error // set by Abort or a mismatch; ends every call
	// What each rank published for the current call.
	op   []string
	bufs [][]float32
	ins  [][]float32
}

// NewGroup creates a group of n ranks.
func NewGroup(n int) *Group {
	g := &Group{n: n, op: make([]string, n), bufs: make([][]float32, n), ins: make([][]float32, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Comm is rank's handle on the group (a model.Collective).
func (g *Group) Comm(rank int) *Comm { return &Comm{g: g, rank: rank} }

// CommOn is Comm whose calls are ops of be's profile, named
// cpu_comm_allreduce and cpu_comm_allgather (time waiting for the other
// ranks included, as an NCCL kernel's is), so a profile shows how much of
// an iteration is communication.
func (g *Group) CommOn(rank int, be *Backend) *Comm { return &Comm{g: g, rank: rank, be: be} }

// Abort fails the group: every call in progress or to come returns at
// once, and every rank's next Barrier reports err. A rank that fails
// outside a collective aborts the group so the others do not wait for it
// for ever.
func (g *Group) Abort(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cond.Broadcast()
}

var _ model.CollectiveGroup = (*Group)(nil)

// Join is CommOn for a CPU backend (model.CollectiveGroup).
func (g *Group) Join(rank int, be model.Backend) (model.Collective, error) {
	cb, ok := be.(*Backend)
	if !ok {
		return nil, fmt.Errorf("in-process collectives need CPU backends, rank %d has %s", rank, be.Name())
	}
	if rank < 0 || rank >= g.n {
		return nil, fmt.Errorf("rank %d of a group of %d", rank, g.n)
	}
	return g.CommOn(rank, cb), nil
}

// Reset clears a failure once no rank is inside a call (every rank has
// returned from the step that failed), so the group serves the next run.
func (g *Group) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err, g.arrived = nil, 0
	g.gen++
	clear(g.op)
	clear(g.bufs)
	clear(g.ins)
}

// Err is the error the group failed with, if it did.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// wait is the rendezvous: it returns once all ranks reached it (false if
// the group failed meanwhile).
func (g *Group) wait() bool { return g.waitCheck(nil) }

// waitCheck is wait where the last rank to arrive runs check (under the
// lock, before any rank leaves): an error fails the group, so every rank
// learns it before one can go on to its next call.
func (g *Group) waitCheck(check func() error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return false
	}
	gen := g.gen
	g.arrived++
	if g.arrived == g.n {
		g.arrived = 0
		g.gen++
		if check != nil {
			g.err = check()
		}
		g.cond.Broadcast()
		return g.err == nil
	}
	for gen == g.gen && g.err == nil {
		g.cond.Wait()
	}
	return g.err == nil
}

// Comm is one rank's handle on a Group.
type Comm struct {
	g    *Group
	rank int
	be   *Backend // whose profile records the calls; nil: none
}

func (c *Comm) begin() time.Time {
	if c.be == nil {
		return time.Time{}
	}
	return c.be.begin()
}

func (c *Comm) end(name string, t0 time.Time) {
	if c.be != nil {
		c.be.end(name, t0)
	}
}

var _ model.Collective = (*Comm)(nil)

func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.g.n }

// publish records this rank's buffers for a call and meets the others;
// false if the group failed or the ranks disagree on the call.
func (c *Comm) publish(op string, buf, in []float32) bool {
	g := c.g
	g.mu.Lock()
	g.op[c.rank], g.bufs[c.rank], g.ins[c.rank] = op, buf, in
	g.mu.Unlock()
	// The last rank to arrive compares the calls before any rank leaves:
	// a rank that left on a mismatch could otherwise publish its next call
	// while another still reads this one's.
	return g.waitCheck(func() error {
		for r := 1; r < g.n; r++ {
			if g.op[r] != g.op[0] || len(g.bufs[r]) != len(g.bufs[0]) || len(g.ins[r]) != len(g.ins[0]) {
				return fmt.Errorf("rank 0 called %s on %d values (%d in) while rank %d called %s on %d values (%d in)",
					g.op[0], len(g.bufs[0]), len(g.ins[0]), r, g.op[r], len(g.bufs[r]), len(g.ins[r]))
			}
		}
		return nil
	})
}

// share is this rank's part of n elements.
func (c *Comm) share(n int) (lo, hi int) {
	per := (n + c.g.n - 1) / c.g.n
	return min(c.rank*per, n), min((c.rank+1)*per, n)
}

// rowsOf is the first rows of t as float32 values, or nil when t is not a
// float buffer of that many rows.
func rowsOf(t model.Tensor, rows int) ([]float32, error) {
	x := ft(t)
	if x == nil || x.f == nil || len(x.shape) != 2 || rows < 0 || rows > x.shape[0] {
		return nil, fmt.Errorf("collective on %v: want a Float [rows, cols] buffer with at least %d rows", t, rows)
	}
	return x.f[:rows*x.cols()], nil
}

// AllReduceSum sums the first rows of t over the ranks, in rank order.
func (c *Comm) AllReduceSum(t model.Tensor, rows int) {
	defer c.end("cpu_comm_allreduce", c.begin())
	g := c.g
	buf, err := rowsOf(t, rows)
	if err != nil {
		g.Abort(err)
		return
	}
	if !c.publish("all-reduce", buf, nil) {
		return
	}
	lo, hi := c.share(len(buf))
	for i := lo; i < hi; i++ {
		var s float64
		for r := range g.n {
			s += float64(g.bufs[r][i])
		}
		v := float32(s)
		for r := range g.n {
			g.bufs[r][i] = v
		}
	}
	g.wait()
}

// AllGather concatenates the ranks' in along columns into out.
func (c *Comm) AllGather(out, in model.Tensor, rows int) {
	defer c.end("cpu_comm_allgather", c.begin())
	g := c.g
	src, err := rowsOf(in, rows)
	var dst []float32
	if err == nil {
		dst, err = rowsOf(out, rows)
	}
	if err == nil && ft(out).cols() != g.n*ft(in).cols() {
		err = fmt.Errorf("all-gather of %d columns from each of %d ranks into %d columns", ft(in).cols(), g.n, ft(out).cols())
	}
	if err != nil {
		g.Abort(err)
		return
	}
	if !c.publish("all-gather", dst, src) {
		return
	}
	// Each rank fills its own out; the others' ins are only read.
	w := ft(in).cols()
	for r := range g.n {
		for row := range rows {
			copy(dst[row*g.n*w+r*w:row*g.n*w+(r+1)*w], g.ins[r][row*w:(row+1)*w])
		}
	}
	g.wait()
}

// Barrier meets the other ranks and reports the group's failure. It is a
// call like the others, so a rank at a Barrier while another is in a data
// movement fails the group rather than letting that one read buffers never
// published.
func (c *Comm) Barrier() error {
	if c.publish("barrier", nil, nil) {
		return nil
	}
	return c.g.Err()
}

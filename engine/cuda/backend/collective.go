//go:build cgo && linux

package backend

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/profile/cupti"
)

// The CUDA backend's collectives (model.Collective) over NCCL: one
// communicator per rank, made and used on the rank's GPU thread, every
// operation an op like the others (queued on the GPU's main stream, held
// by the iteration's graph when one is captured: NCCL operations can be
// captured, and every rank captures the same ones in the same order, so
// the ranks' graphs meet in them as eager iterations do). A capture that
// fails on one rank runs that iteration eagerly there, the same
// collectives in the same order, so the ranks still meet; XRUN_CUDA_GRAPHS=0
// runs every rank eagerly (to compare, or to rule graphs out).
//
// AllReduceSum is NCCL's sum in the compute dtype. With two ranks every
// element is one addition, the same bits on both ranks; with more, NCCL's
// ring adds in an order of its own, the same on every rank and from run
// to run (not rank order, which only the CPU's group promises).

func init() {
	engine.RegisterCollectives("cuda", func(n int) (model.CollectiveGroup, error) { return NewGroup(n) })
}

// Group is n ranks' NCCL communicator (model.CollectiveGroup).
type Group struct {
	n int

	mu      sync.Mutex
	cond    *sync.Cond
	ranks   []*Rank // by rank, as they join
	err     error   // Abort's, or a failed re-initialisation
	aborted bool    // communicators aborted: Reset makes new ones
	// pendingID is the id the communicators of this generation share.
	pendingID *idOnce
	// Barrier's rendezvous.
	arrived, gen int
}

// NewGroup loads NCCL (a failure here fails every rank at once, before
// any of them waits for the others).
func NewGroup(n int) (*Group, error) {
	if n < 1 {
		return nil, fmt.Errorf("nccl: a group of %d ranks", n)
	}
	if err := cuda.LoadNCCL(); err != nil {
		return nil, err
	}
	g := &Group{n: n, ranks: make([]*Rank, n)}
	g.cond = sync.NewCond(&g.mu)
	return g, nil
}

var _ model.CollectiveGroup = (*Group)(nil)

// idOnce hands every rank the same communicator id: the first rank to ask
// makes it.
type idOnce struct {
	once sync.Once
	id   cuda.NCCLID
	err  error
}

func (o *idOnce) get() (cuda.NCCLID, error) {
	o.once.Do(func() { o.id, o.err = cuda.NewNCCLID() })
	return o.id, o.err
}

// Join makes rank's communicator on its GPU (ncclCommInitRank on the GPU's
// thread; it returns once every rank has called it).
func (g *Group) Join(rank int, be model.Backend) (model.Collective, error) {
	b, ok := asBackend(be) // the Backend, or the one a pagedBackend offers
	if !ok {
		return nil, fmt.Errorf("NCCL collectives need CUDA backends, rank %d has %s", rank, be.Name())
	}
	if rank < 0 || rank >= g.n {
		return nil, fmt.Errorf("rank %d of a group of %d", rank, g.n)
	}
	g.mu.Lock()
	if g.ranks[rank] != nil {
		g.mu.Unlock()
		return nil, fmt.Errorf("rank %d joined its group twice", rank)
	}
	r := &Rank{g: g, b: b, rank: rank}
	g.ranks[rank] = r
	ids := g.idsLocked()
	g.mu.Unlock()
	if err := r.init(ids); err != nil {
		return nil, err
	}
	if rank == 0 {
		profileRank0(g, b.dev.Info.Index)
	}
	return r, nil
}

// profiled is the GPU whose kernels a split cell's profile holds: CUPTI
// records every GPU of the process, and the cell's profile is its rank
// 0's (the engine profiles rank 0), the lowest GPU of the cell. Every
// group's rank 0 offers its GPU (a tp group's may come before the
// world's), the lowest is kept, and cleared when its group closes.
var profiled struct {
	sync.Mutex
	g      *Group
	device int
}

func profileRank0(g *Group, device int) {
	profiled.Lock()
	defer profiled.Unlock()
	if profiled.g == nil || device < profiled.device {
		profiled.g, profiled.device = g, device
		cupti.KeepDevice(device)
	}
}

// idsLocked is the id of the communicators being made: one per
// generation, so that Reset's re-initialisation does not reuse a spent id.
func (g *Group) idsLocked() *idOnce {
	if g.pendingID == nil {
		g.pendingID = &idOnce{}
	}
	return g.pendingID
}

// Abort stops every rank's communicator (ncclCommAbort, from this thread,
// while the ranks' GPU threads may be blocked waiting for a peer that
// failed): their operations in flight end and every later call fails.
// NCCL's abort returns only once the graphs holding the communicator are
// destroyed, which their GPU's thread does (it owns them) as soon as the
// abort has woken it: the drop is queued first, from another goroutine,
// since the thread may be blocked.
func (g *Group) Abort(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.aborted = true
	rs := append([]*Rank(nil), g.ranks...)
	g.mu.Unlock()
	g.cond.Broadcast()
	var posted sync.WaitGroup
	for _, r := range rs {
		if r != nil && r.b != nil {
			posted.Go(func() { r.b.dev.Post(func(*cuda.GPU) { r.b.dropGraphs() }, func(error) {}) })
		}
	}
	for _, r := range rs {
		if r != nil {
			r.getComm().Abort()
		}
	}
	// Queued before anything that follows the abort (Reset's new
	// communicators, new graphs).
	posted.Wait()
}

// Reset makes new communicators after an Abort (all ranks at once, each
// on its GPU's thread) and drops the ranks' captured graphs, which hold the
// old ones. A failure stays the group's error, reported by every Barrier.
func (g *Group) Reset() {
	g.mu.Lock()
	if !g.aborted {
		g.err, g.arrived = nil, 0
		g.gen++
		g.mu.Unlock()
		return
	}
	if i := slices.Index(g.ranks, nil); i >= 0 {
		// Re-making the others' communicators would wait for it for ever.
		g.err = fmt.Errorf("NCCL communicators not re-made: rank %d never joined its group", i)
		g.mu.Unlock()
		return
	}
	g.pendingID = &idOnce{}
	ids := g.pendingID
	rs := append([]*Rank(nil), g.ranks...)
	g.mu.Unlock()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.init(ids)
		}()
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err, g.aborted, g.arrived = nil, false, 0
	g.gen++
	if err := errors.Join(errs...); err != nil {
		g.err, g.aborted = fmt.Errorf("re-making the NCCL communicators after a failure: %w", err), true
	}
}

// Close destroys every rank's communicator, all at once (destroying one
// may wait for its peers). Each rank first finishes its queued work and
// drops its captured graphs: NCCL (2.26 on) holds a communicator's
// destruction, and its abort, until every graph that captured one of its
// collectives is destroyed, so destroying it first waits for ever.
func (g *Group) Close() error {
	g.mu.Lock()
	rs := append([]*Rank(nil), g.ranks...)
	g.mu.Unlock()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		if r == nil || r.getComm() == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.b.dev.Do(func(gpu *cuda.GPU) error {
				serr := gpu.Stream.Sync()
				r.b.dropGraphs()
				return errors.Join(serr, r.getComm().Destroy())
			})
		}()
	}
	wg.Wait()
	profiled.Lock()
	if profiled.g == g {
		profiled.g = nil
		cupti.KeepDevice(-1)
	}
	profiled.Unlock()
	return errors.Join(errs...)
}

// Rank is one rank's handle (model.Collective), bound to its backend.
type Rank struct {
	g    *Group
	b    *Backend
	rank int
	// comm is set and replaced on the GPU's thread and read there by the
	// ops; Abort reads it from another thread, hence mu.
	mu   sync.Mutex
	comm *cuda.Comm
	// stage receives NCCL's all-gather (the ranks' blocks one after the
	// other) before GatherBlocks lays it out (GPU thread only).
	stage cuda.Buffer
}

var _ model.Collective = (*Rank)(nil)

func (r *Rank) Rank() int { return r.rank }
func (r *Rank) Size() int { return r.g.n }

func (r *Rank) getComm() *cuda.Comm {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.comm
}

// init makes (or re-makes) the rank's communicator and drops the graphs
// that held the previous one.
func (r *Rank) init(ids *idOnce) error {
	id, err := ids.get()
	if err != nil {
		return err
	}
	return r.b.dev.Do(func(gpu *cuda.GPU) error {
		if old := r.getComm(); old != nil {
			// The graphs first: NCCL's abort waits for the graphs that
			// hold the communicator to be destroyed.
			r.b.dropGraphs()
			old.Abort() // an aborted one: frees nothing twice
		}
		c, err := gpu.NCCLInit(id, r.g.n, r.rank)
		if err != nil {
			return fmt.Errorf("GPU %d, rank %d of %d: %w", gpu.Info.Index, r.rank, r.g.n, err)
		}
		r.mu.Lock()
		r.comm = c
		r.mu.Unlock()
		return nil
	})
}

// float2D checks that t is a Float [rows, cols] activation holding rows.
func float2D(t *tensor, rows int) error {
	if t == nil || t.kind != kFloat || len(t.shape) != 2 || rows < 0 || rows > t.rows() {
		return fmt.Errorf("collective on %v: want a Float [rows, cols] buffer with at least %d rows", t, rows)
	}
	return nil
}

// AllReduceSum sums the first rows of t over the ranks, in place.
func (r *Rank) AllReduceSum(t model.Tensor, rows int) {
	b, x := r.b, ft(t)
	rows = b.rows(rows)
	b.op(func(g *cuda.GPU) error {
		if err := float2D(x, rows); err != nil {
			return err
		}
		return r.getComm().AllReduceSum(g.Stream, b.dt, x.buf, rows*x.cols())
	})
}

// AllGather concatenates the ranks' in along columns into out: NCCL's
// all-gather into the staging buffer, then GatherBlocks.
func (r *Rank) AllGather(out, in model.Tensor, rows int) {
	b, o, x := r.b, ft(out), ft(in)
	rows = b.rows(rows)
	n := r.g.n
	b.op(func(g *cuda.GPU) error {
		if err := errors.Join(float2D(o, rows), float2D(x, rows)); err != nil {
			return err
		}
		if o.cols() != n*x.cols() {
			return fmt.Errorf("all-gather of %d columns from each of %d ranks into %d columns", x.cols(), n, o.cols())
		}
		// Sized for in's every row at once, so that the first (eager)
		// iteration allocates it and no capture has to.
		need := n * x.rows() * x.cols() * b.dt.Size()
		if r.stage.Bytes < need {
			if g.Stream.Capturing() {
				return fmt.Errorf("all-gather: the staging buffer (%d bytes) must exist before a capture", need)
			}
			if r.stage.Bytes > 0 {
				// Captured graphs hold the old address.
				if err := g.Stream.Sync(); err != nil {
					return err
				}
				b.dropGraphs()
				b.freeOwned(g, r.stage)
				b.memActs -= int64(r.stage.Bytes)
				r.stage = cuda.Buffer{}
			}
			s, err := b.alloc(g, need)
			if err != nil {
				return fmt.Errorf("all-gather staging: %w", err)
			}
			r.stage = s
			b.memActs += int64(need)
		}
		if err := r.getComm().AllGather(g.Stream, b.dt, r.stage, x.buf, rows*x.cols()); err != nil {
			return err
		}
		return g.GatherBlocks(g.Stream, b.dt, o.buf, r.stage, rows, x.cols(), n)
	})
}

// Barrier meets the other ranks (on the host: the backend's own
// synchronisation before it has waited for this rank's operations) and
// reports the group's failure or NCCL's asynchronous one.
func (r *Rank) Barrier() error {
	g := r.g
	g.mu.Lock()
	if g.err != nil {
		defer g.mu.Unlock()
		return g.err
	}
	gen := g.gen
	g.arrived++
	if g.arrived == g.n {
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
	} else {
		for gen == g.gen && g.err == nil {
			g.cond.Wait()
		}
	}
	err := g.err
	g.mu.Unlock()
	if err != nil {
		return err
	}
	return r.getComm().AsyncError()
}

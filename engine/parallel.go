package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// Tensor and expert parallelism (tp, ep): a cell's model split over
// ranks, one backend and one model slice per rank (engine/model's
// shard.go), driven in lockstep. The scheduler runs once; every call it
// makes on the model (Forward, Argmax, ...) runs on every rank at once,
// each rank on its own goroutine locked to an OS thread (what a GPU
// rank's CUDA context needs), and returns when all are done. Ranks meet
// in their collectives; rank 0's picks, expert counts and profile are the
// cell's (every rank computes the same picks).
//
// tp and ep mean what trtllm-bench's --tp and --ep mean, so that a study
// comparing engines compares cells on the same GPUs: tp ranks split
// attention, dense MLPs and the vocabulary; MoE layers are split over the
// same ranks into ep expert groups of tp/ep ranks, each rank holding
// FFN/(tp/ep) of its group's experts (TensorRT-LLM's moe_tp_size). ep
// may also exceed tp (a multiple of it), which TensorRT-LLM does not
// take: ep ranks then hold one expert group each, and attention is
// replicated on the ep/tp groups of tp ranks (the same tokens computed
// again, not split). A cell uses max(tp, ep) GPUs (WorldSize).

// WorldSize is how many ranks (GPUs) a cell of tp and ep runs on.
func WorldSize(tp, ep int) int { return max(tp, ep, 1) }

// CheckParallel reports whether model mc can be split tp and ep ways,
// naming the parameter to change.
func CheckParallel(mc ModelConfig, tp, ep int) error {
	bad := func(field string, v int, msg string) error {
		return &ParamError{Field: field, Value: strconv.Itoa(v), Msg: msg}
	}
	switch {
	case tp < 1:
		return bad("tp", tp, "a positive integer")
	case ep < 1:
		return bad("ep", ep, "a positive integer")
	case tp%ep != 0 && ep%tp != 0:
		return bad("ep", ep, fmt.Sprintf("expected a divisor of tp %d (TensorRT-LLM splits each MoE layer's tp ranks into ep expert groups) or a multiple of it (attention then replicated)", tp))
	}
	// ep expert groups of world/ep ranks each (moe_tp).
	moeTP := WorldSize(tp, ep) / ep
	if !mc.MoE() && ep == 1 {
		moeTP = 1
	}
	if err := model.CheckShard(mc, tp, ep, moeTP); err != nil {
		var se *model.ShardError
		if errors.As(err, &se) {
			v := tp
			if se.Param == "ep" {
				v = ep
			}
			return bad(se.Param, v, se.Msg)
		}
		return err
	}
	return nil
}

// RankShare is one rank's slice of a model split tp and ep ways, as
// engine/model's shard.go cuts it (every rank holds as much): what the
// plan's memory check and the rooflines count per GPU. The zero value is
// the whole model, unsplit.
type RankShare struct {
	TP, EP, World int
	// Groups expert groups of MoETP ranks each hold the experts (1 and 1
	// on a dense model).
	Groups, MoETP int
	// A rank's query and KV heads (a KV head replicated where the model
	// has fewer than tp), dense MLP width, LM head rows, experts and each
	// expert's width. The embedding, the norms and the router are whole.
	Heads, KVHeads, DenseFFN, Vocab, Experts, ExpertFFN int
}

// Share is a rank's slice of mc split tp and ep ways; ep has no effect on
// a dense model (as on engine trtllm). An error for a split the model's
// shape does not allow (CheckParallel).
func Share(mc ModelConfig, tp, ep int) (RankShare, error) {
	if !mc.MoE() {
		ep = 1
	}
	if err := CheckParallel(mc, tp, ep); err != nil {
		return RankShare{}, err
	}
	w := WorldSize(tp, ep)
	s := RankShare{TP: tp, EP: ep, World: w, Groups: 1, MoETP: 1,
		Heads: mc.Heads / tp, KVHeads: max(mc.KVHeads/tp, 1), DenseFFN: mc.DenseWidth() / tp, Vocab: mc.Vocab / tp}
	if mc.MoE() {
		// As newRanks places them: ep groups of world/ep ranks.
		s.Groups, s.MoETP = ep, w/ep
		s.Experts, s.ExpertFFN = mc.Experts/ep, mc.FFN/s.MoETP
	}
	return s, nil
}

// Split reports whether the share is less than the whole model.
func (s RankShare) Split() bool { return s.World > 1 }

// HeldParams is how many weights a rank holds on its device: its slices of
// attention, MLPs, experts and LM head, and the embedding, norms and
// routers whole. Unsplit, every parameter and a tied LM head a second
// time (the model uploads it as a GEMM weight of its own).
func (s RankShare) HeldParams(mc ModelConfig) int64 {
	h := int64(mc.Hidden)
	head := int64(mc.Vocab) * h
	if !s.Split() {
		n := mc.Params()
		if mc.TieEmbeddings {
			n += head
		}
		return n
	}
	d := int64(mc.HeadDim)
	attn := h*d*int64(s.Heads+2*s.KVHeads) + int64(s.Heads)*d*h
	per := attn + 2*h
	if mc.MoE() {
		per += int64(s.Experts)*3*h*int64(s.ExpertFFN) + h*int64(mc.Experts)
	} else {
		per += 3 * h * int64(s.DenseFFN)
	}
	return int64(mc.Layers)*per + head + int64(s.Vocab)*h + h
}

// KVElemsPerToken is the KV cache a rank holds for one position of one
// sequence: its KV heads' keys and values, every layer.
func (s RankShare) KVElemsPerToken(mc ModelConfig) int64 {
	if !s.Split() {
		return mc.KVElemsPerToken()
	}
	return 2 * int64(mc.Layers) * int64(s.KVHeads) * int64(mc.HeadDim)
}

// Local is the shape a rank computes (shard.go's local): its heads, KV
// heads and MLP or expert width; the hidden size, the vocabulary and the
// experts the router picks from stay the model's.
func (s RankShare) Local(mc ModelConfig) ModelConfig {
	if !s.Split() {
		return mc
	}
	mc.Heads, mc.KVHeads = s.Heads, s.KVHeads
	if mc.MoE() {
		mc.FFN = s.ExpertFFN
	} else {
		mc.FFN = s.DenseFFN
	}
	return mc
}

// rankModel is what the engine drives: one model, or every rank of a
// split one.
type rankModel interface {
	Forward(b *model.Batch) error
	Argmax(dst []int32) error
	ArgmaxStart() (int, error)
	ArgmaxWait(ticket int, dst []int32) error
	Reserve(c model.Capacity) error
	ResetRouting()
	ExpertCounts(dst []int32) error
	ReadLogits(dst []float32) error
	KVConfig(slots, capacity int) model.KVConfig
	Pageable() bool
	Pipelined() bool
	Capacity() model.Capacity
}

var _ rankModel = (*model.Model)(nil)
var _ rankModel = (*ranks)(nil)

// rank is one rank's model and backend and the locked thread running
// every call on them.
type rank struct {
	m     *model.Model
	be    model.Backend
	calls chan func()
}

func startRank() *rank {
	r := &rank{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for f := range r.calls {
			f()
		}
	}()
	return r
}

// ranks is a split model: rankModel over every rank.
type ranks struct {
	rs     []*rank
	groups []model.CollectiveGroup // the world's, then the TP groups
	closed bool
	// Where ranks other than 0 put what only rank 0 reports.
	picks  [][]int32
	counts [][]int32
	logits [][]float32
}

// collectives makes the groups of a backend's collectives, by backend
// name: "cpu" built in (cpu.Group, in-process); the CUDA backend's, over
// NCCL, are added with RegisterCollectives by the program that links it.
var (
	collectivesMu sync.Mutex
	collectives   = map[string]func(ranks int) (model.CollectiveGroup, error){
		"cpu": func(n int) (model.CollectiveGroup, error) { return cpu.NewGroup(n), nil },
	}
)

// RegisterCollectives makes backend name's collectives available: cells
// of that backend can then be split (tp, ep).
func RegisterCollectives(name string, newGroup func(ranks int) (model.CollectiveGroup, error)) {
	collectivesMu.Lock()
	defer collectivesMu.Unlock()
	collectives[name] = newGroup
}

// newRanks builds the world's ranks in three steps: every rank's backend
// (bopt, its device, its share of the CPU threads), all at once; every
// rank joins its groups, all at once (NCCL's initialisation is itself a
// collective); then the model slices, one rank after the other (a
// checkpoint is read by one rank at a time).
func newRanks(cfg Config, mc ModelConfig, newBackend func(model.BackendOptions) (model.Backend, error), bopt model.BackendOptions, opt model.Options) (*ranks, error) {
	tp, ep := cfg.TP, cfg.EP
	w := WorldSize(tp, ep)
	collectivesMu.Lock()
	newGroup, ok := collectives[cfg.Backend]
	collectivesMu.Unlock()
	if !ok {
		field, v := "tp", tp
		if tp == 1 {
			field, v = "ep", ep
		}
		return nil, &ParamError{Field: field, Value: strconv.Itoa(v),
			Msg: fmt.Sprintf("the %s backend has no collectives in this program (the CUDA backend registers NCCL's only in builds with cgo on Linux); expected tp 1 and ep 1, or engine cpu, which runs the split in-process", cfg.Backend)}
	}
	if opt.FP8 {
		return nil, &ParamError{Field: "dtype", Value: "fp8", Msg: fmt.Sprintf("FP8 GEMMs on a split model (tp %d, ep %d) are not supported yet: a slice's per-tensor scale is not the whole weight's; expected float16, bfloat16 or float32", tp, ep)}
	}
	threads := bopt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &ranks{picks: make([][]int32, w), counts: make([][]int32, w), logits: make([][]float32, w)}
	// The world's group, then one per TP group where TP is not the world.
	sizes := []int{w}
	if tp > 1 && tp < w {
		for range w / tp {
			sizes = append(sizes, tp)
		}
	}
	for _, size := range sizes {
		g, err := newGroup(size)
		if err != nil {
			return nil, fmt.Errorf("collectives of %d ranks (%s): %w", size, cfg.Backend, err)
		}
		p.groups = append(p.groups, g)
	}
	for range w {
		p.rs = append(p.rs, startRank())
	}
	err := p.all(func(i int, r *rank) (err error) {
		b := bopt
		b.Threads, b.Device = max(1, threads/w), bopt.Device+i
		if r.be, err = newBackend(b); err != nil {
			return fmt.Errorf("backend %s (rank %d): %w", cfg.Backend, i, err)
		}
		return nil
	})
	pars := make([]model.Parallel, w)
	if err == nil {
		err = p.all(func(i int, r *rank) error {
			world, err := p.groups[0].Join(i, r.be)
			if err != nil {
				return fmt.Errorf("rank %d joining %d ranks: %w", i, w, err)
			}
			switch {
			case tp == w:
				pars[i].TP = world
			case tp > 1:
				if pars[i].TP, err = p.groups[1+i/tp].Join(i%tp, r.be); err != nil {
					return fmt.Errorf("rank %d joining its %d tp ranks: %w", i, tp, err)
				}
			}
			if mc.MoE() {
				pars[i].EP, pars[i].MoETP = world, w/ep
			}
			return nil
		})
	}
	for i := range w {
		if err != nil {
			break
		}
		err = p.on(i, func(r *rank) (err error) {
			o := opt
			o.Parallel = pars[i]
			r.m, err = model.New(r.be, mc, o)
			if errors.Is(err, model.ErrNoFP8) {
				// The user's parameter to blame, as New says unsplit.
				err = noFP8Error(cfg, r.be, mc, opt.KVFP8, err)
			}
			return err
		})
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// on runs f on rank i's thread and waits for it.
func (p *ranks) on(i int, f func(r *rank) error) error {
	done := make(chan error)
	p.rs[i].calls <- func() { done <- f(p.rs[i]) }
	return <-done
}

// all runs f on every rank at once and returns the first error (rank
// order). A rank that fails aborts the group, so that ranks waiting for
// it in a collective return.
func (p *ranks) all(f func(i int, r *rank) error) error {
	errs := make([]error, len(p.rs))
	var wg sync.WaitGroup
	for i, r := range p.rs {
		wg.Add(1)
		r.calls <- func() {
			defer wg.Done()
			if errs[i] = f(i, r); errs[i] != nil {
				for _, g := range p.groups {
					g.Abort(fmt.Errorf("rank %d: %w", i, errs[i]))
				}
			}
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			// Every rank is out of its collectives: a later run may use
			// the group again (its first call re-establishes every rank's
			// state, as after any failed iteration).
			for _, g := range p.groups {
				g.Reset()
			}
			return err
		}
	}
	return nil
}

// scratch is dst on rank 0 and on rank i a buffer of its length, bufs[i]
// (one per rank, so the ranks never touch each other's).
func scratch[T any](bufs [][]T, i int, dst []T) []T {
	if i == 0 {
		return dst
	}
	if cap(bufs[i]) < len(dst) {
		bufs[i] = make([]T, len(dst))
	}
	return bufs[i][:len(dst)]
}

func (p *ranks) Forward(b *model.Batch) error {
	return p.all(func(_ int, r *rank) error { return r.m.Forward(b) })
}

func (p *ranks) Argmax(dst []int32) error {
	return p.all(func(i int, r *rank) error { return r.m.Argmax(scratch(p.picks, i, dst)) })
}

func (p *ranks) ArgmaxStart() (int, error) {
	tickets := make([]int, len(p.rs))
	err := p.all(func(i int, r *rank) (err error) {
		tickets[i], err = r.m.ArgmaxStart()
		return err
	})
	return tickets[0], err
}

func (p *ranks) ArgmaxWait(ticket int, dst []int32) error {
	return p.all(func(i int, r *rank) error { return r.m.ArgmaxWait(ticket, scratch(p.picks, i, dst)) })
}

func (p *ranks) Reserve(c model.Capacity) error {
	return p.all(func(_ int, r *rank) error { return r.m.Reserve(c) })
}

func (p *ranks) ResetRouting() {
	p.all(func(_ int, r *rank) error { r.m.ResetRouting(); return nil })
}

// ExpertCounts are rank 0's: every rank routes every token alike.
func (p *ranks) ExpertCounts(dst []int32) error {
	return p.all(func(i int, r *rank) error { return r.m.ExpertCounts(scratch(p.counts, i, dst)) })
}

// ReadLogits is rank 0's, read on every rank at once: reading is a sync
// point, where a rank replays (or ends capturing) its iteration's graph,
// and rank 0's graph waits in its collectives for the others' graphs.
func (p *ranks) ReadLogits(dst []float32) error {
	return p.all(func(i int, r *rank) error { return r.m.ReadLogits(scratch(p.logits, i, dst)) })
}

// KVConfig is rank 0's share of the cache; every rank holds as much.
func (p *ranks) KVConfig(slots, capacity int) model.KVConfig {
	return p.rs[0].m.KVConfig(slots, capacity)
}
func (p *ranks) Pageable() bool           { return p.rs[0].m.Pageable() }
func (p *ranks) Pipelined() bool          { return p.rs[0].m.Pipelined() }
func (p *ranks) Capacity() model.Capacity { return p.rs[0].m.Capacity() }

// close frees every rank's backend and ends its thread.
func (p *ranks) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	// A group that holds resources on the ranks' devices (NCCL's
	// communicators) frees them first, every rank at once: NCCL may make
	// a communicator's destruction wait for its peers.
	for _, g := range p.groups {
		if c, ok := g.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	for i := range p.rs {
		errs = append(errs, p.on(i, func(r *rank) error {
			if r.be == nil {
				return nil
			}
			return r.be.Close()
		}))
		close(p.rs[i].calls)
	}
	return errors.Join(errs...)
}

// backend is the engine's view of the ranks' backends: rank 0's name,
// profile (each call on rank 0's thread) and measured ceilings; the KV
// budget every rank's (the least); Close for all.
func (p *ranks) backend() model.Backend { return &ranksBackend{Backend: p.rs[0].be, p: p} }

type ranksBackend struct {
	model.Backend
	p *ranks
}

var (
	_ model.KVBudget       = (*ranksBackend)(nil)
	_ model.Pager          = (*ranksBackend)(nil)
	_ model.PagesWhenBound = (*ranksBackend)(nil)
	_ model.ShapeWarmer    = (*ranksBackend)(nil)
)

func (b *ranksBackend) Close() error { return b.p.close() }

func (b *ranksBackend) rank0(f func(be model.Backend)) {
	b.p.on(0, func(r *rank) error { f(r.be); return nil })
}

func (b *ranksBackend) StartProfile(epoch time.Time) {
	b.rank0(func(be model.Backend) { be.StartProfile(epoch) })
}
func (b *ranksBackend) WindowStart() { b.rank0(func(be model.Backend) { be.WindowStart() }) }
func (b *ranksBackend) WindowStop()  { b.rank0(func(be model.Backend) { be.WindowStop() }) }
func (b *ranksBackend) IterationStart(index int, name string) {
	b.rank0(func(be model.Backend) { be.IterationStart(index, name) })
}
func (b *ranksBackend) IterationEnd(index int) {
	b.rank0(func(be model.Backend) { be.IterationEnd(index) })
}
func (b *ranksBackend) Ops() (ops []model.OpRecord) {
	b.rank0(func(be model.Backend) { ops = be.Ops() })
	return ops
}

// least is the smallest of f over every rank's backend, each asked on its
// rank's thread.
func (b *ranksBackend) least(f func(be model.Backend) int) int {
	n := make([]int, len(b.p.rs))
	b.p.all(func(i int, r *rank) error { n[i] = f(r.be); return nil })
	return slices.Min(n)
}

// MaxKVSlots is what every rank's budget holds of its share of the cache
// (each rank's share is alike): the least of them, since ranks' devices may
// have different memory free, and asking each rank is what sizes its cache
// (the CUDA backend keeps the cache to the budget it was sized by).
func (b *ranksBackend) MaxKVSlots(c model.KVConfig) int {
	return b.least(func(be model.Backend) int {
		if kb, ok := be.(model.KVBudget); ok {
			return kb.MaxKVSlots(c)
		}
		return int(^uint32(0) >> 1)
	})
}

// PagesWhenBound is model.PagesWhenBound's: the ranks page only where it
// pays when their backends ask so (rank 0's says for all: every rank's is
// built from the same options).
func (b *ranksBackend) PagesWhenBound() bool {
	pw, ok := b.Backend.(model.PagesWhenBound)
	return ok && pw.PagesWhenBound()
}

// MaxKVBlocks is MaxKVSlots for a paged cache (the engine pages only where
// Pageable).
func (b *ranksBackend) MaxKVBlocks(c model.KVConfig) int {
	return b.least(func(be model.Backend) int {
		if pg, ok := be.(model.Pager); ok {
			return pg.MaxKVBlocks(c)
		}
		return 0
	})
}

var _ model.PlanCounter = (*ranksBackend)(nil)

// GEMMPlans are the ranks' together (model.PlanCounter; zero where their
// backends build none).
func (b *ranksBackend) GEMMPlans() (n int, spent time.Duration) {
	ns := make([]int, len(b.p.rs))
	ds := make([]time.Duration, len(b.p.rs))
	_ = b.p.all(func(i int, r *rank) error {
		if pc, ok := r.be.(model.PlanCounter); ok {
			ns[i], ds[i] = pc.GEMMPlans()
		}
		return nil
	})
	for i := range ns {
		n, spent = n+ns[i], spent+ds[i]
	}
	return n, spent
}

// DecodeBatches are rank 0's (model.ShapeWarmer; the ranks' backends
// are alike), asked of every rank, since asking may set up a rank's
// warm-up (the CUDA backend's choice of GEMM plans to time).
func (b *ranksBackend) DecodeBatches(slots int) []int {
	outs := make([][]int, len(b.p.rs))
	_ = b.p.all(func(i int, r *rank) error {
		if w, ok := r.be.(model.ShapeWarmer); ok {
			outs[i] = w.DecodeBatches(slots)
		}
		return nil
	})
	return outs[0]
}

// Ceilings are those rank 0's backend measured, if it did (the ranks'
// GPUs are of one host): without it a split cell's roofline would lose
// them (CeilingsReporter).
func (b *ranksBackend) Ceilings() *Ceilings {
	if r, ok := b.Backend.(interface{ Ceilings() *Ceilings }); ok {
		return r.Ceilings()
	}
	return nil
}

// newSplitEngine is New for a cell split over ranks.
func newSplitEngine(ctx context.Context, cfg Config, mc ModelConfig, newBackend func(model.BackendOptions) (model.Backend, error),
	bopt model.BackendOptions, opt model.Options, windows []Span, sw model.Switches) (Engine, error) {
	if err := CheckParallel(mc, cfg.TP, cfg.EP); err != nil {
		return nil, err
	}
	p, err := newRanks(cfg, mc, newBackend, bopt, opt)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		p.close()
		return nil, err
	}
	return &engine{cfg: cfg, mc: mc, be: p.backend(), m: p, windows: windows, sw: sw}, nil
}

package cupti

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// backend is CUPTI as the session uses it: the real library through the
// cgo shim, or a fake in tests.
type backend interface {
	version() uint32
	timestamp() uint64
	enable(kind uint32) error
	disable(kind uint32) error
	// flush forces every buffer, even a partly filled one, to completion.
	flush() error
	// records walks the completed buffers' records, oldest first, and
	// frees the buffers.
	records(fn func(rec []byte)) error
	// name reads a kernel name pointer.
	name(ptr uint64) string
	dropped() uint64
	close()
}

// UnavailableError says why there are no CUPTI records: no libcupti, no
// cgo, or another profiler holding CUPTI (StepAside is then true).
type UnavailableError struct {
	Reason    string
	StepAside bool
}

func (e *UnavailableError) Error() string { return "cupti: " + e.Reason }

// ErrNotStarted is returned by Drain and Stop outside Begin/Start.
var ErrNotStarted = errors.New("cupti: no profile window was started")

// Stats describe what a session collected, for reports.
type Stats struct {
	// Version is cuptiGetVersion's API version; Layout the kernel record
	// struct read for it.
	Version uint32
	Layout  string
	// Verified is true once SelfTest found its kernel with these offsets.
	Verified bool
	Kernels  int
	Copies   int
	Memsets  int
	// Skipped counts records of other kinds or without timestamps.
	Skipped int
	// Invalid counts records dropped because they ended after the next
	// iteration began, which the engine's per-iteration synchronisation
	// rules out: their timestamps are wrong.
	Invalid int
	// OtherDevices counts records of GPUs KeepDevice left out (a split
	// cell's other ranks).
	OtherDevices int
	// Dropped is how many records CUPTI dropped (buffers full or not
	// allocated): the summary then misses them.
	Dropped uint64
}

// keepDevice is the only GPU whose records Drain returns, -1 for all.
var keepDevice atomic.Int64

func init() { keepDevice.Store(-1) }

// KeepDevice makes Drain return the records of GPU device only (its
// ordinal in this process), or of every GPU for -1: CUPTI records the
// whole process, and the ranks of a split cell run one GPU each in it,
// so the cell's profile is its rank 0's GPU's (engine/cuda/backend's
// collectives set it).
func KeepDevice(device int) { keepDevice.Store(int64(device)) }

// mark pairs CUPTI's clock with the engine's at an iteration's start.
type mark struct {
	iteration int
	cupti     uint64
	host      time.Duration
}

// Session collects activity records for profile windows. All methods are
// safe for concurrent use; there is one session per process (Open).
type Session struct {
	mu     sync.Mutex
	b      backend
	lay    layout
	epoch  time.Time
	begun  bool
	on     bool
	marks  []mark
	stats  Stats
	closed bool
}

func newSession(b backend) (*Session, error) {
	v := b.version()
	lay, err := layoutFor(v)
	if err != nil {
		return nil, &UnavailableError{Reason: err.Error()}
	}
	return &Session{b: b, lay: lay, stats: Stats{Version: v, Layout: lay.Kernel}}, nil
}

// Begin starts a profiled run: op records are timed from epoch (the
// engine's run start, as model.Profiler.StartProfile gives it).
func (s *Session) Begin(epoch time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch, s.begun, s.marks = epoch, true, nil
	s.marks = append(s.marks, s.pair(-1))
}

// pair reads both clocks, the host's on either side of CUPTI's so that a
// preemption between the reads is halved.
func (s *Session) pair(iteration int) mark {
	h0 := time.Since(s.epoch)
	c := s.b.timestamp()
	h1 := time.Since(s.epoch)
	return mark{iteration: iteration, cupti: c, host: h0 + (h1-h0)/2}
}

// Start enables kernel, memcpy and memset records (the window opens).
func (s *Session) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun || s.closed {
		return ErrNotStarted
	}
	for i, k := range enabledKinds {
		if err := s.b.enable(k); err != nil {
			for _, j := range enabledKinds[:i] {
				s.b.disable(j)
			}
			return err
		}
	}
	s.on = true
	return nil
}

// Stop disables them (the window closes). Records of work already
// launched still arrive with the next Drain.
func (s *Session) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return ErrNotStarted
	}
	s.on = false
	// Flush while the kinds are still enabled: on CUDA 13.0, kernels of a
	// replayed graph whose records were still pending when their kind was
	// disabled came back with the end time of the next flush.
	errs := []error{s.b.flush()}
	for _, k := range enabledKinds {
		errs = append(errs, s.b.disable(k))
	}
	return errors.Join(errs...)
}

// Mark notes that an engine iteration starts now. Call it before the
// iteration's first launch: records are given the iteration of the last
// mark before their start (each iteration ends in a synchronisation, so
// no kernel of one iteration runs after the next one's mark), and their
// times are converted through the nearest mark.
func (s *Session) Mark(iteration int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.begun {
		s.marks = append(s.marks, s.pair(iteration))
	}
}

// Drain flushes CUPTI and returns the records collected since the last
// Drain, sorted by start: kernels with their mangled name, grid, block
// and stream; copies and memsets with their bytes. Times are since the
// epoch given to Begin.
func (s *Session) Drain() ([]model.OpRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun {
		return nil, ErrNotStarted
	}
	if err := s.b.flush(); err != nil {
		return nil, err
	}
	var ops []model.OpRecord
	err := s.b.records(func(rec []byte) {
		r, ok := s.lay.parse(rec)
		if !ok || (r.Start == 0 && r.End == 0) || r.End < r.Start {
			s.stats.Skipped++
			return
		}
		if d := keepDevice.Load(); d >= 0 && r.Device != uint32(d) {
			s.stats.OtherDevices++
			return
		}
		m, next, ok := s.markAt(r.Start)
		if ok && r.End > next.cupti {
			s.stats.Invalid++
			return
		}
		// The difference wraps for a record before the first mark; as int64
		// it is then the right negative offset.
		op := model.OpRecord{Iteration: m.iteration, Start: m.host + time.Duration(int64(r.Start-m.cupti)),
			Duration: time.Duration(r.End - r.Start), Stream: r.Stream}
		switch r.Kind {
		case kindKernel, kindConcurrentKernel:
			op.Kind, op.Name, op.Grid, op.Block = model.OpKernel, s.b.name(r.NamePtr), r.Grid, r.Block
			s.stats.Kernels++
		case kindMemcpy:
			op.Kind, op.Bytes, op.Copy = model.OpMemcpy, int64(r.Bytes), copyKindName(r.CopyKind)
			s.stats.Copies++
		case kindMemset:
			op.Kind, op.Bytes = model.OpMemset, int64(r.Bytes)
			s.stats.Memsets++
		}
		ops = append(ops, op)
	})
	s.stats.Dropped = s.b.dropped()
	slices.SortStableFunc(ops, func(a, b model.OpRecord) int { return cmp.Compare(a.Start, b.Start) })
	return ops, err
}

// markAt is the last mark at or before a CUPTI timestamp (the first mark
// for earlier ones) and, when ok, the mark after it.
func (s *Session) markAt(ts uint64) (m, next mark, ok bool) {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].cupti > ts })
	m = s.marks[max(i-1, 0)]
	if i < len(s.marks) && i > 0 {
		return m, s.marks[i], true
	}
	return m, mark{}, false
}

// Close disables everything and releases CUPTI's subscriber slot; the
// session cannot be used again in this process.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, k := range enabledKinds {
		s.b.disable(k)
	}
	s.b.close()
	s.closed, s.on = true, false
}

// Stats returns what the session collected so far.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Dropped = s.b.dropped()
	return st
}

// SelfTest checks the record layout on a real kernel: run must launch a
// kernel whose name is kernel and synchronise; SelfTest enables records
// around it, drains, and checks that a record of that name came back with
// a plausible duration, grid and block. Until it passes, the layout is
// documented but unverified on this CUPTI version. Call it outside a
// window; records of the test are discarded.
func (s *Session) SelfTest(run func() error, kernel string) error {
	s.mu.Lock()
	begun, epoch, marks := s.begun, s.epoch, s.marks
	s.mu.Unlock()
	s.Begin(time.Now())
	defer func() {
		s.mu.Lock()
		s.begun, s.epoch, s.marks = begun, epoch, marks
		s.mu.Unlock()
	}()
	if err := s.Start(); err != nil {
		return err
	}
	runErr := run()
	stopErr := s.Stop()
	ops, err := s.Drain()
	if err = errors.Join(runErr, stopErr, err); err != nil {
		return fmt.Errorf("cupti self-test: %w", err)
	}
	var names []string
	for _, op := range ops {
		if op.Kind != model.OpKernel {
			continue
		}
		if op.Name == kernel {
			if op.Duration <= 0 || op.Duration > time.Minute || op.Grid[0] == 0 || op.Block[0] == 0 || op.Block[0] > 1024 {
				return fmt.Errorf("cupti self-test: %s record with implausible fields (duration %v, grid %v, block %v): the %s layout does not match CUPTI %d",
					kernel, op.Duration, op.Grid, op.Block, s.lay.Kernel, s.stats.Version)
			}
			s.mu.Lock()
			s.stats.Verified = true
			s.mu.Unlock()
			return nil
		}
		names = append(names, op.Name)
	}
	return fmt.Errorf("cupti self-test: no record of kernel %s among %d kernel records %q: the %s layout does not match CUPTI %d",
		kernel, len(names), names, s.lay.Kernel, s.stats.Version)
}

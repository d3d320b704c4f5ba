//go:build cgo && linux

package backend

import (
	"time"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/profile/cupti"
)

// StartProfile opens CUPTI for a profiled pass. It is called only for the
// profiled pass, after the timed repeats, because a loaded CUPTI slows every
// launch (bench/GPU.md). Where CUPTI is unusable (no libcupti, or nsys / ncu
// already attached) the pass still runs and cupti.Notes says why its
// profile has no kernels; cuProfilerStart/Stop still bracket the window
// for the outside profiler.
func (b *Backend) StartProfile(epoch time.Time) {
	s, err := cupti.Open()
	if err != nil {
		b.prof = nil
		return
	}
	if !s.Stats().Verified {
		// Check the record layout once per process on a kernel of known
		// name before trusting any record.
		name := "random_fill_f16"
		if b.dt == cuda.BF16 {
			name = "random_fill_bf16"
		}
		err := b.dev.Do(func(g *cuda.GPU) error {
			buf, err := g.Alloc(1 << 12)
			if err != nil {
				return err
			}
			defer g.Free(buf)
			return s.SelfTest(func() error {
				if err := g.RandomFill(g.Stream, b.dt, buf, 1, 0, 1); err != nil {
					return err
				}
				return g.Stream.Sync()
			}, name)
		})
		cupti.RecordSelfTest(err)
		if err != nil {
			b.prof = nil
			return
		}
	}
	s.Begin(epoch)
	b.prof = s
}

// WindowStart opens the span an outside nsys / ncu records, and CUPTI's
// records. The engine calls it at the top of an iteration, after the last
// one's synchronising Argmax, so no earlier launch is still queued.
func (b *Backend) WindowStart() {
	b.dev.Post(func(g *cuda.GPU) { _ = g.ProfilerStart() }, func(error) {})
	if b.prof != nil {
		_ = b.prof.Start()
	}
}

// WindowStop closes both, at an iteration boundary too.
func (b *Backend) WindowStop() {
	if b.prof != nil {
		_ = b.prof.Stop()
	}
	b.dev.Post(func(g *cuda.GPU) { _ = g.ProfilerStop() }, func(error) {})
}

// IterationStart marks the iteration's start on CUPTI's clock, so records
// are attributed to it, and opens the iteration's NVTX range when a
// profiler attached a tool. The range is pushed on the GPU's thread, in
// order with the iteration's launches, because NVTX ranges belong to a
// thread and nsys lays them over the kernels that thread launched. The
// engine calls this in every iteration of a profiled pass, inside the
// window and out (`nsys -c cudaProfilerApi` keeps only the window's); timed
// passes never call it. Without a tool it costs one atomic load.
func (b *Backend) IterationStart(i int, name string) {
	if b.prof != nil {
		b.prof.Mark(i)
	}
	if cuda.NVTXEnabled() {
		b.dev.Post(func(*cuda.GPU) { cuda.RangePush(name) }, func(error) {})
	}
}

// IterationEnd closes the iteration's NVTX range once the iteration is
// queued (with overlap the next one is queued before this one's tokens
// are back, and ranges must not nest); CUPTI needs nothing: the next
// mark ends the iteration, and inside a window iterations run
// synchronously.
func (b *Backend) IterationEnd(int) {
	if cuda.NVTXEnabled() {
		b.dev.Post(func(*cuda.GPU) { cuda.RangePop() }, func(error) {})
	}
}

// Ops drains the profiled pass's kernel, copy and memset records.
func (b *Backend) Ops() []model.OpRecord {
	if b.prof == nil {
		return nil
	}
	_ = b.dev.Do(func(g *cuda.GPU) error { return g.Stream.Sync() })
	ops, _ := b.prof.Drain()
	b.prof = nil
	return ops
}

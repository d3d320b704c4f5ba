package runner

import (
	"context"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
)

// gpuScheduler is the local executor: it runs cells on this host through a
// cellExecutor (worker processes), in the queue's order (the plan's, or
// shuffled: see CellOrder) — on several GPUs, cells
// predicted to run longest first (lptOrder) — a cell on the cpu backend
// alone (others would distort its timings, and it would distort theirs),
// cells on GPUs side by side, each on GPUs no other cell holds. Under a time
// limit, a cell whose first step would not finish in the time left when its
// turn comes is not started, and the next one that fits takes its place.
// Once the study halts (its results could not be written) no cell starts.
type gpuScheduler struct {
	gpus  []cuda.DeviceInfo // the GPUs cells may use
	cell  cellExecutor
	limit *budget // nil: no time limit
	// paces are the cells' recorded speeds, joined by each cell this run
	// completes: they estimate cells with nothing recorded (estimateFirst).
	paces []pace
}

func (g *gpuScheduler) parallel(queue []*runCell) int {
	if !slices.ContainsFunc(queue, func(rc *runCell) bool { return rc.gpus > 0 }) {
		return 1
	}
	return max(len(g.gpus), 1)
}

func (g *gpuScheduler) runCells(ctx context.Context, queue []*runCell, r reporter) error {
	free := make([]bool, len(g.gpus))
	for i := range free {
		free[i] = true
	}
	type finished struct {
		rc    *runCell
		o     outcome
		slots []int
	}
	done := make(chan finished)
	running, cpuBusy := 0, false
	if g.parallel(queue) > 1 {
		queue = lptOrder(queue)
	}
	canStart := func(rc *runCell) ([]int, bool) {
		if rc.gpus == 0 {
			return nil, running == 0
		}
		if cpuBusy {
			return nil, false
		}
		var slots []int
		for i, f := range free {
			if f && len(slots) < rc.gpus {
				slots = append(slots, i)
			}
		}
		return slots, len(slots) == rc.gpus
	}
	for len(queue) > 0 || running > 0 {
		// Time only runs out: a cell that does not fit now never will.
		for ctx.Err() == nil && !r.halted() && len(queue) > 0 {
			first := queue[0].first
			if g.limit != nil {
				first = estimateFirst(queue[0], g.paces)
			}
			ok, left := g.limit.allows(first)
			if ok {
				break
			}
			queue[0].first = first
			r.cellHeld(queue[0], left)
			queue = queue[1:]
		}
		if ctx.Err() == nil && !r.halted() && len(queue) > 0 {
			if slots, ok := canStart(queue[0]); ok {
				rc := queue[0]
				queue = queue[1:]
				var uuids []string
				for _, i := range slots {
					free[i] = false
					uuids = append(uuids, g.gpus[i].UUID)
				}
				cpuBusy = rc.gpus == 0
				running++
				on := "cpu"
				if len(uuids) > 0 {
					on = strings.Join(uuids, ",")
				}
				r.cellStarted(rc, on)
				go func() { done <- finished{rc, g.cell.run(ctx, rc.wc, uuids), slots} }()
				continue
			}
		}
		if running == 0 {
			break // interrupted or halted with nothing in flight
		}
		f := <-done
		running--
		for _, i := range f.slots {
			free[i] = true
		}
		if f.rc.gpus == 0 {
			cpuBusy = false
		}
		if rec := f.o.rec; rec != nil && rec.Status == results.StatusOK {
			if p, ok := paceOf(f.rc, rec); ok {
				g.paces = append(g.paces, p)
			}
		}
		r.cellFinished(f.rc, f.o)
	}
	return nil
}

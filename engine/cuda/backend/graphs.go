//go:build cgo && linux

package backend

import (
	"fmt"
	"os"
	"time"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// mode is how the current iteration's ops run.
type mode int

const (
	eager   mode = iota // queued as they come
	capture             // recorded into the bucket's graph
	replay              // skipped: the bucket's graph replays them at the sync point
)

// graphKey names a decode graph: its batch-size bucket (rows) and the
// decode attention's key split (cuda.AttnSplitsFor), which its launches
// hold.
type graphKey struct{ rows, splits int }

// graphState is one decode batch-size bucket at one split: captured on its second
// iteration (the first runs eagerly, building every cuBLASLt plan and
// loading every kernel it needs), replayed from then on.
type graphState struct {
	seen  int
	graph *cuda.Graph
	ops   int
	picks *pickSpec // the argmax that ended the capture, nil if none did
}

// op queues fn on the GPU's thread. In replay mode the bucket's graph
// already holds it; after a failure the rest of the iteration is skipped
// and the failure is reported at the next synchronising call.
func (b *Backend) op(fn func(g *cuda.GPU) error) {
	b.release()
	b.opBeside(fn)
}

// opBeside is op leaving the held-back op held: for work queued beside
// the ops (Prefetch), which consumes nothing the held op produces.
func (b *Backend) opBeside(fn func(g *cuda.GPU) error) {
	b.ops++
	switch b.mode {
	case replay:
		return
	case capture:
		b.capOps = append(b.capOps, fn)
	}
	b.dev.Post(func(g *cuda.GPU) {
		if b.err != nil {
			return
		}
		if err := fn(g); err != nil {
			b.err = err
		}
	}, func(err error) {
		if b.err == nil {
			b.err = err
		}
	})
}

// flush runs on the GPU's thread at a synchronisation point: it ends a
// capture and launches the graph (or replays the bucket's graph), then
// returns (and clears) the first failure of the ops before it. Later ops
// of the iteration run eagerly on the padded layout.
func (b *Backend) flush(g *cuda.GPU) error {
	if err := b.l2.joinSide(g); err != nil && b.err == nil {
		b.err = err
	}
	switch b.mode {
	case capture:
		failed := b.err != nil
		gr, err := g.Stream.EndCapture(failed)
		switch {
		case err == nil && gr != nil:
			b.bucket.graph, b.bucket.ops = gr, b.ops
			err = gr.Launch(g.Stream)
		case err == nil:
			err = b.err
		}
		if err != nil {
			// The captured work never ran: turn graphs off and run the
			// iteration's ops eagerly, so a capture problem costs speed,
			// not the run.
			fmt.Fprintf(os.Stderr, "cuda backend: decode graphs turned off, capturing %d rows failed: %v\n", b.cur.nTok, err)
			b.graphsOn, b.err = false, nil
			for _, fn := range b.capOps {
				if err := fn(g); err != nil {
					b.err = err
					break
				}
			}
		}
		b.capOps = b.capOps[:0]
	case replay:
		if b.ops != b.bucket.ops && b.err == nil {
			b.err = fmt.Errorf("iteration queued %d ops, its graph holds %d", b.ops, b.bucket.ops)
		} else if !b.launched {
			if err := b.bucket.graph.Launch(g.Stream); err != nil && b.err == nil {
				b.err = err
			}
		}
	}
	b.launched = false
	b.mode = eager
	err := b.err
	b.err = nil
	return err
}

func (b *Backend) dropGraphs() {
	for _, gs := range b.graphs {
		if gs.graph != nil {
			gs.graph.Close()
		}
	}
	clear(b.graphs)
}

var _ model.ShapeWarmer = (*Backend)(nil)

// DecodeBatches are the decode batches that build something of their own
// (model.ShapeWarmer): with graphs, each bucket up to slots (its graph and
// the cuBLASLt plans of its padded rows); without, every size, since each
// M then has plans of its own. cuBLASLt then times the algorithms of
// those batch sizes only (BlasLt.TuneOnly), all of them in the warm-up
// that follows.
func (b *Backend) DecodeBatches(slots int) []int {
	var out []int
	_ = b.dev.Do(func(*cuda.GPU) error {
		// graphsOn is read here, where a failed capture turns it off.
		if b.graphsOn {
			out = cuda.GraphBuckets(slots)
		} else {
			out = make([]int, slots)
			for i := range out {
				out[i] = i + 1
			}
		}
		if b.blas != nil {
			b.blas.TuneOnly(out)
		}
		return nil
	})
	return out
}

var _ model.PlanCounter = (*Backend)(nil)

// GEMMPlans are the cuBLASLt plans built so far and their host time
// (model.PlanCounter); none under gemm_plugin disable.
func (b *Backend) GEMMPlans() (n int, spent time.Duration) {
	_ = b.dev.Do(func(*cuda.GPU) error {
		if b.blas != nil {
			n, spent = b.blas.PlanStats()
		}
		return nil
	})
	return n, spent
}

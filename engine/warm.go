package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/model"
)

// warmDecodes is how many decode iterations each warmed batch size runs:
// on the CUDA backend the first runs eagerly (building its cuBLASLt plans,
// timing their candidates), the second captures the size's graph, the
// third replays it.
const warmDecodes = 3

// warmShapes runs, once per capacity, warmDecodes decode iterations at
// every decode batch size the backend builds something for
// (model.ShapeWarmer), in a bookkeeping of its own: no iteration of it is
// recorded, counted in profile windows or in the expert load, and the
// KV cache positions it wrote are overwritten by whatever comes next.
//
// Without it a timed pass pays for each batch size the first time it
// reaches it. Offline that is the tail of the first repeat; under a
// serving load, whose batch sizes wander, it is spread over the repeats:
// on an H100, TinyLlama-1.1B at 256 req/s measured 16.1k, 24.0k, 25.1k
// and 25.2k output tok/s in its four repeats.
func (e *engine) warmShapes(ctx context.Context, capa model.Capacity, pool *kvPool) error {
	w, ok := e.be.(model.ShapeWarmer)
	if !ok || !e.sw.WarmShapes || e.warmed == capa {
		return nil
	}
	// One prompt token, then the decodes: the shortest request that
	// decodes, so prefill costs a row per request.
	out := min(warmDecodes+1, capa.MaxLen-1)
	sizes := w.DecodeBatches(capa.Slots)
	if out < 2 || len(sizes) == 0 {
		e.warmed = capa
		return nil
	}
	tok := int32(0)
	if e.mc.BOS > 0 && e.mc.BOS < e.mc.Vocab {
		tok = int32(e.mc.BOS)
	}
	st := &runState{e: e, t0: time.Now(), batch: &model.Batch{}, next: make([]int32, capa.MaxLogitRows), slots: capa.Slots}
	if pool != nil {
		st.kv = newKVPool(pool.blocks, pool.size)
	}
	if e.mc.MoE() {
		// As Run: MoE iterations run synchronously, reading the counts.
		st.load = &ExpertLoad{Layers: e.mc.Layers, Experts: e.mc.Experts, DenseLayers: min(e.mc.DenseLayers, e.mc.Layers)}
		st.counts = make([]int32, e.mc.Layers*e.mc.Experts)
	}
	// Largest first: a size's requests all start and end together.
	sizes = slices.Clone(sizes)
	slices.SortFunc(sizes, func(a, b int) int { return b - a })
	for _, b := range sizes {
		if b < 1 || b > capa.Slots {
			continue
		}
		reqs := make([]datasets.Request, b)
		for i := range reqs {
			reqs[i] = datasets.Request{TaskID: i, InputIDs: []int32{tok}, OutputTokens: out}
		}
		if err := st.serve(ctx, reqs, true); err != nil {
			return fmt.Errorf("warming decode batches of %d: %w", b, err)
		}
	}
	e.warmed = capa
	return nil
}

//go:build cgo && linux

package backend

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

var _ model.ExpertShard = (*Backend)(nil)

// shardIDs are the renumbered routing tables of expert parallelism, one
// per routing table the model hands MoEShard (keyed by backend, then by
// table, beside the Backend like moeState).
var shardIDs sync.Map // *Backend -> *sync.Map (*tensor -> *tensor)

func (b *Backend) shardIDsFor(idx *tensor) *tensor {
	v, _ := shardIDs.LoadOrStore(b, &sync.Map{})
	m := v.(*sync.Map)
	if t, ok := m.Load(idx); ok {
		return t.(*tensor)
	}
	// Its buffer is allocated by the first (eager) iteration, on the GPU's
	// thread, before any capture.
	t := &tensor{name: idx.name + ".shard", shape: idx.shape, kind: kInt32}
	m.Store(idx, t)
	return t
}

// MoEShard is MoE over this rank's experts first .. first+E-1 only
// (model.ExpertShard): the router's ids are renumbered on the device
// (moe_shard_ids: this rank's experts from 0, every other id -1, which the
// MoE kernels skip as they skip padding rows), then the layer runs as a
// MoE layer of E experts. A rank's expert GEMMs cost its experts' share of
// the tokens; the EP all-reduce that follows adds the ranks' outputs.
func (b *Backend) MoEShard(out, x, idx, weights, gateUp, down model.Tensor, rows, k, first int) {
	it, gu := ft(idx), ft(gateUp)
	local := b.shardIDsFor(it)
	n := b.rows(rows) * k
	E := gu.shape[0]
	b.op(func(g *cuda.GPU) error {
		if it.kind != kInt32 || it.cols() != k || n > it.rows()*k {
			return fmt.Errorf("moe shard: ids %v for %d rows, k = %d", it.shape, n/k, k)
		}
		if local.buf.Bytes == 0 {
			if g.Stream.Capturing() {
				return fmt.Errorf("moe shard: the renumbered ids must exist before a capture")
			}
			buf, err := b.alloc(g, numel(it.shape)*4)
			if err != nil {
				return fmt.Errorf("moe shard ids: %w", err)
			}
			local.buf = buf
			b.memActs += int64(buf.Bytes)
		}
		return g.MoEShardIDs(g.Stream, local.buf, it.buf, n, first, E)
	})
	b.moe(out, x, local, weights, gateUp, down, rows, k)
}

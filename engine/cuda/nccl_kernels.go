//go:build cgo && linux

package cuda

import "fmt"

// GatherBlocks queues out[r] = blk[0][r] | blk[1][r] | ... for r < rows:
// NCCL's all-gather output (each rank's rows x w block after the other)
// laid out as the model's all-gather wants it (the ranks' columns side by
// side). w is in elements of dt.
func (g *GPU) GatherBlocks(s *Stream, dt DType, out, blk Buffer, rows, w, ranks int) error {
	n := rows * w * ranks * dt.Size()
	switch {
	case rows == 0:
		return nil
	case rows < 0 || w <= 0 || ranks <= 0 || out.Bytes < n || blk.Bytes < n:
		return fmt.Errorf("cuda: GatherBlocks of %d rows x %d from %d ranks (out %d bytes, blocks %d)", rows, w, ranks, out.Bytes, blk.Bytes)
	}
	f, err := g.function("collective", "gather_blocks")
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: rows, Y: ranks}, Dim3{X: min(256, roundUp(max(w/8, 1), 32))}, 0,
		g.argsPack().Ptr(out).Ptr(blk).I32(rows).I32(w).I32(ranks))
}

// MoEShardIDs queues out = idx with experts first .. first+experts-1
// renumbered from 0 and every other id set to -1 (n ids, int32): the
// routing of one rank's experts under expert parallelism, which the MoE
// kernels then run as a MoE layer of experts experts.
func (g *GPU) MoEShardIDs(s *Stream, out, idx Buffer, n, first, experts int) error {
	switch {
	case n == 0:
		return nil
	case n < 0 || first < 0 || experts <= 0 || out.Bytes < 4*n || idx.Bytes < 4*n:
		return fmt.Errorf("cuda: MoEShardIDs of %d ids, experts %d.. (%d)", n, first, experts)
	}
	f, err := g.function("collective", "moe_shard_ids")
	if err != nil {
		return err
	}
	return s.Launch(f, Dim3{X: min(ceilDiv(n, 256), 1024)}, Dim3{X: 256}, 0,
		g.argsPack().Ptr(out).Ptr(idx).I32(n).I32(first).I32(experts))
}

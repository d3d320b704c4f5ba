//go:build cgo && linux

package cuda

import (
	"testing"
	"time"
)

// BenchmarkMLAAttention times one DeepSeek-V3 layer's MLA (128 heads, nope
// 128, rope 64, v 128, latent 512, bf16): MLAPrep and the absorbed
// attention, at decode (batch 1, 64 and 256 after 1024 cached positions)
// and at a prefill of 8 prompts of 512 tokens, on both paths (the fused
// kernel; the split one, the prefill in chunks of its rows as the backend
// runs it). Reported: us per layer and the latent cache bytes read per
// second (every cached row once per token), against HBM's ~3 TB/s.
func BenchmarkMLAAttention(b *testing.B) {
	testGPU(b)
	s := MLAShape{Heads: 128, NopeDim: 128, RopeDim: 64, VDim: 128, Latent: 512, Interleave: true, Scale: 0.1, Eps: 1e-6}
	for _, sc := range []struct {
		name        string
		seqs, n, at int
	}{
		{"decode/B=1/ctx=1024", 1, 1, 1024},
		{"decode/B=64/ctx=1024", 64, 1, 1024},
		{"decode/B=256/ctx=1024", 256, 1, 1024},
		{"prefill/8x512", 8, 512, 0},
	} {
		for _, split := range []bool{false, true} {
			name := sc.name + "/fused"
			if split {
				name = sc.name + "/split"
			}
			benchMLA(b, name, s, sc.seqs, sc.n, sc.at, split)
		}
	}
}

// benchMLA times seqs sequences of n new tokens from position at.
func benchMLA(b *testing.B, name string, s MLAShape, seqs, n, at int, split bool) {
	const dt = BF16
	b.Run(name, func(b *testing.B) {
		T, capacity := seqs*n, at+n
		pos, slot := make([]int32, T), make([]int32, T)
		rows := 0
		for q := range seqs {
			for i := range n {
				pos[q*n+i], slot[q*n+i] = int32(at+i), int32(q)
				rows += at + i + 1
			}
		}
		var d time.Duration
		do(b, func(t testing.TB, g *GPU) {
			var bufs []Buffer
			alloc := func(bytes int, seed uint64) Buffer {
				buf, err := g.Alloc(bytes)
				if err != nil {
					t.Fatal(err)
				}
				bufs = append(bufs, buf)
				if seed != 0 {
					if err := g.RandomFill(g.Stream, dt, buf, seed, 0, 1); err != nil {
						t.Fatal(err)
					}
				}
				return buf
			}
			defer func() {
				for _, buf := range bufs {
					g.Free(buf)
				}
			}()
			es := dt.Size()
			q, ckv := alloc(T*s.QWidth()*es, 1), alloc(T*s.Row()*es, 2)
			norm, kvb := alloc(s.Latent*es, 3), alloc(s.Heads*(s.NopeDim+s.VDim)*s.Latent*es, 4)
			out := alloc(T*s.Heads*s.VDim*es, 0)
			cache := alloc(MLACacheBytes(dt, s, seqs+1, capacity), 5)
			table := alloc(capacity*s.RopeDim*4, 0)
			if err := g.Stream.Zero(table); err != nil {
				t.Fatal(err)
			}
			pb, sb := alloc(T*4, 0), alloc(T*4, 0)
			if err := UploadSlice(g.Stream, pb, pos); err != nil {
				t.Fatal(err)
			}
			if err := UploadSlice(g.Stream, sb, slot); err != nil {
				t.Fatal(err)
			}
			var work Buffer
			if split {
				work = alloc(g.MLASplitWorkBytes(min(T, MLASplitMaxRows), s), 0)
			}
			d = timeLaunches(b, t, g, 3, func(int) error {
				if err := g.MLAPrep(g.Stream, dt, q, ckv, norm, table, cache, pb, sb, T, capacity, s); err != nil {
					return err
				}
				if split { // in chunks of rows, as the backend runs a prefill
					es, qw, ow := dt.Size(), s.QWidth(), s.Heads*s.VDim
					for r0 := 0; r0 < T; r0 += MLASplitMaxRows {
						n := min(MLASplitMaxRows, T-r0)
						err := g.MLAAttentionSplit(g.Stream, dt, out.Slice(r0*ow*es, n*ow*es), q.Slice(r0*qw*es, n*qw*es), kvb, cache,
							pb.Slice(r0*4, n*4), sb.Slice(r0*4, n*4), work, n, capacity, s)
						if err != nil {
							return err
						}
					}
					return nil
				}
				return g.MLAAttention(g.Stream, dt, out, q, kvb, cache, pb, sb, T, capacity, s)
			})
		})
		per := d.Seconds() / float64(b.N)
		b.ReportMetric(per*1e6, "us/layer")
		b.ReportMetric(float64(rows*s.Row()*dt.Size())/per/1e9, "cache-GB/s")
	})
}

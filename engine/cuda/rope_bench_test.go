//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// BenchmarkRopeKV times a prefill's RoPE and cache write at Llama-3.1-8B's
// heads (32 query heads, 8 KV heads of 128, bf16), for 256 and 8,192
// tokens: RopeKV into a 16-bit cache, and into an FP8 cache the fused
// RopeKVFP8 against Rope then KVWriteFP8. Reported: us/op and GB/s of the
// bytes the fused kernel must move (the query and key heads read and
// written, the value heads read, the cache written).
func BenchmarkRopeKV(b *testing.B) {
	testGPU(b)
	a := AttnShape{Heads: 32, KVHeads: 8, HeadDim: 128}
	const dt, capacity = BF16, 2048
	for _, tokens := range []int{256, 8192} {
		for _, v := range []string{"bf16-cache/ropekv", "fp8-cache/rope+kvwrite", "fp8-cache/ropekv"} {
			b.Run(fmt.Sprintf("T=%d/%s", tokens, v), func(b *testing.B) {
				f8 := v != "bf16-cache/ropekv"
				ce := 2
				if f8 {
					ce = 1
				}
				W, D, KV := a.Width(), a.HeadDim, a.KVHeads
				var d time.Duration
				do(b, func(t testing.TB, g *GPU) {
					slots := ceilDiv(tokens, capacity)
					pos, slot := make([]int32, tokens), make([]int32, tokens)
					for i := range pos {
						pos[i], slot[i] = int32(i%capacity), int32(i/capacity)
					}
					table := model.RopeTable(model.Config{Heads: a.Heads, KVHeads: KV, HeadDim: D, RopeTheta: 500000}, capacity)
					rows := devAlloc(t, g, tokens*W*2)
					if err := g.RandomFill(g.Stream, dt, rows, 7, 0, 1); err != nil {
						t.Fatal(err)
					}
					kc, vc := devAlloc(t, g, slots*KV*capacity*D*ce), devAlloc(t, g, slots*KV*capacity*D*ce)
					posB, slotB, tab := devUploadT(t, g, pos), devUploadT(t, g, slot), devUploadT(t, g, table)
					q := KVFP8{On: true, K: 0.01, V: 0.01}
					off := a.Heads * D * 2
					d = timeLaunches(b, t, g, 1, func(int) error {
						switch v {
						case "bf16-cache/ropekv":
							return g.RopeKV(g.Stream, dt, kc, vc, rows, posB, slotB, tab, tokens, capacity, a)
						case "fp8-cache/ropekv":
							return g.RopeKVFP8(g.Stream, dt, kc, vc, rows, posB, slotB, tab, tokens, capacity, KVPages{}, a, q)
						}
						if err := g.Rope(g.Stream, dt, rows, rows.Slice(off, rows.Bytes-off), posB, tab, tokens, a.Heads, KV, D, W, W); err != nil {
							return err
						}
						return g.KVWriteFP8(g.Stream, dt, kc, vc, rows, posB, slotB, tokens, capacity, KVPages{}, a, q)
					})
				})
				per := d.Seconds() / float64(b.N)
				bytes := tokens * (2*(a.Heads+KV)*D*2 + KV*D*2 + 2*KV*D*ce)
				b.ReportMetric(per*1e6, "us/op")
				b.ReportMetric(float64(bytes)/per/1e9, "GB/s")
			})
		}
	}
}

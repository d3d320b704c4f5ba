//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

func TestRope(t *testing.T) {
	l3 := func(f float64) *model.RopeScaling {
		return &model.RopeScaling{Type: "llama3", Factor: f, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	}
	cases := []struct {
		name         string
		tokens       int
		cfg          model.Config
		separateRows bool // q and k in buffers of their own rather than a fused QKV row
	}{
		{"tinyllama", 37, model.Config{Heads: 32, KVHeads: 4, HeadDim: 64, RopeTheta: 10000}, false},
		{"tinyllama-separate-q-k", 9, model.Config{Heads: 32, KVHeads: 4, HeadDim: 64, RopeTheta: 10000}, true},
		{"llama3.1-8b", 5, model.Config{Heads: 32, KVHeads: 8, HeadDim: 128, RopeTheta: 500000, RopeScaling: l3(8)}, false},
		{"llama3.2-1b", 130, model.Config{Heads: 32, KVHeads: 8, HeadDim: 64, RopeTheta: 500000, RopeScaling: l3(32)}, false},
	}
	const positions = 4096
	for _, dt := range dtypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					h := model.HeadLayout{Heads: c.cfg.Heads, KVHeads: c.cfg.KVHeads, HeadDim: c.cfg.HeadDim}
					qw, kw, width := h.Heads*h.HeadDim, h.KVHeads*h.HeadDim, h.QKVWidth()
					table := model.RopeTable(c.cfg, positions)
					pos := make([]int32, c.tokens)
					for i := range pos {
						pos[i] = int32(r.IntN(positions))
					}
					tab, pb := devUploadT(t, g, table), devUploadT(t, g, pos)
					if c.separateRows {
						qv, kv := randVals(r, dt, c.tokens*qw, 2), randVals(r, dt, c.tokens*kw, 2)
						q, k := devUpload(t, g, dt, qv), devUpload(t, g, dt, kv)
						if err := g.Rope(g.Stream, dt, q, k, pb, tab, c.tokens, h.Heads, h.KVHeads, h.HeadDim, qw, kw); err != nil {
							t.Fatal(err)
						}
						cpu.RefRoPE(qv, pos, table, c.tokens, qw, h.Heads, h.HeadDim)
						cpu.RefRoPE(kv, pos, table, c.tokens, kw, h.KVHeads, h.HeadDim)
						checkRel(t, "q", download(t, g, dt, q, len(qv)), qv)
						checkRel(t, "k", download(t, g, dt, k, len(kv)), kv)
						return
					}
					// The model's layout: q, k and v heads side by side in one
					// QKV row; v must come out untouched.
					all := randVals(r, dt, c.tokens*width, 2)
					buf := devUpload(t, g, dt, all)
					k := buf.Slice(qw*dt.Size(), buf.Bytes-qw*dt.Size())
					if err := g.Rope(g.Stream, dt, buf, k, pb, tab, c.tokens, h.Heads, h.KVHeads, h.HeadDim, width, width); err != nil {
						t.Fatal(err)
					}
					cpu.RefRoPE(all, pos, table, c.tokens, width, h.Heads, h.HeadDim)
					cpu.RefRoPE(all[qw:], pos, table, c.tokens, width, h.KVHeads, h.HeadDim)
					checkRel(t, "qkv", download(t, g, dt, buf, len(all)), all)
				})
			})
		}
	}
}

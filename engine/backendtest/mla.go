package backendtest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// CheckMLA runs the DeepSeek-V3 ops (model.MLABackend) on a candidate
// backend and on the oracle: MLA attention in both forms over three
// iterations of a shared cache (prefill, a chunk beside decode tokens,
// decode), and grouped routing, learned and forced. A candidate without
// the ops fails: call it for backends that claim them.
func CheckMLA(t *testing.T, candidate NewBackend, tol float64) {
	seed := uint64(time.Now().UnixNano())
	for _, c := range []struct {
		name string
		run  func(p *pair, got, ref model.MLABackend)
	}{{"mla_attention", checkMLAAttention}, {"route_grouped", checkRouteGrouped}} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, candidate, tol, seed)
			got, ok := p.got.(model.MLABackend)
			if !ok {
				t.Fatalf("backend %s has no MLA ops", p.got.Name())
			}
			c.run(p, got, p.ref.(model.MLABackend))
		})
	}
}

func checkMLAAttention(p *pair, got, ref model.MLABackend) {
	// DeepSeek-V3's head dimensions with fewer heads and a smaller latent.
	for _, s := range []model.MLAShape{
		{Heads: 4, NopeDim: 128, RopeDim: 64, VDim: 128, Latent: 128, Interleave: true, Scale: 0.14, Eps: 1e-6},
		{Heads: 3, NopeDim: 32, RopeDim: 16, VDim: 48, Latent: 64, Scale: 0.2, Eps: 1e-5},
	} {
		for _, absorb := range []bool{true, false} {
			kc := model.KVConfig{Layers: 2, Slots: 4, Capacity: 40, HeadLayout: model.HeadLayout{Heads: s.Heads}, Latent: s.Latent, RopeDim: s.RopeDim}
			cg, err := p.got.NewKVCache(kc)
			p.must(err)
			cr, err := p.ref.NewKVCache(kc)
			p.must(err)
			cfg := model.Config{HeadDim: s.RopeDim, RopeTheta: 10000,
				RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 16, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1}}
			tab := p.weight(model.Table, model.RopeTable(cfg, 40), 40, s.RopeDim)
			kvb := p.weight(model.HeadStack, p.rand(s.Heads*(s.NopeDim+s.VDim)*s.Latent, 0.1), s.Heads, s.NopeDim+s.VDim, s.Latent)
			norm := p.weight(model.Vector, p.rand(s.Latent, 0.1), s.Latent)
			var first, third model.Batch
			first.Add(2, 0, make([]int32, 4), false)
			first.Add(0, 0, make([]int32, 9), false)
			third.Add(2, 10, make([]int32, 1), true)
			third.Add(3, 3, make([]int32, 1), true)
			for i, b := range []*model.Batch{&first, mixedBatch(p.tokens(10)), &third} {
				p.batch(b)
				T := b.NumTokens()
				q := p.input(p.rand(T*s.QWidth(), 1), T, s.QWidth())
				ckv := p.input(p.rand(T*(s.Latent+s.RopeDim), 1), T, s.Latent+s.RopeDim)
				out := p.alloc(model.Float, T, s.Heads*s.VDim)
				got.MLAAttention(out.got, q.got, ckv.got, norm.got, kvb.got, tab.got, cg, 1, s, absorb)
				ref.MLAAttention(out.ref, q.ref, ckv.ref, norm.ref, kvb.ref, tab.ref, cr, 1, s, absorb)
				what := "mla attention, plain, iteration "
				if absorb {
					what = "mla attention, absorbed, iteration "
				}
				p.compare(what+string(rune('1'+i)), out, T, s.Heads*s.VDim)
			}
		}
	}
}

func checkRouteGrouped(p *pair, got, ref model.MLABackend) {
	const rows = 29
	for _, r := range []model.GroupRoute{
		{K: 8, Groups: 8, TopKGroups: 4, Renorm: true, Scale: 2.5}, // DeepSeek-V3
		{K: 6, Groups: 1, TopKGroups: 1, Renorm: true, Scale: 2.446},
		{K: 4, Groups: 4, TopKGroups: 2, Scale: 1.5},
	} {
		E := map[int]int{8: 256, 1: 64, 4: 16}[r.Groups]
		logits := p.rand(rows*E, 2)
		bias := p.rand(E, 0.05)
		lt, bt := p.input(logits, rows, E), p.weight(model.Vector, bias, E)
		idx, wts := p.alloc(model.Int32, rows, r.K), p.alloc(model.Float, rows, r.K)
		counts := p.alloc(model.Int32, 2, E)
		p.got.Zero(counts.got)
		p.ref.Zero(counts.ref)
		got.RouteGrouped(idx.got, wts.got, lt.got, bt.got, nil, 0, rows, r, counts.got, 1)
		ref.RouteGrouped(idx.ref, wts.ref, lt.ref, bt.ref, nil, 0, rows, r, counts.ref, 1)
		gi, ri := make([]int32, rows*r.K), make([]int32, rows*r.K)
		p.must(p.got.ReadInt32(gi, idx.got, rows))
		p.must(p.ref.ReadInt32(ri, idx.ref, rows))
		choice := make([]float32, E)
		for t := range rows {
			for e := range E {
				choice[e] = float32(1/(1+math.Exp(-float64(logits[t*E+e])))) + bias[e]
			}
			// Compared as sets: a backend may order equal weights either way.
			g, w := slices.Clone(gi[t*r.K:(t+1)*r.K]), slices.Clone(ri[t*r.K:(t+1)*r.K])
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) && !nearTie(choice, r.K, p.tol) {
				p.t.Errorf("%+v row %d: experts %v, oracle %v", r, t, gi[t*r.K:(t+1)*r.K], ri[t*r.K:(t+1)*r.K])
			}
		}
		p.compare("grouped routing weights", wts, rows, r.K)
		gc, rc := make([]int32, 2*E), make([]int32, 2*E)
		p.must(p.got.ReadInt32(gc, counts.got, 2))
		p.must(p.ref.ReadInt32(rc, counts.ref, 2))
		if !slices.Equal(gc, rc) {
			p.t.Errorf("%+v: expert counts differ", r)
		}
	}
	// Forced: the table's experts from forcedRow on, the slots' weights.
	r := model.GroupRoute{K: 2, Groups: 4, TopKGroups: 2, Renorm: true, Scale: 2.5, ForcedWeights: []float32{1.5, 1}}
	forced := make([]int32, 30*2)
	for i := range forced {
		forced[i] = int32(i % 8)
	}
	ft := p.alloc(model.Int32, 30, 2)
	p.must(p.got.WriteInt32(ft.got, forced))
	idx, wts := p.alloc(model.Int32, rows, 2), p.alloc(model.Float, rows, 2)
	lt := p.input(p.rand(rows*8, 1), rows, 8)
	got.RouteGrouped(idx.got, wts.got, lt.got, nil, ft.got, 1, rows, r, nil, 0)
	gi, gw := make([]int32, rows*2), make([]float32, rows*2)
	p.must(p.got.ReadInt32(gi, idx.got, rows))
	p.must(p.got.ReadFloat32(gw, wts.got, rows))
	for i := range gi {
		if gi[i] != forced[2+i] || gw[i] != r.ForcedWeights[i%2] {
			p.t.Fatalf("forced grouped routing: experts %v weights %v", gi, gw)
		}
	}
}

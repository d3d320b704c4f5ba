package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// refRotate rotates x by position p's angles in float64: pairs (2i, 2i+1)
// interleaved, else (i, i+half).
func refRotate(x []float32, inv []float32, af float32, p int, interleave bool) {
	half := len(x) / 2
	for i := range half {
		a := float64(float32(p) * inv[i])
		c, s := math.Cos(a)*float64(af), math.Sin(a)*float64(af)
		i0, i1 := i, i+half
		if interleave {
			i0, i1 = 2*i, 2*i+1
		}
		u, v := float64(x[i0]), float64(x[i1])
		x[i0], x[i1] = float32(u*c-v*s), float32(v*c+u*s)
	}
}

// TestMLAAttentionMatchesReference runs three iterations of two sequences
// (prefill, a chunk beside a decode token, two decode tokens) through
// MLAAttention in both forms, on two backends fed the same rows, and
// checks each against RefMLAAttention over host copies of the cache.
func TestMLAAttentionMatchesReference(t *testing.T) {
	shapes := []model.MLAShape{
		{Heads: 4, NopeDim: 16, RopeDim: 8, VDim: 16, Latent: 16, Interleave: true, Scale: 0.3, Eps: 1e-6},
		{Heads: 2, NopeDim: 32, RopeDim: 16, VDim: 24, Latent: 48, Scale: 0.2, Eps: 1e-5},
	}
	type seq struct{ slot, past int }
	iters := [][]struct{ s, n int }{
		{{0, 7}, {1, 3}},
		{{0, 4}, {1, 1}},
		{{0, 1}, {1, 1}},
	}
	for _, s := range shapes {
		r := rand.New(rand.NewPCG(5, uint64(s.Latent)))
		L, dr := s.Latent, s.RopeDim
		const capa, layer = 24, 1
		cfg := model.Config{HeadDim: dr, RopeTheta: 10000,
			RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 16, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 0.707}}
		inv, af := model.RopeInvFreq(cfg)
		kvb := randF(r, s.Heads*(s.NopeDim+s.VDim)*L)
		norm := make([]float32, L)
		for i := range norm {
			norm[i] = 1 + 0.1*float32(r.NormFloat64())
		}
		type setup struct {
			b                            *Backend
			cache                        model.KVCache
			q, ckv, out, wkvb, wn, table model.Tensor
			absorb                       bool
		}
		var bes []setup
		for _, absorb := range []bool{true, false} {
			b := newBackend(t, GemmAuto, 3)
			cache, err := b.NewKVCache(model.KVConfig{Layers: 2, Slots: 2, Capacity: capa, HeadLayout: model.HeadLayout{Heads: s.Heads}, Latent: L, RopeDim: dr})
			if err != nil {
				t.Fatal(err)
			}
			st := setup{b: b, cache: cache, absorb: absorb}
			st.q, _ = b.Alloc("q", model.Float, 16, s.QWidth())
			st.ckv, _ = b.Alloc("ckv", model.Float, 16, L+dr)
			st.out, _ = b.Alloc("out", model.Float, 16, s.Heads*s.VDim)
			st.wkvb, _ = b.Upload("kv_b", model.HeadStack, model.HostF32([]int{s.Heads, s.NopeDim + s.VDim, L}, kvb))
			st.wn, _ = b.Upload("kv_norm", model.Vector, model.HostF32([]int{L}, norm))
			st.table, _ = b.Upload("rope", model.Table, model.HostF32([]int{capa, dr}, model.RopeTable(cfg, capa)))
			bes = append(bes, st)
		}
		seqs := []seq{{slot: 1}, {slot: 0}}
		lat := [2][]float32{} // per sequence: normalised latents
		kr := [2][]float32{}  // per sequence: rotated keys
		for it, parts := range iters {
			var bt model.Batch
			var q, ckv []float32
			for _, p := range parts {
				bt.Add(seqs[p.s].slot, seqs[p.s].past, make([]int32, p.n), true)
				q = append(q, randF(r, p.n*s.QWidth())...)
				ckv = append(ckv, randF(r, p.n*(L+dr))...)
			}
			T := bt.NumTokens()
			var outs [][]float32
			for _, st := range bes {
				if err := st.b.SetBatch(&bt); err != nil {
					t.Fatal(err)
				}
				st.b.WriteFloat32(st.q, q)
				st.b.WriteFloat32(st.ckv, ckv)
				st.b.MLAAttention(st.out, st.q, st.ckv, st.wn, st.wkvb, st.table, st.cache, layer, s, st.absorb)
				got := make([]float32, T*s.Heads*s.VDim)
				if err := st.b.ReadFloat32(got, st.out, T); err != nil {
					t.Fatal(err)
				}
				outs = append(outs, got)
			}
			// The reference: normalise and rotate on the host, then attend.
			row := 0
			for _, p := range parts {
				sq := &seqs[p.s]
				qs := slices.Clone(q[row*s.QWidth() : (row+p.n)*s.QWidth()])
				for i := range p.n {
					pos := sq.past + i
					c := slices.Clone(ckv[(row+i)*(L+dr) : (row+i+1)*(L+dr)])
					RefRMSNorm(c[:L], c[:L], norm, 1, L, s.Eps)
					refRotate(c[L:], inv, af, pos, s.Interleave)
					lat[p.s] = append(lat[p.s], c[:L]...)
					kr[p.s] = append(kr[p.s], c[L:]...)
					for h := range s.Heads {
						o := i*s.QWidth() + h*(s.NopeDim+dr) + s.NopeDim
						refRotate(qs[o:o+dr], inv, af, pos, s.Interleave)
					}
				}
				want := make([]float32, p.n*s.Heads*s.VDim)
				RefMLAAttention(want, qs, lat[p.s], kr[p.s], kvb, p.n, sq.past, s)
				w := s.Heads * s.VDim
				for k, got := range outs {
					if e := RelErr(got[row*w:(row+p.n)*w], want); e > 2e-6 {
						t.Errorf("%+v iteration %d sequence %d absorb=%v: rel err %.3g", s, it, p.s, bes[k].absorb, e)
					}
				}
				sq.past += p.n
				row += p.n
			}
		}
		// A position beyond the cache fails at the next synchronisation.
		var bt model.Batch
		bt.Add(0, capa, []int32{0}, true)
		b := bes[0].b
		b.SetBatch(&bt)
		b.MLAAttention(bes[0].out, bes[0].q, bes[0].ckv, bes[0].wn, bes[0].wkvb, bes[0].table, bes[0].cache, 0, s, true)
		if err := b.ReadFloat32(make([]float32, s.Heads*s.VDim), bes[0].out, 1); err == nil || !strings.Contains(err.Error(), "outside the cache") {
			t.Errorf("position %d of a %d-position cache: %v", capa, capa, err)
		}
	}
}

func TestMLACacheBudget(t *testing.T) {
	b := newBackend(t, GemmAuto, 1)
	b.opt.KVCacheBytes = 1 << 20
	// DeepSeek-V3's cache: 61 layers x (512 + 64) float32 per position.
	c := model.KVConfig{Layers: 61, Capacity: 100, HeadLayout: model.HeadLayout{Heads: 128}, Latent: 512, RopeDim: 64}
	if got := c.KVBytesPerToken(2); got != 61*576*2 {
		t.Errorf("bytes per position at bf16: %d, want %d", got, 61*576*2)
	}
	if got, want := b.MaxKVSlots(c), (1<<20)/(61*576*4*100); got != want {
		t.Errorf("MaxKVSlots: %d, want %d", got, want)
	}
}

func TestRouteGroupedMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	b := newBackend(t, GemmAuto, 3)
	for _, c := range []struct{ E, G, L, k int }{{8, 4, 2, 2}, {64, 8, 3, 6}, {64, 1, 1, 6}, {256, 8, 4, 8}} {
		for _, renorm := range []bool{true, false} {
			rt := model.GroupRoute{K: c.k, Groups: c.G, TopKGroups: c.L, Renorm: renorm, Scale: 2.5}
			const rows = 37
			logits := randF(r, rows*c.E)
			bias := randF(r, c.E)
			for i := range bias {
				bias[i] *= 0.1
			}
			lt, _ := b.Alloc("logits", model.Float, rows, c.E)
			bt, _ := b.Upload("bias", model.Vector, model.HostF32([]int{c.E}, bias))
			it, _ := b.Alloc("idx", model.Int32, rows, c.k)
			wt, _ := b.Alloc("w", model.Float, rows, c.k)
			ct, _ := b.Alloc("counts", model.Int32, 2, c.E)
			b.WriteFloat32(lt, logits)
			b.RouteGrouped(it, wt, lt, bt, nil, 0, rows, rt, ct, 1)
			idx, w := make([]int32, rows*c.k), make([]float32, rows*c.k)
			b.ReadInt32(idx, it, rows)
			b.ReadFloat32(w, wt, rows)
			wantIdx, wantW := make([]int32, rows*c.k), make([]float32, rows*c.k)
			RefRouteGrouped(wantIdx, wantW, logits, bias, rows, c.E, rt)
			if !slices.Equal(idx, wantIdx) {
				t.Errorf("%+v renorm=%v: experts %v, want %v", c, renorm, idx[:c.k], wantIdx[:c.k])
			}
			if e := RelErr(w, wantW); e > 1e-6 {
				t.Errorf("%+v renorm=%v: weights rel err %g", c, renorm, e)
			}
			counts := make([]int32, 2*c.E)
			b.ReadInt32(counts, ct, 2)
			var n int32
			for _, v := range counts[c.E:] {
				n += v
			}
			if n != rows*int32(c.k) || slices.ContainsFunc(counts[:c.E], func(v int32) bool { return v != 0 }) {
				t.Errorf("%+v: counts %v", c, counts)
			}
		}
	}
}

// TestRouteGroupedSemantics pins the method on a token worked by hand:
// the group limit keeps the best-scored expert out, and the correction
// bias changes the choice but not the weights.
func TestRouteGroupedSemantics(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	// Groups {0,1} {2,3} {4,5} {6,7}; group scores (two best): 1.0, 1.46,
	// 1.42, 0.09: groups 1 and 2 are kept, so expert 0, the best, is not.
	logits := []float32{3, -3, 1, 1, 0.9, 0.9, -3, -3}
	rt := model.GroupRoute{K: 2, Groups: 4, TopKGroups: 2, Renorm: true, Scale: 2}
	for _, c := range []struct {
		bias    []float32
		idx     []int32
		weights []float64
	}{
		{make([]float32, 8), []int32{2, 3}, []float64{1, 1}},
		// +0.2 on expert 4 puts it first; its weight stays its score.
		{[]float32{0, 0, 0, 0, 0.2, 0, 0, 0}, []int32{4, 2}, []float64{2 * sig(0.9) / (sig(0.9) + sig(1)), 2 * sig(1) / (sig(0.9) + sig(1))}},
	} {
		idx, w := make([]int32, 2), make([]float32, 2)
		groupRouteRow(idx, w, logits, c.bias, rt, make([]float32, 24))
		if !slices.Equal(idx, c.idx) || math.Abs(float64(w[0])-c.weights[0]) > 1e-6 || math.Abs(float64(w[1])-c.weights[1]) > 1e-6 {
			t.Errorf("bias %v: experts %v weights %v, want %v %v", c.bias, idx, w, c.idx, c.weights)
		}
	}
}

func TestRouteGroupedForced(t *testing.T) {
	b := newBackend(t, GemmAuto, 2)
	rt := model.GroupRoute{K: 2, Groups: 4, TopKGroups: 2, Renorm: true, Scale: 2.5, ForcedWeights: []float32{1.5, 1}}
	lt, _ := b.Alloc("logits", model.Float, 3, 8)
	ft, _ := b.Alloc("forced", model.Int32, 5, 2)
	b.WriteInt32(ft, []int32{0, 1, 2, 3, 4, 5, 6, 7, 1, 0})
	it, _ := b.Alloc("idx", model.Int32, 3, 2)
	wt, _ := b.Alloc("w", model.Float, 3, 2)
	b.RouteGrouped(it, wt, lt, nil, ft, 2, 3, rt, nil, 0)
	idx, w := make([]int32, 6), make([]float32, 6)
	if err := b.ReadInt32(idx, it, 3); err != nil {
		t.Fatal(err)
	}
	b.ReadFloat32(w, wt, 3)
	if !slices.Equal(idx, []int32{4, 5, 6, 7, 1, 0}) || !slices.Equal(w, []float32{1.5, 1, 1.5, 1, 1.5, 1}) {
		t.Errorf("forced rows 2..4: %v %v", idx, w)
	}
	b.RouteGrouped(it, wt, lt, nil, ft, 3, 3, rt, nil, 0)
	if err := b.ReadInt32(idx, it, 3); err == nil || !strings.Contains(err.Error(), "beyond the table") {
		t.Errorf("rows past the table: %v", err)
	}
}

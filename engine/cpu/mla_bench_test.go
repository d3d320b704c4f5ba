package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// BenchmarkMLADecode is one MLA layer's decode step for 8 sequences at
// 1024 cached positions with Moonlight's head dimensions (16 heads,
// latent 512): the absorbed form attends over the latent cache, the plain
// form decompresses every cached position's keys and values first.
func BenchmarkMLADecode(b *testing.B) {
	s := model.MLAShape{Heads: 16, NopeDim: 128, RopeDim: 64, VDim: 128, Latent: 512, Interleave: true, Scale: 0.07, Eps: 1e-6}
	const seqs, ctx = 8, 1024
	for _, form := range []struct {
		name   string
		absorb bool
	}{{"absorbed", true}, {"plain", false}} {
		b.Run(form.name, func(b *testing.B) {
			be := newBackend(b, GemmAuto, 0)
			r := rand.New(rand.NewPCG(1, 2))
			cache, err := be.NewKVCache(model.KVConfig{Layers: 1, Slots: seqs, Capacity: ctx + 1, HeadLayout: model.HeadLayout{Heads: s.Heads}, Latent: s.Latent, RopeDim: s.RopeDim})
			if err != nil {
				b.Fatal(err)
			}
			kvb, _ := be.Upload("kv_b", model.HeadStack, model.HostF32([]int{s.Heads, s.NopeDim + s.VDim, s.Latent}, randF(r, s.Heads*(s.NopeDim+s.VDim)*s.Latent)))
			norm, _ := be.Upload("norm", model.Vector, model.HostF32([]int{s.Latent}, randF(r, s.Latent)))
			tab, _ := be.Upload("rope", model.Table, model.HostF32([]int{ctx + 1, s.RopeDim}, model.RopeTable(model.Config{HeadDim: s.RopeDim, RopeTheta: 10000}, ctx+1)))
			q, _ := be.Alloc("q", model.Float, seqs, s.QWidth())
			ckv, _ := be.Alloc("ckv", model.Float, seqs, s.Latent+s.RopeDim)
			out, _ := be.Alloc("out", model.Float, seqs, s.Heads*s.VDim)
			var bt model.Batch
			for i := range seqs {
				bt.Add(i, ctx, []int32{0}, true)
			}
			if err := be.SetBatch(&bt); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				be.MLAAttention(out, q, ckv, norm, kvb, tab, cache, 0, s, form.absorb)
			}
			if err := be.ReadFloat32(make([]float32, seqs*s.Heads*s.VDim), out, seqs); err != nil {
				b.Fatal(err)
			}
		})
	}
}

package engine

import (
	"sync/atomic"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// countingBackend is the CPU backend counting the weights uploaded to it.
type countingBackend struct {
	*cpu.Backend
	n *atomic.Int64
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

func (b countingBackend) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	b.n.Add(numel(h.Shape))
	return b.Backend.Upload(name, kind, h)
}

func (b countingBackend) Random(name string, kind model.WeightKind, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	b.n.Add(numel(shape))
	return b.Backend.Random(name, kind, shape, seed, scale)
}

func (b countingBackend) RandomSlice(name string, kind model.WeightKind, shape []int, seed uint64, scale float32, runs []model.RandomRun) (model.Tensor, error) {
	b.n.Add(numel(shape))
	return b.Backend.RandomSlice(name, kind, shape, seed, scale, runs)
}

// countingGroup is cpu.Group for counting backends: in-process
// collectives join the CPU backend inside.
type countingGroup struct{ model.CollectiveGroup }

func (g countingGroup) Join(rank int, be model.Backend) (model.Collective, error) {
	if c, ok := be.(countingBackend); ok {
		be = c.Backend
	}
	return g.CollectiveGroup.Join(rank, be)
}

// TestShareHeldParams: the weights Share says a rank holds are those each
// rank of the split model uploads, dense and MoE, split every way, so the
// plan's memory per GPU follows shard.go's rules rather than a copy of
// them.
func TestShareHeldParams(t *testing.T) {
	RegisterCollectives("test-counting-cpu", func(n int) (model.CollectiveGroup, error) { return countingGroup{cpu.NewGroup(n)}, nil })
	for _, c := range []struct {
		model  string
		tp, ep int
	}{
		{"tiny-llama", 1, 1}, {"tiny-llama", 2, 1}, {"tiny-llama", 4, 1},
		{"tiny-moe", 1, 1}, {"tiny-moe", 2, 1}, {"tiny-moe", 2, 2}, {"tiny-moe", 4, 2}, {"tiny-moe", 1, 4}, {"tiny-moe", 2, 4},
	} {
		mc, err := LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Share(mc, c.tp, c.ep)
		if err != nil {
			t.Fatalf("%s tp %d ep %d: %v", c.model, c.tp, c.ep, err)
		}
		w := WorldSize(c.tp, c.ep)
		counts := make([]*atomic.Int64, w)
		newBackend := func(o model.BackendOptions) (model.Backend, error) {
			be, err := cpu.New(o)
			if err != nil {
				return nil, err
			}
			n := &atomic.Int64{}
			counts[o.Device] = n
			return countingBackend{be, n}, nil
		}
		cfg := Config{Model: c.model, Backend: "test-counting-cpu", TP: c.tp, EP: c.ep, Threads: 1}
		var got []int64
		if w == 1 {
			n := &atomic.Int64{}
			be, _ := cpu.New(model.BackendOptions{Threads: 1})
			if _, err := model.New(countingBackend{be, n}, mc, model.Options{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			be.Close()
			got = []int64{n.Load()}
		} else {
			p, err := newRanks(cfg, mc, newBackend, model.BackendOptions{Threads: 1}, model.Options{Seed: 1})
			if err != nil {
				t.Fatalf("%s tp %d ep %d: %v", c.model, c.tp, c.ep, err)
			}
			for _, n := range counts {
				got = append(got, n.Load())
			}
			p.close()
		}
		for r, n := range got {
			if want := s.HeldParams(mc); n != want {
				t.Errorf("%s tp %d ep %d: rank %d uploaded %d weights, Share says %d", c.model, c.tp, c.ep, r, n, want)
			}
		}
		if l := s.Local(mc); s.KVElemsPerToken(mc) != l.KVElemsPerToken() {
			t.Errorf("%s tp %d ep %d: KV per token %d, the local shape's %d", c.model, c.tp, c.ep, s.KVElemsPerToken(mc), l.KVElemsPerToken())
		}
	}
}

// TestShareMixtral: Mixtral-8x7B in bf16 holds 93.4 GB; at tp 2 a rank
// holds half of everything but the embedding (about 47 GB, what fits an
// 80 GB H100), at tp 2 / ep 2 as much in whole experts, and the KV heads
// halve; a model with fewer KV heads than ranks keeps one on each.
func TestShareMixtral(t *testing.T) {
	mc, _ := LookupModel("mixtral-8x7b")
	whole, _ := Share(mc, 1, 1)
	if gb := float64(whole.HeldParams(mc)) * 2 / 1e9; gb < 93 || gb > 94 {
		t.Errorf("unsplit: %.1f GB", gb)
	}
	for _, ep := range []int{1, 2} {
		s, err := Share(mc, 2, ep)
		if err != nil {
			t.Fatal(err)
		}
		if gb := float64(s.HeldParams(mc)) * 2 / 1e9; gb < 46.5 || gb > 47.5 {
			t.Errorf("tp 2 ep %d: %.1f GB a rank, want about 47", ep, gb)
		}
		if s.KVElemsPerToken(mc)*2 != mc.KVElemsPerToken() {
			t.Errorf("tp 2 ep %d: KV per token %d of %d", ep, s.KVElemsPerToken(mc), mc.KVElemsPerToken())
		}
	}
	s, _ := Share(mc, 2, 2)
	if s.Experts != 4 || s.ExpertFFN != mc.FFN || s.Groups != 2 || s.MoETP != 1 {
		t.Errorf("tp 2 ep 2: %+v, want 4 whole experts a rank", s)
	}
	if s, _ = Share(mc, 2, 1); s.Experts != 8 || s.ExpertFFN != mc.FFN/2 {
		t.Errorf("tp 2: %+v, want every expert at half its width", s)
	}
	if s, _ = Share(mc, 16, 1); s.KVHeads != 1 {
		t.Errorf("tp 16 over 8 KV heads: %d a rank, want 1 (replicated)", s.KVHeads)
	}
	if _, err := Share(mc, 3, 1); err == nil {
		t.Error("tp 3 of 32 heads allowed")
	}
	dense, _ := LookupModel("llama-3.1-8b")
	if s, err := Share(dense, 2, 4); err != nil || s.World != 2 || s.EP != 1 {
		t.Errorf("ep on a dense model: %+v, %v; want ep ignored", s, err)
	}
}

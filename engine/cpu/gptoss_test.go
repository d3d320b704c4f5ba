package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

func TestGLU(t *testing.T) {
	oss := model.GLU{Limit: 7, Alpha: 1.702}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for _, c := range []struct {
		act  model.GLU
		g, u float32
		want float64
	}{
		{model.GLU{}, 1, 2, 2 * sig(1)},
		{model.GLU{}, 9, -9, -81 * sig(9)},                    // plain SwiGLU clamps nothing
		{oss, 1, 2, 3 * sig(1.702)},                           // (u+1)·g·σ(αg)
		{oss, 9, 2, 3 * 7 * sig(7*1.702)},                     // gate clamped from above
		{oss, -9, 2, 3 * -9 * sig(-9*1.702)},                  // but not from below
		{oss, 1, 9, 8 * sig(1.702)},                           // up clamped to 7
		{oss, 1, -9, -6 * sig(1.702)},                         // and to -7
		{model.GLU{Limit: 1, Alpha: 1}, 2, 0.5, 1.5 * sig(1)}, // another limit
	} {
		got := c.act.Apply(c.g, c.u)
		if math.Abs(float64(got)-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%+v.Apply(%g, %g) = %g, want %g", c.act, c.g, c.u, got, c.want)
		}
		gu := []float32{c.g, c.u}
		out, ref := make([]float32, 1), make([]float32, 1)
		gluRow(out, gu, c.act)
		RefGLU(ref, gu, 1, 1, c.act)
		if math.Abs(float64(out[0])-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) || math.Abs(float64(ref[0])-c.want) > 1e-6*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%+v(%g, %g): gluRow %g, RefGLU %g, want %g", c.act, c.g, c.u, out[0], ref[0], c.want)
		}
	}
}

func TestAddBias(t *testing.T) {
	b := newBackend(t, GemmAuto, 2)
	x, _ := b.Alloc("x", model.Float, 4, 3)
	b.WriteFloat32(x, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	bias, _ := b.Upload("b", model.Vector, model.HostF32([]int{3}, []float32{0.5, -1, 2}))
	b.AddBias(x, bias, 3) // the fourth row is not the batch's
	got := make([]float32, 12)
	if err := b.ReadFloat32(got, x, 4); err != nil {
		t.Fatal(err)
	}
	want := []float32{1.5, 1, 5, 4.5, 4, 8, 7.5, 7, 11, 10, 11, 12}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AddBias: %v, want %v", got, want)
		}
	}
	wrong, _ := b.Upload("b", model.Vector, model.HostF32([]int{2}, []float32{1, 1}))
	b.AddBias(x, wrong, 1)
	if err := b.ReadFloat32(got, x, 1); err == nil {
		t.Error("a bias of the wrong width was added")
	}
}

// TestOSSAttentionMatchesReference runs sequences through a ring cache
// batch by batch (prefill chunks longer than the window, chunks after
// cached positions, decode tokens, two sequences sharing batches) and
// checks every token's output against RefAttentionSinks over the
// sequence's whole history, on a sliding layer and a full one, with and
// without sinks.
func TestOSSAttentionMatchesReference(t *testing.T) {
	hl := model.HeadLayout{Heads: 4, KVHeads: 2, HeadDim: 8}
	W := hl.QKVWidth()
	const window, capacity = 5, 40
	// Each step: per sequence (slot), how many new tokens (0: none).
	steps := [][2]int{{12, 0}, {1, 3}, {1, 7}, {6, 1}, {1, 1}, {3, 9}, {1, 1}}
	for _, sinks := range []bool{false, true} {
		for _, threads := range []int{1, 3} {
			b := newBackend(t, GemmAuto, threads)
			r := rand.New(rand.NewPCG(5, uint64(threads)))
			kc := model.KVConfig{Layers: 2, Slots: 3, Capacity: capacity, HeadLayout: hl, Ring: true, Window: window, Sliding: []bool{true, false}}
			cache, err := b.NewKVCache(kc)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := kc.SlotBytes(4), int64(2*hl.KVHeads*hl.HeadDim*4*(window+capacity)); got != want {
				t.Errorf("SlotBytes %d, want %d (the sliding layer holds its window)", got, want)
			}
			var sk model.Tensor
			var skv []float32
			if sinks {
				skv = randF(r, hl.Heads)
				sk, _ = b.Upload("sinks", model.Vector, model.HostF32([]int{hl.Heads}, skv))
			}
			qkvT, _ := b.Alloc("qkv", model.Float, 32, W)
			outT, _ := b.Alloc("out", model.Float, 32, hl.Heads*hl.HeadDim)
			// hist[layer][seq]: every position's K and V rows.
			var histK, histV [2][2][]float32
			past := [2]int{}
			for si, st := range steps {
				var bt model.Batch
				var qkv []float32
				for s, n := range st {
					if n == 0 {
						continue
					}
					bt.Add(s+1, past[s], make([]int32, n), true)
					qkv = append(qkv, randF(r, n*W)...)
				}
				T := len(bt.Tokens)
				if err := b.SetBatch(&bt); err != nil {
					t.Fatal(err)
				}
				b.WriteFloat32(qkvT, qkv)
				for layer, win := range []int{window, 0} {
					b.OSSAttention(outT, qkvT, sk, cache, layer, win)
					got := make([]float32, T*hl.Heads*hl.HeadDim)
					if err := b.ReadFloat32(got, outT, T); err != nil {
						t.Fatal(err)
					}
					row := 0
					for s, n := range st {
						if n == 0 {
							continue
						}
						var q []float32
						for i := range n {
							x := qkv[(row+i)*W : (row+i+1)*W]
							q = append(q, x[:hl.Heads*hl.HeadDim]...)
							histK[layer][s] = append(histK[layer][s], x[hl.Heads*hl.HeadDim:(hl.Heads+hl.KVHeads)*hl.HeadDim]...)
							histV[layer][s] = append(histV[layer][s], x[(hl.Heads+hl.KVHeads)*hl.HeadDim:]...)
						}
						want := make([]float32, n*hl.Heads*hl.HeadDim)
						RefAttentionSinks(want, q, histK[layer][s], histV[layer][s], skv, n, past[s], hl.Heads, hl.KVHeads, hl.HeadDim, win)
						g := got[row*hl.Heads*hl.HeadDim : (row+n)*hl.Heads*hl.HeadDim]
						if e := RelErr(g, want); e > 1e-5 {
							t.Errorf("sinks %v threads %d step %d layer %d (window %d) seq %d: rel err %g", sinks, threads, si, layer, win, s, e)
						}
						row += n
					}
				}
				for s, n := range st {
					past[s] += n
				}
			}
		}
	}
}

func TestOSSAttentionRefusals(t *testing.T) {
	b := newBackend(t, GemmAuto, 1)
	hl := model.HeadLayout{Heads: 2, KVHeads: 1, HeadDim: 4}
	if _, err := b.NewKVCache(model.KVConfig{Layers: 1, Slots: 1, Capacity: 8, HeadLayout: hl, Ring: true, FP8: true}); err == nil {
		t.Error("an FP8 ring cache was made")
	}
	plain, _ := b.NewKVCache(model.KVConfig{Layers: 1, Slots: 1, Capacity: 8, HeadLayout: hl})
	qkv, _ := b.Alloc("qkv", model.Float, 1, hl.QKVWidth())
	out, _ := b.Alloc("out", model.Float, 1, 8)
	var bt model.Batch
	bt.Add(0, 0, []int32{1}, true)
	b.SetBatch(&bt)
	b.OSSAttention(out, qkv, nil, plain, 0, 0)
	if err := b.ReadFloat32(make([]float32, 8), out, 1); err == nil {
		t.Error("GPT-OSS attention ran on a cache that is not a ring")
	}
	ring, _ := b.NewKVCache(model.KVConfig{Layers: 1, Slots: 1, Capacity: 8, HeadLayout: hl, Ring: true})
	sinks, _ := b.Upload("s", model.Vector, model.HostF32([]int{3}, []float32{1, 2, 3}))
	b.OSSAttention(out, qkv, sinks, ring, 0, 0)
	if err := b.ReadFloat32(make([]float32, 8), out, 1); err == nil {
		t.Error("3 sinks were taken for 2 heads")
	}
	var far model.Batch
	far.Add(0, 8, []int32{1}, true)
	b.SetBatch(&far)
	b.OSSAttention(out, qkv, nil, ring, 0, 0)
	if err := b.ReadFloat32(make([]float32, 8), out, 1); err == nil {
		t.Error("a position beyond the cache was attended")
	}
}

func TestOSSMoEMatchesReference(t *testing.T) {
	const E, k, H, F, rows = 4, 2, 16, 24, 7
	r := rand.New(rand.NewPCG(9, 1))
	for _, c := range []struct {
		name   string
		biases bool
		act    model.GLU
	}{
		{"plain", false, model.GLU{}},
		{"biases", true, model.GLU{}},
		{"clamped", false, model.GLU{Limit: 1.5, Alpha: 1.702}},
		{"gpt-oss", true, model.GLU{Limit: 1.5, Alpha: 1.702}},
	} {
		for _, gemm := range []string{GemmAuto, GemmDisable} {
			b := newBackend(t, gemm, 2)
			x, gu, dn := randF(r, rows*H), randF(r, E*2*F*H), randF(r, E*H*F)
			for i := range gu {
				gu[i] *= 0.5 // gate and up spread past the clamp
			}
			idx := make([]int32, rows*k)
			wts := make([]float32, rows*k)
			for i := range idx {
				idx[i] = int32((i*3 + i/k) % E)
				wts[i] = float32(r.Float64())
			}
			var guB, dnB []float32
			var guBT, dnBT model.Tensor
			if c.biases {
				guB, dnB = randF(r, E*2*F), randF(r, E*H)
				guBT, _ = b.Upload("gub", model.Table, model.HostF32([]int{E, 2 * F}, guB))
				dnBT, _ = b.Upload("dnb", model.Table, model.HostF32([]int{E, H}, dnB))
			}
			want := make([]float32, rows*H)
			RefOSSMoE(want, x, idx, wts, gu, dn, guB, dnB, rows, k, H, F, c.act)
			xt, _ := b.Alloc("x", model.Float, rows, H)
			ot, _ := b.Alloc("o", model.Float, rows, H)
			it, _ := b.Alloc("i", model.Int32, rows, k)
			wt, _ := b.Alloc("w", model.Float, rows, k)
			b.WriteFloat32(xt, x)
			b.WriteInt32(it, idx)
			b.WriteFloat32(wt, wts)
			gut, _ := b.Upload("gu", model.Experts, model.HostF32([]int{E, 2 * F, H}, gu))
			dnt, _ := b.Upload("dn", model.Experts, model.HostF32([]int{E, H, F}, dn))
			b.OSSMoE(ot, xt, it, wt, gut, dnt, guBT, dnBT, rows, k, c.act)
			got := make([]float32, rows*H)
			if err := b.ReadFloat32(got, ot, rows); err != nil {
				t.Fatal(err)
			}
			if e := RelErr(got, want); e > 1e-5 {
				t.Errorf("%s gemm=%s: rel err %g", c.name, gemm, e)
			}
			// Plain MoE afterwards is untouched by the extras.
			b.MoE(ot, xt, it, wt, gut, dnt, rows, k)
			RefMoE(want, x, idx, wts, gu, dn, rows, k, H, F)
			b.ReadFloat32(got, ot, rows)
			if e := RelErr(got, want); e > 1e-5 {
				t.Errorf("%s gemm=%s: MoE after OSSMoE: rel err %g", c.name, gemm, e)
			}
		}
	}
}

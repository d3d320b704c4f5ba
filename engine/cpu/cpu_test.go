package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

func randF(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func newBackend(t testing.TB, gemm string, threads int) *Backend {
	b, err := New(model.BackendOptions{Gemm: gemm, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestGEMMMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {1, 16, 64}, {5, 17, 3}, {6, 32, 64}, {7, 100, 33}, {13, 512, 64}, {64, 128, 64}, {130, 70, 160}}
	for _, goKernel := range []bool{false, true} {
		for _, gemm := range []string{GemmAuto, GemmDisable} {
			for _, threads := range []int{1, 3} {
				b := newBackend(t, gemm, threads)
				for _, s := range shapes {
					m, n, k := s[0], s[1], s[2]
					x, w := randF(r, m*k), randF(r, n*k)
					want := make([]float32, m*n)
					RefGEMM(want, x, w, m, n, k)
					wt, _ := b.Upload("w", model.Matrix, model.HostF32([]int{n, k}, w))
					xt, _ := b.Alloc("x", model.Float, m, k)
					ot, _ := b.Alloc("o", model.Float, m, n)
					b.WriteFloat32(xt, x)
					forceGoKernel = goKernel
					b.MatMul(ot, xt, wt, m)
					forceGoKernel = false
					got := make([]float32, m*n)
					if err := b.ReadFloat32(got, ot, m); err != nil {
						t.Fatal(err)
					}
					if e := RelErr(got, want); e > 1e-6 {
						t.Errorf("gemm=%s go=%v threads=%d %v: rel err %g", gemm, goKernel, threads, s, e)
					}
				}
			}
		}
	}
}

func TestExpf(t *testing.T) {
	for x := -87.0; x < 88.7; x += 0.0137 {
		got, want := float64(expf(float32(x))), math.Exp(float64(float32(x)))
		if math.Abs(got-want)/want > 4e-7 {
			t.Fatalf("expf(%g) = %g, want %g", x, got, want)
		}
	}
	if !math.IsInf(float64(expf(100)), 1) || expf(-100) != 0 {
		t.Error("expf out of range")
	}
}

// opsFixture runs a batch of two sequences (a 5-token prefill chunk after 3
// cached tokens, and a decode token) through each op and compares with the
// reference functions.
func TestOpsMatchReference(t *testing.T) {
	for _, hl := range []model.HeadLayout{{Heads: 4, KVHeads: 2, HeadDim: 8}, {Heads: 8, KVHeads: 1, HeadDim: 32}} {
		for _, goKernel := range []bool{false, true} {
			forceGoKernel = goKernel
			testOps(t, hl)
			forceGoKernel = false
		}
	}
}

func testOps(t *testing.T, hl model.HeadLayout) {
	r := rand.New(rand.NewPCG(3, 4))
	W := hl.QKVWidth()
	for _, threads := range []int{1, 2} {
		b := newBackend(t, GemmAuto, threads)
		cache, _ := b.NewKVCache(model.KVConfig{Layers: 2, Slots: 3, Capacity: 16, HeadLayout: hl})
		// Sequence A (slot 2): 3 tokens cached earlier, then 5 new.
		// Sequence B (slot 0): 6 cached, then 1 new.
		qkvA0, qkvB0 := randF(r, 3*W), randF(r, 6*W)
		var bt model.Batch
		bt.Add(2, 0, make([]int32, 3), false)
		bt.Add(0, 0, make([]int32, 6), false)
		qkv, _ := b.Alloc("qkv", model.Float, 9, W)
		out, _ := b.Alloc("out", model.Float, 9, hl.Heads*hl.HeadDim)
		b.SetBatch(&bt)
		b.WriteFloat32(qkv, append(append([]float32{}, qkvA0...), qkvB0...))
		b.Attention(out, qkv, cache, 1)

		bt.Reset()
		bt.Add(2, 3, make([]int32, 5), true)
		bt.Add(0, 6, make([]int32, 1), true)
		qkvA1, qkvB1 := randF(r, 5*W), randF(r, W)
		b.SetBatch(&bt)
		b.WriteFloat32(qkv, append(append([]float32{}, qkvA1...), qkvB1...))
		b.Attention(out, qkv, cache, 1)
		got := make([]float32, 6*hl.Heads*hl.HeadDim)
		b.ReadFloat32(got, out, 6)

		split := func(rows []float32, n int) (q, kv []float32) {
			for i := range n {
				row := rows[i*W : (i+1)*W]
				q = append(q, row[:hl.Heads*hl.HeadDim]...)
			}
			return q, nil
		}
		kvOf := func(rows []float32, n, off int) []float32 {
			var kv []float32
			for i := range n {
				kv = append(kv, rows[i*W+off:i*W+off+hl.KVHeads*hl.HeadDim]...)
			}
			return kv
		}
		kOff, vOff := hl.Heads*hl.HeadDim, (hl.Heads+hl.KVHeads)*hl.HeadDim
		all := func(a, b []float32) []float32 { return append(append([]float32{}, a...), b...) }
		qa, _ := split(qkvA1, 5)
		qb, _ := split(qkvB1, 1)
		want := make([]float32, 6*hl.Heads*hl.HeadDim)
		RefAttention(want, qa, kvOf(all(qkvA0, qkvA1), 8, kOff), kvOf(all(qkvA0, qkvA1), 8, vOff), 5, 3, hl.Heads, hl.KVHeads, hl.HeadDim)
		RefAttention(want[5*hl.Heads*hl.HeadDim:], qb, kvOf(all(qkvB0, qkvB1), 7, kOff), kvOf(all(qkvB0, qkvB1), 7, vOff), 1, 6, hl.Heads, hl.KVHeads, hl.HeadDim)
		if e := RelErr(got, want); e > 1e-6 {
			t.Errorf("%+v go=%v threads=%d attention rel err %g", hl, forceGoKernel, threads, e)
		}

		// RoPE and qk-norm on the same batch.
		table := model.RopeTable(model.Config{HeadDim: hl.HeadDim, RopeTheta: 10000}, 16)
		tab, _ := b.Upload("rope", model.Table, model.HostF32([]int{16, hl.HeadDim}, table))
		x := randF(r, 6*W)
		b.WriteFloat32(qkv, x)
		b.RoPE(qkv, tab, hl)
		gotR := make([]float32, 6*W)
		b.ReadFloat32(gotR, qkv, 6)
		wantR := append([]float32{}, x...)
		RefRoPE(wantR, bt.Positions, table, 6, W, hl.Heads+hl.KVHeads, hl.HeadDim)
		if e := RelErr(gotR, wantR); e > 1e-6 {
			t.Errorf("rope rel err %g", e)
		}
		qw, kw := randF(r, hl.HeadDim), randF(r, hl.HeadDim)
		qwt, _ := b.Upload("qn", model.Vector, model.HostF32([]int{hl.HeadDim}, qw))
		kwt, _ := b.Upload("kn", model.Vector, model.HostF32([]int{hl.HeadDim}, kw))
		b.HeadNorm(qkv, qwt, kwt, hl, 1e-6)
		b.ReadFloat32(gotR, qkv, 6)
		for row := range 6 {
			for h := range hl.Heads + hl.KVHeads {
				w := qw
				if h >= hl.Heads {
					w = kw
				}
				head := wantR[row*W+h*hl.HeadDim : row*W+(h+1)*hl.HeadDim]
				RefRMSNorm(head, head, w, 1, hl.HeadDim, 1e-6)
			}
		}
		if e := RelErr(gotR, wantR); e > 1e-6 {
			t.Errorf("qk-norm rel err %g", e)
		}
	}
}

func TestRowOpsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := newBackend(t, GemmAuto, 2)
	const rows, H, F = 37, 48, 24
	x, d, w := randF(r, rows*H), randF(r, rows*H), randF(r, H)
	xt, _ := b.Alloc("x", model.Float, rows, H)
	dt, _ := b.Alloc("d", model.Float, rows, H)
	ot, _ := b.Alloc("o", model.Float, rows, H)
	wt, _ := b.Upload("w", model.Vector, model.HostF32([]int{H}, w))
	b.WriteFloat32(xt, x)
	b.WriteFloat32(dt, d)
	b.AddRMSNorm(xt, dt, wt, ot, rows, 1e-5)
	got, res := make([]float32, rows*H), make([]float32, rows*H)
	b.ReadFloat32(got, ot, rows)
	b.ReadFloat32(res, xt, rows)
	sum := make([]float32, rows*H)
	for i := range sum {
		sum[i] = x[i] + d[i]
	}
	want := make([]float32, rows*H)
	RefRMSNorm(want, sum, w, rows, H, 1e-5)
	if e := RelErr(res, sum); e > 1e-7 {
		t.Errorf("residual add rel err %g", e)
	}
	if e := RelErr(got, want); e > 1e-6 {
		t.Errorf("add+rmsnorm rel err %g", e)
	}

	gu := randF(r, rows*2*F)
	gut, _ := b.Alloc("gu", model.Float, rows, 2*F)
	at, _ := b.Alloc("a", model.Float, rows, F)
	b.WriteFloat32(gut, gu)
	b.SwiGLU(at, gut, rows)
	gotA, wantA := make([]float32, rows*F), make([]float32, rows*F)
	b.ReadFloat32(gotA, at, rows)
	RefSwiGLU(wantA, gu, rows, F)
	if e := RelErr(gotA, wantA); e > 1e-6 {
		t.Errorf("swiglu rel err %g", e)
	}

	const V = 300
	logits := randF(r, rows*V)
	logits[5*V+7], logits[5*V+9] = 100, 100 // a tie: the lower index wins
	lt, _ := b.Alloc("l", model.Float, rows, V)
	b.WriteFloat32(lt, logits)
	gotI, wantI := make([]int32, rows), make([]int32, rows)
	if err := b.Argmax(gotI, lt, rows); err != nil {
		t.Fatal(err)
	}
	RefArgmax(wantI, logits, rows, V)
	for i := range gotI {
		if gotI[i] != wantI[i] {
			t.Errorf("argmax row %d: %d, want %d", i, gotI[i], wantI[i])
		}
	}
	if gotI[5] != 7 {
		t.Errorf("argmax tie: %d, want 7", gotI[5])
	}
}

func TestRouteAndMoEMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, E, K, H, F = 29, 8, 2, 32, 40
	for _, gemm := range []string{GemmAuto, GemmDisable} {
		for _, method := range []string{model.RoutingSoftmaxTopKRenorm, model.RoutingTopKSoftmax, model.RoutingSoftmaxTopK} {
			b := newBackend(t, gemm, 2)
			logits, x := randF(r, rows*E), randF(r, rows*H)
			gu, dn := randF(r, E*2*F*H), randF(r, E*H*F)
			lt, _ := b.Alloc("l", model.Float, rows, E)
			xt, _ := b.Alloc("x", model.Float, rows, H)
			it, _ := b.Alloc("i", model.Int32, rows, K)
			wt, _ := b.Alloc("w", model.Float, rows, K)
			ct, _ := b.Alloc("c", model.Int32, 3, E)
			ot, _ := b.Alloc("o", model.Float, rows, H)
			gut, _ := b.Upload("gu", model.Experts, model.HostF32([]int{E, 2 * F, H}, gu))
			dnt, _ := b.Upload("dn", model.Experts, model.HostF32([]int{E, H, F}, dn))
			b.WriteFloat32(lt, logits)
			b.WriteFloat32(xt, x)
			b.Route(it, wt, lt, nil, 0, rows, K, method, ct, 1)
			b.MoE(ot, xt, it, wt, gut, dnt, rows, K)
			gotI, wantI := make([]int32, rows*K), make([]int32, rows*K)
			gotW, wantW := make([]float32, rows*K), make([]float32, rows*K)
			b.ReadInt32(gotI, it, rows)
			b.ReadFloat32(gotW, wt, rows)
			RefRoute(wantI, wantW, logits, rows, E, K, method)
			for i := range gotI {
				if gotI[i] != wantI[i] {
					t.Fatalf("%s: route %d: expert %d, want %d", method, i, gotI[i], wantI[i])
				}
			}
			if e := RelErr(gotW, wantW); e > 1e-6 {
				t.Errorf("%s: weights rel err %g", method, e)
			}
			counts := make([]int32, 3*E)
			b.ReadInt32(counts, ct, 3)
			total := int32(0)
			for i, c := range counts {
				if c != 0 && (i < E || i >= 2*E) {
					t.Errorf("count in layer %d", i/E)
				}
				total += c
			}
			if total != rows*K {
				t.Errorf("counts sum to %d, want %d", total, rows*K)
			}
			got, want := make([]float32, rows*H), make([]float32, rows*H)
			b.ReadFloat32(got, ot, rows)
			RefMoE(want, x, wantI, wantW, gu, dn, rows, K, H, F)
			if e := RelErr(got, want); e > 1e-5 {
				t.Errorf("gemm=%s %s: moe rel err %g", gemm, method, e)
			}
		}
	}
}

func TestRouteForced(t *testing.T) {
	b := newBackend(t, GemmAuto, 1)
	const rows, E, K = 4, 4, 2
	lt, _ := b.Alloc("l", model.Float, rows, E)
	it, _ := b.Alloc("i", model.Int32, rows, K)
	wt, _ := b.Alloc("w", model.Float, rows, K)
	ft, _ := b.Alloc("f", model.Int32, 10, K)
	table := make([]int32, 10*K)
	for i := range table {
		table[i] = int32(i % E)
	}
	b.WriteInt32(ft, table)
	b.Route(it, wt, lt, ft, 3, rows, K, model.RoutingSoftmaxTopKRenorm, nil, 0)
	got := make([]int32, rows*K)
	w := make([]float32, rows*K)
	b.ReadInt32(got, it, rows)
	b.ReadFloat32(w, wt, rows)
	for i := range got {
		if got[i] != table[3*K+i] || w[i] != 0.5 {
			t.Fatalf("forced routing: %v %v", got, w)
		}
	}
}

func TestRandomIsDeterministicAndParallelSafe(t *testing.T) {
	a := newBackend(t, GemmDisable, 1)
	b := newBackend(t, GemmDisable, 3)
	ta, _ := a.Random("w", model.Matrix, []int{300, 700}, 42, 0.5)
	tb, _ := b.Random("w", model.Matrix, []int{300, 700}, 42, 0.5)
	fa, fb := ta.(*tensor).f, tb.(*tensor).f
	for i := range fa {
		if fa[i] != fb[i] || fa[i] < -0.5 || fa[i] >= 0.5 {
			t.Fatalf("element %d: %g vs %g", i, fa[i], fb[i])
		}
	}
	if fa[0] != model.RandomValue(42, 0, 0.5) {
		t.Error("Random differs from model.RandomValue")
	}
}

func TestVectorMath(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 7, 8, 9, 33, 100} {
		x := randF(r, n)
		for i := range x {
			x[i] *= 20
		}
		g, u := randF(r, n), randF(r, n)
		for i := range g {
			g[i] *= 30
		}
		got, want := append([]float32{}, x...), make([]float32, n)
		s := expSum(got, 0.5, -3)
		var ws float64
		for i, v := range x {
			e := math.Exp(float64(v)*0.5 - 3)
			want[i] = float32(e)
			ws += e
		}
		if e := RelErr(got, want); e > 1e-6 || math.Abs(float64(s)-ws)/ws > 1e-6 {
			t.Errorf("n=%d expSum rel err %g, sum %g want %g", n, e, s, ws)
		}
		if m, want := maxOf(x), goMax(x); m != want {
			t.Errorf("n=%d maxOf %g, want %g", n, m, want)
		}
		out, ref := make([]float32, n), make([]float32, n)
		siluMul(out, g, u)
		gu := append(append([]float32{}, g...), u...)
		RefSwiGLU(ref, gu, 1, n)
		if e := RelErr(out, ref); e > 1e-6 {
			t.Errorf("n=%d siluMul rel err %g", n, e)
		}
	}
}

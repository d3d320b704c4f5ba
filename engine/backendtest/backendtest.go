package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// NewBackend makes a fresh candidate backend.
type NewBackend func() (model.Backend, error)

// pair holds the candidate and the oracle with the same inputs.
type pair struct {
	t        *testing.T
	got, ref model.Backend
	r        *rand.Rand
	tol      float64
}

func (p *pair) must(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatal(err)
	}
}

func (p *pair) rand(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.r.NormFloat64() * scale)
	}
	return v
}

// tensors are the same tensor on both backends.
type tensors struct{ got, ref model.Tensor }

func (p *pair) alloc(dt model.DType, shape ...int) tensors {
	p.t.Helper()
	g, err := p.got.Alloc("t", dt, shape...)
	p.must(err)
	r, err := p.ref.Alloc("t", dt, shape...)
	p.must(err)
	return tensors{g, r}
}

func (p *pair) input(v []float32, shape ...int) tensors {
	p.t.Helper()
	t := p.alloc(model.Float, shape...)
	p.must(p.got.WriteFloat32(t.got, v))
	p.must(p.ref.WriteFloat32(t.ref, v))
	return t
}

func (p *pair) weight(kind model.WeightKind, v []float32, shape ...int) tensors {
	p.t.Helper()
	h := model.HostF32(shape, v)
	g, err := p.got.Upload("w", kind, h)
	p.must(err)
	r, err := p.ref.Upload("w", kind, h)
	p.must(err)
	return tensors{g, r}
}

func (p *pair) batch(b *model.Batch) {
	p.t.Helper()
	p.must(p.got.SetBatch(b))
	p.must(p.ref.SetBatch(b))
}

// compare reads the first rows of t from both and checks the relative
// error.
func (p *pair) compare(what string, t tensors, rows, cols int) {
	p.t.Helper()
	g, r := make([]float32, rows*cols), make([]float32, rows*cols)
	if err := p.got.ReadFloat32(g, t.got, rows); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	p.must(p.ref.ReadFloat32(r, t.ref, rows))
	if e := cpu.RelErr(g, r); !(e <= p.tol) {
		p.t.Errorf("%s: relative error %.3g > %.3g", what, e, p.tol)
	}
}

func start(t *testing.T, candidate NewBackend, tol float64, seed uint64) *pair {
	got, err := candidate()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := cpu.New(model.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { got.Close(); ref.Close() })
	// Fresh inputs every run, as bench/GPU.md asks; the seed is logged so a
	// failure can be replayed.
	t.Logf("backendtest seed %d", seed)
	return &pair{t: t, got: got, ref: ref, r: rand.New(rand.NewPCG(seed, 1)), tol: tol}
}

// Check runs every op on both backends. tol bounds the relative error
// (1e-5 suits float32, ~1e-2 fp16/bf16); integer results (argmax, routed
// experts) must agree except where the oracle's own values are within tol
// of a tie.
func Check(t *testing.T, candidate NewBackend, tol float64) {
	seed := uint64(time.Now().UnixNano())
	ops := []struct {
		name string
		run  func(p *pair)
	}{
		{"matmul", checkMatMul}, {"norms", checkNorms}, {"embed_gather", checkGather},
		{"swiglu", checkSwiGLU}, {"rope_qknorm", checkRoPE}, {"attention", checkAttention},
		{"route_moe", checkMoE}, {"argmax", checkArgmax}, {"random", checkRandom}, {"pipeline", checkPipeline},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) { op.run(start(t, candidate, tol, seed)) })
	}
}

func checkMatMul(p *pair) {
	for _, s := range [][3]int{{1, 64, 64}, {7, 100, 48}, {33, 384, 64}, {130, 96, 160}} {
		m, n, k := s[0], s[1], s[2]
		w := p.weight(model.Matrix, p.rand(n*k, 1/math.Sqrt(float64(k))), n, k)
		x := p.input(p.rand(m*k, 1), m+3, k) // spare rows: ops must honour rows
		o := p.alloc(model.Float, m+3, n)
		p.got.MatMul(o.got, x.got, w.got, m)
		p.ref.MatMul(o.ref, x.ref, w.ref, m)
		p.compare("matmul", o, m, n)
	}
}

func checkNorms(p *pair) {
	const rows, H = 19, 96
	x, d := p.rand(rows*H, 1), p.rand(rows*H, 1)
	w := p.weight(model.Vector, p.rand(H, 1), H)
	xt, dt, out := p.input(x, rows, H), p.input(d, rows, H), p.alloc(model.Float, rows, H)
	p.got.RMSNorm(out.got, xt.got, w.got, rows, 1e-5)
	p.ref.RMSNorm(out.ref, xt.ref, w.ref, rows, 1e-5)
	p.compare("rmsnorm", out, rows, H)
	p.got.AddRMSNorm(xt.got, dt.got, w.got, out.got, rows, 1e-5)
	p.ref.AddRMSNorm(xt.ref, dt.ref, w.ref, out.ref, rows, 1e-5)
	p.compare("add_rmsnorm residual", xt, rows, H)
	p.compare("add_rmsnorm out", out, rows, H)
	p.got.Add(xt.got, dt.got, rows)
	p.ref.Add(xt.ref, dt.ref, rows)
	p.compare("add", xt, rows, H)
	p.got.RMSNorm(xt.got, xt.got, w.got, rows, 1e-5) // in place
	p.ref.RMSNorm(xt.ref, xt.ref, w.ref, rows, 1e-5)
	p.compare("rmsnorm in place", xt, rows, H)
}

// mixedBatch has a 6-token prefill chunk after 4 cached tokens, a decode
// token and a fresh 3-token prompt, in slots 2, 0 and 3.
func mixedBatch(tokens func(n int) []int32) *model.Batch {
	var b model.Batch
	b.Add(2, 4, tokens(6), true)
	b.Add(0, 9, tokens(1), true)
	b.Add(3, 0, tokens(3), false)
	return &b
}

func (p *pair) tokens(vocab int) func(int) []int32 {
	return func(n int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(p.r.IntN(vocab))
		}
		return ids
	}
}

func checkGather(p *pair) {
	const V, H = 300, 40
	table := p.weight(model.Table, p.rand(V*H, 1), V, H)
	b := mixedBatch(p.tokens(V))
	p.batch(b)
	T := b.NumTokens()
	x := p.alloc(model.Float, T, H)
	p.got.Embed(x.got, table.got)
	p.ref.Embed(x.ref, table.ref)
	p.compare("embed", x, T, H)
	g := p.alloc(model.Float, T, H)
	p.got.GatherRows(g.got, x.got)
	p.ref.GatherRows(g.ref, x.ref)
	p.compare("gather_rows", g, len(b.LogitRows), H)
}

func checkSwiGLU(p *pair) {
	const rows, F = 21, 88
	gu := p.input(p.rand(rows*2*F, 2), rows, 2*F)
	o := p.alloc(model.Float, rows, F)
	p.got.SwiGLU(o.got, gu.got, rows)
	p.ref.SwiGLU(o.ref, gu.ref, rows)
	p.compare("swiglu", o, rows, F)
}

var layouts = []model.HeadLayout{{Heads: 4, KVHeads: 2, HeadDim: 16}, {Heads: 8, KVHeads: 1, HeadDim: 64}, {Heads: 6, KVHeads: 6, HeadDim: 32}}

func checkRoPE(p *pair) {
	for _, hl := range layouts {
		cfg := model.Config{HeadDim: hl.HeadDim, RopeTheta: 10000,
			RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 8, OriginalMaxPos: 16}}
		tab := p.weight(model.Table, model.RopeTable(cfg, 32), 32, hl.HeadDim)
		b := mixedBatch(p.tokens(10))
		p.batch(b)
		T, W := b.NumTokens(), hl.QKVWidth()
		qkv := p.input(p.rand(T*W, 1), T, W)
		p.got.RoPE(qkv.got, tab.got, hl)
		p.ref.RoPE(qkv.ref, tab.ref, hl)
		p.compare("rope", qkv, T, W)
		qn := p.weight(model.Vector, p.rand(hl.HeadDim, 1), hl.HeadDim)
		kn := p.weight(model.Vector, p.rand(hl.HeadDim, 1), hl.HeadDim)
		p.got.HeadNorm(qkv.got, qn.got, kn.got, hl, 1e-6)
		p.ref.HeadNorm(qkv.ref, qn.ref, kn.ref, hl, 1e-6)
		p.compare("qk_norm", qkv, T, W)
	}
}

func checkAttention(p *pair) {
	for _, hl := range layouts {
		kc := model.KVConfig{Layers: 2, Slots: 4, Capacity: 40, HeadLayout: hl}
		cg, err := p.got.NewKVCache(kc)
		p.must(err)
		cr, err := p.ref.NewKVCache(kc)
		p.must(err)
		W, HD := hl.QKVWidth(), hl.Heads*hl.HeadDim
		// Iteration 1 fills what the mixed batch finds cached; iteration 2
		// is the mixed batch; iteration 3 decodes past a 16-position panel.
		var first model.Batch
		first.Add(2, 0, make([]int32, 4), false)
		first.Add(0, 0, make([]int32, 9), false)
		third := model.Batch{}
		third.Add(2, 10, make([]int32, 1), true)
		third.Add(3, 3, make([]int32, 20), true)
		for i, b := range []*model.Batch{&first, mixedBatch(p.tokens(10)), &third} {
			p.batch(b)
			T := b.NumTokens()
			qkv := p.input(p.rand(T*W, 1), T, W)
			out := p.alloc(model.Float, T, HD)
			p.got.Attention(out.got, qkv.got, cg, 1)
			p.ref.Attention(out.ref, qkv.ref, cr, 1)
			p.compare("attention iteration "+string(rune('1'+i)), out, T, HD)
		}
	}
}

func checkMoE(p *pair) {
	const rows, E, K, H, F = 23, 8, 2, 48, 40
	for _, method := range []string{model.RoutingSoftmaxTopKRenorm, model.RoutingTopKSoftmax, model.RoutingSoftmaxTopK} {
		logits := p.rand(rows*E, 2)
		lt := p.input(logits, rows, E)
		idx, wts := p.alloc(model.Int32, rows, K), p.alloc(model.Float, rows, K)
		counts := p.alloc(model.Int32, 3, E)
		p.got.Zero(counts.got)
		p.ref.Zero(counts.ref)
		p.got.Route(idx.got, wts.got, lt.got, nil, 0, rows, K, method, counts.got, 2)
		p.ref.Route(idx.ref, wts.ref, lt.ref, nil, 0, rows, K, method, counts.ref, 2)
		gi, ri := make([]int32, rows*K), make([]int32, rows*K)
		p.must(p.got.ReadInt32(gi, idx.got, rows))
		p.must(p.ref.ReadInt32(ri, idx.ref, rows))
		for r := range rows {
			for j := range K {
				if gi[r*K+j] != ri[r*K+j] && !nearTie(logits[r*E:(r+1)*E], K, p.tol) {
					p.t.Errorf("%s row %d: experts %v, oracle %v", method, r, gi[r*K:(r+1)*K], ri[r*K:(r+1)*K])
				}
			}
		}
		p.compare(method+" weights", wts, rows, K)
		gc, rc := make([]int32, 3*E), make([]int32, 3*E)
		p.must(p.got.ReadInt32(gc, counts.got, 3))
		p.must(p.ref.ReadInt32(rc, counts.ref, 3))
		var sum int32
		for i := range gc {
			sum += gc[i]
			if (i < 2*E || i >= 3*E) && gc[i] != 0 {
				p.t.Errorf("%s: counts outside layer 2: %v", method, gc)
				break
			}
		}
		if sum != rows*K {
			p.t.Errorf("%s: counts %v sum to %d, want %d", method, gc, sum, rows*K)
		}
		// Experts, fed the oracle's routing so near-ties cannot matter.
		p.must(p.got.WriteInt32(idx.got, ri))
		rw := make([]float32, rows*K)
		p.must(p.ref.ReadFloat32(rw, wts.ref, rows))
		p.must(p.got.WriteFloat32(wts.got, rw))
		gu := p.weight(model.Experts, p.rand(E*2*F*H, 1/math.Sqrt(H)), E, 2*F, H)
		dn := p.weight(model.Experts, p.rand(E*H*F, 1/math.Sqrt(F)), E, H, F)
		x := p.input(p.rand(rows*H, 1), rows, H)
		out := p.alloc(model.Float, rows, H)
		p.got.MoE(out.got, x.got, idx.got, wts.got, gu.got, dn.got, rows, K)
		p.ref.MoE(out.ref, x.ref, idx.ref, wts.ref, gu.ref, dn.ref, rows, K)
		p.compare(method+" moe", out, rows, H)
	}
	// Forced routing: the table's rows from forcedRow on, weight 1/k.
	forced := make([]int32, 40*K)
	for i := range forced {
		forced[i] = int32(model.BalancedExpert(i/K, i%K, K, E))
	}
	ft := p.alloc(model.Int32, 40, K)
	p.must(p.got.WriteInt32(ft.got, forced))
	idx, wts := p.alloc(model.Int32, rows, K), p.alloc(model.Float, rows, K)
	lt := p.input(p.rand(rows*E, 1), rows, E)
	p.got.Route(idx.got, wts.got, lt.got, ft.got, 5, rows, K, model.RoutingSoftmaxTopKRenorm, nil, 0)
	gi, gw := make([]int32, rows*K), make([]float32, rows*K)
	p.must(p.got.ReadInt32(gi, idx.got, rows))
	p.must(p.got.ReadFloat32(gw, wts.got, rows))
	for i := range gi {
		if gi[i] != forced[5*K+i] || math.Abs(float64(gw[i])-1.0/K) > p.tol {
			p.t.Fatalf("forced routing: experts %v weights %v", gi, gw)
		}
	}
}

// nearTie reports whether any two neighbours among the k+1 largest logits
// are closer than tol (relative), where a lower-precision backend may
// order them either way.
func nearTie(l []float32, k int, tol float64) bool {
	s := append([]float32(nil), l...)
	for i := range min(k+1, len(s)) { // selection of the top k+1, descending
		for j := i + 1; j < len(s); j++ {
			if s[j] > s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	// A tie anywhere among them can flip what the backend's precision
	// picks: at the boundary, which experts are chosen; inside the top k,
	// their order (and so which weight goes to which slot).
	for i := range min(k, len(s)-1) {
		if math.Abs(float64(s[i]-s[i+1])) <= tol*math.Max(1, math.Abs(float64(s[i]))) {
			return true
		}
	}
	return false
}

func checkArgmax(p *pair) {
	const rows, V = 9, 1000
	v := p.rand(rows*V, 1)
	want := make([]int32, rows)
	for r := range rows {
		want[r] = int32(p.r.IntN(V))
		v[r*V+int(want[r])] = 50 // a clear winner in every precision
	}
	v[3*V+7], v[3*V+9], want[3] = 60, 60, 7 // an exact tie: the lower index
	l := p.input(v, rows+2, V)
	got := make([]int32, rows)
	if err := p.got.Argmax(got, l.got, rows); err != nil {
		p.t.Fatal(err)
	}
	for r := range rows {
		if got[r] != want[r] {
			p.t.Errorf("argmax row %d: %d, want %d", r, got[r], want[r])
		}
	}
}

// checkPipeline is model.Pipeliner: picks started but not waited for feed
// the next batch's tokens on the device (Batch.Fed), and must embed
// exactly as the same ids given by the host; the picks then read back
// right, tickets in order, at most two outstanding.
func checkPipeline(p *pair) {
	pl, ok := p.got.(model.Pipeliner)
	if !ok {
		p.t.Skip("the backend does not pipeline iterations")
	}
	const rows, V, H = 5, 300, 40
	v := p.rand(rows*V, 1)
	want := make([]int32, rows)
	for r := range rows {
		want[r] = int32(p.r.IntN(V))
		v[r*V+int(want[r])] = 50
	}
	l := p.input(v, rows, V)
	table := p.weight(model.Table, p.rand(V*H, 1), V, H)
	first := mixedBatch(p.tokens(V))
	p.must(p.got.SetBatch(first))
	t0, err := pl.ArgmaxStart(l.got, rows)
	p.must(err)

	// Slot 0 decodes pick 3, slot 1 reads a prompt, slot 2 decodes pick 0.
	var fed, host model.Batch
	fed.AddFed(0, 5, 3)
	fed.Add(1, 0, []int32{7, 8}, true)
	fed.AddFed(2, 9, 0)
	host.Add(0, 5, want[3:4], true)
	host.Add(1, 0, []int32{7, 8}, true)
	host.Add(2, 9, want[0:1], true)
	p.must(p.got.SetBatch(&fed))
	p.must(p.ref.SetBatch(&host))
	x := p.alloc(model.Float, 4, H)
	p.got.Embed(x.got, table.got)
	p.ref.Embed(x.ref, table.ref)
	t1, err := pl.ArgmaxStart(l.got, rows)
	p.must(err)
	if _, err := pl.ArgmaxStart(l.got, rows); err == nil {
		p.t.Error("a third outstanding ArgmaxStart was accepted")
	}
	if err := pl.ArgmaxWait(t1, make([]int32, rows)); err == nil {
		p.t.Error("waiting for the newer ticket first was accepted")
	}
	for _, tk := range []int{t0, t1} {
		got := make([]int32, rows)
		p.must(pl.ArgmaxWait(tk, got))
		for r := range rows {
			if got[r] != want[r] {
				p.t.Errorf("ticket %d pick %d: %d, want %d", tk, r, got[r], want[r])
			}
		}
	}
	p.compare("embed with fed tokens", x, 4, H)
}

// checkRandom reads a random weight back through MatMul with identity
// rows: the backends must generate the same values (model.RandomValue).
func checkRandom(p *pair) {
	const n, k = 50, 24
	g, err := p.got.Random("w", model.Matrix, []int{n, k}, 1234, 0.3)
	p.must(err)
	r, err := p.ref.Random("w", model.Matrix, []int{n, k}, 1234, 0.3)
	p.must(err)
	eye := make([]float32, k*k)
	for i := range k {
		eye[i*k+i] = 1
	}
	x := p.input(eye, k, k)
	o := p.alloc(model.Float, k, n)
	p.got.MatMul(o.got, x.got, g, k)
	p.ref.MatMul(o.ref, x.ref, r, k)
	p.compare("random weight", o, k, n)
}

// CheckModel runs a whole model with random weights (seed 1) on both
// backends over a prefill batch and a mixed batch and compares the
// logits.
func CheckModel(t *testing.T, candidate NewBackend, cfg model.Config, tol float64) {
	p := start(t, candidate, tol, uint64(time.Now().UnixNano()))
	run := func(be model.Backend) [][]float32 {
		m, err := model.New(be, cfg, model.Options{Seed: 1})
		p.must(err)
		p.must(m.Reserve(model.Capacity{MaxTokens: 64, MaxLogitRows: 8, Slots: 4, MaxLen: 64}))
		var out [][]float32
		ids := func(n int) []int32 {
			v := make([]int32, n)
			for i := range v {
				v[i] = int32((i*7919 + n) % cfg.Vocab)
			}
			return v
		}
		var b model.Batch
		b.Add(1, 0, ids(20), true)
		b.Add(3, 0, ids(11), true)
		for step := range 2 {
			p.must(m.Forward(&b))
			l := make([]float32, len(b.LogitRows)*cfg.Vocab)
			p.must(m.ReadLogits(l))
			out = append(out, l)
			if step == 0 {
				b.Reset()
				b.Add(1, 20, ids(1), true)
				b.Add(3, 11, ids(1), true)
				b.Add(0, 0, ids(9), true)
			}
		}
		return out
	}
	got, want := run(p.got), run(p.ref)
	for i := range want {
		if e := cpu.RelErr(got[i], want[i]); !(e <= tol) {
			t.Errorf("%s iteration %d: logits relative error %.3g > %.3g", cfg.Name, i, e, tol)
		}
	}
}

//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// The MLA and grouped-routing kernels against engine/cpu's MLABackend on
// fresh random inputs, rounded to the GPU's dtype first so that both sides
// start from the same values. Every MLA iteration runs both attention
// paths (MLAAttention and MLAAttentionSplit) on the same prepared cache.

var mlaShapes = []struct {
	name string
	s    MLAShape
}{
	// DeepSeek-V3 (and Moonlight's head shape with 128 heads).
	{"deepseek-v3", MLAShape{Heads: 128, NopeDim: 128, RopeDim: 64, VDim: 128, Latent: 512, Interleave: true, Eps: 1e-6}},
	// The tiny-deepseek-v3 golden.
	{"tiny", MLAShape{Heads: 4, NopeDim: 16, RopeDim: 8, VDim: 16, Latent: 16, Interleave: true, Eps: 1e-6}},
	// Half-split rotation, a head count and value width of no power of two.
	{"odd", MLAShape{Heads: 3, NopeDim: 32, RopeDim: 16, VDim: 48, Latent: 96, Eps: 1e-5}},
}

// mlaIteration is one batch: sequences (slot, past, length).
type mlaIteration []struct{ slot, past, n int }

// mlaScript fills a cache of 4 slots over three iterations: two prefills
// (one longer than a token tile several times), then a chunk beside two
// decode tokens, then decode only.
var mlaScript = []mlaIteration{
	{{1, 0, 13}, {0, 0, 3}},
	{{1, 13, 1}, {2, 0, 6}, {0, 3, 1}},
	{{0, 4, 1}, {1, 14, 1}, {2, 6, 1}},
}

func TestMLAKernels(t *testing.T) {
	const slots, capacity = 4, 24
	for _, dt := range dtypes {
		for _, c := range mlaShapes {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) { testMLAKernels(t, g, dt, c.s, slots, capacity) })
			})
		}
	}
}

func testMLAKernels(t testing.TB, g *GPU, dt DType, s MLAShape, slots, capacity int) {
	r := newRand(t)
	s.Scale = float32(1 / math.Sqrt(float64(s.NopeDim+s.RopeDim)))
	ms := model.MLAShape{Heads: s.Heads, NopeDim: s.NopeDim, RopeDim: s.RopeDim, VDim: s.VDim, Latent: s.Latent,
		Interleave: s.Interleave, Scale: s.Scale, Eps: s.Eps}
	ref, err := cpu.New(model.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var mla model.MLABackend = ref
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	upload := func(kind model.WeightKind, v []float32, shape ...int) model.Tensor {
		w, err := ref.Upload("w", kind, model.HostF32(shape, v))
		must(err)
		return w
	}
	cfg := model.Config{HeadDim: s.RopeDim, RopeTheta: 10000,
		RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 16, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1}}
	table := model.RopeTable(cfg, capacity)
	kvbV := randVals(r, dt, s.Heads*(s.NopeDim+s.VDim)*s.Latent, float32(math.Sqrt(3/float64(s.Latent))))
	normV := randVals(r, dt, s.Latent, 1)
	for i := range normV {
		normV[i] = dt.ToFloat32(dt.FromFloat32(1 + 0.2*normV[i]))
	}
	rTab, rKvb, rNorm := upload(model.Table, table, capacity, s.RopeDim), upload(model.HeadStack, kvbV, s.Heads, s.NopeDim+s.VDim, s.Latent), upload(model.Vector, normV, s.Latent)
	rCache, err := ref.NewKVCache(model.KVConfig{Layers: 1, Slots: slots, Capacity: capacity, HeadLayout: model.HeadLayout{Heads: s.Heads},
		Latent: s.Latent, RopeDim: s.RopeDim})
	must(err)

	gTab, gKvb, gNorm := devUploadT(t, g, table), devUpload(t, g, dt, kvbV), devUpload(t, g, dt, normV)
	cacheBytes := MLACacheBytes(dt, s, slots+1, capacity)
	gCache, err := g.Alloc(cacheBytes)
	must(err)
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return g.Free(gCache) }) })
	must(g.Stream.Zero(gCache))

	for it, iter := range mlaScript {
		var b model.Batch
		var slot []int32
		for _, q := range iter {
			b.Add(q.slot, q.past, make([]int32, q.n), true)
			for range q.n {
				slot = append(slot, int32(q.slot))
			}
		}
		T := b.NumTokens()
		qV := randVals(r, dt, T*s.QWidth(), 1)
		ckvV := randVals(r, dt, T*s.Row(), 1)

		// The CPU backend: MLAAttention on copies (it works in place).
		must(ref.SetBatch(&b))
		rq, err := ref.Alloc("q", model.Float, T, s.QWidth())
		must(err)
		rckv, err := ref.Alloc("ckv", model.Float, T, s.Row())
		must(err)
		rout, err := ref.Alloc("out", model.Float, T, s.Heads*s.VDim)
		must(err)
		must(ref.WriteFloat32(rq, qV))
		must(ref.WriteFloat32(rckv, ckvV))
		mla.MLAAttention(rout, rq, rckv, rNorm, rKvb, rTab, rCache, 0, ms, true)
		wantOut, wantQ, wantCKV := make([]float32, T*s.Heads*s.VDim), make([]float32, T*s.QWidth()), make([]float32, T*s.Row())
		must(ref.ReadFloat32(wantOut, rout, T))
		must(ref.ReadFloat32(wantQ, rq, T))
		must(ref.ReadFloat32(wantCKV, rckv, T))

		gq, gckv := devUpload(t, g, dt, qV), devUpload(t, g, dt, ckvV)
		gout := devPoisoned(t, g, dt, T*s.Heads*s.VDim)
		gpos, gslot := devUploadT(t, g, b.Positions), devUploadT(t, g, slot)
		must(g.MLAPrep(g.Stream, dt, gq, gckv, gNorm, gTab, gCache, gpos, gslot, T, capacity, s))
		must(g.MLAAttention(g.Stream, dt, gout, gq, gKvb, gCache, gpos, gslot, T, capacity, s))
		what := fmt.Sprintf("iteration %d", it)
		checkRel(t, what+": rotated q", download(t, g, dt, gq, len(wantQ)), wantQ)
		checkRel(t, what+": normalised, rotated ckv", download(t, g, dt, gckv, len(wantCKV)), wantCKV)
		// The cache rows the iteration wrote are its ckv rows.
		cache := download(t, g, dt, gCache, cacheBytes/dt.Size())
		var rows []float32
		for i, p := range b.Positions {
			at := (int(slot[i])*capacity + int(p)) * s.Row()
			rows = append(rows, cache[at:at+s.Row()]...)
		}
		checkRel(t, what+": cache rows", rows, wantCKV)
		checkRel(t, what+": attention", download(t, g, dt, gout, len(wantOut)), wantOut)
		// The split path on the same rotated queries and cache.
		work, err := g.Alloc(g.MLASplitWorkBytes(T, s))
		must(err)
		gout2 := devPoisoned(t, g, dt, T*s.Heads*s.VDim)
		must(g.MLAAttentionSplit(g.Stream, dt, gout2, gq, gKvb, gCache, gpos, gslot, work, T, capacity, s))
		checkRel(t, fmt.Sprintf("%s: attention, split %d ways", what, g.MLASplits(T, s)), download(t, g, dt, gout2, len(wantOut)), wantOut)
		must(g.Free(work))
	}
}

// TestMLAKernelsRejectShapes: shapes the kernels cannot take are refused
// before anything is launched.
func TestMLAKernelsRejectShapes(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		buf, err := g.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(buf)
		for _, s := range []MLAShape{
			{Heads: 4, NopeDim: 16, RopeDim: 7, VDim: 16, Latent: 16},
			{Heads: 4, NopeDim: 16, RopeDim: 8, VDim: 16, Latent: MLAMaxLatent + 32},
			{Heads: 0, NopeDim: 16, RopeDim: 8, VDim: 16, Latent: 16},
		} {
			if err := g.MLAAttention(g.Stream, F16, buf, buf, buf, buf, buf, buf, 1, 4, s); err == nil {
				t.Errorf("%+v: no error", s)
			}
		}
	})
}

// groupCase is one routing configuration of TestRouteGrouped.
type groupCase struct {
	name              string
	experts           int
	r                 model.GroupRoute
	rows              int
	logitScale, bias  float32
	padEvery, padSlot int
}

func TestRouteGrouped(t *testing.T) {
	cases := []groupCase{
		{name: "deepseek-v3", experts: 256, r: model.GroupRoute{K: 8, Groups: 8, TopKGroups: 4, Renorm: true, Scale: 2.5}, rows: 77, logitScale: 3, bias: 0.05},
		{name: "moonlight", experts: 64, r: model.GroupRoute{K: 6, Groups: 1, TopKGroups: 1, Renorm: true, Scale: 2.446}, rows: 40, logitScale: 3, bias: 0.05},
		{name: "tiny-golden", experts: 8, r: model.GroupRoute{K: 2, Groups: 4, TopKGroups: 2, Renorm: true, Scale: 2.5}, rows: 33, logitScale: 2, bias: 0.1},
		{name: "no-renorm-padded", experts: 16, r: model.GroupRoute{K: 4, Groups: 4, TopKGroups: 2, Scale: 1.5}, rows: 24, logitScale: 2, bias: 0.1, padEvery: 5, padSlot: 9},
		// Coarse logits: many exact ties, broken by the lowest index.
		{name: "ties", experts: 32, r: model.GroupRoute{K: 4, Groups: 4, TopKGroups: 2, Renorm: true, Scale: 1}, rows: 50, logitScale: -1},
		// Groups of one expert: a group's score is its expert's.
		{name: "groups-of-one", experts: 16, r: model.GroupRoute{K: 3, Groups: 16, TopKGroups: 5, Renorm: true, Scale: 1}, rows: 20, logitScale: 2, bias: 0.1},
	}
	for _, dt := range dtypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) { testRouteGrouped(t, g, dt, c) })
			})
		}
	}
}

func testRouteGrouped(t testing.TB, g *GPU, dt DType, c groupCase) {
	r := newRand(t)
	E, K, rows := c.experts, c.r.K, c.rows
	var logits []float32
	if c.logitScale < 0 {
		logits = make([]float32, rows*E)
		for i := range logits {
			logits[i] = float32(r.IntN(3)) - 1
		}
	} else {
		logits = randVals(r, dt, rows*E, c.logitScale)
	}
	bias := make([]float32, E)
	if c.bias > 0 {
		bias = randVals(r, dt, E, c.bias)
	}
	// The CPU's choices from the same rounded inputs.
	ref, err := cpu.New(model.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	rl, err := ref.Alloc("logits", model.Float, rows, E)
	must(err)
	must(ref.WriteFloat32(rl, logits))
	rb, err := ref.Upload("bias", model.Vector, model.HostF32([]int{E}, bias))
	must(err)
	ri, err := ref.Alloc("idx", model.Int32, rows, K)
	must(err)
	rw, err := ref.Alloc("wts", model.Float, rows, K)
	must(err)
	ref.RouteGrouped(ri, rw, rl, rb, nil, 0, rows, c.r, nil, 0)
	wantIdx, wantW := make([]int32, rows*K), make([]float32, rows*K)
	must(ref.ReadInt32(wantIdx, ri, rows))
	must(ref.ReadFloat32(wantW, rw, rows))

	var slots []int32
	padded := func(row int) bool { return c.padEvery > 0 && row%c.padEvery == c.padEvery-1 }
	if c.padEvery > 0 {
		for i := range rows {
			s := int32(i % 3)
			if padded(i) {
				s = int32(c.padSlot)
			}
			slots = append(slots, s)
		}
	}
	counts := make([]int32, E)
	gr := GroupRoute{Logits: devUpload(t, g, dt, logits), Bias: devUpload(t, g, dt, bias), Idx: devUploadT(t, g, make([]int32, rows*K)),
		Weights: devPoisoned(t, g, dt, rows*K), Rows: rows, Experts: E, K: K, Groups: c.r.Groups, TopKGroups: c.r.TopKGroups,
		Renorm: c.r.Renorm, Scale: c.r.Scale, Counts: devUploadT(t, g, counts)}
	if slots != nil {
		gr.Slots, gr.PadSlot = devUploadT(t, g, slots), c.padSlot
	}
	if err := g.RouteGrouped(g.Stream, dt, gr); err != nil {
		t.Fatal(err)
	}
	gotIdx := make([]int32, rows*K)
	must(DownloadSlice(g.Stream, gotIdx, gr.Idx))
	must(DownloadSlice(g.Stream, counts, gr.Counts))
	gotW := download(t, g, dt, gr.Weights, rows*K)

	wantCounts := make([]int32, E)
	var cmpW, refW []float32
	for row := range rows {
		gi, wi := gotIdx[row*K:(row+1)*K], wantIdx[row*K:(row+1)*K]
		if padded(row) {
			for j := range K {
				if gi[j] != -1 || gotW[row*K+j] != 0 {
					t.Fatalf("padding row %d: experts %v weights %v, want -1 and 0", row, gi, gotW[row*K:(row+1)*K])
				}
			}
			continue
		}
		// Exact indices, in order, unless two choices are within the
		// float32 noise of the sigmoid (the kernel's expf and the CPU's
		// differ by an ulp or two).
		if !slices.Equal(gi, wi) && !groupNearTie(logits[row*E:(row+1)*E], bias, c.r) {
			t.Errorf("row %d: experts %v, CPU %v", row, gi, wi)
		}
		for _, e := range wi {
			wantCounts[e]++
		}
		cmpW = append(cmpW, gotW[row*K:(row+1)*K]...)
		refW = append(refW, wantW[row*K:(row+1)*K]...)
	}
	checkRel(t, "weights", cmpW, refW)
	if !slices.Equal(counts, wantCounts) {
		t.Errorf("counts %v, want %v", counts, wantCounts)
	}
}

// groupNearTie reports whether a row's choice of groups or of experts
// hangs on two values closer than float32 noise.
func groupNearTie(logits, bias []float32, r model.GroupRoute) bool {
	E := len(logits)
	epg := E / r.Groups
	choice := make([]float64, E)
	for e, v := range logits {
		choice[e] = 1/(1+math.Exp(-float64(v))) + float64(bias[e])
	}
	close := func(a, b float64) bool { return a != b && math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(a)) }
	anyClose := func(v []float64) bool {
		s := slices.Clone(v)
		sort.Float64s(s)
		for i := 1; i < len(s); i++ {
			if close(s[i-1], s[i]) {
				return true
			}
		}
		return false
	}
	gs := make([]float64, r.Groups)
	for g := range gs {
		s := slices.Clone(choice[g*epg : (g+1)*epg])
		sort.Sort(sort.Reverse(sort.Float64Slice(s)))
		gs[g] = s[0]
		if epg > 1 {
			gs[g] += s[1]
		}
	}
	return anyClose(choice) || anyClose(gs)
}

// TestRouteGroupedForced: the table's experts from the start row, slot j
// weighted by the forced weights, padding rows routed nowhere, and with a
// drift cell the window moves from one launch to the next.
func TestRouteGroupedForced(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				const E, K, rows, tableRows = 16, 4, 10, 40
				r := rand.New(rand.NewPCG(1, 2))
				table := make([]int32, tableRows*K)
				for i := range table {
					table[i] = int32(r.IntN(E))
				}
				fw := []float32{1.25, 0.5, 0.75, 1}
				slots := make([]int32, rows)
				slots[rows-1] = 7 // the padding slot
				gr := GroupRoute{Idx: devUploadT(t, g, make([]int32, rows*K)), Weights: devPoisoned(t, g, dt, rows*K), Rows: rows,
					Experts: E, K: K, Forced: devUploadT(t, g, table), ForcedWeights: devUploadT(t, g, fw), Row: 3,
					Counts: devUploadT(t, g, make([]int32, E)), Slots: devUploadT(t, g, slots), PadSlot: 7}
				if err := g.RouteGrouped(g.Stream, dt, gr); err != nil {
					t.Fatal(err)
				}
				idx, counts := make([]int32, rows*K), make([]int32, E)
				if err := DownloadSlice(g.Stream, idx, gr.Idx); err != nil {
					t.Fatal(err)
				}
				if err := DownloadSlice(g.Stream, counts, gr.Counts); err != nil {
					t.Fatal(err)
				}
				w := download(t, g, dt, gr.Weights, rows*K)
				want := make([]int32, E)
				for i := range idx {
					if i/K == rows-1 {
						if idx[i] != -1 || w[i] != 0 {
							t.Fatalf("padding row: expert %d weight %g", idx[i], w[i])
						}
						continue
					}
					if idx[i] != table[3*K+i] || w[i] != fw[i%K] {
						t.Fatalf("slot %d: expert %d weight %g, want %d and %g", i, idx[i], w[i], table[3*K+i], fw[i%K])
					}
					want[idx[i]]++
				}
				if !slices.Equal(counts, want) {
					t.Errorf("counts %v, want %v", counts, want)
				}
				// Drift: successive launches of the same arguments read
				// different windows of the table.
				gr.Slots, gr.Counts = Buffer{}, Buffer{}
				gr.Drift, gr.Period = devUploadT(t, g, []uint32{0}), tableRows-rows
				var windows [][]int32
				for range 4 {
					if err := g.RouteGrouped(g.Stream, dt, gr); err != nil {
						t.Fatal(err)
					}
					if err := DownloadSlice(g.Stream, idx, gr.Idx); err != nil {
						t.Fatal(err)
					}
					windows = append(windows, slices.Clone(idx))
				}
				if slices.Equal(windows[1], windows[2]) && slices.Equal(windows[2], windows[3]) {
					t.Errorf("the window did not move under drift: %v", windows[1:])
				}
			})
		})
	}
}

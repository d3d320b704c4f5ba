//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

var moeMethodNames = []string{model.RoutingSoftmaxTopKRenorm, model.RoutingTopKSoftmax, model.RoutingSoftmaxTopK}

// devInts allocates n int32 filled with a value no kernel writes, so an
// output left unwritten shows.
func devInts(t testing.TB, g *GPU, n int) Buffer {
	t.Helper()
	b := devUploadT(t, g, make([]int32, n))
	if err := g.Stream.Fill32(b, 0x7EADBEEF); err != nil {
		t.Fatal(err)
	}
	return b
}

func downloadInts(t testing.TB, g *GPU, b Buffer, n int) []int32 {
	t.Helper()
	v := make([]int32, n)
	if err := DownloadSlice(g.Stream, v, b.Slice(0, n*4)); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMoERoute checks learned routing against engine/cpu.RefRoute for every
// method: the experts exactly (the logits are rounded to the dtype first, so
// both see the same values, ties included), the weights within tol16, the
// counts of the layer and the padding rows (expert -1, weight 0, not
// counted).
func TestMoERoute(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct{ rows, E, k int }{{23, 8, 2}, {1, 8, 2}, {300, 32, 4}, {77, 128, 8}, {9, 4, 4}, {40, 256, 8}} {
			for mi, method := range moeMethodNames {
				t.Run(fmt.Sprintf("%s/R%d_E%d_k%d/%s", dt, c.rows, c.E, c.k, method), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						logits := randVals(r, dt, c.rows*c.E, 3)
						if c.rows > 5 { // an exact tie across the k-th place: the lower index wins
							copy(logits[5*c.E:], []float32{1, 1, 1, 1})
						}
						padded := map[int]bool{}
						slots := make([]int32, c.rows)
						for i := range slots {
							slots[i] = int32(i % 5)
							if c.rows > 3 && i%7 == 3 {
								slots[i], padded[i] = 99, true
							}
						}
						n := c.rows * c.k
						idx, wts := devInts(t, g, n), devPoisoned(t, g, dt, n)
						counts := devUploadT(t, g, make([]int32, 3*c.E))
						rt := MoERoute{Logits: devUpload(t, g, dt, logits), Idx: idx, Weights: wts, Rows: c.rows, Experts: c.E, K: c.k,
							Method: mi, Counts: counts.Slice(c.E*4, c.E*4), Slots: devUploadT(t, g, slots), PadSlot: 99}
						if err := g.MoERoute(g.Stream, dt, rt); err != nil {
							t.Fatal(err)
						}
						gi, gw := downloadInts(t, g, idx, n), download(t, g, dt, wts, n)
						gc := downloadInts(t, g, counts, 3*c.E)
						ri, rw := make([]int32, n), make([]float32, n)
						cpu.RefRoute(ri, rw, logits, c.rows, c.E, c.k, method)
						want := make([]int32, 3*c.E)
						for row := range c.rows {
							for j := range c.k {
								a := row*c.k + j
								if padded[row] {
									ri[a], rw[a] = -1, 0
									continue
								}
								want[c.E+int(ri[a])]++
							}
						}
						if !slices.Equal(gi, ri) {
							t.Fatalf("experts\n got %v\nwant %v", gi, ri)
						}
						checkRel(t, "weights", gw, rw)
						if !slices.Equal(gc, want) {
							t.Errorf("counts\n got %v\nwant %v", gc, want)
						}
					})
				})
			}
		}
	}
}

// TestMoERouteForced checks the forced path: the table's rows from the start
// row, weight 1/k, counts, padding rows; and the drift cell, which moves the
// window inside the period on every launch.
func TestMoERouteForced(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				r := newRand(t)
				const rows, E, k, tableRows = 37, 8, 2, 200
				table := make([]int32, tableRows*k)
				for i := range table {
					table[i] = int32(r.IntN(E))
				}
				tb := devUploadT(t, g, table)
				slots := make([]int32, rows)
				slots[rows-1] = 7 // one padding row
				n := rows * k
				idx, wts := devInts(t, g, n), devPoisoned(t, g, dt, n)
				counts := devUploadT(t, g, make([]int32, E))
				drift := devUploadT(t, g, []uint32{0})
				rt := MoERoute{Idx: idx, Weights: wts, Rows: rows, Experts: E, K: k, Forced: tb, Row: 11,
					Counts: counts, Slots: devUploadT(t, g, slots), PadSlot: 7}
				check := func(start int, what string) {
					gi, gw := downloadInts(t, g, idx, n), download(t, g, dt, wts, n)
					for a := range n {
						want, ww := table[start*k+a], float32(1)/k
						if a/k == rows-1 {
							want, ww = -1, 0
						}
						if gi[a] != want || gw[a] != ww {
							t.Fatalf("%s: pair %d: expert %d weight %g, want %d, %g", what, a, gi[a], gw[a], want, ww)
						}
					}
				}
				if err := g.MoERoute(g.Stream, dt, rt); err != nil {
					t.Fatal(err)
				}
				check(11, "row 11")
				want := make([]int32, E)
				for _, e := range table[11*k : (11+rows-1)*k] {
					want[e]++
				}
				if gc := downloadInts(t, g, counts, E); !slices.Equal(gc, want) {
					t.Errorf("counts %v, want %v", gc, want)
				}
				// Drift: the start is (row + state/2) mod period, the state
				// advanced by the LCG after every launch.
				rt.Drift, rt.Period, rt.Counts = drift, tableRows-rows, Buffer{}
				state := uint32(0)
				starts := map[int]bool{}
				for i := range 4 {
					if err := g.MoERoute(g.Stream, dt, rt); err != nil {
						t.Fatal(err)
					}
					start := (11 + int(state>>1)) % rt.Period
					starts[start] = true
					check(start, fmt.Sprintf("drift launch %d", i))
					state = state*1664525 + 1013904223
				}
				if len(starts) < 3 {
					t.Errorf("drifting windows started at %v only", starts)
				}
				if _, err := nanCheck(download(t, g, dt, wts, n)); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

func nanCheck(v []float32) (int, error) {
	for i, x := range v {
		if math.IsNaN(float64(x)) {
			return i, fmt.Errorf("element %d is NaN", i)
		}
	}
	return 0, nil
}

// refMoE is engine/cpu.RefMoE over the rows, spread over the cores; pairs
// with expert -1 contribute nothing.
func refMoE(x []float32, idx []int32, wts, gateUp, down []float32, rows, k, H, F int) []float32 {
	out := make([]float32, rows*H)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for t := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for j := range k {
				e := idx[t*k+j]
				if e < 0 {
					continue
				}
				y := make([]float32, H)
				cpu.RefMoE(y, x[t*H:(t+1)*H], []int32{e}, []float32{wts[t*k+j]}, gateUp, down, 1, 1, H, F)
				for i := range H {
					out[t*H+i] += y[i]
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// moeCase is one MoE layer shape; skew routes most tokens to expert 0;
// counts, when set, gives every expert exactly that many rows (they sum to
// rows*k, none above rows).
type moeCase struct {
	rows, k, E, H, F int
	skew             bool
	counts           []int
}

var moeCases = []moeCase{
	{23, 2, 4, 64, 160, false, nil},    // tiny-mixtral
	{1, 2, 8, 1024, 512, false, nil},   // one decode token
	{64, 2, 8, 512, 1408, false, nil},  // decode, 16 rows per expert: one fragment
	{64, 2, 8, 512, 1408, true, nil},   // imbalanced: ~46 rows for expert 0
	{300, 2, 4, 128, 256, false, nil},  // prefill-like: ~136 rows per expert, two l tiles
	{40, 8, 128, 256, 96, false, nil},  // Qwen3-like: many experts, few rows each
	{19, 4, 4, 2880, 2880, false, nil}, // GPT-OSS widths (not multiples of 64 / 128)
	{130, 4, 4, 2880, 1440, true, nil}, // GPT-OSS hidden, ~119 rows per expert: 8 fragments
	{5, 2, 2, 4096, 3584, false, nil},  // Mixtral hidden
	// Row counts around every tile edge (16-row fragments, 64- and 128-row
	// tiles, an expert over one l tile), an unused expert, widths that are
	// no multiple of the block slices.
	{rows: 350, k: 2, E: 12, H: 264, F: 520, counts: []int{0, 1, 15, 16, 17, 63, 64, 65, 128, 129, 200, 2}},
	{rows: 213, k: 1, E: 9, H: 136, F: 2056, counts: []int{17, 0, 1, 15, 16, 63, 64, 30, 7}},
}

// moeInputs draws one case: routing with distinct experts per token (some
// pairs -1, padding), weights, inputs and expert weights, all rounded to dt.
func moeInputs(r *rand.Rand, dt DType, c moeCase) (x []float32, idx []int32, wts, gu, dn []float32) {
	x = randVals(r, dt, c.rows*c.H, 1)
	idx = make([]int32, c.rows*c.k)
	wts = randVals(r, dt, c.rows*c.k, 1)
	if c.counts != nil {
		idx = countedRouting(r, c)
	}
	for t := range c.rows {
		if c.counts != nil {
			break
		}
		perm := r.Perm(c.E)
		if c.skew && t%4 != 3 {
			i := slices.Index(perm, 0)
			perm[0], perm[i] = perm[i], perm[0]
		}
		for j := range c.k {
			idx[t*c.k+j] = int32(perm[j])
		}
		if c.rows > 3 && t%11 == 10 { // a padding token
			for j := range c.k {
				idx[t*c.k+j] = -1
			}
		}
	}
	gu = randVals(r, dt, c.E*2*c.F*c.H, float32(2/math.Sqrt(float64(c.H))))
	dn = randVals(r, dt, c.E*c.H*c.F, float32(2/math.Sqrt(float64(c.F))))
	return
}

// countedRouting routes c.rows tokens so that expert e gets c.counts[e]
// pairs: the experts' runs laid end to end, token t taking positions t,
// t + rows, ... (distinct experts, as no run is longer than rows), tokens
// and slots shuffled.
func countedRouting(r *rand.Rand, c moeCase) []int32 {
	var seq []int32
	for e, n := range c.counts {
		if n > c.rows {
			panic("moeCase: an expert with more rows than tokens")
		}
		for range n {
			seq = append(seq, int32(e))
		}
	}
	if len(seq) != c.rows*c.k {
		panic(fmt.Sprintf("moeCase: counts sum to %d, not %d x %d", len(seq), c.rows, c.k))
	}
	idx := make([]int32, c.rows*c.k)
	for i, t := range r.Perm(c.rows) {
		for j, jj := range r.Perm(c.k) {
			idx[t*c.k+jj] = seq[i+j*c.rows]
		}
	}
	return idx
}

func (c moeCase) shape() MoEShape {
	return MoEShape{Rows: c.rows, K: c.k, Experts: c.E, Hidden: c.H, FFN: c.F}
}

// moeBufs are one case's operands on the device; out and the workspace are
// poisoned with NaN.
type moeBufs struct{ out, x, idx, wts, gu, dn, work Buffer }

func uploadMoE(t testing.TB, g *GPU, dt DType, c moeCase, x []float32, idx []int32, wts, gu, dn []float32, library bool) moeBufs {
	return moeBufs{out: devPoisoned(t, g, dt, c.rows*c.H), x: devUpload(t, g, dt, x), idx: devUploadT(t, g, idx),
		wts: devUpload(t, g, dt, wts), gu: devUpload(t, g, dt, gu), dn: devUpload(t, g, dt, dn),
		work: devPoisoned(t, g, dt, MoEWorkBytes(dt, c.shape(), library)/dt.Size())}
}

// run queues the layer with the own kernels, or with cuBLASLt.
func (b moeBufs) run(g *GPU, dt DType, sh MoEShape, library bool) error {
	if library {
		bl, err := g.BlasLt()
		if err != nil {
			return err
		}
		return g.MoEBlasLt(g.Stream, dt, bl, b.out, b.x, b.idx, b.wts, b.gu, b.dn, b.work, sh)
	}
	return g.MoE(g.Stream, dt, b.out, b.x, b.idx, b.wts, b.gu, b.dn, b.work, sh)
}

// moePaths are the ways TestMoE runs a layer: the own kernels as planned,
// with each tile configuration forced, with the down GEMM split three ways
// over K (uneven splits, partials summed by the combine), and cuBLASLt.
var moePaths = map[string]struct {
	tile   string
	splits int
}{"own": {}, "own_s": {tile: "s"}, "own_m": {tile: "m"}, "own_l": {tile: "l"}, "own_k3": {splits: 3}, "cublaslt": {}}

// TestMoE checks the grouped expert layer against engine/cpu.RefMoE, with
// the own kernels (every tile configuration, split and unsplit down GEMMs)
// and with cuBLASLt per expert, on poisoned outputs and workspaces.
func TestMoE(t *testing.T) {
	testGPU(t) // skips without one, before the inputs are drawn
	for _, dt := range dtypes {
		for _, c := range moeCases {
			name := fmt.Sprintf("%s/R%d_k%d_E%d_H%d_F%d", dt, c.rows, c.k, c.E, c.H, c.F)
			if c.skew {
				name += "_skewed"
			}
			if c.counts != nil {
				name += "_counted"
			}
			t.Run(name, func(t *testing.T) {
				// One draw and one CPU reference a case for all its paths:
				// drawing the experts' weights and the reference again for
				// each path was most of the test's time.
				r := newRand(t)
				x, idx, wts, gu, dn := moeInputs(r, dt, c)
				ref := refMoE(x, idx, wts, gu, dn, c.rows, c.k, c.H, c.F)
				for _, path := range []string{"own", "own_s", "own_m", "own_l", "own_k3", "cublaslt"} {
					if path != "own" && path != "cublaslt" && c.H*c.F > 1<<22 {
						continue
					}
					t.Run(path, func(t *testing.T) {
						do(t, func(t testing.TB, g *GPU) {
							lib := path == "cublaslt"
							bufs := uploadMoE(t, g, dt, c, x, idx, wts, gu, dn, lib)
							oldTile, oldSplits := g.sw.CUDAMoETile, moeSplitsForce
							g.sw.CUDAMoETile, moeSplitsForce = moePaths[path].tile, moePaths[path].splits
							err := bufs.run(g, dt, c.shape(), lib)
							g.sw.CUDAMoETile, moeSplitsForce = oldTile, oldSplits
							if err != nil {
								t.Fatal(err)
							}
							got := download(t, g, dt, bufs.out, c.rows*c.H)
							checkRel(t, "moe", got, ref)
							for tk := range c.rows {
								if idx[tk*c.k] == -1 && slices.ContainsFunc(got[tk*c.H:(tk+1)*c.H], func(v float32) bool { return v != 0 }) {
									t.Fatalf("padding token %d: output not zero", tk)
								}
							}
						})
					})
				}
			})
		}
	}
}

// TestMoEBadExpert: an expert id outside the experts turns its token's
// output into NaN (shown, never passed off as a result), the others stay
// right.
func TestMoEBadExpert(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		r := newRand(t)
		dt := BF16
		c := moeCase{rows: 6, k: 2, E: 4, H: 64, F: 160}
		x, idx, wts, gu, dn := moeInputs(r, dt, c)
		idx[2*c.k+1] = 9
		bufs := uploadMoE(t, g, dt, c, x, idx, wts, gu, dn, false)
		if err := bufs.run(g, dt, c.shape(), false); err != nil {
			t.Fatal(err)
		}
		got := download(t, g, dt, bufs.out, c.rows*c.H)
		for tk := range c.rows {
			_, err := nanCheck(got[tk*c.H : (tk+1)*c.H])
			if (tk == 2) != (err != nil) {
				t.Errorf("token %d: NaN %v", tk, err != nil)
			}
		}
	})
}

// TestMoECapture runs route + the own MoE inside a captured graph and
// replays it with new routing inputs: nothing in the layer reads back to
// the host.
func TestMoECapture(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		r := newRand(t)
		dt := F16
		c := moeCase{rows: 32, k: 2, E: 8, H: 256, F: 512}
		x, _, _, gu, dn := moeInputs(r, dt, c)
		sh := c.shape()
		n := c.rows * c.k
		lg := devUpload(t, g, dt, randVals(r, dt, c.rows*c.E, 2))
		idx, wts := devInts(t, g, n), devPoisoned(t, g, dt, n)
		counts := devUploadT(t, g, make([]int32, c.E))
		xb, gub, dnb := devUpload(t, g, dt, x), devUpload(t, g, dt, gu), devUpload(t, g, dt, dn)
		out := devPoisoned(t, g, dt, c.rows*c.H)
		work := devPoisoned(t, g, dt, MoEWorkBytes(dt, sh, false)/2)
		rt := MoERoute{Logits: lg, Idx: idx, Weights: wts, Rows: c.rows, Experts: c.E, K: c.k, Method: MoESoftmaxTopKRenorm, Counts: counts}
		// Load every kernel before the capture.
		if err := g.MoERoute(g.Stream, dt, rt); err != nil {
			t.Fatal(err)
		}
		if err := g.MoE(g.Stream, dt, out, xb, idx, wts, gub, dnb, work, sh); err != nil {
			t.Fatal(err)
		}
		gr, err := g.Stream.Capture(func() error {
			if err := g.MoERoute(g.Stream, dt, rt); err != nil {
				return err
			}
			return g.MoE(g.Stream, dt, out, xb, idx, wts, gub, dnb, work, sh)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer gr.Close()
		for rep := range 2 {
			logits := randVals(r, dt, c.rows*c.E, 2)
			if err := UploadSlice(g.Stream, lg, dt.Encode(logits)); err != nil {
				t.Fatal(err)
			}
			if err := g.Stream.Zero(counts); err != nil {
				t.Fatal(err)
			}
			if err := gr.Launch(g.Stream); err != nil {
				t.Fatal(err)
			}
			ri, rw := make([]int32, n), make([]float32, n)
			cpu.RefRoute(ri, rw, logits, c.rows, c.E, c.k, model.RoutingSoftmaxTopKRenorm)
			gi := downloadInts(t, g, idx, n)
			if !slices.Equal(gi, ri) {
				t.Fatalf("replay %d: experts differ", rep)
			}
			var sum int32
			for _, v := range downloadInts(t, g, counts, c.E) {
				sum += v
			}
			if sum != int32(n) {
				t.Errorf("replay %d: counts sum to %d, want %d", rep, sum, n)
			}
			checkRel(t, fmt.Sprintf("replay %d", rep), download(t, g, dt, out, c.rows*c.H), refMoE(x, ri, rw, gu, dn, c.rows, c.k, c.H, c.F))
		}
	})
}

// TestMoEPlan checks the own kernels' launch plan without a GPU: the tile
// configuration and the down GEMM's K splits at the zoo's decode shapes on
// an H200 (132 SMs, 227 KB of shared memory per block), that splits are
// never empty and their partials fit the workspace, and that the workspace
// grows with the rows (the backend sizes it once for the most rows).
func TestMoEPlan(t *testing.T) {
	const sms, smem = 132, 232448
	defer func() { moeSplitsForce = 0 }()
	for _, c := range []struct {
		sh         MoEShape
		cfg        string
		kps, split int
	}{
		{MoEShape{Rows: 1, K: 2, Experts: 8, Hidden: 4096, FFN: 14336}, "s", 14, 16},
		{MoEShape{Rows: 64, K: 2, Experts: 8, Hidden: 4096, FFN: 14336}, "l", 56, 4},
		{MoEShape{Rows: 256, K: 2, Experts: 8, Hidden: 4096, FFN: 14336}, "l", 56, 4},
		{MoEShape{Rows: 1, K: 4, Experts: 32, Hidden: 2880, FFN: 2880}, "s", 12, 4},
		{MoEShape{Rows: 64, K: 4, Experts: 32, Hidden: 2880, FFN: 2880}, "l", 23, 2},
		{MoEShape{Rows: 256, K: 4, Experts: 32, Hidden: 2880, FFN: 2880}, "l", 23, 2},
		{MoEShape{Rows: 8192, K: 2, Experts: 8, Hidden: 4096, FFN: 14336}, "l", 224, 1},
	} {
		cfg := moeConfigFor(c.sh, smem, "auto")
		kps, split := moeDownSplits(cfg, c.sh, sms)
		if cfg.name != c.cfg || kps != c.kps || split != c.split {
			t.Errorf("%+v: config %s, %d splits of %d k tiles; want %s, %d of %d", c.sh, cfg.name, split, kps, c.cfg, c.split, c.kps)
		}
	}
	if cfg := moeConfigFor(MoEShape{Rows: 256}, 166912, "auto"); cfg.name != "m" {
		t.Errorf("163 KB of shared memory per block: config %s, want m", cfg.name)
	}
	for _, tile := range []string{"s", "m", "l"} {
		if cfg := moeConfigFor(MoEShape{Rows: 1}, smem, tile); cfg.name != tile {
			t.Errorf("XRUN_CUDA_MOE_TILE=%s: config %s", tile, cfg.name)
		}
	}
	for _, force := range []int{0, 3} {
		moeSplitsForce = force
		for _, z := range []MoEShape{{K: 2, Experts: 8, Hidden: 4096, FFN: 14336}, {K: 4, Experts: 32, Hidden: 2880, FFN: 2880},
			{K: 8, Experts: 128, Hidden: 2048, FFN: 768}, {K: 1, Experts: 9, Hidden: 136, FFN: 2056}} {
			prev := [2]int{}
			for rows := 1; rows <= 3000; rows += 1 + rows/8 {
				sh := z
				sh.Rows = rows
				for _, cfg := range []moeGemmConfig{moeGemmSmall, moeGemmMedium, moeGemmLarge} {
					kps, split := moeDownSplits(cfg, sh, sms)
					ktiles := ceilDiv(sh.FFN, moeBK)
					n := rows * sh.K
					if split < 1 || (split-1)*kps >= ktiles || split*kps < ktiles || split > 1 && split*n > moePartialRows(n) {
						t.Fatalf("%+v %s: %d splits of %d k tiles (%d k tiles, room for %d partial rows)", sh, cfg.name, split, kps, ktiles, moePartialRows(n))
					}
				}
				for i, lib := range []bool{false, true} {
					b := MoEWorkBytes(BF16, sh, lib)
					if b < prev[i] {
						t.Fatalf("%+v library %v: workspace shrinks from %d to %d bytes", sh, lib, prev[i], b)
					}
					prev[i] = b
				}
			}
		}
	}
}

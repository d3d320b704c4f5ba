//go:build cgo && linux

package cuda

import (
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// refGemmCols is the CPU backend's reference GEMM (engine/cpu.RefGEMM,
// float64 accumulation) of Y = X W^T restricted to the columns whose W rows
// are given, spread over the cores in blocks of rows and columns: by rows
// alone a decode-sized M kept one or two cores busy, and this reference is
// most of several GPU checks' time.
func refGemmCols(x []float32, wRows [][]float32, m, k int) []float32 {
	c := len(wRows)
	w := make([]float32, 0, c*k)
	for _, r := range wRows {
		w = append(w, r...)
	}
	out := make([]float32, m*c)
	cpus := runtime.NumCPU()
	rowChunk := max(1, ceilDiv(m, cpus))
	// Enough column blocks for four tasks a core, none narrower than 16.
	colChunk := max(16, ceilDiv(c, max(1, 4*cpus/ceilDiv(m, rowChunk))))
	var wg sync.WaitGroup
	for i0 := 0; i0 < m; i0 += rowChunk {
		rows := min(rowChunk, m-i0)
		for j0 := 0; j0 < c; j0 += colChunk {
			cols := min(colChunk, c-j0)
			wg.Go(func() {
				blk := make([]float32, rows*cols)
				cpu.RefGEMM(blk, x[i0*k:(i0+rows)*k], w[j0*k:(j0+cols)*k], rows, cols, k)
				for i := range rows {
					copy(out[(i0+i)*c+j0:(i0+i)*c+j0+cols], blk[i*cols:(i+1)*cols])
				}
			})
		}
	}
	wg.Wait()
	return out
}

// zooGemm names one (N, K) a model multiplies by.
type zooGemm struct {
	name string
	n, k int
}

// zooGemmShapes are the dense projections of the zoo's models (engine/zoo.go):
// fused QKV, attention output, fused gate_up and down of the MLP, and the LM
// head; the MoE models' attention projections are dense too.
var zooGemmShapes = []zooGemm{
	{"tiny-llama/qkv", 128, 64}, {"tiny-llama/o", 64, 64}, {"tiny-llama/gate_up", 320, 64}, {"tiny-llama/down", 64, 160}, {"tiny-llama/lm", 512, 64},
	{"tiny-dense/qkv", 384, 256}, {"tiny-dense/gate_up", 1408, 256}, {"tiny-dense/down", 256, 704}, {"tiny-dense/lm", 2048, 256},
	{"tinyllama/qkv", 2560, 2048}, {"tinyllama/o", 2048, 2048}, {"tinyllama/gate_up", 11264, 2048}, {"tinyllama/down", 2048, 5632}, {"tinyllama/lm", 32000, 2048},
	{"llama-3.2-1b/qkv", 3072, 2048}, {"llama-3.2-1b/gate_up", 16384, 2048}, {"llama-3.2-1b/down", 2048, 8192}, {"llama-3.2-1b/lm", 128256, 2048},
	{"llama-3.1-8b/qkv", 6144, 4096}, {"llama-3.1-8b/o", 4096, 4096}, {"llama-3.1-8b/gate_up", 28672, 4096}, {"llama-3.1-8b/down", 4096, 14336}, {"llama-3.1-8b/lm", 128256, 4096},
	{"gpt-oss-20b/qkv", 5120, 2880}, {"gpt-oss-20b/o", 2880, 4096}, {"gpt-oss-20b/lm", 201088, 2880},
	{"qwen3-30b-a3b/qkv", 5120, 2048}, {"qwen3-30b-a3b/o", 2048, 4096}, {"qwen3-30b-a3b/lm", 151936, 2048},
}

// sampleCols picks the columns checked against the CPU: the first tile, the
// last 128 (the N edge) and 64 at random.
func sampleCols(t testing.TB, n int) []int {
	r := newRand(t)
	var cols []int
	for j := 0; j < min(n, 64); j++ {
		cols = append(cols, j)
	}
	for j := max(0, n-128); j < n; j++ {
		cols = append(cols, j)
	}
	for range 64 {
		cols = append(cols, r.IntN(n))
	}
	slices.Sort(cols)
	return slices.Compact(cols)
}

func pick(y []float32, m, n int, cols []int) []float32 {
	out := make([]float32, 0, m*len(cols))
	for i := range m {
		for _, j := range cols {
			out = append(out, y[i*n+j])
		}
	}
	return out
}

// TestGemmZoo checks the own GEMM (on Hopper its warpgroup MMA) and
// cuBLASLt at every dense zoo shape and decode/prefill M against the CPU on sampled columns, and against each
// other on every output. Operands are filled on the device from a fresh
// seed; the reference reads back exactly what the GPU multiplied.
func TestGemmZoo(t *testing.T) {
	for _, dt := range dtypes {
		for _, sh := range zooGemmShapes {
			t.Run(fmt.Sprintf("%s/%s_N%d_K%d", dt, sh.name, sh.n, sh.k), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					checkGemmZoo(t, g, dt, sh, []int{1, 2, 8, 17, 64, 128, 136, 144, 160, 176, 192, 200, 224, 256, 300, 384, 520, 777})
				})
			})
		}
	}
}

// TestGemmEdges covers shapes off every tile boundary (M, N, K not multiples
// of the tiles; odd N) against a full CPU reference.
func TestGemmEdges(t *testing.T) {
	for _, dt := range dtypes {
		for _, n := range []int{8, 24, 72, 1000, 4097} {
			for _, k := range []int{8, 40, 200, 2056} {
				t.Run(fmt.Sprintf("%s/N%d_K%d", dt, n, k), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) { checkGemmEdges(t, g, dt, n, k) })
				})
			}
		}
	}
}

// TestGemmMMASync runs TestGemmZoo's and TestGemmEdges's checks on the
// mma.sync tiles (gemm.cu) where the default is the warpgroup MMA
// (gemm_wgmma.cu: Hopper, XRUN_CUDA_WGMMA), and on the warpgroup MMA where
// the switch turned it off; elsewhere TestGemmZoo and TestGemmEdges check
// the mma.sync tiles already. The M cover both wgmma configurations (64
// rows up to M = 64, 128 above) and split-K.
func TestGemmMMASync(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("only Hopper has a second tensor-core GEMM (the warpgroup MMA)")
	}
	other := func(g *GPU, fn func()) {
		defer keepSwitches(g)()
		g.sw.CUDAWgmma = !g.sw.CUDAWgmma
		fn()
	}
	for _, dt := range dtypes {
		for _, sh := range zooGemmShapes {
			t.Run(fmt.Sprintf("%s/%s_N%d_K%d", dt, sh.name, sh.n, sh.k), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					other(g, func() { checkGemmZoo(t, g, dt, sh, []int{8, 17, 64, 65, 128, 200, 256}) })
				})
			})
		}
		for _, n := range []int{8, 24, 72, 1000, 4097} {
			for _, k := range []int{8, 40, 200, 2056} {
				t.Run(fmt.Sprintf("%s/N%d_K%d", dt, n, k), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) { other(g, func() { checkGemmEdges(t, g, dt, n, k) }) })
				})
			}
		}
	}
}

// TestGemmWgmmaTiles forces each warpgroup-MMA tile (XRUN_CUDA_WGMMA_TILE)
// on a few zoo shapes and the edge shapes, 16-bit and E4M3: the tile M
// does not choose (wg2w, and wg1 above 64 rows) must be right too.
func TestGemmWgmmaTiles(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("the warpgroup MMA is Hopper's (sm_90)")
	}
	var paths []gemmPath
	for _, tile := range []string{"wg1", "wg2", "wg2w"} {
		paths = append(paths, gemmPath{tile, func(sw *model.Switches) {
			sw.CUDAWgmma, sw.CUDAWgmmaFP8, sw.CUDAWgmmaTile = true, true, tile
		}})
	}
	checkGemmForced(t, paths, []int{8, 65, 200, 256}, []DType{BF16}, [][2]int{{4097, 2056}})
}

// forcedGemmShapes are the zoo shapes (and an odd one) the GEMM tests that
// force a kernel path check.
var forcedGemmShapes = []zooGemm{{"tinyllama/qkv", 2560, 2048}, {"tinyllama/down", 2048, 5632}, {"llama-3.1-8b/qkv", 6144, 4096}, {"odd", 1000, 208}}

// gemmPath is one own-GEMM path a check forces through the switches.
type gemmPath struct {
	name string
	set  func(sw *model.Switches)
}

// checkGemmForced checks every path of paths on forcedGemmShapes (the 16-bit
// checks at ms in every dtype, and the E4M3 one) and on edges (in each of
// edgeDTs), as subtests <shape>/<path> and edges/<path>. Each shape's
// operands and its CPU and cuBLASLt references are made once, from a fresh
// seed, and every path multiplies the same ones: the references do not
// depend on the path and were most of the check's time when each path made
// its own (TestGemmTMA's 16 paths: 950 CPU-seconds of reference GEMMs).
func checkGemmForced(t *testing.T, paths []gemmPath, ms []int, edgeDTs []DType, edges [][2]int) {
	forEach := func(t *testing.T, check func(t testing.TB, g *GPU)) {
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					defer keepSwitches(g)()
					p.set(&g.sw)
					check(t, g)
				})
			})
		}
	}
	for _, sh := range forcedGemmShapes {
		t.Run(fmt.Sprintf("%s_N%d_K%d", sh.name, sh.n, sh.k), func(t *testing.T) {
			var zoo []*gemmZooCheck
			var f8 *gemmFP8ZooCheck
			do(t, func(t testing.TB, g *GPU) {
				for _, dt := range dtypes {
					zoo = append(zoo, newGemmZooCheck(t, g, dt, sh, ms))
				}
				f8 = newGemmFP8ZooCheck(t, g, sh)
			})
			forEach(t, func(t testing.TB, g *GPU) {
				for _, c := range zoo {
					c.check(t, g)
				}
				f8.check(t, g)
			})
		})
	}
	t.Run("edges", func(t *testing.T) {
		var checks []*gemmEdgeCheck
		do(t, func(t testing.TB, g *GPU) {
			for _, dt := range edgeDTs {
				for _, e := range edges {
					checks = append(checks, newGemmEdgeCheck(t, g, dt, e[0], e[1]))
				}
			}
		})
		forEach(t, func(t testing.TB, g *GPU) {
			for _, c := range checks {
				c.check(t, g)
			}
		})
	})
}

// checkGemmZoo is TestGemmZoo's check of one shape at the given M.
func checkGemmZoo(t testing.TB, g *GPU, dt DType, sh zooGemm, ms []int) {
	newGemmZooCheck(t, g, dt, sh, ms).check(t, g)
}

// gemmZooCheck is one shape's random operands on the device with, at each
// M, the CPU's product on sampled columns and cuBLASLt's on every output.
type gemmZooCheck struct {
	dt         DType
	sh         zooGemm
	ms, cols   []int
	x, w       Buffer
	refs, blas [][]float32
}

// newGemmZooCheck fills the operands from a fresh seed, makes the
// references and checks cuBLASLt's product against the CPU's.
func newGemmZooCheck(t testing.TB, g *GPU, dt DType, sh zooGemm, ms []int) *gemmZooCheck {
	r := newRand(t)
	es := dt.Size()
	maxM := slices.Max(ms)
	c := &gemmZooCheck{dt: dt, sh: sh, ms: ms, cols: sampleCols(t, sh.n)}
	c.w, c.x = devPoisoned(t, g, dt, sh.n*sh.k), devPoisoned(t, g, dt, maxM*sh.k)
	if err := g.RandomFill(g.Stream, dt, c.w, r.Uint64(), 0, 0.1); err != nil {
		t.Fatal(err)
	}
	if err := g.RandomFill(g.Stream, dt, c.x, r.Uint64(), 0, 1); err != nil {
		t.Fatal(err)
	}
	wRows := make([][]float32, len(c.cols))
	for i, j := range c.cols {
		wRows[i] = download(t, g, dt, c.w.Slice(j*sh.k*es, sh.k*es), sh.k)
	}
	xAll := download(t, g, dt, c.x, maxM*sh.k)
	lt, err := g.BlasLt()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		ref := refGemmCols(xAll[:m*sh.k], wRows, m, sh.k)
		y := devPoisoned(t, g, dt, m*sh.n)
		if err := lt.Matmul(g.Stream, dt, y, c.x, c.w, m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		blas := download(t, g, dt, y, m*sh.n)
		checkRel(t, fmt.Sprintf("%s cuBLASLt M=%d vs CPU", dt, m), pick(blas, m, sh.n, c.cols), ref)
		c.refs, c.blas = append(c.refs, ref), append(c.blas, blas)
	}
	return c
}

// check runs the own GEMM, as the switches choose, at each M against the
// CPU and cuBLASLt.
func (c *gemmZooCheck) check(t testing.TB, g *GPU) {
	sh := c.sh
	for i, m := range c.ms {
		y := devPoisoned(t, g, c.dt, m*sh.n)
		if err := g.Gemm(g.Stream, c.dt, y, c.x, c.w, m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		own := download(t, g, c.dt, y, m*sh.n)
		checkRel(t, fmt.Sprintf("%s own M=%d vs CPU", c.dt, m), pick(own, m, sh.n, c.cols), c.refs[i])
		checkRel(t, fmt.Sprintf("%s own vs cuBLASLt M=%d, all outputs", c.dt, m), own, c.blas[i])
	}
}

// checkGemmEdges is TestGemmEdges's check of one N and K.
func checkGemmEdges(t testing.TB, g *GPU, dt DType, n, k int) {
	newGemmEdgeCheck(t, g, dt, n, k).check(t, g)
}

// gemmEdgeMs are the M checkGemmEdges multiplies at: every tile boundary's
// neighbours.
var gemmEdgeMs = []int{1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 33, 65, 100, 129, 200, 256}

// gemmEdgeCheck is one N, K's random W and, at each of gemmEdgeMs, a
// random X and the CPU's product on every output.
type gemmEdgeCheck struct {
	dt   DType
	n, k int
	w    Buffer
	xs   []Buffer
	refs [][]float32
}

func newGemmEdgeCheck(t testing.TB, g *GPU, dt DType, n, k int) *gemmEdgeCheck {
	r := newRand(t)
	wv := randVals(r, dt, n*k, 0.5)
	c := &gemmEdgeCheck{dt: dt, n: n, k: k, w: devUpload(t, g, dt, wv)}
	wRows := rowsOf(wv, k)
	for _, m := range gemmEdgeMs {
		xv := randVals(r, dt, m*k, 1)
		c.xs = append(c.xs, devUpload(t, g, dt, xv))
		c.refs = append(c.refs, refGemmCols(xv, wRows, m, k))
	}
	return c
}

func (c *gemmEdgeCheck) check(t testing.TB, g *GPU) {
	for i, m := range gemmEdgeMs {
		y := devPoisoned(t, g, c.dt, m*c.n)
		if err := g.Gemm(g.Stream, c.dt, y, c.xs[i], c.w, m, c.n, c.k); err != nil {
			t.Fatal(err)
		}
		checkRel(t, fmt.Sprintf("%s N=%d K=%d own M=%d", c.dt, c.n, c.k, m), download(t, g, c.dt, y, m*c.n), c.refs[i])
	}
}

func TestPlanGemm(t *testing.T) {
	// Pure host logic: runs everywhere.
	for _, c := range []struct {
		m, n, k   int
		cfg       string
		minSplits int
		maxSplits int
	}{
		{1, 2048, 2048, "s", 2, 8},
		{1, 32000, 2048, "s", 1, 1},
		{64, 2048, 5632, "m", 2, 16},
		{256, 32000, 2048, "l", 1, 1},
		{256, 2048, 2048, "m", 2, 4},
		{3, 64, 8, "s", 1, 1},
		{64, 2048, 5632, "wg1", 2, 16},
		{65, 2560, 2048, "wg2", 2, 8},
		{256, 11264, 2048, "wg2w", 1, 2},
		{256, 32000, 2048, "wg2w", 1, 1},
		{64, 4096, 14336, "f8_wg1", 2, 16},
		{2048, 6144, 4096, "f8_wg2", 1, 1},
	} {
		p := planGemm(c.m, c.n, c.k, 132, GemmWorkspaceBytes, 0)
		if strings.HasPrefix(c.cfg, "f8_") {
			p = planGemmWG(c.m, c.n, c.k, 132, GemmWorkspaceBytes, true, "auto", 0)
		} else if strings.HasPrefix(c.cfg, "wg") {
			p = planGemmWG(c.m, c.n, c.k, 132, GemmWorkspaceBytes, false, "auto", 0)
		}
		kt := ceilDiv(c.k, p.cfg.bk)
		if p.cfg.name != c.cfg || p.splits < c.minSplits || p.splits > c.maxSplits || p.kps*p.splits < kt || p.kps*(p.splits-1) >= kt {
			t.Errorf("planGemm(%d, %d, %d) = %+v; want config %s, %d..%d splits covering %d k-tiles with none empty",
				c.m, c.n, c.k, p, c.cfg, c.minSplits, c.maxSplits, kt)
		}
	}
}

// h100Slots is an H100 80GB HBM3's driver's count of places
// (cuOccupancyMaxActiveClusters, TestTMASlots) for the tiles of one block
// a multiprocessor in clusters of 1..8; the others as uniformSlots counts.
func h100Slots(c tmaConfig, s int) int {
	if c.perSM != 1 {
		return uniformSlots(132, c, s)
	}
	return [...]int{0, 132, 132, 117, 120, 110, 102, 105, 120}[max(s, 1)]
}

// h100Device is an H100's 132 multiprocessors for planGemmTMA, with slots
// (nil: uniformSlots) and its HBM's rate.
func h100Device(slots func(tmaConfig, int) int) tmaDevice {
	return tmaDevice{sms: 132, slots: slots, unitBytes: tmaUnitBytes("NVIDIA H100 80GB HBM3")}
}

// TestBatchPlan: on an H100's (and H200's) cluster places, where clusters
// of three fit 117 blocks, not 132, Qwen3-30B-A3B's qkv at M = 192 splits
// 192 x 128 two ways into 80 blocks, short of two thirds of a round, and
// batchPlan leaves it to 64 x 176 (uniform places split it three ways, 11
// k-tiles a block, which it leaves too); Llama-3.1-8B's qkv, 96 blocks of
// 32 k-tiles, it takes.
func TestBatchPlan(t *testing.T) {
	split := func(m, n, k int) func(tmaConfig) tmaPlan {
		return func(c tmaConfig) tmaPlan { return splitGemmTMA(c, m, n, k, 132, h100Slots, false, 0) }
	}
	if p := split(192, 5120, 2048)(tmaConfigs["wg3"]); p.splits != 2 {
		t.Fatalf("Qwen3-30B-A3B's qkv on wg3: split %d, want 2", p.splits)
	}
	if p, ok := batchPlan(192, 5120, 2048, false, split(192, 5120, 2048), h100Slots); ok {
		t.Errorf("Qwen3-30B-A3B's qkv at 192: batchPlan took %v, 80 blocks", p)
	}
	if p, ok := batchPlan(192, 6144, 4096, false, split(192, 6144, 4096), h100Slots); !ok || p.cfg.name != "wg3" || p.splits != 2 {
		t.Errorf("Llama-3.1-8B's qkv at 192: batchPlan %v, %v; want wg3/2", p, ok)
	}
	if p := planGemmTMA(192, 5120, 2048, h100Device(h100Slots), false, "auto", 0); p.cfg.name != "wg1w" {
		t.Errorf("Qwen3-30B-A3B's qkv at 192: %v, want wg1w", p)
	}
}

// TestPlanGemmTMA checks the TMA kernels' plans: the tile by M, splits
// within a cluster, every block with k-tiles, no split where the tiles
// alone fill the GPU (prefill), and a split where a decode's tiles would
// leave most multiprocessors idle.
func TestPlanGemmTMA(t *testing.T) {
	for _, c := range []struct {
		m, n, k    int
		fp8        bool
		tile, cfg  string
		waves      int
		minS, maxS int
	}{
		{64, 2560, 2048, false, "wg1", "wg1", 0, 2, 8},
		{64, 32000, 2048, false, "auto", "wg1", 0, 1, 1},
		{256, 2560, 2048, false, "wide", "wg2", 0, 3, 3},    // 120 blocks in clusters of 3 fit 132 places, not 80 in twos
		{128, 2560, 2048, false, "wide", "wg2", 0, 6, 6},    // 120 blocks in sixes, not 80 in fours
		{128, 11264, 2048, false, "wide", "wg2m", 0, 2, 2},  // 118 blocks, one wave, where 128 x 128 split four ways takes three
		{256, 11264, 2048, false, "wide", "wg2m", 0, 1, 1},  // 118 tiles: one wave, where 128 x 128 needs two
		{256, 11264, 2048, false, "auto", "wg2f", 0, 1, 1},  // 128 tiles of 128 x 176 fill more of the GPU than 118
		{128, 11264, 2048, false, "auto", "wg1w", 0, 1, 1},  // 128 tiles of 64 x 176: one round of 132, 0.97 full
		{256, 5120, 2048, false, "auto", "w2x96", 0, 1, 1},  // 108 of 132 (Qwen3-30B-A3B's qkv, pairPlan)
		{256, 6144, 4096, false, "auto", "w2x96", 0, 1, 1},  // 140 tiles of 64 x 176: two rounds; 128 of 128 x 96 (pairPlan)
		{256, 4096, 4096, false, "auto", "w2x64", 0, 1, 1},  // 96 tiles of 64 x 176: a round 0.73 full; 128 of 128 x 64
		{64, 11264, 2048, false, "auto", "wg1m", 0, 1, 1},   // at tmaNarrowRows the cost model's narrow tiles
		{2048, 11264, 2048, false, "auto", "wg2w", 0, 1, 1}, // prefill: 128 x 176 is weighed at decode sizes only
		{256, 2048, 5632, false, "auto", "wg2", 0, 4, 4},    // 128 x 128 split four ways fills the GPU
		{2048, 2560, 2048, false, "auto", "wg2m", 0, 1, 1},  // 224 tiles: two full waves against 160 of 128 x 256 in two
		{2048, 32000, 2048, false, "auto", "wg2w", 0, 1, 1}, // 16 waves of 128 x 256 against 21 of 128 x 192
		{256, 11264, 2048, false, "wg2m", "wg2m", 0, 1, 1},
		{8192, 2560, 2048, false, "auto", "wg2w", 0, 1, 1},
		{96, 2048, 5632, false, "auto", "wg2", 0, 2, 8},
		{100, 2048, 5632, false, "auto", "p1s", 0, 2, 2}, // alternating, 128 blocks of 44 k-tiles
		{256, 6144, 4096, true, "auto", "w2x96", 0, 1, 1},
		{2048, 28672, 4096, true, "auto", "wg2w", 0, 1, 1}, // codes: 128 x 256 where its rounds fill
		{2048, 2048, 2048, true, "auto", "wg2", 0, 1, 1},   // 128 tiles of 128 x 256: one round, no persistent blocks
		{2048, 5120, 2048, true, "auto", "wg2", 0, 1, 1},   // 320: the last of three rounds 42 % empty
		{256, 28672, 4096, true, "auto", "wg2w", 0, 1, 1},  // two row tiles: 224 tiles of 128 x 256, 0.85 of two rounds as 128 x 128's 448
		{128, 28672, 4096, true, "auto", "wg2", 0, 1, 1},   // one row tile: codes keep 128 x 128
		{256, 16384, 2048, true, "auto", "wg2", 0, 1, 1},   // 128 tiles of 128 x 256: fewer than the places
		{256, 11264, 2048, true, "auto", "wg2f", 0, 1, 1},  // 128 tiles of 128 x 176 in one round, not 176 of 128 x 128 in two
		{256, 5120, 2048, true, "auto", "w2x96", 0, 1, 1},  // 108 tiles of 128 x 96 (pairPlan)
		{512, 11264, 2048, true, "auto", "wg2", 0, 1, 1},   // above tmaSmallRows codes weigh no 128 x 176
		{256, 2560, 2048, false, "wg1", "wg1", 0, 1, 8},
		{256, 2560, 2048, false, "wg2w", "wg2w", 1, 8, 8},  // 132 / 20 blocks a tile, rounded up to a power of two
		{256, 32000, 2048, false, "auto", "wg2w", 0, 1, 1}, // 250 tiles fill the GPU unsplit
		{17, 72, 40, false, "auto", "wg1", 0, 1, 1},        // one k-tile: nothing to split
		// The narrow tiles, K unsplit: TinyLlama's qkv and o at M = 256,
		// one wave, and up to 128 rows; from 97 to 128 rows o and down
		// on the alternating 64 x 64 split two ways (kpPlan; 128 blocks),
		// Qwen3-30B-A3B's qkv on 64 x 96 unsplit (108, in clusters of the
		// two row tiles: narrowCluster), and over 49-64 k-tiles 64 x 64
		// unsplit (Llama-3.1-8B's and GPT-OSS-20B's o). Gate_up and the
		// LM head take too many narrow tiles.
		{256, 2560, 2048, false, "auto", "p1m", 0, 1, 1}, // wg1n's 128 blocks onto 108 of 64 x 96 on alternating consumers (kpWide)
		// 64 x 64 unsplit on two consumers of 32 columns each (h1s).
		{256, 2048, 2048, false, "auto", "h1s", 0, 1, 1},
		{96, 2560, 2048, false, "auto", "h1s", 0, 1, 1},
		{128, 2560, 2048, false, "auto", "h1s", 0, 1, 1},
		{128, 2048, 2048, false, "auto", "p1s", 0, 2, 2},
		{100, 2560, 2048, false, "auto", "h1s", 0, 1, 1},
		{128, 5120, 2048, false, "auto", "p1mc21", 0, 1, 1},
		{128, 2048, 5632, false, "auto", "p1s", 0, 2, 2},
		{128, 4096, 4096, false, "auto", "p1s", 0, 1, 1}, // 128 blocks of 64 k-tiles
		{112, 2880, 4096, false, "auto", "p1s", 0, 1, 1},
		{128, 2048, 8192, false, "auto", "wg2", 0, 2, 8},    // Llama-3.2-1B's down: 128 k-tiles, past p1s's 64
		{128, 6144, 4096, false, "auto", "p1mc21", 0, 1, 1}, // wg1m (p1m's 128 blocks would run 64 k-tiles each), W multicast to the pair (narrowCluster)
		// One row tile at 129-192 rows (batchPlan): 160 x 128 swapped up
		// to 160 rows, 192 x 128 above (176 x 128 swapped where that
		// splits K, at 161-176); the LM head unsplit (250 tiles),
		// Llama-3.1-8B's o split four ways (16 k-tiles a block), its
		// down before s2x48 (swapTakes); not TinyLlama's gate_up, whose
		// split would leave 8-11 (at 129-160 two row tiles of 80 by 192
		// of W instead, 118 blocks unsplit), nor Qwen3-30B-A3B's qkv at
		// 192 (a split of 11, 64 x 176 unsplit instead). At 129-160 the
		// narrow outputs over long K split 80 x 128 (TinyLlama's down).
		{192, 32000, 2048, false, "auto", "wg3", 0, 1, 1},
		{176, 32000, 2048, false, "auto", "wg3", 0, 1, 1},
		{160, 32000, 2048, false, "auto", "s2x160", 0, 1, 1},
		{129, 32000, 2048, false, "auto", "s2x160", 0, 1, 1},
		{128, 32000, 2048, false, "auto", "wg2w", 0, 1, 1},
		{193, 32000, 2048, false, "auto", "s2x200", 0, 1, 1}, // widePlan
		{225, 32000, 2048, false, "auto", "wg2w", 0, 1, 1},
		{192, 4096, 4096, false, "auto", "wg3", 0, 4, 4},
		{160, 4096, 4096, false, "auto", "s2x160", 0, 4, 4},
		{160, 2048, 8192, false, "auto", "s2x160", 0, 4, 8},
		{192, 11264, 2048, false, "auto", "wg2f", 0, 1, 1},
		{160, 11264, 2048, false, "auto", "s3x80", 0, 1, 1},
		{176, 4096, 4096, false, "auto", "s2x176", 0, 2, 8},
		{176, 11264, 2048, false, "auto", "s3x88", 0, 1, 1},
		{160, 2048, 5632, false, "auto", "s2x80", 0, 2, 8},
		{160, 5120, 2880, false, "auto", "s2x80", 0, 1, 1}, // 80 blocks of 132 places, K unsplit
		{160, 6144, 4096, false, "auto", "s2x80", 0, 1, 1},
		{160, 2048, 5632, true, "auto", "s2x80", 0, 2, 8}, // codes alike
		{160, 5120, 2048, true, "auto", "s2x80", 0, 1, 1},
		{160, 11264, 2048, true, "auto", "s3x80", 0, 1, 1},
		{176, 5120, 2048, true, "auto", "s2x88", 0, 1, 1}, // above 160 rows the 88-row tiles
		{192, 5120, 2048, true, "auto", "wg2", 0, 1, 1},   // above 176 neither
		{192, 5120, 2048, false, "auto", "wg1w", 0, 1, 1},
		{160, 32000, 2048, true, "auto", "s2x160", 0, 1, 1}, // codes alike
		{192, 6144, 4096, true, "auto", "wg3", 0, 2, 2},     // 32 k-tiles of codes: two ways, 16 a block
		{160, 4096, 4096, true, "auto", "wg1m", 0, 1, 1},    // split two ways 64 blocks, three ways 11 k-tiles
		{160, 32000, 2048, false, "wide", "wg2w", 0, 1, 1},
		{257, 2560, 2048, false, "auto", "w2x64", 0, 1, 1}, // above tmaSmallRows: 120 tiles in one round (roundPlan)
		{257, 2560, 2048, false, "wide", "wg2", 0, 1, 8},   // the choice by M without it
		{2048, 2560, 2048, false, "wide", "wg2m", 0, 1, 1},
		{64, 2560, 2048, false, "wide", "wg1", 0, 2, 8},
		// Up to M = 32, where 64 x 128 would split K: qkv and o on 64 x
		// 64, gate_up's 118 blocks of 64 x 96; down keeps the split (88
		// k-tiles a narrow block), the LM head fills the GPU on 64 x 128.
		{32, 2560, 2048, false, "auto", "wg1s", 0, 1, 1},
		{32, 2048, 2048, false, "auto", "wg1s", 0, 1, 1},
		{32, 2048, 5632, false, "auto", "wg1", 0, 2, 8},
		// From 33 rows, 64 x 128 eight stages deep where the narrow tiles
		// leave most of the GPU idle, or the split would run on cp.async
		// (tmaPlan.deeper); gate_up keeps its one round of 64 x 96.
		{64, 2560, 2048, false, "auto", "wg1d", 0, 2, 8},
		{64, 2048, 2048, false, "auto", "wg1d", 0, 2, 8},
		{64, 2048, 5632, false, "auto", "wg1d", 0, 2, 8},
		{64, 2048, 2048, false, "wide", "wg1", 0, 2, 8},
		{64, 11264, 2048, false, "auto", "wg1m", 0, 1, 1},
		{33, 11264, 2048, false, "auto", "wg1m", 0, 1, 1},
		{64, 32000, 2048, false, "auto", "wg1", 0, 1, 1},
		{64, 11264, 2048, false, "wide", "wg1", 0, 2, 8},
		{256, 2048, 2048, false, "wide", "wg2", 0, 2, 8},
		{256, 6144, 4096, true, "auto", "w2x96", 0, 1, 1}, // codes on 128 x 96 (pairPlan)
		{256, 2560, 2048, false, "wg1n", "wg1n", 4, 8, 8}, // forced, split as the waves ask: 128 tiles x 4 < 4 a multiprocessor
	} {
		p := planGemmTMA(c.m, c.n, c.k, h100Device(nil), c.fp8, c.tile, c.waves)
		bk := 64
		if c.fp8 {
			bk = 128
		}
		kt := ceilDiv(c.k, bk)
		if p.cfg.name != c.cfg || p.splits < c.minS || p.splits > c.maxS || p.splits > tmaMaxCluster ||
			p.kps*p.splits < kt || p.kps*(p.splits-1) >= kt {
			t.Errorf("planGemmTMA(%d, %d, %d, fp8 %v, %s, waves %d) = %+v; want %s, %d..%d splits covering %d k-tiles with none empty",
				c.m, c.n, c.k, c.fp8, c.tile, c.waves, p, c.cfg, c.minS, c.maxS, kt)
		}
		if sm := p.cfg.smem() * p.cfg.perSM; sm > 227<<10 {
			t.Errorf("%s: %d blocks of %d bytes of shared memory do not fit a multiprocessor", p.cfg.name, p.cfg.perSM, p.cfg.smem())
		}
	}
}

// TestPlanGemmTMASmall checks the narrow-or-split choice up to 32 rows
// (tmaPlan.smallCost; above, tmaPlan.deeper may replace it) on the zoo's
// shapes where BenchmarkGemm timed both at M = 64 on an H100 and an H200,
// each with its HBM's rate: the faster there wins, apart from ties
// (GPT-OSS-20B's o on the H200).
func TestPlanGemmTMASmall(t *testing.T) {
	for _, c := range []struct {
		name       string
		n, k       int
		h100, h200 string // wg1: K split, on the cp.async kernels
	}{
		{"tinyllama/qkv", 2560, 2048, "wg1s", "wg1s"}, {"tinyllama/o", 2048, 2048, "wg1s", "wg1s"},
		{"tinyllama/gate_up", 11264, 2048, "wg1m", "wg1m"}, {"tinyllama/down", 2048, 5632, "wg1", "wg1"},
		{"llama-3.2-1b/qkv", 3072, 2048, "wg1s", "wg1s"}, {"llama-3.2-1b/gate_up", 16384, 2048, "wg1s", "wg1s"},
		{"llama-3.2-1b/down", 2048, 8192, "wg1", "wg1"}, {"llama-3.1-8b/qkv", 6144, 4096, "wg1s", "wg1s"},
		{"llama-3.1-8b/o", 4096, 4096, "wg1s", "wg1s"}, {"llama-3.1-8b/down", 4096, 14336, "wg1s", "wg1"},
		{"gpt-oss-20b/qkv", 5120, 2880, "wg1s", "wg1s"}, {"gpt-oss-20b/o", 2880, 4096, "wg1s", ""},
		{"qwen3-30b-a3b/qkv", 5120, 2048, "wg1s", "wg1s"}, {"qwen3-30b-a3b/o", 2048, 4096, "wg1", "wg1"},
	} {
		for gpu, want := range map[string]string{"NVIDIA H100 80GB HBM3": c.h100, "NVIDIA H200": c.h200} {
			d := tmaDevice{sms: 132, unitBytes: tmaUnitBytes(gpu)}
			for _, m := range []int{17, 32} {
				p := planGemmTMA(m, c.n, c.k, d, false, "auto", 0)
				if want != "" && (p.cfg.name != want || (want == "wg1") != (p.splits > 1)) {
					t.Errorf("%s, %s at M = %d: %s split %d; want %s", gpu, c.name, m, p.cfg.name, p.splits, want)
				}
			}
		}
	}
}

// TestPlanGemmTMASwap: at 129-192 rows the narrow outputs over long K
// (TinyLlama's and Llama-3.2-1B's down, Qwen3-30B-A3B's o) go on the
// swapped 48 x 128 tile, 16-bit and E4M3, K split so its blocks fill the
// GPU, unless batchPlan takes another (Llama-3.2-1B's 16-bit down at 129
// on one row tile, s2x160 split six ways, 22 k-tiles a block; the others
// at 129-176 on two row tiles of 80 or 88, s2x80 or s2x88, E4M3 codes only
// above K = 4,096, at K = 4,096 and below on p1x48, narrowCodes); wider
// outputs, short K, 128 and 256 rows and tile "wide" keep their plans.
func TestPlanGemmTMASwap(t *testing.T) {
	d := h100Device(h100Slots)
	for _, c := range []struct {
		m, n, k int
		want    bool
		batch   [2]bool // batchPlan's tile instead: 16-bit, E4M3
	}{
		{160, 2048, 5632, true, [2]bool{true, true}}, {192, 2048, 5632, true, [2]bool{}}, {129, 2048, 8192, true, [2]bool{true, true}}, {192, 2048, 4096, true, [2]bool{false, true}},
		{160, 2048, 4096, true, [2]bool{true, true}}, {176, 2048, 5632, true, [2]bool{true, true}}, // codes at K = 4,096 on p1x48
		{128, 2048, 5632, false, [2]bool{}}, {256, 2048, 5632, false, [2]bool{}}, // outside the rows
		{192, 4096, 14336, false, [2]bool{true, true}}, {192, 2880, 4096, false, [2]bool{true, false}}, // wider
		{192, 2048, 2048, false, [2]bool{false, true}}, {160, 2560, 2048, false, [2]bool{}}, // short K
	} {
		for i, fp8 := range []bool{false, true} {
			p := planGemmTMA(c.m, c.n, c.k, d, fp8, "auto", 0)
			if _, ok := batchPlan(c.m, c.n, c.k, fp8, func(cfg tmaConfig) tmaPlan { return splitGemmTMA(cfg, c.m, c.n, c.k, 132, d.slots, fp8, 0) }, d.slots); ok != c.batch[i] {
				t.Errorf("M=%d N=%d K=%d fp8 %v: batchPlan %v, want %v", c.m, c.n, c.k, fp8, ok, c.batch[i])
			}
			want := c.want && !c.batch[i]
			if got := p.cfg.name == "s2x48"; got != want {
				t.Errorf("M=%d N=%d K=%d fp8 %v: %s split %d; swapped tile %v, want %v", c.m, c.n, c.k, fp8, p.cfg.name, p.splits, got, want)
			}
			if want && p.cfg.tiles(c.m, c.n)*p.splits > d.slots(p.cfg, p.splits) {
				t.Errorf("M=%d N=%d K=%d fp8 %v: %d blocks of s2x48 in clusters of %d, more than one round", c.m, c.n, c.k, fp8, p.cfg.tiles(c.m, c.n)*p.splits, p.splits)
			}
		}
		if p := planGemmTMA(c.m, c.n, c.k, d, false, "wide", 0); p.cfg.swap {
			t.Errorf("M=%d N=%d K=%d tile wide: %s", c.m, c.n, c.k, p.cfg.name)
		}
	}
}

// TestPlanGemmTMADeeper: at M = 64 on an H200 (an H100's cluster places,
// which the H200's driver counts alike), the zoo's projections take 64 x
// 128 eight stages deep where tmaPlan.deeper's measurements put it below
// the narrow tiles or the cp.async split, in one round of places; the
// rest keep the narrow tiles (the LM heads and Llama-3.1-8B's gate_up
// fill the GPU on 64 x 128 unsplit). E4M3 codes whose 64 x 128 tiles
// split K take the alternating 64 x 64 instead (kpCodes).
func TestPlanGemmTMADeeper(t *testing.T) {
	slots := h100Slots
	d := tmaDevice{sms: 132, slots: slots, unitBytes: tmaUnitBytes("NVIDIA H200")}
	for _, c := range []struct {
		name       string
		n, k       int
		f16, codes string
	}{
		{"tinyllama/qkv", 2560, 2048, "wg1d", "wg1s"}, {"tinyllama/o", 2048, 2048, "wg1d", "wg1s"},
		{"tinyllama/gate_up", 11264, 2048, "wg1m", "wg1m"}, {"tinyllama/down", 2048, 5632, "wg1d", "p1s"},
		{"llama-3.2-1b/qkv", 3072, 2048, "wg1d", "wg1s"}, {"llama-3.2-1b/gate_up", 16384, 2048, "wg1d", "wg1d"},
		{"llama-3.2-1b/down", 2048, 8192, "wg1d", "p1s"}, {"llama-3.1-8b/qkv", 6144, 4096, "wg1s", "wg1s"},
		{"llama-3.1-8b/o", 4096, 4096, "wg1d", "wg1s"}, {"llama-3.1-8b/down", 4096, 14336, "wg1d", "p1s"},
		{"llama-3.1-8b/gate_up", 28672, 4096, "wg1", "wg1"},
		{"gpt-oss-20b/qkv", 5120, 2880, "wg1s", "wg1s"}, {"gpt-oss-20b/o", 2880, 4096, "wg1d", "p1s"},
		{"qwen3-30b-a3b/qkv", 5120, 2048, "wg1s", "wg1s"}, {"qwen3-30b-a3b/o", 2048, 4096, "wg1d", "p1s"},
	} {
		for _, fp8 := range []bool{false, true} {
			want := c.f16
			if fp8 {
				want = c.codes
			}
			p := planGemmTMA(64, c.n, c.k, d, fp8, "auto", 0)
			if p.cfg.name != want {
				t.Errorf("%s at M = 64, fp8 %v: %s split %d; want %s", c.name, fp8, p.cfg.name, p.splits, want)
			}
			if b := p.cfg.tiles(64, c.n) * p.splits; p.cfg.name == "wg1d" && b > slots(p.cfg, p.splits) {
				t.Errorf("%s at M = 64, fp8 %v: %d blocks of wg1d in clusters of %d, %d places", c.name, fp8, b, p.splits, slots(p.cfg, p.splits))
			}
		}
	}
}

// TestPlanGemmTMAClusters: where the GPCs hold fewer clusters than the
// multiprocessors' count suggests (here 31 clusters of 4 blocks, 124
// places, not 132: one GPC of 12), a split whose 128 blocks would need a
// second wave gives way to one that runs in one; and the plans on an
// H100's own counts.
func TestPlanGemmTMAClusters(t *testing.T) {
	gpcs := []int{18, 18, 18, 18, 16, 16, 16, 12}
	slots := func(c tmaConfig, s int) int {
		n := 0
		for _, g := range gpcs {
			n += g * c.perSM / max(s, 1) * max(s, 1)
		}
		return n
	}
	for _, c := range []struct {
		m, n, k int
		cfg     string
		splits  int
	}{
		{256, 2048, 2048, "wg2", 3}, // o: 96 blocks in clusters of 3 (129 places), where a split of four is 128 blocks (124)
		{256, 2048, 5632, "wg2", 3}, // down: 96 blocks of 30 k-tiles, not 88 of 128 x 192 in fours
		{256, 11264, 2048, "wg2m", 1},
	} {
		p := planGemmTMA(c.m, c.n, c.k, h100Device(slots), false, "wide", 0)
		if p.cfg.name != c.cfg || p.splits != c.splits {
			t.Errorf("planGemmTMA(%d, %d, %d) on GPCs %v = %s split %d; want %s split %d", c.m, c.n, c.k, gpcs, p.cfg.name, p.splits, c.cfg, c.splits)
		}
		if blocks := ceilDiv(c.m, p.cfg.rows) * ceilDiv(c.n, p.cfg.bn) * p.splits; blocks > slots(p.cfg, p.splits) {
			t.Errorf("planGemmTMA(%d, %d, %d): %d blocks in clusters of %d, %d places: two waves", c.m, c.n, c.k, blocks, p.splits, slots(p.cfg, p.splits))
		}
	}
	// On an H100's own counts (h100Slots) three blocks a cluster fit fewer
	// places than four, so TinyLlama's qkv at M = 256 (120 blocks in
	// threes) keeps its split of two, where o and down take three.
	// With the decode-sized tiles weighed (auto), at M = 256 qkv and o go
	// to the narrow ones unsplit (qkv's 64 x 80 then to 64 x 96
	// alternating: kpWide), gate_up to 128 x 176, and down keeps its plan;
	// at 128 o and down go to 64 x 64 alternating (kpPlan). 64 x 64
	// unsplit runs on two consumers of half its columns each (h1s).
	for _, c := range []struct {
		m, n, k   int
		tile, cfg string
		splits    int
	}{
		{256, 2560, 2048, "wide", "wg2", 2}, {256, 2048, 2048, "wide", "wg2", 3}, {256, 2048, 5632, "wide", "wg2", 3}, {256, 11264, 2048, "wide", "wg2m", 1},
		{128, 2560, 2048, "wide", "wg2", 5}, {128, 2048, 2048, "wide", "wg2", 6}, {128, 2048, 5632, "wide", "wg2", 6}, {128, 11264, 2048, "wide", "wg2m", 2},
		{256, 2560, 2048, "auto", "p1m", 1}, {256, 2048, 2048, "auto", "h1s", 1}, {256, 2048, 5632, "auto", "wg2", 3}, {256, 11264, 2048, "auto", "wg2f", 1},
		{128, 2560, 2048, "auto", "h1s", 1}, {128, 2048, 2048, "auto", "p1s", 2}, {128, 2048, 5632, "auto", "p1s", 2}, {128, 11264, 2048, "auto", "wg1w", 1},
	} {
		if p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), false, c.tile, 0); p.cfg.name != c.cfg || p.splits != c.splits {
			t.Errorf("planGemmTMA(%d, %d, %d, %s) on an H100's counts = %s split %d; want %s split %d", c.m, c.n, c.k, c.tile, p.cfg.name, p.splits, c.cfg, c.splits)
		}
	}
	if got := uniformSlots(132, tmaConfigs["wg2"], 4); got != 132 {
		t.Errorf("uniformSlots(132, wg2, 4) = %d, want 132", got)
	}
}

// TestTMASlots checks the driver's count of co-resident clustered blocks
// (cuOccupancyMaxActiveClusters) for every TMA tile and split: positive,
// a whole number of clusters, at most the multiprocessors' places; logged,
// since the plans depend on them.
func TestTMASlots(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	do(t, func(t testing.TB, g *GPU) {
		for _, name := range tmaTiles {
			cfg := tmaConfigs[name]
			for _, fp8 := range []bool{false, true} {
				for s := 1; s <= tmaMaxCluster; s++ {
					v := g.tmaSlots(cfg, fp8, s)
					if v <= 0 || v%s != 0 || v > g.Info.SMs*cfg.perSM {
						t.Errorf("%s fp8 %v clusters of %d: %d places; want a positive multiple of %d, at most %d", name, fp8, s, v, s, g.Info.SMs*cfg.perSM)
					}
					t.Logf("%s fp8 %v clusters of %d: %d blocks at once", name, fp8, s, v)
				}
			}
		}
	})
}

// tmaTiles are the TMA GEMM's configurations (tmaConfigs), in the order
// the tests and benchmarks walk them.
var tmaTiles = []string{"wg1", "wg2", "wg2m", "wg2w", "wg2f", "wg1s", "wg1n", "wg1m", "wg1w", "wg1d", "s1x32", "s1x40", "s1x48", "s2x32", "s2x48", "p1s", "p1m", "wg3", "s2x160", "s2x176", "s2x192", "s1x80", "s2x80", "s3x80", "s2x88", "s3x88", "s1x72", "s1x136", "p1x48", "p1x72", "p1x112", "p1x136", "w2x64", "w2x80", "w2x96", "s2x104", "s3x104", "s2x208", "s2x72", "s2x200", "s2x224"}

// TestTMATiles: tmaTiles names every configuration but the clustered
// ones (which no split takes: TestGemmTMAClusters checks them) and the
// halves (which have no epilogues: TestGemmTMAHalves checks them, clustered
// or not), tmaClusterTiles and tmaHalfTiles those, each once, so that a
// new one is checked and timed with the rest; tmaPersist and tmaMulticast
// name only configurations.
func TestTMATiles(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range slices.Concat(tmaTiles, tmaClusterTiles, tmaHalfTiles) {
		_, cl := tmaClusters[name]
		if _, ok := tmaConfigs[name]; !ok || seen[name] || (cl && !tmaHalves[name]) != slices.Contains(tmaClusterTiles, name) || tmaHalves[name] != slices.Contains(tmaHalfTiles, name) {
			t.Errorf("tmaTiles: %q unknown, twice or in the wrong list", name)
		}
		seen[name] = true
	}
	if len(seen) != len(tmaConfigs) {
		t.Errorf("tmaTiles has %d of the %d configurations", len(seen), len(tmaConfigs))
	}
	for _, set := range []map[string]bool{tmaPersist, tmaMulticast} {
		for name := range set {
			if !seen[name] {
				t.Errorf("%q in tmaPersist or tmaMulticast is no configuration", name)
			}
		}
	}
	// Each persistent configuration's persistent family instantiates it.
	for name := range tmaPersist {
		p := tmaPlan{cfg: tmaConfigs[name], splits: 1, kps: 4, blocks: 132}
		src, err := kernelFS.ReadFile("kernels/" + p.module() + ".cu")
		if err != nil || !strings.Contains(string(src), "("+name+", ") {
			t.Errorf("%s persistent: not instantiated in %s.cu (%v)", name, p.module(), err)
		}
	}
	// Each configuration's family instantiates it (its name a macro's
	// first argument there).
	for name, cfg := range tmaConfigs {
		src, err := kernelFS.ReadFile("kernels/" + cfg.module() + ".cu")
		if err != nil || !strings.Contains(string(src), "("+name+", ") {
			t.Errorf("%s: not instantiated in %s.cu (%v)", name, cfg.module(), err)
		}
	}
}

// TestPDLTMAFamilies: every family made only of gemm_tma.cuh's template
// (no kernel of its own) is launched with programmatic dependent launch,
// since the template waits (pdl_enter) before its first load of X; a new
// family left out of pdlFamilies would lose that overlap unnoticed.
func TestPDLTMAFamilies(t *testing.T) {
	n := 0
	for _, fam := range kernelFamilies() {
		src, err := kernelSource(fam)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, `#include "gemm_tma.cuh"`) || strings.Contains(src, "__global__") {
			continue
		}
		n++
		if !pdlFamilies[fam] {
			t.Errorf("%s: gemm_tma.cuh's kernels only, not in pdlFamilies", fam)
		}
	}
	if n < 8 {
		t.Errorf("%d families of gemm_tma.cuh's kernels, want the 8 or more there are", n)
	}
}

// TestTMAPolicy checks which launches XRUN_CUDA_GEMM_TMA=auto puts on the
// TMA kernels (pure host logic): unsplit ones, and splits of the 128-row
// tiles; `1` takes all, `0` none.
func TestTMAPolicy(t *testing.T) {
	g := &GPU{Info: DeviceInfo{Major: 9, SMs: 132}, tma: true, launchEx: true,
		sw: model.Switches{CUDAWgmma: true, CUDAWgmmaTile: "auto", CUDAGemmTMA: "auto"}}
	for _, c := range []struct {
		m, n, k int
		fp8     bool
		want    bool
	}{
		{2048, 2560, 2048, false, true}, // prefill: unsplit
		{64, 32000, 2048, false, true},  // the LM head fills the GPU unsplit
		{64, 2560, 2048, false, true},   // 64 x 64 unsplit, where 64 x 128 would split
		{32, 2048, 5632, false, false},  // down: 64-row split on cp.async
		{64, 2048, 5632, false, true},   // from 33 rows its split on 64 x 128 eight stages deep
		{128, 2560, 2048, false, true},  // 16-bit 128-row split: TMA
		{256, 2560, 2048, false, true},
		{128, 6144, 4096, true, true}, // codes: the 128-row split on TMA
		{64, 4096, 4096, true, true},  // codes: 64 x 64 unsplit, where 64 x 128 would split
		{32, 2048, 8192, true, false}, // codes: 64-row split on cp.async
	} {
		_, got := g.tmaPlanFor(c.m, c.n, c.k, c.fp8)
		if got != c.want {
			t.Errorf("tmaPlanFor(%d, %d, %d, fp8 %v) uses TMA: %v, want %v", c.m, c.n, c.k, c.fp8, got, c.want)
		}
	}
	for mode, want := range map[string]bool{"1": true, "0": false} {
		g.sw.CUDAGemmTMA = mode
		if _, got := g.tmaPlanFor(64, 2048, 5632, false); got != want {
			t.Errorf("XRUN_CUDA_GEMM_TMA=%s: TMA %v, want %v", mode, got, want)
		}
	}
}

// TestTMAGrid: the row tiles run along X, so that the blocks of one
// column tile of W are launched together; a split along Z; too many
// column tiles refused.
func TestTMAGrid(t *testing.T) {
	p := tmaPlan{cfg: tmaConfigs["wg2w"], splits: 2, kps: 16}
	g, err := p.grid(256, 32000, 256)
	if err != nil || g != (Dim3{X: 2, Y: 125, Z: 2}) {
		t.Errorf("grid(256, 32000) = %+v, %v; want 2 x 125 x 2", g, err)
	}
	if g, err := p.grid(300, 1000, 128); err != nil || g.X != 3 || g.Y != 8 {
		t.Errorf("grid(300, 1000, 128) = %+v, %v; want 3 x 8", g, err)
	}
	if _, err := p.grid(64, 65536*256+1, 256); err == nil {
		t.Error("65537 column tiles: no error")
	}
}

// TestEpilogueRows: from EpilogueRows up every 16-bit launch of the zoo's
// decode shapes (the gate_up GEMM as its fused 2n rows) is on the TMA
// kernels, so a GEMM the backend holds back for the epilogue never falls
// back to the GEMM and the op apart; and the count is 0 where the
// switches keep splits off TMA.
func TestEpilogueRows(t *testing.T) {
	shapes := [][2]int{{2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}
	for _, c := range []struct {
		tma, tile string
		want      int
	}{
		{"auto", "auto", tmaNarrowRows + 1}, {"1", "auto", 1}, {"0", "auto", 0},
		{"auto", "wg1", 0}, {"auto", "wg2", 1}, {"auto", "wg2m", 1}, {"auto", "wg2w", 1},
		{"auto", "wg2f", 1}, {"auto", "wg1s", 1}, {"auto", "wg1n", 1}, {"auto", "wg1m", 1}, {"auto", "wg1w", 1}, {"auto", "wg1d", 1}, {"auto", "s1x40", 1}, {"auto", "s2x32", 1},
		{"auto", "wide", tmaNarrowRows + 1},
	} {
		g := &GPU{Info: DeviceInfo{Major: 9, SMs: 132}, tma: true, launchEx: true,
			sw: model.Switches{CUDAWgmma: true, CUDAWgmmaTile: c.tile, CUDAGemmTMA: c.tma}}
		r := g.EpilogueRows()
		if r != c.want {
			t.Errorf("XRUN_CUDA_GEMM_TMA=%s XRUN_CUDA_WGMMA_TILE=%s: EpilogueRows %d, want %d", c.tma, c.tile, r, c.want)
		}
		for m := max(r, 1); r > 0 && m <= 1024; m++ {
			for _, s := range shapes {
				if _, on := g.tmaPlanFor(m, s[0], s[1], false); !on {
					t.Fatalf("XRUN_CUDA_GEMM_TMA=%s XRUN_CUDA_WGMMA_TILE=%s: M=%d N=%d K=%d not on TMA, EpilogueRows %d", c.tma, c.tile, m, s[0], s[1], r)
				}
			}
		}
	}
	if r := (&GPU{Info: DeviceInfo{Major: 8, SMs: 108}, sw: model.Switches{CUDAWgmma: true, CUDAGemmTMA: "1"}}).EpilogueRows(); r != 0 {
		t.Errorf("Ampere: EpilogueRows %d, want 0", r)
	}
}

// TestGemmTMA runs the own GEMM on the TMA kernels at every launch
// (XRUN_CUDA_GEMM_TMA=1: every tile, split or not) and on none (=0),
// 16-bit and E4M3, against the CPU (checkGemmZoo, checkGemmFP8Zoo,
// checkGemmEdges); the default mix is TestGemmZoo's and TestGemmEdges's.
func TestGemmTMA(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	var paths []gemmPath
	for _, tma := range []string{"1", "0"} {
		for _, tile := range append(append([]string{"auto"}, tmaTiles...), "wide") {
			for _, waves := range []int{0, 1, 4} {
				if tma == "0" && (waves != 0 || tile != "auto") {
					continue // the cp.async kernels' tiles and splits: TestGemmWgmmaTiles
				}
				paths = append(paths, gemmPath{fmt.Sprintf("tma=%s/%s/waves=%d", tma, tile, waves), func(sw *model.Switches) {
					sw.CUDAWgmma, sw.CUDAWgmmaFP8, sw.CUDAGemmTMA = true, true, tma
					sw.CUDAWgmmaTile, sw.CUDAGemmWaves = tile, waves
				}})
			}
		}
	}
	checkGemmForced(t, paths, []int{8, 65, 256, 1031}, dtypes, [][2]int{{4097, 2056}, {72, 40}})
}

// TestBlasLtReuse: with XRUN_CUDA_LT_REUSE, untimed M of one power-of-two
// bucket after the first reuse its algorithm (checked by cuBLASLt) instead
// of asking the heuristic, and their products still match the CPU; a
// timed decode size and M = 1 never do. On a fresh handle, so that the
// count is this test's own.
func TestBlasLtReuse(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		defer keepSwitches(g)()
		g.sw.CUDALtReuse = true
		if g.blas != nil {
			if err := g.blas.close(); err != nil {
				t.Fatal(err)
			}
		}
		lt, err := g.BlasLt()
		if err != nil {
			t.Fatal(err)
		}
		lt.TuneOnly([]int{1, 8})
		defer func() {
			if err := lt.close(); err != nil {
				t.Fatal(err)
			}
		}()
		const n, k = 1000, 208
		r := newRand(t)
		for _, dt := range dtypes {
			wv := randVals(r, dt, n*k, 0.5)
			w := devUpload(t, g, dt, wv)
			wRows := rowsOf(wv, k)
			before := lt.reused
			// 300 seeds bucket 512, 301..500 reuse it; 8 is timed, 1 is M = 1.
			for _, m := range []int{300, 301, 419, 500, 8, 1} {
				xv := randVals(r, dt, m*k, 1)
				y := devPoisoned(t, g, dt, m*n)
				if err := lt.Matmul(g.Stream, dt, y, devUpload(t, g, dt, xv), w, m, n, k); err != nil {
					t.Fatal(err)
				}
				checkRel(t, fmt.Sprintf("%s M=%d", dt, m), download(t, g, dt, y, m*n), refGemmCols(xv, wRows, m, k))
			}
			if got := lt.reused - before; got != 3 {
				t.Errorf("%s: %d plans reused a bucket's algorithm, want 3 (M 301, 419, 500)", dt, got)
			}
		}
	})
}

// TestGemmEpilogue runs the own GEMM above the GEMV's rows with SwiGLU
// (GLU) and the residual add (Residual) in the TMA kernels' epilogue on
// every tile and split (XRUN_CUDA_GEMM_TMA=1), against the CPU: the
// product rounded to the dtype, then SwiGLU of the rounded halves or the
// add, as the separate kernels compute them. Shapes: a ragged one whose
// last tile's gate box reads into the up rows, and TinyLlama's MLP.
func TestGemmEpilogue(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	for _, tile := range append(append([]string{"auto"}, tmaTiles...), "wide") {
		for _, waves := range []int{0, 1, 4} {
			for _, glu := range []bool{true, false} {
				name := map[bool]string{true: "glu", false: "res"}[glu]
				t.Run(fmt.Sprintf("%s/waves=%d/%s", tile, waves, name), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						defer keepSwitches(g)()
						g.sw.CUDAWgmma, g.sw.CUDAGemmTMA, g.sw.CUDAWgmmaTile, g.sw.CUDAGemmWaves = true, "1", tile, waves
						for _, dt := range dtypes {
							for _, m := range []int{9, 65, 256, 1031} {
								checkGemmEpilogue(t, g, dt, m, 200, 264, glu)
							}
							// TinyLlama's MLP at decode sizes, on the default
							// tile and splits only (the CPU reference is slow).
							if tile == "auto" && waves == 0 {
								for _, m := range []int{65, 256} {
									checkGemmEpilogue(t, g, dt, m, 5632, 2048, glu)
								}
							}
						}
					})
				})
			}
		}
	}
}

func checkGemmEpilogue(t testing.TB, g *GPU, dt DType, m, n, k int, glu bool) {
	r := newRand(t)
	xin, wv, wRows := randGemmOperands(r, dt, m, n, k, glu)
	ref := dt.Decode(dt.Encode(refGemmCols(xin, wRows, m, k)))
	var y Buffer
	if glu {
		gu := ref
		ref = make([]float32, m*n)
		cpu.RefSwiGLU(ref, gu, m, n)
		y = devPoisoned(t, g, dt, m*n)
	} else {
		y0 := randVals(r, dt, m*n, 4)
		for i := range ref {
			ref[i] += y0[i]
		}
		y = devUpload(t, g, dt, y0)
	}
	ok, err := g.GemmEpilogue(g.Stream, dt, y, devUpload(t, g, dt, xin), devUpload(t, g, dt, wv), m, n, k, GemvFusion{GLU: glu, Residual: !glu})
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("%s M=%d N=%d K=%d: XRUN_CUDA_GEMM_TMA=1 but the epilogue did not run on TMA", dt, m, n, k)
	}
	p, _ := g.tmaPlanFor(m, len(wRows), k, false)
	checkRel(t, fmt.Sprintf("%s epilogue glu=%v M=%d N=%d K=%d (%s, split %d)", dt, glu, m, n, k, p.cfg.name, p.splits), download(t, g, dt, y, m*n), ref)
}

// checkGemmPlannedEach runs checkGemmPlanned for plan p at every dtype,
// the output widths ns and each epilogue (none, residual add, SwiGLU).
func checkGemmPlannedEach(t testing.TB, g *GPU, p tmaPlan, m, k int, ns ...int) {
	t.Helper()
	for _, dt := range dtypes {
		for _, n := range ns {
			for _, epi := range []string{"", "res", "glu"} {
				checkGemmPlanned(t, g, dt, p, m, n, k, epi)
			}
		}
	}
}

// TestGemmTMASplits: every split of K the TMA kernels take (1 to
// tmaMaxCluster blocks a tile), on every tile, plain and under either
// epilogue, against the CPU, at an output width whose residual rows are
// 8-byte aligned (264) and one whose are not (202). The planner picks few
// splits for any one shape (TestGemmTMA and TestGemmEpilogue see those),
// while the cluster's reduction divides a tile's rows among any number of
// blocks up to the cluster's limit.
func TestGemmTMASplits(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const m, kps = 200, 3
	for _, tile := range tmaTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				for s := 1; s <= tmaMaxCluster; s++ {
					p := tmaPlan{cfg: tmaConfigs[tile], splits: s, kps: kps}
					k := s * kps * 64 // 16-bit k-tiles of 64: every block of the split has kps of them
					checkGemmPlannedEach(t, g, p, m, k, 264, 202)
				}
			})
		})
	}
}

// tmaClusterTiles are tmaClusters' configurations, in a fixed order.
var tmaClusterTiles = []string{"p1x72c13", "p1x72c21", "p1x72c23", "p1x48c12", "p1x48c13", "p1x112c21", "p1x112c22", "p1mc21", "p1mc41", "p1mc42", "p1sc21", "p1sc41", "wg1nc21"}

// TestGemmTMAClusters: the clustered tiles (tmaClusters, W multicast to
// the row tiles of a column tile and X to the column tiles of a row tile)
// against the CPU: rows and columns making row and column tiles no
// multiple of the cluster's (the grid padded with blocks past M or N), 9
// rows (one row tile, mostly zeros), more k-tiles than stages with the
// last ragged; plain and under either epilogue (under SwiGLU a tile's
// columns are half gate, half up rows), and E4M3 codes.
func TestGemmTMAClusters(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	halves := 0 // the clustered halves are TestGemmTMAHalves'
	for name := range tmaClusters {
		if tmaHalves[name] {
			halves++
		}
	}
	if len(tmaClusterTiles) != len(tmaClusters)-halves {
		t.Fatalf("tmaClusterTiles %v, tmaClusters %v", tmaClusterTiles, tmaClusters)
	}
	const kt = 20
	for _, tile := range tmaClusterTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				p := tmaPlan{cfg: tmaConfigs[tile], splits: 1, kps: kt}
				for _, m := range []int{9, 200} {
					checkGemmPlannedEach(t, g, p, m, kt*64-8, 1000, 202)
					checkFP8Planned(t, g, p, m, 1000, kt*128-16)
				}
			})
		})
	}
}

// checkFP8Planned runs plan p over E4M3 codes, m x n over k (per-row
// activation scales at 9 rows, per-tensor otherwise), against the CPU's
// fake-quantised reference on sampled columns.
func checkFP8Planned(t testing.TB, g *GPU, p tmaPlan, m, n, k int) {
	t.Helper()
	f := newFP8Case(t, g, n, k, m, m == 9)
	cols := sampleCols(t, n)
	fq, plain := f.ref(m, cols)
	y := devPoisoned(t, g, BF16, m*n)
	if err := g.launchGemmTMA(g.Stream, BF16, y, f.x.Codes, f.w.Codes, p, 1, m, n, k, fp8ScaleArgs(f.x, f.w)); err != nil {
		t.Fatal(err)
	}
	checkFP8(t, fmt.Sprintf("%s E4M3 M=%d", p.cfg.name, m), pick(download(t, g, BF16, y, m*n), m, n, cols), fq, plain)
}

// tmaHalfTiles are tmaHalves' configurations, in a fixed order.
var tmaHalfTiles = []string{"h1s", "h1n", "h1m", "h1sc21", "h1nc21", "h1mc21", "h1mc41"}

// TestGemmTMAHalves: the tiles whose two consumers each take half of W's
// tile (tmaHalves), which have no epilogue kernels, against the CPU: 16-bit
// values at 9 and 200 rows (a ragged row tile; clusters padded past M),
// output widths no multiple of the tile's (a ragged half, one past N), more
// k-tiles than stages with the last ragged; and E4M3 codes.
func TestGemmTMAHalves(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const kt = 20
	for _, tile := range tmaHalfTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				p := tmaPlan{cfg: tmaConfigs[tile], splits: 1, kps: kt}
				for _, m := range []int{9, 200} {
					for _, dt := range dtypes {
						for _, n := range []int{1000, 264, 202} {
							checkGemmPlanned(t, g, dt, p, m, n, kt*64-8, "")
						}
					}
					checkFP8Planned(t, g, p, m, 1000, kt*128-16)
				}
			})
		})
	}
}

// TestGemmEpilogueHalves: GemmEpilogue on a half tile's plan runs its
// one-consumer twin's epilogue kernels (tmaHalfTwin), the halves having
// none, against the CPU.
func TestGemmEpilogueHalves(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	for _, tile := range tmaHalfTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				defer keepSwitches(g)()
				g.sw.CUDAWgmma, g.sw.CUDAGemmTMA, g.sw.CUDAWgmmaTile = true, "1", tile
				for _, dt := range dtypes {
					for _, m := range []int{9, 256} {
						for _, glu := range []bool{true, false} {
							checkGemmEpilogue(t, g, dt, m, 200, 264, glu)
						}
					}
				}
			})
		})
	}
}

// TestTMAClusterGrid: a clustered tile's launch is its clusters' shape,
// its grid padded to whole clusters along either dimension (the blocks
// past M or N store nothing), K never split.
func TestTMAClusterGrid(t *testing.T) {
	for _, c := range []struct {
		tile       string
		m, n, wide int
		want       Dim3
	}{
		{"p1x72c21", 136, 2880, 64, Dim3{X: 2, Y: 45, Z: 1}},
		{"p1x72c21", 200, 2880, 64, Dim3{X: 4, Y: 45, Z: 1}}, // three row tiles, padded to four
		{"p1x72c23", 136, 1000, 64, Dim3{X: 2, Y: 18, Z: 1}}, // 16 column tiles, padded to 18
		{"p1x72c13", 9, 1000, 32, Dim3{X: 1, Y: 33, Z: 1}},   // under SwiGLU: 32 outputs a tile
		{"p1x48c12", 136, 2048, 64, Dim3{X: 3, Y: 32, Z: 1}},
		{"p1mc42", 256, 2880, 96, Dim3{X: 4, Y: 30, Z: 1}},
		{"p1mc41", 200, 2880, 96, Dim3{X: 4, Y: 30, Z: 1}}, // four row tiles, the last ragged
		{"p1sc41", 130, 2048, 64, Dim3{X: 4, Y: 32, Z: 1}}, // three row tiles, padded to four
		{"wg1nc21", 256, 2560, 80, Dim3{X: 4, Y: 32, Z: 1}},
		{"h1mc41", 256, 2880, 96, Dim3{X: 4, Y: 30, Z: 1}},
	} {
		p := tmaPlan{cfg: tmaConfigs[c.tile], splits: 1, kps: 64}
		g, err := p.grid(c.m, c.n, c.wide)
		if cl := tmaClusters[c.tile].shape; err != nil || g != c.want || p.cluster() != cl || g.X%cl.X != 0 || g.Y%cl.Y != 0 {
			t.Errorf("%s M=%d N=%d: grid %+v (%v), cluster %+v; want grid %+v", c.tile, c.m, c.n, g, err, p.cluster(), c.want)
		}
		want := map[bool]string{true: "gemm_tma_swap_cl", false: "gemm_tma_cl"}[p.cfg.swap]
		if tmaHalves[c.tile] {
			want = "gemm_tma_half"
		}
		if twin := tmaConfigs[tmaClusters[c.tile].twin]; p.module() != want || p.cfg.threads() != twin.threads() || p.smem() != twin.smem() {
			t.Errorf("%s: module %s, %d threads, %d bytes of shared memory; want %s and its twin's", c.tile, p.module(), p.cfg.threads(), p.smem(), want)
		}
	}
}

// TestGemmTMAPersist: the persistent kernels (blocks that take tile after
// tile, XRUN_CUDA_GEMM_PERSIST), plain and under either epilogue, against
// the CPU: few blocks for many tiles, so each block runs several with the
// pipeline carried across them (the next tile's loads under the last
// one's stores), tile counts that are no multiple of the blocks, ragged
// row and column tiles (output widths 8-byte aligned or not), and more
// k-tiles than stages, the last one ragged.
func TestGemmTMAPersist(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const k = 616 // ten 16-bit k-tiles, the last of 40
	for tile := range tmaPersist {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				for _, m := range []int{200, 520} {
					for _, blocks := range []int{1, 3, 7} {
						p := tmaPlan{cfg: tmaConfigs[tile], splits: 1, kps: ceilDiv(k, 64)}.persist(m, 1000, blocks)
						if p.blocks != blocks {
							t.Fatalf("%s M=%d: plan %+v not persistent on %d blocks", tile, m, p, blocks)
						}
						checkGemmPlannedEach(t, g, p, m, k, 1000, 202)
					}
				}
			})
		})
	}
}

// TestGemmTMAMulticast: W's loads multicast to clusters of two row tiles
// (tmaPlan.mc), on every tile, launched a block a tile and, where the tile
// has persistent kernels, on pairs of persistent blocks; plain and under
// either epilogue, and over E4M3 codes, against the CPU: row tiles ragged
// in the last pair, output widths 8-byte aligned or not, more k-tiles than
// stages.
func TestGemmTMAMulticast(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const k, k8 = 616, 1264 // ten 16-bit k-tiles, the last of 40; ten of codes
	for _, tile := range tmaTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				cfg := tmaConfigs[tile]
				ragged := min(56, cfg.rows/4) // rows the last pair's second tile lacks
				for _, m := range []int{2*cfg.rows - ragged, 4*cfg.rows - 8} {
					// Every tile's kernels multicast where launched so, though
					// the planner picks it only for the 128-row tiles and 64 x
					// 176.
					plans := []tmaPlan{{cfg: cfg, splits: 1, kps: ceilDiv(k, 64), mc: true}}
					if tmaPersist[tile] {
						// Two pairs of persistent blocks, as withMulticast makes them.
						plans = append(plans, tmaPlan{cfg: cfg, splits: 1, kps: ceilDiv(k, 64), blocks: 4, mc: true})
					}
					for _, p := range plans {
						if !p.mc || p.blocks%2 != 0 {
							t.Fatalf("%s M=%d: plan %+v not multicast in pairs", tile, m, p)
						}
						checkGemmPlannedEach(t, g, p, m, k, 1000, 202)
						// And over E4M3 codes, which the planner does not
						// multicast (BenchmarkGemmFP8's own-fp8-mc does): ten
						// k-tiles of 128 codes, the last of 112.
						p.kps = ceilDiv(k8, 128)
						checkFP8Planned(t, g, p, m, 1000, k8)
					}
				}
			})
		})
	}
}

// TestTMAMulticastPlan: which plans multicast W, and their clusters and
// grids.
func TestTMAMulticastPlan(t *testing.T) {
	for _, c := range []struct {
		cfg                  string
		m, splits, blocks    int
		slots2               int
		fp8                  bool
		want                 bool
		wantBlocks           int
		wantCluster, wantGrd Dim3
	}{
		{"wg2w", 256, 1, 0, 132, false, true, 0, Dim3{2, 1, 1}, Dim3{2, 125, 1}},     // two row tiles
		{"wg2w", 256, 1, 132, 132, false, true, 132, Dim3{2, 1, 1}, Dim3{132, 1, 1}}, // persistent, in pairs
		{"wg2w", 256, 1, 132, 120, false, true, 120, Dim3{2, 1, 1}, Dim3{120, 1, 1}}, // fewer pairs fit
		{"wg2", 384, 1, 0, 132, false, false, 0, Dim3{1, 1, 1}, Dim3{3, 250, 1}},     // three row tiles
		{"wg2", 256, 3, 0, 132, false, false, 0, Dim3{1, 1, 3}, Dim3{2, 250, 3}},     // K split: its own cluster
		{"wg1s", 128, 1, 0, 132, false, false, 0, Dim3{1, 1, 1}, Dim3{2, 500, 1}},    // a narrow tile
		{"wg1w", 256, 1, 0, 132, false, true, 0, Dim3{2, 1, 1}, Dim3{4, 182, 1}},     // 64 x 176: four row tiles, two pairs
		{"wg1w", 192, 1, 0, 132, false, false, 0, Dim3{1, 1, 1}, Dim3{3, 182, 1}},    // three row tiles
		{"wg2", 256, 1, 0, 132, true, false, 0, Dim3{1, 1, 1}, Dim3{2, 250, 1}},      // E4M3 codes
		{"wg2f", 256, 1, 0, 132, false, true, 0, Dim3{2, 1, 1}, Dim3{2, 182, 1}},     // 128 x 176
		{"wg2w", 2048, 1, 132, 1, false, false, 132, Dim3{1, 1, 1}, Dim3{132, 1, 1}}, // no pair fits
	} {
		p := tmaPlan{cfg: tmaConfigs[c.cfg], splits: c.splits, kps: 4, blocks: c.blocks}.withMulticast(c.m, c.slots2, c.fp8)
		grid, err := p.grid(c.m, 32000, p.cfg.bn)
		if err != nil {
			t.Fatal(err)
		}
		if p.mc != c.want || p.blocks != c.wantBlocks || p.cluster() != c.wantCluster || grid != c.wantGrd {
			t.Errorf("%s M=%d split %d blocks %d: mc %v blocks %d cluster %+v grid %+v, want %v %d %+v %+v", c.cfg, c.m, c.splits, c.blocks,
				p.mc, p.blocks, p.cluster(), grid, c.want, c.wantBlocks, c.wantCluster, c.wantGrd)
		}
	}
}

// TestTMAWavesNarrow: XRUN_CUDA_GEMM_WAVES sets the split of every TMA
// plan, the narrow tiles' too (unsplit otherwise): the smallest power of
// two that gives the blocks a multiprocessor it asks for.
func TestTMAWavesNarrow(t *testing.T) {
	d := tmaDevice{sms: 132, unitBytes: tmaUnitBytes("H200")}
	for _, c := range []struct {
		tile             string
		m, n, k, waves   int
		fp8              bool
		wantS, wantBlock int
	}{
		{"wg1s", 64, 4096, 14336, 0, true, 1, 64},  // Llama-3.1-8B's down, E4M3: 64 tiles, K unsplit
		{"wg1s", 64, 4096, 14336, 1, true, 4, 256}, // 64 x 2 < 132 blocks: 4 ways
		{"wg1s", 64, 4096, 14336, 2, true, 8, 512},
		{"wg1m", 256, 2048, 4096, 1, false, 2, 176}, // 88 tiles of 64 x 96
		{"wg1w", 128, 5120, 2048, 1, false, 4, 240}, // 60 tiles of 64 x 176: 120 blocks < 132, so 4 ways
	} {
		p := planGemmTMA(c.m, c.n, c.k, d, c.fp8, c.tile, c.waves)
		if p.cfg.name != c.tile || p.splits != c.wantS || p.cfg.tiles(c.m, c.n)*p.splits != c.wantBlock {
			t.Errorf("%s M=%d N=%d K=%d waves %d: %s split %d, %d blocks; want split %d, %d blocks", c.tile, c.m, c.n, c.k, c.waves,
				p.cfg.name, p.splits, p.cfg.tiles(c.m, c.n)*p.splits, c.wantS, c.wantBlock)
		}
	}
}

// TestTMAPersistPlan: which plans run on persistent blocks, and their
// kernels' names and grids.
func TestTMAPersistPlan(t *testing.T) {
	for _, c := range []struct {
		cfg          string
		m, n, splits int
		want         int
	}{
		{"wg2w", 256, 32000, 1, 132}, // the LM head at batch 256: 250 tiles, two waves
		{"wg2w", 2048, 2560, 1, 132},
		{"wg2m", 256, 11264, 1, 0},  // 118 tiles: one wave
		{"wg2", 256, 2048, 3, 0},    // split
		{"wg2", 2048, 6144, 1, 132}, // E4M3 codes too
		{"wg1", 2048, 32000, 1, 0},
		{"wg3", 176, 32000, 1, 132},    // the LM head at 161-192 rows: 250 tiles of 192 x 128
		{"s2x160", 160, 32000, 1, 132}, // and at 129-160: 250 of 128 rows of W by 160 of X
		{"s2x160", 160, 2048, 1, 0},    // 16 tiles
		{"s2x48", 160, 32000, 1, 0},    // no persistent kernels
	} {
		p := tmaPlan{cfg: tmaConfigs[c.cfg], splits: c.splits, kps: 4}.persist(c.m, c.n, 132)
		if p.blocks != c.want {
			t.Errorf("%s M=%d N=%d split %d: %d persistent blocks, want %d", c.cfg, c.m, c.n, c.splits, p.blocks, c.want)
		}
		grid, err := p.grid(c.m, c.n, p.cfg.bn)
		if err != nil {
			t.Fatal(err)
		}
		wantTile, wantGrid := c.cfg, Dim3{ceilDiv(c.m, p.cfg.rows), ceilDiv(c.n, p.cfg.bn), c.splits}
		if c.want > 0 {
			wantTile, wantGrid = c.cfg+"_p", Dim3{c.want, 1, 1}
		}
		if p.tile() != wantTile || grid != wantGrid {
			t.Errorf("%s M=%d N=%d: tile %q grid %+v, want %q %+v", c.cfg, c.m, c.n, p.tile(), grid, wantTile, wantGrid)
		}
	}
}

// TestTMASwapPersist: a swapped tile's persistent kernels are their own
// family, stage their outputs (rows of X in 8-row blocks) beside
// fewer stages within a multiprocessor's shared memory, and GemmEpilogue
// runs the tile a block a tile, where its epilogues are.
func TestTMASwapPersist(t *testing.T) {
	// gemm_tma_swap_p.cu's instantiations: the rows, stages and staging
	// passes tmaPlan.smem sizes the launch by.
	src, err := kernelSource("gemm_tma_swap_p")
	if err != nil {
		t.Fatal(err)
	}
	inst := map[string][3]int{}
	for _, m := range regexp.MustCompile(`(?m)^GEMM_TMA_XP\((\w+), (f16|bf16), 2, (\d+), (\d+), (\d+)\)`).FindAllStringSubmatch(src, -1) {
		v := [3]int{}
		for i := range v {
			v[i], _ = strconv.Atoi(m[3+i])
		}
		if w, ok := inst[m[1]]; ok && w != v {
			t.Errorf("gemm_tma_swap_p.cu: %s's f16 and bf16 kernels differ: %v, %v", m[1], w, v)
		}
		inst[m[1]] = v
	}
	for name := range tmaPersist {
		if cfg := tmaConfigs[name]; cfg.swap {
			want := [3]int{cfg.rows, tmaSwapPersistStages[name], max(1, tmaSwapPersistPasses[name])}
			if got, ok := inst[name]; !ok || got != want {
				t.Errorf("gemm_tma_swap_p.cu: %s as (rows, stages, passes) %v, want %v (tmaConfigs, tmaSwapPersistStages, tmaSwapPersistPasses)", name, got, want)
			}
		}
	}
	for name := range tmaPersist {
		cfg := tmaConfigs[name]
		p := tmaPlan{cfg: cfg, splits: 1, kps: 4, blocks: 132}
		if sm := p.smem(); sm > 227<<10 {
			t.Errorf("%s persistent: %d bytes of shared memory do not fit a multiprocessor", name, sm)
		}
		if !cfg.swap {
			if p.smem() != cfg.smem() || p.module() != "gemm_tma_p" || p.unpersisted().blocks != 132 {
				t.Errorf("%s persistent: smem %d module %s, want %d gemm_tma_p, kept for the epilogues", name, p.smem(), p.module(), cfg.smem())
			}
			continue
		}
		if cfg.rows%8 != 0 {
			t.Errorf("%s persistent: %d rows of X, not 8-row blocks (gemm_tma.cuh's staged stores)", name, cfg.rows)
		}
		st := tmaSwapPersistStages[name]
		passes := max(1, tmaSwapPersistPasses[name])
		if cfg.rows%(8*passes) != 0 {
			t.Errorf("%s persistent: %d rows of X do not stage in %d passes of 8-row blocks", name, cfg.rows, passes)
		}
		want := st*(cfg.rows+cfg.bn)*128 + 1024 + 16*st + 16 + cfg.rows/passes*(cfg.bn+8)*2
		if st == 0 || st > cfg.stages || p.stages() != st || p.smem() != want || p.module() != "gemm_tma_swap_p" {
			t.Errorf("%s persistent: %d stages, smem %d, module %s; want %d, %d, gemm_tma_swap_p", name, p.stages(), p.smem(), p.module(), st, want)
		}
		if q := p.unpersisted(); q.blocks != 0 || q.module() != cfg.module() || !strings.HasPrefix(q.module(), "gemm_tma_swap") || q.smem() != cfg.smem() {
			t.Errorf("%s under an epilogue: %+v, want a block a tile on %s", name, q, cfg.module())
		}
	}
}

// checkGemmPlanned runs Y = X W^T on the TMA kernels by plan p (epi "": the
// plain GEMM, "res" and "glu": GemmEpilogue's) and checks it against the
// CPU.
func checkGemmPlanned(t testing.TB, g *GPU, dt DType, p tmaPlan, m, n, k int, epi string) {
	r := newRand(t)
	glu := epi == "glu"
	xin, wv, wRows := randGemmOperands(r, dt, m, n, k, glu)
	ref := dt.Decode(dt.Encode(refGemmCols(xin, wRows, m, k)))
	x, w := devUploadSlack(t, g, dt, xin, k), devUpload(t, g, dt, wv)
	var y Buffer
	var err error
	switch epi {
	case "":
		y = devPoisoned(t, g, dt, m*n)
		err = g.launchGemmTMA(g.Stream, dt, y, x, w, p, dt.Size(), m, n, k, nil)
	case "glu":
		gu := ref
		ref = make([]float32, m*n)
		cpu.RefSwiGLU(ref, gu, m, n)
		y = devPoisoned(t, g, dt, m*n)
		err = g.launchGemmEpi(g.Stream, dt, y, x, w, p, m, n, k, true)
	case "res":
		y0 := randVals(r, dt, m*n, 4)
		for i := range ref {
			ref[i] += y0[i]
		}
		y = devUpload(t, g, dt, y0)
		err = g.launchGemmEpi(g.Stream, dt, y, x, w, p, m, n, k, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkRel(t, fmt.Sprintf("%s %q M=%d N=%d K=%d (%s, split %d)", dt, epi, m, n, k, p.cfg.name, p.splits), download(t, g, dt, y, m*n), ref)
}

// TestGemmEarlyW: with XRUN_CUDA_GEMM_EARLY_W the TMA kernels request W's
// first k-tiles before their programmatic-launch wait; X must still be
// read only after it. X here is written by a kernel queued right before
// the GEMM (no host synchronisation between them, poisoned before), W
// uploaded and settled, as in a forward pass; the products match the CPU
// on sampled columns with the early loads on and off, unsplit and split
// (waves 4), at TinyLlama's qkv and gate_up (GLU epilogue) shapes.
func TestGemmEarlyW(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	for _, early := range []bool{true, false} {
		for _, waves := range []int{0, 4} {
			t.Run(fmt.Sprintf("early=%v/waves=%d", early, waves), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					defer keepSwitches(g)()
					g.sw.CUDAWgmma, g.sw.CUDAGemmTMA, g.sw.CUDAGemmWaves, g.sw.CUDAGemmEarlyW = true, "1", waves, early
					for _, dt := range dtypes {
						for _, m := range []int{65, 256} {
							checkGemmChained(t, g, dt, m, 2560, 2048, false)
							checkGemmChained(t, g, dt, m, 1000, 2048, true)
						}
					}
				})
			})
		}
	}
}

// checkGemmChained is TestGemmEarlyW's check of one shape: X filled on the
// device right before the GEMM (or, glu, the gate_up GEMM with SwiGLU).
func checkGemmChained(t testing.TB, g *GPU, dt DType, m, n, k int, glu bool) {
	r := newRand(t)
	_, wv, wRows := randGemmOperands(r, dt, m, n, k, glu)
	w := devUpload(t, g, dt, wv)
	x, y := devPoisoned(t, g, dt, m*k), devPoisoned(t, g, dt, m*n)
	if err := g.Stream.Sync(); err != nil { // W settled; X still NaN
		t.Fatal(err)
	}
	if err := g.RandomFill(g.Stream, dt, x, r.Uint64(), 0, 1); err != nil {
		t.Fatal(err)
	}
	if glu {
		ok, err := g.GemmEpilogue(g.Stream, dt, y, x, w, m, n, k, GemvFusion{GLU: true})
		if err != nil || !ok {
			t.Fatalf("%s M=%d N=%d K=%d: the SwiGLU epilogue did not run on TMA (%v)", dt, m, n, k, err)
		}
	} else if err := g.Gemm(g.Stream, dt, y, x, w, m, n, k); err != nil {
		t.Fatal(err)
	}
	out := download(t, g, dt, y, m*n)
	xin := download(t, g, dt, x, m*k) // what the GEMM should have read
	what := fmt.Sprintf("%s M=%d N=%d K=%d glu=%v early=%v", dt, m, n, k, glu, g.sw.CUDAGemmEarlyW)
	if !glu {
		cols := sampleCols(t, n)
		rows := make([][]float32, len(cols))
		for i, j := range cols {
			rows[i] = wRows[j]
		}
		checkRel(t, what, pick(out, m, n, cols), refGemmCols(xin, rows, m, k))
		return
	}
	gu := dt.Decode(dt.Encode(refGemmCols(xin, wRows, m, k)))
	ref := make([]float32, m*n)
	cpu.RefSwiGLU(ref, gu, m, n)
	checkRel(t, what, out, ref)
}

// TestSwapRound: which narrow plans swapRound moves onto a swapped tile of
// 48 or 32 rows of X, K unsplit, on an H100's or H200's 132 places.
func TestSwapRound(t *testing.T) {
	slots := func(c tmaConfig, s int) int { return uniformSlots(132, c, s) }
	for _, c := range []struct {
		from    string
		m, n, k int
		fp8     bool
		want    string
	}{
		{"wg1s", 136, 2560, 2048, false, "p1x48"}, // 120 tiles of 48 x 64 beat 100 of 32 x 128
		{"wg1s", 136, 2048, 2048, false, "p1x48"}, // 96
		{"wg1n", 136, 3072, 2048, false, "s2x32"}, // p1x48's 144 take two rounds
		{"wg1m", 136, 4096, 4096, true, "s2x48"},  // 96; 32 x 128's 160 take two
		{"wg1n", 144, 2880, 4096, true, "s2x32"},  // 115
		{"wg1s", 128, 2560, 2048, false, "wg1s"},  // two row tiles of 64: kpPlan's rows
		{"wg1s", 145, 2560, 2048, false, "wg1s"},  // four row tiles of 48
		{"wg1s", 136, 1024, 2048, false, "wg1s"},  // 48 tiles of 48 x 64: a round under 70 % full
		{"wg2", 136, 2560, 2048, false, "wg2"},    // not narrow
		{"wg1s", 136, 2560, 2048, true, "wg1s"},   // E4M3 codes keep 64 x 64
		{"wg1n", 136, 2560, 2048, true, "s2x32"},  // and take no tile of one consumer: 100 of 32 x 128
		{"wg1n", 136, 1536, 2048, true, "wg1n"},   // p1x48's 96 not weighed; s2x32's 60 under 70 %
	} {
		p := tmaPlan{cfg: tmaConfigs[c.from], splits: 1, kps: 4}
		if q := swapRound(p, c.m, c.n, c.k, c.fp8, slots); q.cfg.name != c.want || q.splits != 1 || q.blocks != 0 {
			t.Errorf("swapRound(%s, M=%d N=%d K=%d fp8 %v) = %s, want %s unsplit", c.from, c.m, c.n, c.k, c.fp8, q, c.want)
		} else if c.want != c.from && q.kps*tmaKTile(c.fp8) < c.k {
			t.Errorf("swapRound(%s, M=%d N=%d K=%d): %d k-tiles do not cover K", c.from, c.m, c.n, c.k, q.kps)
		}
	}
}

// h100BatchPlan is batchPlan on an H100's or H200's 132 places, K split by
// splitGemmTMA.
func h100BatchPlan(m, n, k int, fp8 bool) (tmaPlan, bool) {
	split := func(c tmaConfig) tmaPlan { return splitGemmTMA(c, m, n, k, 132, h100Slots, fp8, 0) }
	return batchPlan(m, n, k, fp8, split, h100Slots)
}

// TestRowRound: batchPlan's s2x48 unsplit in place of s2x80 for the qkv
// projections of 129-144 rows whose three row tiles make one round, on an
// H100's or H200's places; past 144 rows, or in two rounds, s2x80 stays.
func TestRowRound(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		fp8     bool
		want    string
	}{
		{136, 5120, 2880, false, "s2x48"}, // GPT-OSS-20B's qkv: 120 blocks of 132 places
		{130, 5120, 2048, false, "s2x48"}, // Qwen3-30B-A3B's
		{144, 5120, 2048, true, "s2x48"},  // E4M3 codes alike
		{144, 6144, 4096, false, "s2x80"}, // Llama-3.1-8B's: 144 blocks of s2x48, two rounds (at 129-136 narrowRow takes it)
		{152, 5120, 2048, false, "s2x80"}, // four row tiles of 48
		{128, 5120, 2048, false, ""},      // not batchPlan's rows
	} {
		p, ok := h100BatchPlan(c.m, c.n, c.k, c.fp8)
		if c.want == "" {
			if ok {
				t.Errorf("batchPlan(M=%d N=%d K=%d) = %s, want none", c.m, c.n, c.k, p)
			}
			continue
		}
		if !ok || p.cfg.name != c.want || p.splits != 1 || p.kps*tmaKTile(c.fp8) < c.k {
			t.Errorf("batchPlan(M=%d N=%d K=%d fp8 %v) = %s (%d k-tiles), %v; want %s unsplit", c.m, c.n, c.k, c.fp8, p, p.kps, ok, c.want)
		}
	}
}

// TestTMAMapRows: X's tensor map covers the last row tile whole where the
// buffer holds its rows, and stops at M where it does not (the TMA then
// fills the rest with zeros).
func TestTMAMapRows(t *testing.T) {
	for _, c := range []struct {
		bytes, m, k, es, tile, want int
	}{
		{256 * 4096 * 2, 200, 4096, 2, 64, 256},              // a decode of 200 rows in buffers of 256
		{256 * 4096 * 2, 256, 4096, 2, 64, 256},              // no ragged tile
		{200 * 4096 * 2, 200, 4096, 2, 64, 200},              // a buffer of exactly M rows
		{255 * 4096 * 2, 200, 4096, 2, 64, 200},              // a row short
		{256 * 4096, 200, 4096, 1, 64, 256},                  // E4M3 codes
		{256 * 2048 * 2, 130, 2048, 2, 48, 144},              // three swapped tiles of 48 rows
		{(200 + slackRows) * 2880 * 2, 9, 2880, 2, 192, 192}, // the widest swapped tile
		{8192 * 4096 * 2, 2000, 4096, 2, 128, 2048},          // a prefill chunk on 128-row tiles
	} {
		if got := tmaMapRows(Buffer{Bytes: c.bytes}, c.m, c.k, c.es, c.tile); got != c.want {
			t.Errorf("tmaMapRows(%d bytes, M=%d K=%d es %d, tile %d) = %d, want %d", c.bytes, c.m, c.k, c.es, c.tile, got, c.want)
		}
	}
}

// TestSplitPair: where batchPlan's one-row tile splits K four ways or more,
// s3x80 (s3x88 above 160 rows) split as many ways, if each block keeps 16
// k-tiles and the blocks make one round of the split's places.
func TestSplitPair(t *testing.T) {
	for _, c := range []struct {
		one             string
		splits, m, n, k int
		want            string
	}{
		{"s2x160", 4, 136, 2880, 4096, "s3x80"}, // GPT-OSS-20B's o: 120 blocks of 16 k-tiles, 120 places
		{"s2x176", 4, 176, 2880, 4096, "s3x88"}, // the same at 176 rows
		{"s2x160", 3, 136, 2880, 4096, ""},      // three ways: 90 blocks of 22 k-tiles would fit, not taken
		{"s2x160", 6, 136, 2048, 8192, ""},      // Llama-3.2-1B's down: 132 blocks, 102 places for clusters of six
		{"s2x160", 8, 136, 2880, 4096, ""},      // 8 k-tiles a block
		{"s2x160", 4, 136, 4096, 4096, ""},      // 176 blocks
	} {
		three := "s3x80"
		if c.m > 160 {
			three = "s3x88"
		}
		q := tmaPlan{cfg: tmaConfigs[c.one], splits: c.splits, kps: ceilDiv(ceilDiv(c.k, 64), c.splits)}
		r, ok := splitPair(q, three, c.m, c.n, c.k, h100Slots)
		if ok != (c.want != "") || ok && (r.cfg.name != c.want || r.splits != c.splits || r.kps*r.splits*64 < c.k) {
			t.Errorf("splitPair(%s/%d, M=%d N=%d K=%d) = %s, %v; want %q split %d ways", c.one, c.splits, c.m, c.n, c.k, r, ok, c.want, c.splits)
		}
	}
}

// TestNarrowRow: batchPlan's p1x136 at 129-136 rows, unsplit or (16-bit)
// split two ways, where each block keeps 32-64 k-tiles and the blocks make
// one round at least 70 % full, on an H100's or H200's places.
func TestNarrowRow(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		fp8     bool
		want    string
		splits  int
	}{
		{136, 6144, 4096, false, "p1x136", 1}, // Llama-3.1-8B's qkv: 96 blocks of 64 k-tiles
		{130, 4096, 4096, false, "p1x136", 2}, // its o: 128 blocks of 32
		{136, 6144, 4096, true, "p1x136", 1},  // E4M3 qkv: 96 blocks of 32
		{136, 4096, 14336, true, "", 0},       // E4M3 down: split two ways, not taken for codes
		{136, 4096, 14336, false, "", 0},      // 16-bit down: 112 k-tiles a block
		{136, 3072, 2048, false, "", 0},       // Llama-3.2-1B's qkv: 16 k-tiles a block split
		{136, 5120, 2880, false, "", 0},       // GPT-OSS-20B's qkv: 80 blocks, 61 % of a round
		{144, 6144, 4096, false, "", 0},       // two row tiles
		{128, 6144, 4096, false, "", 0},       // not batchPlan's rows
	} {
		p, ok := narrowRow(c.m, c.n, c.k, c.fp8, h100Slots)
		if ok != (c.want != "") || ok && (p.cfg.name != c.want || p.splits != c.splits || p.kps*p.splits*tmaKTile(c.fp8) < c.k) {
			t.Errorf("narrowRow(M=%d N=%d K=%d fp8 %v) = %s, %v; want %q split %d ways", c.m, c.n, c.k, c.fp8, p, ok, c.want, c.splits)
		}
	}
}

// TestNarrowPair: batchPlan's p1x72 unsplit for GEMMs of 129-144 rows
// (16-bit or E4M3) where each block keeps 32-64 k-tiles and the blocks
// make one round at least 70 % full, after narrowRow, on an H100's or
// H200's places.
func TestNarrowPair(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		fp8     bool
		want    string
		splits  int
	}{
		{136, 3072, 2048, false, "p1x72", 1},    // Llama-3.2-1B's qkv: 96 blocks of 32 k-tiles
		{144, 4096, 4096, false, "p1x72c21", 1}, // Llama-3.1-8B's o: 128 blocks of 64, in pairs
		{136, 4096, 4096, false, "p1x136", 2},   // narrowRow's first
		{144, 2880, 4096, false, "p1x72c21", 1}, // GPT-OSS-20B's o: 90 blocks, 68 % of a round
		{136, 2048, 4096, false, "s2x80", 3},    // Qwen3-30B-A3B's o: 64 blocks, 48 %
		{136, 4096, 4096, true, "p1x72", 1},     // E4M3 Llama-3.1-8B's o: 32 k-tiles of 128 codes
		{144, 3072, 2048, true, "", 0},          // E4M3 Llama-3.2-1B's qkv: 16 k-tiles of 128 codes
		{144, 4096, 14336, false, "s2x160", 3},  // Llama-3.1-8B's down: 224 k-tiles
		{152, 3072, 2048, false, "", 0},         // three row tiles of 72
	} {
		p, ok := h100BatchPlan(c.m, c.n, c.k, c.fp8)
		if c.want == "" {
			if ok && p.cfg.name == "p1x72" {
				t.Errorf("batchPlan(M=%d N=%d K=%d fp8 %v) = %s, want no p1x72", c.m, c.n, c.k, c.fp8, p)
			}
			continue
		}
		if !ok || p.cfg.name != c.want || p.splits != c.splits || p.kps*p.splits*tmaKTile(c.fp8) < c.k {
			t.Errorf("batchPlan(M=%d N=%d K=%d fp8 %v) = %s, %v; want %q split %d ways", c.m, c.n, c.k, c.fp8, p, ok, c.want, c.splits)
		}
	}
}

// TestNarrowCodes: batchPlan's p1x48 unsplit for E4M3 codes at 129-192 rows
// where each block keeps 16-32 k-tiles of 128 codes and the blocks make
// one round at least 70 % full, on an H100's or H200's places.
func TestNarrowCodes(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		fp8     bool
		want    bool
	}{
		{160, 2048, 4096, true, true},   // Qwen3-30B-A3B's o: 128 blocks of 32 k-tiles
		{192, 2048, 2048, true, true},   // TinyLlama's o: 16
		{145, 2048, 2048, true, true},   // four row tiles
		{144, 2048, 2048, true, true},   // three row tiles
		{136, 2560, 2048, true, true},   // TinyLlama's qkv: 120 blocks
		{128, 2048, 2048, true, false},  // two: not batchPlan's rows
		{193, 2048, 2048, true, false},  // five
		{160, 2048, 5632, true, false},  // TinyLlama's down: 44 k-tiles
		{160, 2560, 2048, true, false},  // its qkv: 160 blocks, two rounds
		{160, 1024, 2048, true, false},  // 64 blocks: under 70 % of a round
		{160, 2048, 2048, false, false}, // 16-bit
	} {
		p, ok := h100BatchPlan(c.m, c.n, c.k, c.fp8)
		if got := ok && p.cfg.name == "p1x48"; got != c.want {
			t.Errorf("batchPlan(M=%d N=%d K=%d fp8 %v) = %s, %v; want p1x48: %v", c.m, c.n, c.k, c.fp8, p, ok, c.want)
		} else if got && (p.splits != 1 || p.kps*tmaKTile(c.fp8) < c.k) {
			t.Errorf("batchPlan(M=%d N=%d K=%d): %s does not cover K unsplit", c.m, c.n, c.k, p)
		}
	}
}

// TestTMASplitSwitch: XRUN_CUDA_GEMM_SPLIT splits K on the plan's tile
// (forced or chosen) as many ways as asked, fewer where a block would get
// no k-tiles, and persistent blocks only where that leaves K unsplit.
func TestTMASplitSwitch(t *testing.T) {
	g := h100PlanGPU()
	for _, c := range []struct {
		tile           string
		split, m, n, k int
		fp8            bool
		want           string
	}{
		{"auto", 0, 136, 2880, 4096, false, "p1x72c21"},       // the planner's
		{"s1x72", 0, 136, 2880, 4096, false, "s1x72/4"},       // the cost model's split of a forced tile
		{"s1x72", 1, 136, 2880, 4096, false, "s1x72"},         // unsplit, as cuBLASLt runs it
		{"auto", 2, 136, 2880, 4096, false, "p1x72/2"},        // the planner's tile split two ways: its unclustered twin
		{"auto", 2, 130, 2048, 4096, false, "s2x80/2"},        // the planner's tile split two ways
		{"p1x72c21", 1, 136, 2880, 4096, false, "p1x72c21"},   // a clustered tile unsplit
		{"p1x72c21", 0, 136, 2880, 4096, false, "p1x72c21"},   // the cost model never splits it
		{"p1x72c21", 2, 136, 2880, 4096, false, "p1x72/2"},    // a split: its unclustered twin
		{"s3x80", 8, 136, 2880, 192, false, "s3x80/3"},        // three k-tiles: three ways at most
		{"auto", 1, 256, 128256, 2048, false, "wg2w x132 mc"}, // unsplit: persistent and multicast as planned
		{"auto", 2, 256, 128256, 2048, false, "wg2w/2"},       // split: neither
		{"auto", 1, 136, 4096, 14336, true, "s2x160"},         // E4M3 codes alike
	} {
		g.sw.CUDAWgmmaTile, g.sw.CUDAGemmSplit = c.tile, c.split
		if c.tile != "auto" {
			g.sw.CUDAGemmTMA = "1"
		} else {
			g.sw.CUDAGemmTMA = "auto"
		}
		p, ok := g.tmaPlanFor(c.m, c.n, c.k, c.fp8)
		if !ok || p.String() != c.want || p.kps*p.splits*tmaKTile(c.fp8) < c.k {
			t.Errorf("%s split %d, M=%d N=%d K=%d fp8 %v: %s (%d k-tiles a block), %v; want %s", c.tile, c.split, c.m, c.n, c.k, c.fp8, p, p.kps, ok, c.want)
		}
	}
}

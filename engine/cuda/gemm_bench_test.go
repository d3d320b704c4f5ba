//go:build cgo && linux

package cuda

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// BenchmarkGemm times the own GEMM (gemm_plugin: disable) against cuBLASLt
// (auto) at the zoo's projections (TinyLlama-1.1B's first, by their bare
// names) for decode batches M = 1, 64, 128, 256 and a prefill chunk of
// 2048, fp16. Device time comes from events around b.N launches replayed
// from a captured graph, as a decode step runs them (timeGraph); the
// weights rotate among enough copies to exceed the L2 cache several times,
// so each launch streams its weights from HBM as in a real forward pass.
// Reported: us/gemm, TFLOP/s, and GB/s of the bytes that must move (W, X,
// Y once), from the graph's time, and us/launch, the same launches queued
// one by one from the host (timeLaunches: what the host's pace adds).
// On Hopper, own is the warpgroup MMA as XRUN_CUDA_GEMM_TMA chooses, own-tma
// its TMA kernels at every M (=1; -wg1, -wg2, -wg2m, -wg2w, -wg2f, and at
// every M but 2048 the narrow -wg1s, -wg1n, -wg1m and -wg1w, the swapped
// -s1x32 ... and the rest of the tiles force a tile; own-wide is the choice by M
// without the narrow tiles, XRUN_CUDA_WGMMA_TILE=wide), own-unpersist the
// choice by M with a block a tile where its tiles make more than a wave
// (XRUN_CUDA_GEMM_PERSIST=0), own-cpasync its
// cp.async kernels (=0) and own-mmasync the mma.sync tiles
// (XRUN_CUDA_WGMMA=0). At M = 256, own-hot and cublaslt-hot launch on one
// copy of the weight, which stays in L2 where it fits (all but the LM
// head's): the part of a launch's time that is not waiting on HBM.
// -gemm.rows sets the M values, -gemm.split the own implementations' split
// of K on the TMA kernels (-gemm.split 1: a forced tile unsplit),
// -gemm.reverse the order each shape's implementations run in.
func BenchmarkGemm(b *testing.B) {
	dev := testGPU(b)
	rows, err := gemmRows(*gemmRowsFlag)
	if err != nil {
		b.Fatal(err)
	}
	const dt = F16
	// TinyLlama's GEMMs by their own names (as the notes have always
	// named them), then the rest of the zoo's full-size ones as
	// model-gemm.
	shapes := []zooGemm{
		{"qkv", 2560, 2048}, {"o", 2048, 2048}, {"gate_up", 11264, 2048}, {"down", 2048, 5632}, {"lm", 32000, 2048},
	}
	for _, sh := range zooGemmShapes {
		if model, _, _ := strings.Cut(sh.name, "/"); model != "tinyllama" && !strings.HasPrefix(model, "tiny-") {
			shapes = append(shapes, zooGemm{strings.ReplaceAll(sh.name, "/", "-"), sh.n, sh.k})
		}
	}
	for _, sh := range shapes {
		for _, m := range rows {
			var ws []Buffer
			var x, y Buffer
			wBytes := sh.n * sh.k * dt.Size()
			copies := min(16, max(2, ceilDiv(4*dev.Info.L2Bytes, wBytes)))
			do(b, func(t testing.TB, g *GPU) {
				for i := range copies {
					w, err := g.Alloc(wBytes)
					if err != nil {
						t.Fatal(err)
					}
					ws = append(ws, w)
					if err := g.RandomFill(g.Stream, dt, w, uint64(i+1), 0, 0.1); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				if x, err = g.Alloc(benchXRows(m) * sh.k * dt.Size()); err != nil {
					t.Fatal(err)
				}
				if y, err = g.Alloc(m * sh.n * dt.Size()); err != nil {
					t.Fatal(err)
				}
				if err := g.RandomFill(g.Stream, dt, x, 99, 0, 1); err != nil {
					t.Fatal(err)
				}
			})
			impls := []string{"own", "cublaslt"}
			switch {
			case dev.Info.Major == 9 && m == 2048:
				impls = append(impls, "own-cpasync", "own-tma", "own-tma-wg2", "own-tma-wg2m", "own-tma-wg2w", "own-unpersist")
			case dev.Info.Major == 9 && m > 1:
				// XRUN_CUDA_WGMMA=0, the cp.async kernels (XRUN_CUDA_GEMM_TMA=0),
				// each XRUN_CUDA_WGMMA_TILE, and split-K aiming at one block an SM.
				impls = append(impls, "own-mmasync", "own-cpasync", "own-tma", "own-wg1", "own-wg2", "own-wg2w", "own-tma-wg1", "own-tma-wg2", "own-tma-wg2m", "own-tma-wg2w", "own-tma-wg2f", "own-tma-wg1d", "own-tma-wg3", "own-tma-w2x64", "own-tma-w2x80", "own-tma-w2x96", "own-waves1", "own-unpersist")
				// Every tile, at every M but 2048: the planner takes the
				// decode tiles up to tmaSmallRows, and a sweep above it
				// (a prefill chunk's or a mixed batch's rows) says whether
				// it should there too.
				//
				// The narrow tiles, K unsplit, and the choice by M
				// without them (XRUN_CUDA_WGMMA_TILE=wide).
				impls = append(impls, "own-tma-wg1s", "own-tma-wg1n", "own-tma-wg1m", "own-tma-wg1w", "own-wide")
				// The swapped tiles: few rows of X a block.
				impls = append(impls, "own-tma-s1x32", "own-tma-s1x40", "own-tma-s1x48", "own-tma-s2x32", "own-tma-s2x48", "own-tma-s2x160", "own-tma-s2x176", "own-tma-s2x192", "own-tma-s1x80", "own-tma-s2x80", "own-tma-s3x80", "own-tma-s2x88", "own-tma-s3x88", "own-tma-s1x72", "own-tma-s1x136", "own-tma-s2x104", "own-tma-s3x104", "own-tma-s2x208", "own-tma-s2x72", "own-tma-s2x200", "own-tma-s2x224")
				// The swapped tiles with persistent kernels, a block a tile.
				for _, tile := range tmaTiles {
					if tmaPersist[tile] && tmaConfigs[tile].swap {
						impls = append(impls, "own-tma-"+tile+"-unpersist")
					}
				}
				// The alternating tiles: two consumers, alternate k-tiles.
				impls = append(impls, "own-tma-p1s", "own-tma-p1m", "own-tma-p1x48", "own-tma-p1x72", "own-tma-p1x112", "own-tma-p1x136")
				// Those in clusters, W and X multicast.
				for _, tile := range slices.Concat(tmaClusterTiles, tmaHalfTiles) {
					impls = append(impls, "own-tma-"+tile)
				}
			}
			if m == 1 {
				impls = append(impls, "own-waves1", "own-waves4", "own-waves8")
			}
			if dev.Info.Major == 9 && m > 1 {
				// The plan and each tile the planner multicasts (the
				// 128-row ones and 64 x 176, tmaPlan.withMulticast) with
				// W's loads not multicast.
				for _, impl := range impls {
					if tile, ok := strings.CutPrefix(impl, "own-tma-"); impl == "own" || ok && tmaMulticast[tile] {
						impls = append(impls, impl+"-nomc")
					}
				}
			}
			if m == 256 {
				// The weight in L2 (one copy, where it fits): what is left of
				// a launch's time when no weight comes from HBM.
				impls = append(impls, "own-hot", "cublaslt-hot")
			}
			for _, impl := range benchOrder(impls) {
				hot := strings.HasSuffix(impl, "-hot")
				b.Run(fmt.Sprintf("%s/%s/M=%d/N=%d/K=%d", impl, sh.name, m, sh.n, sh.k), func(b *testing.B) {
					var d, q time.Duration
					do(b, func(t testing.TB, g *GPU) {
						lt, err := g.BlasLt()
						if err != nil {
							t.Fatal(err)
						}
						defer keepSwitches(g)()
						setBenchImpl(&g.sw, impl)
						g.sw.CUDAGemmSplit = *gemmSplitFlag
						run := func(i int) error {
							w := ws[i%len(ws)]
							if hot {
								w = ws[0]
							}
							if strings.HasPrefix(impl, "own") {
								return g.Gemm(g.Stream, dt, y, x, w, m, sh.n, sh.k)
							}
							return lt.Matmul(g.Stream, dt, y, x, w, m, sh.n, sh.k)
						}
						d = timeGraph(b, t, g, 2*copies, run)
						q = timeLaunches(b, t, g, 2*copies, run)
						// The plan this GPU took (its clusters' places,
						// tmaSlots, can move it off the golden file's):
						// shown with -test.v.
						if strings.HasPrefix(impl, "own") {
							if p, ok := g.tmaPlanFor(m, sh.n, sh.k, false); ok {
								b.Logf("plan %s", p)
							}
						}
					})
					per := d.Seconds() / float64(b.N)
					b.ReportMetric(per*1e6, "us/gemm")
					b.ReportMetric(q.Seconds()/float64(b.N)*1e6, "us/launch")
					b.ReportMetric(2*float64(m)*float64(sh.n)*float64(sh.k)/per/1e12, "TFLOP/s")
					bytes := float64((sh.n*sh.k + m*sh.k + m*sh.n) * dt.Size())
					b.ReportMetric(bytes/per/1e9, "GB/s")
				})
			}
			do(b, func(t testing.TB, g *GPU) {
				for _, w := range append(ws, x, y) {
					if err := g.Free(w); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// setBenchImpl sets the switches a BenchmarkGemm implementation name stands
// for (own-mmasync, own-cpasync, own-tma[-wgX], own-wgX, own-wide,
// own-wavesN, any of them with -unpersist and then -nomc, own-unpersist
// alone); the others leave them as they are.
func setBenchImpl(sw *model.Switches, impl string) {
	var waves int
	// -nomc: W's loads not multicast (XRUN_CUDA_GEMM_MULTICAST=0);
	// -unpersist: a block a tile (XRUN_CUDA_GEMM_PERSIST=0); each with
	// whatever the rest of the name sets.
	if rest, ok := strings.CutSuffix(impl, "-nomc"); ok {
		sw.CUDAGemmMulticast = false
		impl = rest
	}
	if rest, ok := strings.CutSuffix(impl, "-unpersist"); ok {
		sw.CUDAGemmPersist = false
		impl = rest
	}
	switch rest, tma := strings.CutPrefix(impl, "own-tma"); {
	case impl == "own-mmasync":
		sw.CUDAWgmma = false
	case impl == "own-cpasync":
		sw.CUDAGemmTMA = "0"
	case tma:
		sw.CUDAGemmTMA = "1"
		if tile, ok := strings.CutPrefix(rest, "-"); ok {
			sw.CUDAWgmmaTile = tile
		}
	case strings.HasPrefix(impl, "own-wg"):
		sw.CUDAWgmmaTile = strings.TrimPrefix(impl, "own-")
	case impl == "own-wide":
		sw.CUDAWgmmaTile = "wide"
	default:
		if _, err := fmt.Sscanf(impl, "own-waves%d", &waves); err == nil {
			sw.CUDAGemmWaves = waves
		}
	}
}

// TestSetBenchImpl: each BenchmarkGemm implementation name sets the
// switches it stands for and nothing else.
func TestSetBenchImpl(t *testing.T) {
	base := model.Switches{CUDAWgmma: true, CUDAGemmTMA: "auto", CUDAWgmmaTile: "auto", CUDAGemmPersist: true, CUDAGemmMulticast: true}
	for impl, want := range map[string]func(*model.Switches){
		"own":           func(*model.Switches) {},
		"cublaslt-hot":  func(*model.Switches) {},
		"own-mmasync":   func(s *model.Switches) { s.CUDAWgmma = false },
		"own-cpasync":   func(s *model.Switches) { s.CUDAGemmTMA = "0" },
		"own-tma":       func(s *model.Switches) { s.CUDAGemmTMA = "1" },
		"own-tma-wg1m":  func(s *model.Switches) { s.CUDAGemmTMA, s.CUDAWgmmaTile = "1", "wg1m" },
		"own-tma-s1x40": func(s *model.Switches) { s.CUDAGemmTMA, s.CUDAWgmmaTile = "1", "s1x40" },
		"own-wg2w":      func(s *model.Switches) { s.CUDAWgmmaTile = "wg2w" },
		"own-unpersist": func(s *model.Switches) { s.CUDAGemmPersist = false },
		"own-wide":      func(s *model.Switches) { s.CUDAWgmmaTile = "wide" },
		"own-nomc":      func(s *model.Switches) { s.CUDAGemmMulticast = false },
		"own-tma-wg2f-nomc": func(s *model.Switches) {
			s.CUDAGemmTMA, s.CUDAWgmmaTile, s.CUDAGemmMulticast = "1", "wg2f", false
		},
		"own-tma-s2x208-unpersist": func(s *model.Switches) {
			s.CUDAGemmTMA, s.CUDAWgmmaTile, s.CUDAGemmPersist = "1", "s2x208", false
		},
		"own-waves4": func(s *model.Switches) { s.CUDAGemmWaves = 4 },
	} {
		got, exp := base, base
		setBenchImpl(&got, impl)
		want(&exp)
		if got != exp {
			t.Errorf("%s: %+v, want %+v", impl, got, exp)
		}
	}
}

// gemmSplitFlag: BenchmarkGemm's and BenchmarkGemmFP8's own
// implementations with K split this many ways on the TMA kernels
// (XRUN_CUDA_GEMM_SPLIT; 0: the planner's split), e.g. `-gemm.split 1`
// for a forced tile unsplit.
// gemmReverseFlag runs BenchmarkGemm's and BenchmarkGemmFP8's
// implementations at each shape in reverse order (cuBLASLt's last, the
// plan's last but one), so that a position effect (a later implementation
// at a shape reading slower, as the same kernel forced after the plan did
// by 1-6 %, NOTES v70) can be measured, and pooled out by running the
// samples in both orders.
var gemmReverseFlag = flag.Bool("gemm.reverse", false, "BenchmarkGemm and BenchmarkGemmFP8: time each shape's implementations in reverse order")

// benchOrder is impls in the order -gemm.reverse asks for.
func benchOrder(impls []string) []string {
	if *gemmReverseFlag {
		impls = slices.Clone(impls)
		slices.Reverse(impls)
	}
	return impls
}

var gemmSplitFlag = flag.Int("gemm.split", 0, "BenchmarkGemm and BenchmarkGemmFP8: the own GEMM's split of K on the TMA kernels (XRUN_CUDA_GEMM_SPLIT; 0: the planner's)")

// gemmSlackFlag: whether BenchmarkGemm's and BenchmarkGemmFP8's X has rows
// to spare past M, as the engine's activations do (they hold the largest
// batch, and the backend rounds them up: tmaMapRows reads a ragged last
// tile's rows from them); false times a buffer of exactly M rows, whose
// last tile the TMA fills with zeros.
var gemmSlackFlag = flag.Bool("gemm.xslack", true, "BenchmarkGemm and BenchmarkGemmFP8: X with rows to spare past M, as the engine's activations have")

// benchXRows is the rows BenchmarkGemm and BenchmarkGemmFP8 allocate X for
// at M = m: m, and under -gemm.xslack slackRows more.
func benchXRows(m int) int {
	if *gemmSlackFlag {
		return m + slackRows
	}
	return m
}

// gemmRowsFlag: the M values BenchmarkGemm and BenchmarkGemmFP8 time, where
// not their default (gemmRows): e.g. `-gemm.rows 192,256` for the batch
// sizes a study runs.
var gemmRowsFlag = flag.String("gemm.rows", gemmRowsDefault, "BenchmarkGemm and BenchmarkGemmFP8: comma-separated M values to time")

// gemmRowsDefault: a decode's batch sizes and a prefill chunk.
const gemmRowsDefault = "1,64,128,256,2048"

// gemmRows is the M values -gemm.rows lists, in its order: each a positive
// integer; empty, gemmRowsDefault's.
func gemmRows(s string) ([]int, error) {
	if s == "" {
		s = gemmRowsDefault
	}
	var rows []int
	for _, f := range strings.Split(s, ",") {
		m, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || m < 1 || m > 1<<20 {
			return nil, fmt.Errorf("-gemm.rows %q: %q is not a row count from 1 to %d", s, f, 1<<20)
		}
		rows = append(rows, m)
	}
	return rows, nil
}

// TestGemmRows: -gemm.rows's lists, and what it refuses.
func TestGemmRows(t *testing.T) {
	for in, want := range map[string][]int{"": {1, 64, 128, 256, 2048}, "192": {192}, "192, 256,1": {192, 256, 1}} {
		if got, err := gemmRows(in); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("gemmRows(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{",", "0", "-3", "64,", "1e3", "2048,x", "1048577"} {
		if got, err := gemmRows(in); err == nil {
			t.Errorf("gemmRows(%q) = %v; want an error", in, got)
		}
	}
}

// FuzzGemmRows: whatever -gemm.rows says, gemmRows returns positive counts
// or an error, never a panic.
func FuzzGemmRows(f *testing.F) {
	for _, s := range []string{"", "192,256", "0", ",,", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := gemmRows(s)
		if err != nil {
			return
		}
		if len(rows) == 0 {
			t.Fatalf("gemmRows(%q): no rows and no error", s)
		}
		for _, m := range rows {
			if m < 1 || m > 1<<20 {
				t.Fatalf("gemmRows(%q) = %v", s, rows)
			}
		}
	})
}

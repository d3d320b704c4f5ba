//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 checks (kernels/fp8.cu) against engine/fp8 and engine/cpu's FP8
// reference: the codes and scales bit for bit, the GEMMs within a bound.

// fp8TolRef bounds an FP8 GEMM against the fake-quant reference on the same
// codes: every product of two E4M3 values is exact in float32, so what is
// left is float32 against float64 accumulation and the bf16 output's
// rounding (2^-9 relative), as for the fp16/bf16 GEMMs.
const fp8TolRef = tol16

// fp8TolUnquantized bounds an FP8 GEMM against the GEMM of the values it
// quantized. E4M3 keeps 3 mantissa bits: rounding leaves a relative error
// of at most 2^-4 and about 2^-4/sqrt(3) = 0.036 RMS on each operand, so
// about 0.05 RMS on each product; the errors of a dot product's terms are
// independent, so its relative (L2) error stays about that. 0.1 is twice it.
const fp8TolUnquantized = 0.1

// devCodes downloads n E4M3 codes.
func devCodes(t testing.TB, g *GPU, b Buffer, n int) []uint8 {
	t.Helper()
	c := make([]uint8, n)
	if err := DownloadSlice(g.Stream, c, b.Slice(0, n)); err != nil {
		t.Fatal(err)
	}
	return c
}

func devF32(t testing.TB, g *GPU, b Buffer, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	if err := DownloadSlice(g.Stream, v, b.Slice(0, 4*n)); err != nil {
		t.Fatal(err)
	}
	return v
}

func devAlloc(t testing.TB, g *GPU, bytes int) Buffer {
	t.Helper()
	b, err := g.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return g.Free(b) }) })
	return b
}

// refQuant is fp8's quantization of rows x k: codes and scales (one, or one
// per row), static where given.
func refQuant(x []float32, rows, k int, static float32, perRow bool) ([]uint8, []float32) {
	q := make([]uint8, rows*k)
	if perRow {
		var sc []float32
		for r := range rows {
			s := fp8.Scale(fp8.AbsMax(x[r*k : (r+1)*k]))
			fp8.Quantize(q[r*k:(r+1)*k], x[r*k:(r+1)*k], s)
			sc = append(sc, s)
		}
		return q, sc
	}
	s := static
	if s == 0 {
		s = fp8.Scale(fp8.AbsMax(x))
	}
	fp8.Quantize(q, x, s)
	return q, []float32{s}
}

// TestFP8Quantize checks the activation quantizer's codes and scales bit
// for bit against engine/fp8: dynamic per tensor, static, per row; values
// spread over many binades (subnormal codes, ties and saturation included)
// and an all-zero row; rows of 36 values take the one-by-one loops (no
// 16-byte packs), 2 x 14336 the largest input every block reduces itself.
func TestFP8Quantize(t *testing.T) {
	for _, dt := range dtypes {
		for _, sh := range [][2]int{{1, 64}, {3, 160}, {5, 36}, {2, 14336}, {17, 4096}, {64, 2880}} {
			rows, k := sh[0], sh[1]
			t.Run(fmt.Sprintf("%s/%dx%d", dt, rows, k), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					x := make([]float32, rows*k)
					for i := range x {
						v := float32(math.Exp2(float64(r.IntN(24)-16))) * (2*r.Float32() - 1)
						x[i] = dt.ToFloat32(dt.FromFloat32(v))
					}
					if rows > 1 {
						clear(x[k : 2*k]) // a zero row: scale 1
					}
					xb := devUpload(t, g, dt, x)
					q, amax, sc := devAlloc(t, g, rows*k), devAlloc(t, g, FP8AmaxBytes), devAlloc(t, g, 4*rows)
					static := devUploadT(t, g, []float32{0.0123})
					for _, c := range []struct {
						name   string
						mode   FP8Quant
						static float32
					}{
						{"dynamic", FP8Quant{}, 0},
						{"static", FP8Quant{Static: static}, 0.0123},
						{"per-row", FP8Quant{PerRow: true}, 0},
					} {
						if err := g.FP8Quantize(g.Stream, dt, q, xb, rows, k, c.mode, amax, sc); err != nil {
							t.Fatal(err)
						}
						wantQ, wantS := refQuant(x, rows, k, c.static, c.mode.PerRow)
						gotQ, gotS := devCodes(t, g, q, rows*k), devF32(t, g, sc, len(wantS))
						for i, s := range wantS {
							if gotS[i] != s {
								t.Errorf("%s: scale %d is %g, want %g", c.name, i, gotS[i], s)
							}
						}
						bad := 0
						for i := range wantQ {
							if gotQ[i] != wantQ[i] && bad < 5 {
								bad++
								t.Errorf("%s: code %d of %g is %#02x, want %#02x", c.name, i, x[i], gotQ[i], wantQ[i])
							}
						}
					}
				})
			})
		}
	}
}

// TestFP8QuantizeRandom checks that a random weight quantized on the
// device has the CPU backend's scale and codes: those of the float32
// values model.RandomFill gives.
func TestFP8QuantizeRandom(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		r := newRand(t)
		const n = 320 * 64
		seed, scale := r.Uint64(), float32(0.37)
		q, amax, sc := devAlloc(t, g, n), devAlloc(t, g, FP8AmaxBytes), devAlloc(t, g, 4)
		if err := g.FP8QuantizeRandom(g.Stream, q, n, seed, scale, amax, sc); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, n)
		model.RandomFill(v, seed, 0, scale)
		wantQ, wantS := refQuant(v, 1, n, 0, false)
		if got := devF32(t, g, sc, 1)[0]; got != wantS[0] {
			t.Errorf("scale %g, want %g", got, wantS[0])
		}
		got := devCodes(t, g, q, n)
		for i := range got {
			if got[i] != wantQ[i] {
				t.Fatalf("code %d is %#02x, want %#02x (value %g)", i, got[i], wantQ[i], v[i])
			}
		}
	})
}

// fp8Case is one FP8 GEMM's operands on the device and what the reference
// needs of them.
type fp8Case struct {
	x, w     FP8Operand
	xq       []float32 // X's E4M3 values (unscaled), m x k
	sx       []float32
	xv       []float32 // the bf16 values X was quantized from
	wv       func(j int) []float32
	wCodes   func(j int) []uint8
	sw       []float32
	maxM, k  int
	perRowed bool
}

// newFP8Case fills W [n, k] with a random weight quantized on the device
// (per tensor, or per row with perRow: the rows scaled apart so that
// their scales differ) and X [maxM, k] with random bf16 values quantized
// per tensor (or per row).
func newFP8Case(t testing.TB, g *GPU, n, k, maxM int, perRow bool) *fp8Case {
	r := newRand(t)
	c := &fp8Case{maxM: maxM, k: k, perRowed: perRow}
	seed := r.Uint64()
	wc, amax := devAlloc(t, g, n*k), devAlloc(t, g, FP8AmaxBytes)
	var wvals []float32 // per row only: the host keeps the weight
	if perRow {
		wvals = make([]float32, n*k)
		model.RandomFill(wvals, seed, 0, 0.1)
		for j := range n {
			s := float32(1 + j%7)
			for i := range k {
				wvals[j*k+i] *= s
			}
		}
		codes, sc := refQuant(wvals, n, k, 0, true)
		if err := UploadSlice(g.Stream, wc, codes); err != nil {
			t.Fatal(err)
		}
		c.w = FP8Operand{Codes: wc, Scales: devUploadT(t, g, sc), PerRow: true}
		c.sw = sc
	} else {
		sc := devAlloc(t, g, 4)
		if err := g.FP8QuantizeRandom(g.Stream, wc, n*k, seed, 0.1, amax, sc); err != nil {
			t.Fatal(err)
		}
		c.w = FP8Operand{Codes: wc, Scales: sc}
		c.sw = devF32(t, g, sc, 1)
	}
	c.wCodes = func(j int) []uint8 { return devCodes(t, g, wc.Slice(j*k, k), k) }
	c.wv = func(j int) []float32 {
		if wvals != nil {
			return wvals[j*k : (j+1)*k]
		}
		v := make([]float32, k)
		model.RandomFill(v, seed, int64(j*k), 0.1)
		return v
	}
	c.xv = randVals(r, BF16, maxM*k, 1)
	xb := devUpload(t, g, BF16, c.xv)
	// Codes 0x7f (NaN) in slackRows rows past maxM, as devUploadSlack's.
	xq, sx := devAlloc(t, g, ((maxM+slackRows)*k+1)&^1), devAlloc(t, g, 4*maxM)
	if err := g.Stream.Fill16(xq, 0x7f7f); err != nil {
		t.Fatal(err)
	}
	if err := g.FP8Quantize(g.Stream, BF16, xq, xb, maxM, k, FP8Quant{PerRow: perRow}, amax, sx); err != nil {
		t.Fatal(err)
	}
	c.x = FP8Operand{Codes: xq, Scales: sx, PerRow: perRow}
	c.xq, c.sx = cpu.RefFP8Input(c.xv, maxM, k, 0, perRow)
	return c
}

// ref is the fake-quant reference (cpu.RefFP8GEMM) and the unquantized
// GEMM of the first m rows on columns cols.
func (c *fp8Case) ref(m int, cols []int) (fq, plain []float32) {
	k := c.k
	var codes []uint8
	var sw []float32
	wRows := make([][]float32, len(cols))
	for i, j := range cols {
		codes = append(codes, c.wCodes(j)...)
		wRows[i] = c.wv(j)
		if len(c.sw) > 1 {
			sw = append(sw, c.sw[j])
		}
	}
	if len(sw) == 0 {
		sw = c.sw
	}
	sx := c.sx
	if c.perRowed {
		sx = sx[:m]
	} else {
		// Quantized over all maxM rows: the scale of the whole X.
		sx = sx[:1]
	}
	fq = make([]float32, m*len(cols))
	cpu.RefFP8GEMM(fq, c.xq[:m*k], sx, codes, sw, m, len(cols), k)
	return fq, refGemmCols(c.xv[:m*k], wRows, m, k)
}

// TestGemmFP8Zoo checks the own FP8 GEMM and cuBLASLt's at every dense zoo
// shape and decode/prefill M (up to 520, whose plans take 128 x 256 tiles
// where those fill their rounds, ragged in the last row tile) against the
// fake-quant CPU reference on the same codes (fp8TolRef) and the
// unquantized GEMM (fp8TolUnquantized) on sampled columns, and against
// each other on every output. cuBLASLt's FP8
// kernels need Ada or Hopper; elsewhere its half is skipped.
func TestGemmFP8Zoo(t *testing.T) {
	for _, sh := range zooGemmShapes {
		t.Run(fmt.Sprintf("%s_N%d_K%d", sh.name, sh.n, sh.k), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) { checkGemmFP8Zoo(t, g, sh) })
		})
	}
}

// TestGemmFP8Paths runs TestGemmFP8Zoo's and TestGemmFP8PerRow's checks on
// the own FP8 GEMM's other tiles where a GPU has two: on Hopper the
// warpgroup MMA's E4M3 form (gemm_wgmma.cu) beside the CUDA-core tiles
// (fp8.cu), whichever XRUN_CUDA_WGMMA_FP8 does not choose.
func TestGemmFP8Paths(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("only Hopper has a second FP8 GEMM (the warpgroup MMA)")
	}
	other := func(g *GPU, fn func()) {
		defer keepSwitches(g)()
		on := !g.wgmmaFP8()
		g.sw.CUDAWgmma, g.sw.CUDAWgmmaFP8 = on, on
		fn()
	}
	for _, sh := range zooGemmShapes {
		t.Run(fmt.Sprintf("%s_N%d_K%d", sh.name, sh.n, sh.k), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) { other(g, func() { checkGemmFP8Zoo(t, g, sh) }) })
		})
	}
	for _, sh := range fp8PerRowShapes {
		t.Run(fmt.Sprintf("per-row/%s_N%d_K%d", sh.name, sh.n, sh.k), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) { other(g, func() { checkGemmFP8PerRow(t, g, sh) }) })
		})
	}
}

// checkGemmFP8Zoo is TestGemmFP8Zoo's check of one shape.
func checkGemmFP8Zoo(t testing.TB, g *GPU, sh zooGemm) {
	newGemmFP8ZooCheck(t, g, sh).check(t, g)
}

// gemmFP8ZooCheck is one shape's FP8 operands on the device with, at each
// M, the fake-quant and unquantized CPU products on sampled columns and
// cuBLASLt's FP8 product on every output (where its FP8 kernels run).
type gemmFP8ZooCheck struct {
	sh              zooGemm
	c               *fp8Case
	ms, cols        []int
	fq, plain, blas [][]float32
}

func newGemmFP8ZooCheck(t testing.TB, g *GPU, sh zooGemm) *gemmFP8ZooCheck {
	z := &gemmFP8ZooCheck{sh: sh, ms: []int{1, 2, 8, 17, 64, 65, 96, 128, 136, 144, 160, 176, 192, 200, 224, 256, 300, 384, 520, 777}, cols: sampleCols(t, sh.n)}
	z.c = newFP8Case(t, g, sh.n, sh.k, z.ms[len(z.ms)-1], false)
	lt, err := g.BlasLt()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range z.ms {
		fq, plain := z.c.ref(m, z.cols)
		z.fq, z.plain = append(z.fq, fq), append(z.plain, plain)
		if !fp8TensorCores(g.Info) {
			continue
		}
		y := devPoisoned(t, g, BF16, m*sh.n)
		if err := lt.MatmulFP8(g.Stream, BF16, y, z.c.x, z.c.w, m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		blas := download(t, g, BF16, y, m*sh.n)
		checkFP8(t, fmt.Sprintf("cuBLASLt M=%d", m), pick(blas, m, sh.n, z.cols), fq, plain)
		z.blas = append(z.blas, blas)
	}
	return z
}

// check runs the own FP8 GEMM, as the switches choose, at each M against
// the CPU and cuBLASLt.
func (z *gemmFP8ZooCheck) check(t testing.TB, g *GPU) {
	sh := z.sh
	for i, m := range z.ms {
		y := devPoisoned(t, g, BF16, m*sh.n)
		if err := g.GemmFP8(g.Stream, BF16, y, z.c.x, z.c.w, m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		own := download(t, g, BF16, y, m*sh.n)
		checkFP8(t, fmt.Sprintf("own M=%d", m), pick(own, m, sh.n, z.cols), z.fq[i], z.plain[i])
		if z.blas != nil {
			checkRel(t, fmt.Sprintf("own vs cuBLASLt M=%d, all outputs", m), own, z.blas[i])
		}
	}
}

// TestGemmFP8Persist: the persistent kernels over E4M3 codes (blocks that
// take tile after tile), with per-tensor and per-row scales, against the
// fake-quant CPU reference: few blocks for many tiles, tile counts no
// multiple of the blocks, ragged row and column tiles, more k-tiles than
// stages, the last one ragged; and on pairs of blocks multicasting W.
func TestGemmFP8Persist(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const n, k = 1000, 1296 // eleven k-tiles of 128 codes, the last of 16
	for tile := range tmaPersist {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				for _, perRow := range []bool{false, true} {
					c := newFP8Case(t, g, n, k, 520, perRow)
					cols := sampleCols(t, n)
					for _, m := range []int{200, 520} {
						fq, plain := c.ref(m, cols)
						base := tmaPlan{cfg: tmaConfigs[tile], splits: 1, kps: ceilDiv(k, 128)}
						for _, p := range []tmaPlan{base.persist(m, n, 1), base.persist(m, n, 3), base.persist(m, n, 3).withMulticast(m, 4, false)} {
							if p.blocks == 0 {
								t.Fatalf("%s M=%d: plan %+v not persistent", tile, m, p)
							}
							y := devPoisoned(t, g, BF16, m*n)
							err := g.launchGemmTMA(g.Stream, BF16, y, c.x.Codes, c.w.Codes, p, 1, m, n, k, fp8ScaleArgs(c.x, c.w))
							if err != nil {
								t.Fatal(err)
							}
							what := fmt.Sprintf("%s per-row %v M=%d blocks %d multicast %v", tile, perRow, m, p.blocks, p.mc)
							checkFP8(t, what, pick(download(t, g, BF16, y, m*n), m, n, cols), fq, plain)
						}
					}
				}
			})
		})
	}
}

// TestGemmFP8TMASplits: every TMA tile's E4M3 kernel with K split 1-8
// ways in its cluster (the narrow tiles split only under
// XRUN_CUDA_GEMM_WAVES), per-tensor and per-row scales, against the
// fake-quant CPU reference; ragged row and column tiles, each block of a
// split two k-tiles of 128 codes, the last block's last one ragged.
func TestGemmFP8TMASplits(t *testing.T) {
	if testGPU(t).Info.Major != 9 {
		t.Skip("TMA and the warpgroup MMA are Hopper's (sm_90)")
	}
	const m, n, kps = 200, 264, 2
	for _, tile := range tmaTiles {
		t.Run(tile, func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				for _, perRow := range []bool{false, true} {
					for s := 1; s <= tmaMaxCluster; s++ {
						k := s*kps*128 - 16
						c := newFP8Case(t, g, n, k, m, perRow)
						cols := sampleCols(t, n)
						fq, plain := c.ref(m, cols)
						p := tmaPlan{cfg: tmaConfigs[tile], splits: s, kps: kps}
						y := devPoisoned(t, g, BF16, m*n)
						if err := g.launchGemmTMA(g.Stream, BF16, y, c.x.Codes, c.w.Codes, p, 1, m, n, k, fp8ScaleArgs(c.x, c.w)); err != nil {
							t.Fatal(err)
						}
						what := fmt.Sprintf("%s per-row %v split %d", tile, perRow, s)
						checkFP8(t, what, pick(download(t, g, BF16, y, m*n), m, n, cols), fq, plain)
					}
				}
			})
		})
	}
}

// TestGemmFP8PerRow checks the own FP8 GEMM with a weight scale per row
// and an input scale per row (checkpoints' per-channel weights and
// per-token activations), and that cuBLASLt's path refuses them.
func TestGemmFP8PerRow(t *testing.T) {
	for _, sh := range fp8PerRowShapes {
		t.Run(fmt.Sprintf("%s_N%d_K%d", sh.name, sh.n, sh.k), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) { checkGemmFP8PerRow(t, g, sh) })
		})
	}
}

var fp8PerRowShapes = []zooGemm{{"tiny-llama/gate_up", 320, 64}, {"tinyllama/o", 2048, 2048}, {"edge", 1000, 208}}

// checkGemmFP8PerRow is TestGemmFP8PerRow's check of one shape.
func checkGemmFP8PerRow(t testing.TB, g *GPU, sh zooGemm) {
	c := newFP8Case(t, g, sh.n, sh.k, 65, true)
	cols := sampleCols(t, sh.n)
	for _, m := range []int{1, 5, 8, 9, 65} {
		fq, plain := c.ref(m, cols)
		y := devPoisoned(t, g, BF16, m*sh.n)
		if err := g.GemmFP8(g.Stream, BF16, y, c.x, c.w, m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		checkFP8(t, fmt.Sprintf("own M=%d", m), pick(download(t, g, BF16, y, m*sh.n), m, sh.n, cols), fq, plain)
	}
	lt, err := g.BlasLt()
	if err != nil {
		t.Fatal(err)
	}
	y := devPoisoned(t, g, BF16, sh.n)
	if err := lt.MatmulFP8(g.Stream, BF16, y, c.x, c.w, 1, sh.n, sh.k); err == nil {
		t.Error("cuBLASLt's FP8 path took per-row scales")
	}
}

func checkFP8(t testing.TB, what string, got, fq, plain []float32) {
	t.Helper()
	if e := cpu.RelErr(got, fq); !(e < fp8TolRef) {
		i := worst(got, fq)
		t.Errorf("%s vs the fake-quant reference: relative error %.3g (bound %g); worst at %d: got %g, want %g", what, e, fp8TolRef, i, got[i], fq[i])
	}
	if e := cpu.RelErr(got, plain); !(e < fp8TolUnquantized) {
		t.Errorf("%s vs the unquantized GEMM: relative error %.3g (bound %g)", what, e, fp8TolUnquantized)
	} else {
		t.Logf("%s: %.3g from the unquantized GEMM", what, e)
	}
}

// fp8TensorCores is whether cuBLASLt has FP8 kernels for the GPU: compute
// capability 8.9 (Ada) or 9.0 and later.
func fp8TensorCores(d DeviceInfo) bool {
	return d.Major > 8 || d.Major == 8 && d.Minor >= 9
}

// BenchmarkFP8Quantize times quantizing a GEMM input, dynamic per tensor,
// at Llama-3.1-8B's two input widths: decode rows every block reduces
// itself, and larger inputs through the amax kernel. Reported: us/quant and
// GB/s of bf16 read and codes written.
func BenchmarkFP8Quantize(b *testing.B) {
	testGPU(b)
	for _, k := range []int{4096, 14336} {
		for _, m := range []int{1, 2, 8, 64, 256, 2048, 8192} {
			// static: the scale given (a checkpoint's input_scale, as the
			// prefill's attention output is quantized), no amax pass.
			for _, static := range []bool{false, true} {
				b.Run(fmt.Sprintf("M=%d/K=%d/static=%v", m, k, static), func(b *testing.B) {
					var d time.Duration
					do(b, func(t testing.TB, g *GPU) {
						x := devAlloc(t, g, m*k*2)
						xq, sx, amax := devAlloc(t, g, m*k), devAlloc(t, g, 4), devAlloc(t, g, FP8AmaxBytes)
						if err := g.RandomFill(g.Stream, BF16, x, 99, 0, 1); err != nil {
							t.Fatal(err)
						}
						var mode FP8Quant
						if static {
							mode.Static = devUploadT(t, g, []float32{0.01})
						}
						d = timeLaunches(b, t, g, 1, func(int) error {
							return g.FP8Quantize(g.Stream, BF16, xq, x, m, k, mode, amax, sx)
						})
					})
					per := d.Seconds() / float64(b.N)
					b.ReportMetric(per*1e6, "us/quant")
					b.ReportMetric(float64(3*m*k)/per/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkGemmFP8 times FP8 against bf16 GEMMs at the zoo's projections
// (Llama-3.1-8B's first, by their bare names, then the rest of the
// full-size ones as model-gemm, as BenchmarkGemm names them) for M = 1,
// 64, 128, 256 and 2048: cuBLASLt bf16, cuBLASLt FP8 and the own FP8
// kernels, each FP8 one with its input's quantization (amax and quantize
// kernels, dynamic per tensor) counted, as a forward pass runs it. On
// Hopper the own kernels also run forced: the warpgroup MMA (TMA-fed as
// XRUN_CUDA_GEMM_TMA chooses; -tma and -cpasync force each), its 128 x
// 256 tile, the CUDA-core tiles, and at every M but 2048 each TMA tile
// (own-fp8-tma-wg1 ... -wg1m, XRUN_CUDA_GEMM_TMA=1 with
// XRUN_CUDA_WGMMA_TILE), at 2048 128 x 192 (own-fp8-tma-wg2m);
// own-fp8-unpersist, the plan without persistent blocks; own-fp8-waves1,
// the plan with K split for a block a multiprocessor
// (XRUN_CUDA_GEMM_WAVES=1, the narrow tiles too); own-fp8-mc, the plan
// with W's loads multicast to pairs of row tiles where its launch allows
// it, which the planner does not do for E4M3 codes
// (tmaPlan.withMulticast).
// Weights rotate among copies larger than the L2 cache together, as in
// BenchmarkGemm, and are timed as it times them (a captured graph's
// replays; us/launch, queued from the host one by one). Reported: us/gemm,
// TFLOP/s, GB/s of the bytes that must move (W at its width, X and Y in
// bf16), and us/launch.
func BenchmarkGemmFP8(b *testing.B) {
	dev := testGPU(b)
	rows, err := gemmRows(*gemmRowsFlag)
	if err != nil {
		b.Fatal(err)
	}
	shapes := []zooGemm{{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm", 128256, 4096}}
	for _, sh := range zooGemmShapes {
		if model, _, _ := strings.Cut(sh.name, "/"); model != "llama-3.1-8b" && !strings.HasPrefix(model, "tiny-") {
			shapes = append(shapes, zooGemm{strings.ReplaceAll(sh.name, "/", "-"), sh.n, sh.k})
		}
	}
	for _, sh := range shapes {
		for _, m := range rows {
			impls := []string{"cublaslt-bf16", "cublaslt-fp8", "own-fp8"}
			if dev.Info.Major == 9 && m > fp8GemvRows {
				// The warpgroup MMA and fp8.cu's CUDA-core tiles, whatever
				// XRUN_CUDA_WGMMA_FP8 says.
				impls = append(impls, "own-fp8-wgmma", "own-fp8-wg2w", "own-fp8-cpasync", "own-fp8-tma", "own-fp8-cores", "own-fp8-unpersist", "own-fp8-mc", "own-fp8-waves1")
				// Every tile at every M but 2048 (BenchmarkGemm says why).
				if m != 2048 {
					for _, tile := range append(tmaTiles[:len(tmaTiles):len(tmaTiles)], tmaClusterTiles...) {
						impls = append(impls, "own-fp8-tma-"+tile)
					}
				} else {
					impls = append(impls, "own-fp8-tma-wg2m") // with own-fp8-wg2w, the 16-bit plans' tiles there
				}
			}
			for _, impl := range benchOrder(impls) {
				b.Run(fmt.Sprintf("%s/%s/M=%d/N=%d/K=%d", impl, sh.name, m, sh.n, sh.k), func(b *testing.B) {
					fp8 := impl != "cublaslt-bf16"
					wBytes := sh.n * sh.k
					if !fp8 {
						wBytes *= 2
					}
					copies := min(16, max(2, ceilDiv(4*dev.Info.L2Bytes, wBytes)))
					if impl == "cublaslt-fp8" && !fp8TensorCores(dev.Info) {
						b.Skip("no FP8 tensor cores on this GPU")
					}
					var d, q time.Duration
					do(b, func(t testing.TB, g *GPU) {
						if rest, own := strings.CutPrefix(impl, "own-fp8"); own {
							defer keepSwitches(g)()
							g.sw.CUDAGemmSplit = *gemmSplitFlag
							if rest != "" {
								on := impl != "own-fp8-cores"
								g.sw.CUDAWgmma, g.sw.CUDAWgmmaFP8 = on, on
								// -wg2w, -tma, -tma-<tile> and -cpasync (gemm_wgmma.cu's
								// cp.async kernels) as BenchmarkGemm's own-* set them.
								setBenchImpl(&g.sw, "own"+rest)
							}
						}
						lt, err := g.BlasLt()
						if err != nil {
							t.Fatal(err)
						}
						x := devAlloc(t, g, m*sh.k*2)
						y := devAlloc(t, g, m*sh.n*2)
						xq, sx, amax := devAlloc(t, g, benchXRows(m)*sh.k), devAlloc(t, g, 4), devAlloc(t, g, FP8AmaxBytes)
						if err := g.RandomFill(g.Stream, BF16, x, 99, 0, 1); err != nil {
							t.Fatal(err)
						}
						var ws []FP8Operand
						for i := range copies {
							w := devAlloc(t, g, wBytes)
							sc := devAlloc(t, g, 4)
							if fp8 {
								err = g.FP8QuantizeRandom(g.Stream, w, sh.n*sh.k, uint64(i+1), 0.1, amax, sc)
							} else {
								err = g.RandomFill(g.Stream, BF16, w, uint64(i+1), 0, 0.1)
							}
							if err != nil {
								t.Fatal(err)
							}
							ws = append(ws, FP8Operand{Codes: w, Scales: sc})
						}
						xo := FP8Operand{Codes: xq, Scales: sx}
						run := func(i int) error {
							w := ws[i%len(ws)]
							if !fp8 {
								return lt.Matmul(g.Stream, BF16, y, x, w.Codes, m, sh.n, sh.k)
							}
							if err := g.FP8Quantize(g.Stream, BF16, xq, x, m, sh.k, FP8Quant{}, amax, sx); err != nil {
								return err
							}
							if impl == "own-fp8-mc" {
								return launchFP8Multicast(g, y, xo, w, m, sh.n, sh.k)
							}
							if strings.HasPrefix(impl, "own-fp8") {
								return g.GemmFP8(g.Stream, BF16, y, xo, w, m, sh.n, sh.k)
							}
							return lt.MatmulFP8(g.Stream, BF16, y, xo, w, m, sh.n, sh.k)
						}
						d = timeGraph(b, t, g, 2*copies, run)
						q = timeLaunches(b, t, g, 2*copies, run)
						// The TMA plan GemmFP8 took, as BenchmarkGemm logs
						// its own (-test.v).
						if fp8 && m > fp8GemvRows && g.wgmmaFP8() && strings.HasPrefix(impl, "own-fp8") && impl != "own-fp8-mc" {
							if p, ok := g.tmaPlanFor(m, sh.n, sh.k, true); ok {
								b.Logf("plan %s", p)
							}
						}
					})
					per := d.Seconds() / float64(b.N)
					b.ReportMetric(per*1e6, "us/gemm")
					b.ReportMetric(q.Seconds()/float64(b.N)*1e6, "us/launch")
					b.ReportMetric(2*float64(m)*float64(sh.n)*float64(sh.k)/per/1e12, "TFLOP/s")
					b.ReportMetric(float64(wBytes+(m*sh.k+m*sh.n)*2)/per/1e9, "GB/s")
				})
			}
		}
	}
}

// launchFP8Multicast queues the own E4M3 GEMM on the TMA kernels by its
// plan with W's loads multicast as for 16-bit values (BenchmarkGemmFP8's
// own-fp8-mc).
func launchFP8Multicast(g *GPU, y Buffer, x, w FP8Operand, m, n, k int) error {
	p, ok := g.tmaPlanFor(m, n, k, true)
	if !ok {
		return fmt.Errorf("M=%d N=%d K=%d: not on the TMA kernels", m, n, k)
	}
	p = p.withMulticast(m, g.tmaSlots(p.cfg, true, 2), false)
	return g.launchGemmTMA(g.Stream, BF16, y, x.Codes, w.Codes, p, 1, m, n, k, fp8ScaleArgs(x, w))
}

// TestFP8CalibAmax checks calibration's running amax against engine/fp8's
// AbsMax of the same values, exactly: over two launches into one cell
// (the second from where the first stopped: for most n an address that is
// not 16-byte aligned, read value by value), values over many binades,
// with a NaN (skipped), an infinity, and all zeros.
func TestFP8CalibAmax(t *testing.T) {
	for _, dt := range dtypes {
		for _, n := range []int{2, 37, 4096, 7*4096 + 5, 1000 * 14336} {
			for _, c := range []string{"finite", "nan", "inf", "zero"} {
				t.Run(fmt.Sprintf("%s/n=%d/%s", dt, n, c), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						x := make([]float32, n)
						if c != "zero" {
							for i := range x {
								v := float32(math.Exp2(float64(r.IntN(24)-16))) * (2*r.Float32() - 1)
								x[i] = dt.ToFloat32(dt.FromFloat32(v))
							}
						}
						switch c {
						case "nan":
							x[r.IntN(n)] = float32(math.NaN())
						case "inf":
							x[r.IntN(n)] = float32(math.Inf(-1))
						}
						xb := devUpload(t, g, dt, x)
						cell := devAlloc(t, g, 4)
						if err := g.Stream.Zero(cell); err != nil {
							t.Fatal(err)
						}
						h := n / 2
						if err := g.FP8CalibAmax(g.Stream, dt, xb, h, cell); err != nil {
							t.Fatal(err)
						}
						es := dt.Size()
						if err := g.FP8CalibAmax(g.Stream, dt, xb.Slice(h*es, (n-h)*es), n-h, cell); err != nil {
							t.Fatal(err)
						}
						got, want := devF32(t, g, cell, 1)[0], fp8.AbsMax(x)
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Errorf("amax %g (%#08x), want %g (%#08x)", got, math.Float32bits(got), want, math.Float32bits(want))
						}
					})
				})
			}
		}
	}
}

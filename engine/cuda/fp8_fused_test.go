//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/fp8"
)

// The fused FP8 kernels (kernels/fp8_fused.cu) against the path they
// replace, the plain kernel then FP8Quantize with the same static scale:
// codes (and AddRMSNorm's residual) bit for bit, on fresh random input at
// Llama-3.1-8B's and TinyLlama's widths (hidden 4096 / 2048, FFN 14336 /
// 5632) and 1, 7, 64 and 1000 rows; the codes also against engine/fp8's
// quantization of the plain kernel's output.

var fp8FusedRows = []int{1, 7, 64, 1000}

// fp8FusedScale is a static scale for values v: 3/4 of amax/448, so that
// the largest values saturate, as they do beyond a calibration's range.
func fp8FusedScale(v []float32) float32 { return 0.75 * fp8.Scale(fp8.AbsMax(v)) }

// devCodesPoisoned allocates n code bytes filled with 0xff (-NaN, which
// no finite value quantizes to): a code the kernel fails to write shows.
func devCodesPoisoned(t testing.TB, g *GPU, n int) Buffer {
	t.Helper()
	b := devAlloc(t, g, n+n%2)
	if err := g.Stream.Fill16(b, 0xffff); err != nil {
		t.Fatal(err)
	}
	return b
}

// devBits downloads n 16-bit values as their bits.
func devBits(t testing.TB, g *GPU, b Buffer, n int) []uint16 {
	t.Helper()
	v := make([]uint16, n)
	if err := DownloadSlice(g.Stream, v, b.Slice(0, 2*n)); err != nil {
		t.Fatal(err)
	}
	return v
}

// sameCodes reports the first few codes of got that differ from want (of
// the values vals).
func sameCodes(t testing.TB, what string, got, want []uint8, vals []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if got[i] != want[i] {
			if bad < 5 {
				t.Errorf("%s: code %d (of %g) is %#02x, want %#02x", what, i, vals[i], got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d codes differ", what, bad, len(want))
	}
}

// fp8Unfused quantizes the dt values in out (rows x k, vals on the host)
// with FP8Quantize's static mode and checks its codes against engine/fp8:
// the path the fused kernels must match.
func fp8Unfused(t testing.TB, g *GPU, dt DType, out Buffer, vals []float32, rows, k int, scale Buffer, s float32) []uint8 {
	t.Helper()
	q, amax, sc := devAlloc(t, g, rows*k), devAlloc(t, g, FP8AmaxBytes), devAlloc(t, g, 4)
	if err := g.FP8Quantize(g.Stream, dt, q, out, rows, k, FP8Quant{Static: scale}, amax, sc); err != nil {
		t.Fatal(err)
	}
	got := devCodes(t, g, q, rows*k)
	want, _ := refQuant(vals, rows, k, s, false)
	sameCodes(t, "unfused vs engine/fp8", got, want, vals)
	return got
}

func TestFP8FusedRMSNorm(t *testing.T) {
	const eps = 1e-5
	for _, dt := range dtypes {
		for _, hidden := range []int{4096, 2048} {
			for _, add := range []bool{false, true} {
				name := fmt.Sprintf("%s/H%d", dt, hidden)
				if add {
					name += "/add"
				}
				t.Run(name, func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						maxN := fp8FusedRows[len(fp8FusedRows)-1] * hidden
						x, res, w := randVals(r, dt, maxN, 2), randVals(r, dt, maxN, 2), randVals(r, dt, hidden, 1)
						xb, wb := devUpload(t, g, dt, x), devUpload(t, g, dt, w)
						for _, rows := range fp8FusedRows {
							n := rows * hidden
							out := devPoisoned(t, g, dt, n)
							var resPlain, resFused Buffer
							if add {
								resPlain, resFused = devUpload(t, g, dt, res[:n]), devUpload(t, g, dt, res[:n])
								if err := g.AddRMSNorm(g.Stream, dt, out, resPlain, xb, wb, rows, hidden, eps); err != nil {
									t.Fatal(err)
								}
							} else if err := g.RMSNorm(g.Stream, dt, out, xb, wb, rows, hidden, eps); err != nil {
								t.Fatal(err)
							}
							normed := download(t, g, dt, out, n)
							s := fp8FusedScale(normed)
							sb := devUploadT(t, g, []float32{s})
							want := fp8Unfused(t, g, dt, out, normed, rows, hidden, sb, s)

							q := devCodesPoisoned(t, g, n)
							var err error
							if add {
								err = g.FP8AddRMSNorm(g.Stream, dt, q, resFused, xb, wb, sb, rows, hidden, eps)
							} else {
								err = g.FP8RMSNorm(g.Stream, dt, q, xb, wb, sb, rows, hidden, eps)
							}
							if err != nil {
								t.Fatal(err)
							}
							sameCodes(t, fmt.Sprintf("%d rows: fused vs unfused", rows), devCodes(t, g, q, n), want, normed)
							if add {
								a, b := devBits(t, g, resPlain, n), devBits(t, g, resFused, n)
								for i := range a {
									if a[i] != b[i] {
										t.Fatalf("%d rows: residual %d is %#04x fused, %#04x unfused", rows, i, b[i], a[i])
									}
								}
							}
						}
					})
				})
			}
		}
	}
}

func TestFP8FusedSwiGLU(t *testing.T) {
	for _, dt := range dtypes {
		for _, ffn := range []int{14336, 5632} {
			for _, fused := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/F%d/gate_up=%v", dt, ffn, fused), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						maxRows := fp8FusedRows[len(fp8FusedRows)-1]
						var gate, up Buffer
						ld := ffn
						if fused { // [rows, 2F]: gate half, then up half
							ld = 2 * ffn
							gate = devUpload(t, g, dt, randVals(r, dt, maxRows*ld, 4))
							up = gate.Slice(ffn*dt.Size(), gate.Bytes-ffn*dt.Size())
						} else {
							gate = devUpload(t, g, dt, randVals(r, dt, maxRows*ffn, 4))
							up = devUpload(t, g, dt, randVals(r, dt, maxRows*ffn, 4))
						}
						for _, rows := range fp8FusedRows {
							n := rows * ffn
							out := devPoisoned(t, g, dt, n)
							if err := g.SwiGLU(g.Stream, dt, out, gate, up, rows, ffn, ld); err != nil {
								t.Fatal(err)
							}
							act := download(t, g, dt, out, n)
							s := fp8FusedScale(act)
							sb := devUploadT(t, g, []float32{s})
							want := fp8Unfused(t, g, dt, out, act, rows, ffn, sb, s)
							q := devCodesPoisoned(t, g, n)
							if err := g.FP8SwiGLU(g.Stream, dt, q, gate, up, sb, rows, ffn, ld); err != nil {
								t.Fatal(err)
							}
							sameCodes(t, fmt.Sprintf("%d rows: fused vs unfused", rows), devCodes(t, g, q, n), want, act)
						}
					})
				})
			}
		}
	}
}

// BenchmarkFP8Fused times each fused kernel against the two launches it
// replaces (the plain kernel, then the static quantization) at
// Llama-3.1-8B's widths, bf16. Reported: us per row set.
func BenchmarkFP8Fused(b *testing.B) {
	testGPU(b)
	const eps = 1e-5
	for _, c := range []struct {
		op string
		k  int
	}{{"rmsnorm", 4096}, {"add_rmsnorm", 4096}, {"swiglu", 14336}} {
		for _, m := range []int{1, 8, 64, 256, 2048, 8192} {
			for _, fused := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/M=%d/fused=%v", c.op, m, fused), func(b *testing.B) {
					var d time.Duration
					do(b, func(t testing.TB, g *GPU) {
						in := 2 * m * c.k
						if c.op == "swiglu" {
							in *= 2
						}
						x, res, w := devAlloc(t, g, in), devAlloc(t, g, 2*m*c.k), devAlloc(t, g, 2*c.k)
						out, q, amax, sx := devAlloc(t, g, 2*m*c.k), devAlloc(t, g, m*c.k), devAlloc(t, g, FP8AmaxBytes), devAlloc(t, g, 4)
						for i, buf := range []Buffer{x, res, w} {
							if err := g.RandomFill(g.Stream, BF16, buf, uint64(i+1), 0, 1); err != nil {
								t.Fatal(err)
							}
						}
						scale := devUploadT(t, g, []float32{0.01})
						up := x.Slice(2*c.k, x.Bytes-2*c.k)
						d = timeLaunches(b, t, g, 1, func(int) error {
							switch {
							case fused && c.op == "rmsnorm":
								return g.FP8RMSNorm(g.Stream, BF16, q, x, w, scale, m, c.k, eps)
							case fused && c.op == "add_rmsnorm":
								return g.FP8AddRMSNorm(g.Stream, BF16, q, res, x, w, scale, m, c.k, eps)
							case fused:
								return g.FP8SwiGLU(g.Stream, BF16, q, x, up, scale, m, c.k, 2*c.k)
							}
							var err error
							switch c.op {
							case "rmsnorm":
								err = g.RMSNorm(g.Stream, BF16, out, x, w, m, c.k, eps)
							case "add_rmsnorm":
								err = g.AddRMSNorm(g.Stream, BF16, out, res, x, w, m, c.k, eps)
							default:
								err = g.SwiGLU(g.Stream, BF16, out, x, up, m, c.k, 2*c.k)
							}
							if err != nil {
								return err
							}
							return g.FP8Quantize(g.Stream, BF16, q, out, m, c.k, FP8Quant{Static: scale}, amax, sx)
						})
					})
					per := d.Seconds() / float64(b.N)
					b.ReportMetric(per*1e6, "us/op")
					// The fused op's bytes (16-bit in, codes out; add_rmsnorm
					// also reads and writes the residual), for either path.
					bytes := 2*m*c.k + m*c.k
					switch c.op {
					case "add_rmsnorm":
						bytes += 4 * m * c.k
					case "swiglu":
						bytes += 2 * m * c.k
					}
					b.ReportMetric(float64(bytes)/per/1e9, "GB/s")
				})
			}
		}
	}
}

//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// moeBenchModels are the zoo's MoE layers issue 9's bar is measured on.
var moeBenchModels = []struct {
	name       string
	E, k, H, F int
}{{"mixtral", 8, 2, 4096, 14336}, {"gpt-oss", 32, 4, 2880, 2880}}

// moeBenchRouting draws rows tokens' k distinct experts: "balanced" is
// TensorRT-LLM's perfect assignment ((t k + j) mod E), "uniform" seeded
// uniform draws (the mild imbalance of chance), "zipf1" draws with
// popularity 1/rank (a hot expert, like a learned router's skew). Seeded:
// every implementation sees the same routing.
func moeBenchRouting(kind string, rows, k, E int) []int32 {
	r := rand.New(rand.NewPCG(7, uint64(rows)))
	idx := make([]int32, rows*k)
	cdf := make([]float64, E)
	sum := 0.0
	for i := range E {
		sum += 1 / float64(i+1)
		cdf[i] = sum
	}
	for t := range rows {
		row := idx[t*k : (t+1)*k]
		for j := range k {
			switch kind {
			case "balanced":
				row[j] = int32((t*k + j) % E)
			default: // a draw, redrawn while it repeats an expert of the row
				for {
					e := int32(r.IntN(E))
					if kind == "zipf1" {
						e = int32(min(sort.SearchFloat64s(cdf, r.Float64()*sum), E-1))
					}
					if !slices.Contains(row[:j], e) {
						row[j] = e
						break
					}
				}
			}
		}
	}
	return idx
}

// BenchmarkMoE times whole MoE layers (grouping, gate_up with SwiGLU, down,
// combine) of Mixtral-8x7B (H 4096, F 14336, 8 experts, top 2) and
// GPT-OSS-20B (H 2880, F 2880, 32 experts, top 4), bf16, at decode batches
// 1, 64 and 256, routed balanced, uniform and zipf1 (moeBenchRouting).
// Implementations: the own grouped kernels as the backend plans them
// ("own": s tiles up to 16 tokens, l above), with a tile configuration
// forced ("own-s", "own-m"), with the weight loads' L2 hints N instead of
// moeDefaultFlags ("own-hintsN"); and cuBLASLt per expert ("cublaslt":
// counts read back, as gemm_plugin auto runs outside graphs). The full
// expert set (2.8 GB, 1.6 GB) lives on the device, far beyond L2, so every
// launch streams the touched experts from HBM as a decode step does.
//
// Reported: us/layer; TB/s, the bytes of the touched experts over the time
// (issue 9's roofline; the H200 streams ~4.3-4.8 TB/s); TFLOP/s of the
// routed pairs' useful work; max/mean, the routing's expert load.
func BenchmarkMoE(b *testing.B) {
	testGPU(b)
	const dt = BF16
	es := dt.Size()
	for _, z := range moeBenchModels {
		var gu, dn Buffer
		alloc := func(t testing.TB, g *GPU, bytes int) Buffer {
			buf, err := g.Alloc(bytes)
			if err != nil {
				t.Fatal(err)
			}
			return buf
		}
		do(b, func(t testing.TB, g *GPU) {
			gu, dn = alloc(t, g, z.E*2*z.F*z.H*es), alloc(t, g, z.E*z.H*z.F*es)
			for i, w := range []Buffer{gu, dn} {
				if err := g.RandomFill(g.Stream, dt, w, uint64(i+1), 0, 0.02); err != nil {
					t.Fatal(err)
				}
			}
		})
		for _, rows := range []int{1, 64, 256} {
			sh := MoEShape{Rows: rows, K: z.k, Experts: z.E, Hidden: z.H, FFN: z.F}
			var x, out, wts, ib, work Buffer
			do(b, func(t testing.TB, g *GPU) {
				x, out, wts = alloc(t, g, rows*z.H*es), alloc(t, g, rows*z.H*es), alloc(t, g, rows*z.k*es)
				ib, work = alloc(t, g, rows*z.k*4), alloc(t, g, MoEWorkBytes(dt, sh, true))
				if err := g.RandomFill(g.Stream, dt, x, 3, 0, 1); err != nil {
					t.Fatal(err)
				}
				if err := g.RandomFill(g.Stream, dt, wts, 4, 0, 0.5); err != nil {
					t.Fatal(err)
				}
			})
			routings := []string{"balanced", "uniform", "zipf1"}
			if rows == 1 {
				routings = routings[:1]
			}
			for _, rt := range routings {
				idx := moeBenchRouting(rt, rows, z.k, z.E)
				load := make([]int, z.E)
				for _, e := range idx {
					load[e]++
				}
				touched := 0
				for _, c := range load {
					if c > 0 {
						touched++
					}
				}
				bytes := float64(touched) * 3 * float64(z.H) * float64(z.F) * float64(es)
				flops := float64(len(idx)) * 3 * 2 * float64(z.H) * float64(z.F)
				imbalance := float64(slices.Max(load)) / (float64(len(idx)) / float64(z.E))
				do(b, func(t testing.TB, g *GPU) {
					if err := UploadSlice(g.Stream, ib, idx); err != nil {
						t.Fatal(err)
					}
				})
				impls := []string{"own", "cublaslt"}
				if rt == "balanced" && rows > 1 {
					impls = append(impls, "own-s", "own-m")
					for h := range 4 {
						if h != moeDefaultFlags {
							impls = append(impls, fmt.Sprintf("own-hints%d", h))
						}
					}
				}
				for _, impl := range impls {
					b.Run(fmt.Sprintf("%s/B%d/%s/%s", z.name, rows, rt, impl), func(b *testing.B) {
						var d time.Duration
						do(b, func(t testing.TB, g *GPU) {
							bl, err := g.BlasLt()
							if err != nil {
								t.Fatal(err)
							}
							defer keepSwitches(g)()
							switch impl {
							case "own-s", "own-m":
								g.sw.CUDAMoETile = impl[len(impl)-1:]
							}
							if h, ok := strings.CutPrefix(impl, "own-hints"); ok {
								g.sw.CUDAMoEHints = int(h[0] - '0')
							}
							d = timeLaunches(b, t, g, 3, func(int) error {
								if impl == "cublaslt" {
									return g.MoEBlasLt(g.Stream, dt, bl, out, x, ib, wts, gu, dn, work, sh)
								}
								return g.MoE(g.Stream, dt, out, x, ib, wts, gu, dn, work, sh)
							})
						})
						per := d.Seconds() / float64(b.N)
						b.ReportMetric(per*1e6, "us/layer")
						b.ReportMetric(bytes/per/1e12, "TB/s")
						b.ReportMetric(flops/per/1e12, "TFLOP/s")
						b.ReportMetric(math.Round(imbalance*100)/100, "max/mean")
					})
				}
			}
			do(b, func(t testing.TB, g *GPU) {
				for _, buf := range []Buffer{x, out, wts, ib, work} {
					if err := g.Free(buf); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
		do(b, func(t testing.TB, g *GPU) {
			for _, buf := range []Buffer{gu, dn} {
				if err := g.Free(buf); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

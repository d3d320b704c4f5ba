//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// fp8Experts quantizes an expert stack [E][N][K] as the CPU backend's
// QuantizeFP8 does: each expert's amax/448, its codes, the scale repeated
// for every row.
func fp8Experts(v []float32, E, N, K int) ([]uint8, []float32) {
	codes, scales := make([]uint8, len(v)), make([]float32, E*N)
	for e := range E {
		w := v[e*N*K : (e+1)*N*K]
		s := fp8.Scale(fp8.AbsMax(w))
		fp8.Quantize(codes[e*N*K:(e+1)*N*K], w, s)
		for r := range N {
			scales[e*N+r] = s
		}
	}
	return codes, scales
}

// TestMoEFP8 runs MoEFP8 against the CPU backend's FP8 experts (its
// moeFP8, the reference: the input and the activations quantized per
// tensor, codes multiplied in float32, scaled by the input's and each
// row's scale) on fresh random experts and inputs, tokens routed nowhere
// among them, poisoned outputs and workspaces. The GPU rounds the gate/up
// output and the activations to fp16/bf16 where the CPU keeps float32, so
// an activation on a rounding boundary may take the next code: the
// outputs agree to a relative RMS error, not bit for bit. How far they
// part follows the dtype's precision: bf16's unit in the last place is 8x
// fp16's, so 8x as many activations change code. The pipeline emulated
// on the CPU (these four cases, 3-12 seeds each, only the roundings
// differing) parts by 0.003-0.010 in fp16 and 0.012-0.026 in bf16; the
// bounds leave about twice that.
func TestMoEFP8(t *testing.T) {
	testGPU(t)
	for _, c := range []moeCase{
		{rows: 23, k: 2, E: 4, H: 64, F: 160},
		{rows: 64, k: 2, E: 8, H: 512, F: 1408},
		{rows: 40, k: 8, E: 128, H: 256, F: 96},
		{rows: 130, k: 4, E: 4, H: 2880, F: 1440, skew: true},
	} {
		for _, dt := range dtypes {
			t.Run(fmt.Sprintf("%s/%dx%d-of-%d/H%d-F%d", dt, c.rows, c.k, c.E, c.H, c.F), func(t *testing.T) {
				r := newRand(t)
				x, idx, wts, gu, dn := moeInputs(r, dt, c)
				guC, guS := fp8Experts(gu, c.E, 2*c.F, c.H)
				dnC, dnS := fp8Experts(dn, c.E, c.H, c.F)

				ref, err := cpu.New(model.BackendOptions{Threads: 4})
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				must := func(err error) {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
				}
				upload := func(codes []uint8, scales []float32, shape ...int) model.Tensor {
					w, err := ref.Upload("experts", model.Experts, model.HostTensor{Shape: shape, DType: "F8_E4M3", Data: codes, FP8: &model.FP8Scales{Weight: scales}})
					must(err)
					return w
				}
				rGU, rDN := upload(guC, guS, c.E, 2*c.F, c.H), upload(dnC, dnS, c.E, c.H, c.F)
				rx, err := ref.Alloc("x", model.Float, c.rows, c.H)
				must(err)
				rout, err := ref.Alloc("out", model.Float, c.rows, c.H)
				must(err)
				ridx, err := ref.Alloc("idx", model.Int32, c.rows, c.k)
				must(err)
				rw, err := ref.Alloc("wts", model.Float, c.rows, c.k)
				must(err)
				must(ref.WriteFloat32(rx, x))
				must(ref.WriteInt32(ridx, idx))
				must(ref.WriteFloat32(rw, wts))
				// MoEShard from expert 0 holds every expert and skips the
				// slots routed nowhere (-1), which MoE refuses.
				ref.MoEShard(rout, rx, ridx, rw, rGU, rDN, c.rows, c.k, 0)
				want := make([]float32, c.rows*c.H)
				must(ref.ReadFloat32(want, rout, c.rows))

				do(t, func(t testing.TB, g *GPU) {
					sh := MoEShape{Rows: c.rows, K: c.k, Experts: c.E, Hidden: c.H, FFN: c.F}
					out := devPoisoned(t, g, dt, c.rows*c.H)
					work := devPoisoned(t, g, dt, MoEFP8WorkBytes(dt, sh)/dt.Size()+1)
					gw := FP8Experts{Codes: devUploadT(t, g, guC), Scales: devUploadT(t, g, guS)}
					dw := FP8Experts{Codes: devUploadT(t, g, dnC), Scales: devUploadT(t, g, dnS)}
					if err := g.MoEFP8(g.Stream, dt, out, devUpload(t, g, dt, x), devUploadT(t, g, idx), devUpload(t, g, dt, wts), gw, dw, work, sh); err != nil {
						t.Fatal(err)
					}
					got := make([]uint16, c.rows*c.H)
					if err := DownloadSlice(g.Stream, got, out); err != nil {
						t.Fatal(err)
					}
					var se, sw float64
					for i, b := range got {
						v := float64(dt.ToFloat32(b))
						if math.IsNaN(v) {
							t.Fatalf("element %d not written (NaN)", i)
						}
						d := v - float64(want[i])
						se += d * d
						sw += float64(want[i]) * float64(want[i])
					}
					bound := map[DType]float64{F16: 0.02, BF16: 0.05}[dt]
					if rel := math.Sqrt(se / sw); !(rel < bound) {
						t.Errorf("relative RMS error %.4f against the CPU's FP8 experts, want < %g", rel, bound)
					} else {
						t.Logf("relative RMS error %.4f against the CPU's FP8 experts (bound %g)", rel, bound)
					}
				})
			})
		}
	}
}

// TestFP8QuantizeRandomRows: each expert of a random Experts stack
// quantized on the device with its own scale is the CPU backend's
// QuantizeFP8 of the same float32 values, codes and scales bit for bit.
func TestFP8QuantizeRandomRows(t *testing.T) {
	const E, N, K = 3, 40, 96
	do(t, func(t testing.TB, g *GPU) {
		seed, scale := uint64(0x5eed), float32(0.05)
		v := make([]float32, E*N*K)
		model.RandomFill(v, seed, 0, scale)
		wantC, wantS := fp8Experts(v, E, N, K)
		codes := devUploadT(t, g, make([]uint8, E*N*K))
		scales := devUploadT(t, g, make([]float32, E*N))
		amax := devUploadT(t, g, make([]uint32, 1))
		for e := range E {
			if err := g.FP8QuantizeRandomRows(g.Stream, codes.Slice(e*N*K, N*K), N*K, int64(e*N*K), seed, scale, amax, scales.Slice(4*e*N, 4*N), N); err != nil {
				t.Fatal(err)
			}
		}
		gotC, gotS := make([]uint8, E*N*K), make([]float32, E*N)
		if err := DownloadSlice(g.Stream, gotC, codes); err != nil {
			t.Fatal(err)
		}
		if err := DownloadSlice(g.Stream, gotS, scales); err != nil {
			t.Fatal(err)
		}
		for i := range wantS {
			if gotS[i] != wantS[i] {
				t.Fatalf("scale of row %d: %g, want %g", i, gotS[i], wantS[i])
			}
		}
		if i := firstDiff(gotC, wantC); i >= 0 {
			t.Fatalf("code %d: %#x, want %#x", i, gotC[i], wantC[i])
		}
	})
}

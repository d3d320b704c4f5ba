package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// TestMXFP4MoEExact: MoE and OSSMoE on MXFP4 experts give exactly what
// they give on float32 experts holding the dequantized values (both GEMM
// paths; the scratch reused across experts of different shapes and
// calls), and those match the reference.
func TestMXFP4MoEExact(t *testing.T) {
	const E, k, H, F = 4, 2, 64, 96
	r := rand.New(rand.NewPCG(4, 2))
	for _, gemm := range []string{GemmAuto, GemmDisable} {
		b := newBackend(t, gemm, 2)
		gq, err := b.RandomMXFP4("gu", []int{E, 2 * F, H}, 11, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		dw, _ := model.RandomMXFP4([]int{E, H, F}, 12, 0.2)
		dq, err := b.UploadMXFP4("dn", dw)
		if err != nil {
			t.Fatal(err)
		}
		gw, _ := model.RandomMXFP4([]int{E, 2 * F, H}, 11, 0.3)
		gu, dn := gw.Dequantize(), dw.Dequantize()
		gf, _ := b.Upload("guf", model.Experts, model.HostF32([]int{E, 2 * F, H}, gu))
		df, _ := b.Upload("dnf", model.Experts, model.HostF32([]int{E, H, F}, dn))
		guB := randF(r, E*2*F)
		dnB := randF(r, E*H)
		guBT, _ := b.Upload("gub", model.Table, model.HostF32([]int{E, 2 * F}, guB))
		dnBT, _ := b.Upload("dnb", model.Table, model.HostF32([]int{E, H}, dnB))
		act := model.GLU{Limit: 7, Alpha: 1.702}
		for _, rows := range []int{1, 5, 70} {
			x := randF(r, rows*H)
			idx := make([]int32, rows*k)
			wts := make([]float32, rows*k)
			for i := range idx {
				idx[i] = int32((i*3 + i/k) % E)
				wts[i] = float32(r.Float64())
			}
			xt, _ := b.Alloc("x", model.Float, rows, H)
			it, _ := b.Alloc("i", model.Int32, rows, k)
			wt, _ := b.Alloc("w", model.Float, rows, k)
			b.WriteFloat32(xt, x)
			b.WriteInt32(it, idx)
			b.WriteFloat32(wt, wts)
			run := func(f func(out model.Tensor)) []float32 {
				ot, _ := b.Alloc("o", model.Float, rows, H)
				f(ot)
				got := make([]float32, rows*H)
				if err := b.ReadFloat32(got, ot, rows); err != nil {
					t.Fatal(err)
				}
				return got
			}
			mx := run(func(o model.Tensor) { b.MoE(o, xt, it, wt, gq, dq, rows, k) })
			fl := run(func(o model.Tensor) { b.MoE(o, xt, it, wt, gf, df, rows, k) })
			if !slices.Equal(mx, fl) {
				t.Errorf("gemm=%s rows %d: MXFP4 MoE differs from dequantized float experts (rel err %g)", gemm, rows, RelErr(mx, fl))
			}
			want := make([]float32, rows*H)
			RefMoE(want, x, idx, wts, gu, dn, rows, k, H, F)
			if e := RelErr(mx, want); e > 1e-5 {
				t.Errorf("gemm=%s rows %d: MoE against the reference: rel err %g", gemm, rows, e)
			}
			mx = run(func(o model.Tensor) { b.OSSMoE(o, xt, it, wt, gq, dq, guBT, dnBT, rows, k, act) })
			fl = run(func(o model.Tensor) { b.OSSMoE(o, xt, it, wt, gf, df, guBT, dnBT, rows, k, act) })
			if !slices.Equal(mx, fl) {
				t.Errorf("gemm=%s rows %d: MXFP4 OSSMoE differs from dequantized float experts (rel err %g)", gemm, rows, RelErr(mx, fl))
			}
			RefOSSMoE(want, x, idx, wts, gu, dn, guB, dnB, rows, k, H, F, act)
			if e := RelErr(mx, want); e > 1e-5 {
				t.Errorf("gemm=%s rows %d: OSSMoE against the reference: rel err %g", gemm, rows, e)
			}
		}
	}
}

// TestMXFP4Weights: RandomMXFP4 is model.RandomMXFP4; UploadMXFP4 copies
// and checks; Free drops the codes.
func TestMXFP4Weights(t *testing.T) {
	b := newBackend(t, GemmAuto, 1)
	got, err := b.RandomMXFP4("w", []int{2, 3, 64}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := model.RandomMXFP4([]int{2, 3, 64}, 5, 1)
	if w := ft(got).mx; !slices.Equal(w.Blocks, want.Blocks) || !slices.Equal(w.Scales, want.Scales) || !slices.Equal(got.Shape(), want.Shape) {
		t.Error("RandomMXFP4 differs from model.RandomMXFP4")
	}
	up, err := b.UploadMXFP4("u", want)
	if err != nil {
		t.Fatal(err)
	}
	want.Blocks[0] ^= 0xff
	if ft(up).mx.Blocks[0] == want.Blocks[0] {
		t.Error("UploadMXFP4 kept the caller's buffer")
	}
	b.Free(up)
	if ft(up).mx != nil {
		t.Error("Free kept the codes")
	}
	for _, bad := range []model.MXFP4{
		{Shape: []int{1, 2, 48}, Blocks: make([]byte, 48), Scales: make([]byte, 3)},
		{Shape: []int{1, 2, 64}, Blocks: make([]byte, 63), Scales: make([]byte, 4)},
	} {
		if _, err := b.UploadMXFP4("bad", bad); err == nil {
			t.Errorf("%v: no error", bad.Shape)
		}
	}
	if _, err := b.RandomMXFP4("bad", []int{2, 64}, 1, 1); err == nil {
		t.Error("a Matrix shape: no error")
	}
}

// BenchmarkMXFP4MoE times a MoE layer (H 512, F 512, 8 experts, top 2) on
// float32 experts and on MXFP4 ones, which each work item dequantizes, at
// 1, 16 and 256 tokens: the cost of keeping the CPU the exact reference.
func BenchmarkMXFP4MoE(b *testing.B) {
	const E, k, H, F = 8, 2, 512, 512
	r := rand.New(rand.NewPCG(3, 3))
	for _, rows := range []int{1, 16, 256} {
		for _, mx := range []bool{false, true} {
			b.Run(fmt.Sprintf("rows%d/mxfp4_%v", rows, mx), func(b *testing.B) {
				be := newBackend(b, GemmAuto, 0)
				gw, _ := model.RandomMXFP4([]int{E, 2 * F, H}, 1, 0.05)
				dw, _ := model.RandomMXFP4([]int{E, H, F}, 2, 0.05)
				var gu, dn model.Tensor
				if mx {
					gu, _ = be.UploadMXFP4("gu", gw)
					dn, _ = be.UploadMXFP4("dn", dw)
				} else {
					gu, _ = be.Upload("gu", model.Experts, model.HostF32(gw.Shape, gw.Dequantize()))
					dn, _ = be.Upload("dn", model.Experts, model.HostF32(dw.Shape, dw.Dequantize()))
				}
				x, _ := be.Alloc("x", model.Float, rows, H)
				o, _ := be.Alloc("o", model.Float, rows, H)
				it, _ := be.Alloc("i", model.Int32, rows, k)
				wt, _ := be.Alloc("w", model.Float, rows, k)
				be.WriteFloat32(x, randF(r, rows*H))
				idx := make([]int32, rows*k)
				for i := range idx {
					idx[i] = int32((i*5 + i/k) % E)
				}
				be.WriteInt32(it, idx)
				be.WriteFloat32(wt, randF(r, rows*k))
				b.ResetTimer()
				for range b.N {
					be.MoE(o, x, it, wt, gu, dn, rows, k)
				}
				b.ReportMetric(float64(rows*k*3*2*H*F)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

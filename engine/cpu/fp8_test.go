package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// codesOf quantizes w ([rows, k]) per tensor, as QuantizeFP8 does: its
// codes and the scale.
func codesOf(w []float32) ([]uint8, float32) {
	s := fp8.Scale(fp8.AbsMax(w))
	q := make([]uint8, len(w))
	fp8.Quantize(q, w, s)
	return q, s
}

// fp8Host is an F8_E4M3 weight with per-row scales (per channel).
func fp8Host(r *rand.Rand, shape []int, input float32, perToken bool) (model.HostTensor, []uint8, []float32) {
	rows, k := 1, shape[len(shape)-1]
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	codes := make([]uint8, rows*k)
	scales := make([]float32, rows)
	for i := range rows {
		w := randF(r, k)
		scales[i] = fp8.Scale(fp8.AbsMax(w)) * (1 + float32(i%3)) // rows of different ranges
		fp8.Quantize(codes[i*k:(i+1)*k], w, scales[i])
	}
	return model.HostTensor{Shape: shape, DType: "F8_E4M3", Data: codes,
		FP8: &model.FP8Scales{Weight: scales, Input: input, PerToken: perToken}}, codes, scales
}

// TestFP8MatMulMatchesReference: the FP8 GEMM equals the float64
// reference on the same E4M3 values and scales within float32 rounding
// (per tensor quantized on the backend, per channel from a checkpoint,
// static, dynamic and per-token activations; both GEMM paths), and
// differs from the unquantized GEMM by what E4M3's 3 mantissa bits allow.
func TestFP8MatMulMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	shapes := [][3]int{{1, 16, 64}, {5, 17, 3}, {7, 100, 33}, {64, 128, 64}}
	for _, gemm := range []string{GemmAuto, GemmDisable} {
		b := newBackend(t, gemm, 2)
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			x := randF(r, m*k)
			xt, _ := b.Alloc("x", model.Float, m, k)
			ot, _ := b.Alloc("o", model.Float, m, n)
			b.WriteFloat32(xt, x)
			got, want := make([]float32, m*n), make([]float32, m*n)
			run := func(wt model.Tensor) {
				b.MatMul(ot, xt, wt, m)
				if err := b.ReadFloat32(got, ot, m); err != nil {
					t.Fatal(err)
				}
			}

			// Quantized on the backend: per tensor, dynamic activations.
			w := randF(r, n*k)
			wt, _ := b.Upload("w", model.Matrix, model.HostF32([]int{n, k}, w))
			if _, err := b.QuantizeFP8(wt); err != nil {
				t.Fatal(err)
			}
			run(wt)
			codes, ws := codesOf(w)
			q, sx := RefFP8Input(x, m, k, 0, false)
			RefFP8GEMM(want, q, sx, codes, []float32{ws}, m, n, k)
			if e := RelErr(got, want); e > 1e-6 {
				t.Errorf("gemm=%s %v per tensor: rel err %g against the reference", gemm, s, e)
			}
			exact := make([]float32, m*n)
			RefGEMM(exact, x, w, m, n, k)
			// Each operand within 2^-4 relative (half an E4M3 step): the
			// products within about 2^-3, and random signs average most
			// of it away.
			if e := RelErr(got, exact); e > 0.1 || e == 0 {
				t.Errorf("gemm=%s %v: rel err %g against the unquantized GEMM, want FP8's (0, 0.1]", gemm, s, e)
			}

			// From a checkpoint: per channel, static and per-token inputs.
			for _, mode := range []struct {
				static   float32
				perToken bool
			}{{0, false}, {fp8.AbsMax(x) / 300, false}, {0, true}} {
				h, codes, scales := fp8Host(r, []int{n, k}, mode.static, mode.perToken)
				wt, err := b.Upload("w8", model.Matrix, h)
				if err != nil {
					t.Fatal(err)
				}
				run(wt)
				q, sx := RefFP8Input(x, m, k, mode.static, mode.perToken)
				RefFP8GEMM(want, q, sx, codes, scales, m, n, k)
				if e := RelErr(got, want); e > 1e-6 {
					t.Errorf("gemm=%s %v %+v: rel err %g", gemm, s, mode, e)
				}
			}
		}
	}
}

// TestFP8MoEMatchesReference checks FP8 experts against RefFP8MoE. The
// activations between the two GEMMs are quantized from float32 sums whose
// order differs, so a value on a rounding edge may land one E4M3 step
// apart: a tolerance of a few thousandths, not float32's.
func TestFP8MoEMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const rows, E, K, H, F = 23, 6, 2, 32, 24
	for _, gemm := range []string{GemmAuto, GemmDisable} {
		for _, mode := range []struct {
			static   bool
			perToken bool
		}{{false, false}, {true, false}, {false, true}} {
			b := newBackend(t, gemm, 3)
			x, logits := randF(r, rows*H), randF(r, rows*E)
			var guIn, dnIn float32
			if mode.static {
				guIn, dnIn = fp8.AbsMax(x)/400, 0.01
			}
			gu, guCodes, guScale := fp8Host(r, []int{E, 2 * F, H}, guIn, mode.perToken)
			dn, dnCodes, dnScale := fp8Host(r, []int{E, H, F}, dnIn, mode.perToken)
			gut, err := b.Upload("gu", model.Experts, gu)
			if err != nil {
				t.Fatal(err)
			}
			dnt, _ := b.Upload("dn", model.Experts, dn)
			lt, _ := b.Alloc("l", model.Float, rows, E)
			xt, _ := b.Alloc("x", model.Float, rows, H)
			it, _ := b.Alloc("i", model.Int32, rows, K)
			wt, _ := b.Alloc("w", model.Float, rows, K)
			ot, _ := b.Alloc("o", model.Float, rows, H)
			b.WriteFloat32(lt, logits)
			b.WriteFloat32(xt, x)
			b.Route(it, wt, lt, nil, 0, rows, K, model.RoutingSoftmaxTopKRenorm, nil, 0)
			b.MoE(ot, xt, it, wt, gut, dnt, rows, K)
			idx, wts := make([]int32, rows*K), make([]float32, rows*K)
			b.ReadInt32(idx, it, rows)
			b.ReadFloat32(wts, wt, rows)
			got, want := make([]float32, rows*H), make([]float32, rows*H)
			if err := b.ReadFloat32(got, ot, rows); err != nil {
				t.Fatal(err)
			}
			RefFP8MoE(want, x, idx, wts, guCodes, guScale, guIn, dnCodes, dnScale, dnIn, mode.perToken, rows, K, H, F)
			if e := RelErr(got, want); e > 5e-3 {
				t.Errorf("gemm=%s %+v: moe rel err %g", gemm, mode, e)
			}
		}
	}
}

// TestKVLayouts: attention reads the same keys and values through every
// cache layout: fixed slots, paged (blocks handed out out of order), FP8
// (values that are E4M3 steps of the layer's scale, so storing them loses
// nothing) and paged FP8 give the float32 slots' output bit for bit, and
// that output is the reference's.
func TestKVLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	hl := model.HeadLayout{Heads: 4, KVHeads: 2, HeadDim: 16}
	W, D := hl.QKVWidth(), hl.HeadDim
	const layers, scale = 2, 0.05
	// Keys and values on the E4M3 grid of the scale.
	grid := func(v []float32) []float32 {
		for i := range v {
			if i%W >= hl.Heads*D {
				v[i] = fp8.Decode(fp8.Encode(v[i]/scale)) * scale
			}
		}
		return v
	}
	// Sequence A (slot 1): 20 cached, then 14 new (3 blocks of 16);
	// sequence B (slot 0): 10 cached, then 1 new.
	a0, b0, a1, b1 := grid(randF(r, 20*W)), grid(randF(r, 10*W)), grid(randF(r, 14*W)), grid(randF(r, W))
	blocksA, blocksB := []int32{4, 0, 2}, []int32{3}
	run := func(c model.KVConfig) []float32 {
		b := newBackend(t, GemmAuto, 2)
		cache, err := b.NewKVCache(c)
		if err != nil {
			t.Fatal(err)
		}
		qkv, _ := b.Alloc("qkv", model.Float, 30, W)
		out, _ := b.Alloc("out", model.Float, 30, hl.Heads*D)
		step := func(pastA, pastB int, xa, xb []float32, na, nb int) {
			var bt model.Batch
			bt.Add(1, pastA, make([]int32, na), true)
			if c.Paged() {
				bt.SetBlocks(blocksA[:(pastA+na+c.BlockSize-1)/c.BlockSize])
			}
			bt.Add(0, pastB, make([]int32, nb), true)
			if c.Paged() {
				bt.SetBlocks(blocksB)
			}
			b.SetBatch(&bt)
			b.WriteFloat32(qkv, slices.Concat(xa, xb))
			b.Attention(out, qkv, cache, 1)
		}
		step(0, 0, a0, b0, 20, 10)
		step(20, 10, a1, b1, 14, 1)
		got := make([]float32, 15*hl.Heads*D)
		if err := b.ReadFloat32(got, out, 15); err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := model.KVConfig{Layers: layers, Slots: 2, Capacity: 40, HeadLayout: hl}
	want := run(base)
	scales := []float32{1, scale}
	for _, c := range []model.KVConfig{
		{Layers: layers, Slots: 2, Capacity: 40, HeadLayout: hl, BlockSize: 16, Blocks: 5},
		{Layers: layers, Slots: 2, Capacity: 40, HeadLayout: hl, FP8: true, KScale: scales, VScale: scales},
		{Layers: layers, Slots: 2, Capacity: 40, HeadLayout: hl, BlockSize: 16, Blocks: 5, FP8: true, KScale: scales, VScale: scales},
	} {
		if got := run(c); !slices.Equal(got, want) {
			t.Errorf("paged %v fp8 %v: attention differs from the float32 slots (rel err %g)", c.Paged(), c.FP8, RelErr(got, want))
		}
	}
	kvOf := func(rows []float32, off int) []float32 {
		var kv []float32
		for i := range len(rows) / W {
			kv = append(kv, rows[i*W+off:i*W+off+hl.KVHeads*D]...)
		}
		return kv
	}
	qOf := func(rows []float32) []float32 {
		var q []float32
		for i := range len(rows) / W {
			q = append(q, rows[i*W:i*W+hl.Heads*D]...)
		}
		return q
	}
	ref := make([]float32, 15*hl.Heads*D)
	kOff, vOff := hl.Heads*D, (hl.Heads+hl.KVHeads)*D
	a, bb := slices.Concat(a0, a1), slices.Concat(b0, b1)
	RefAttention(ref, qOf(a1), kvOf(a, kOff), kvOf(a, vOff), 14, 20, hl.Heads, hl.KVHeads, D)
	RefAttention(ref[14*hl.Heads*D:], qOf(b1), kvOf(bb, kOff), kvOf(bb, vOff), 1, 10, hl.Heads, hl.KVHeads, D)
	if e := RelErr(want, ref); e > 1e-6 {
		t.Errorf("attention rel err %g against the reference", e)
	}

	// A table short of the sequence's length, or naming a block outside
	// the pool, fails at the next synchronisation.
	b := newBackend(t, GemmAuto, 1)
	cache, _ := b.NewKVCache(model.KVConfig{Layers: 1, Slots: 1, Capacity: 40, HeadLayout: hl, BlockSize: 16, Blocks: 2})
	qkv, _ := b.Alloc("qkv", model.Float, 20, W)
	out, _ := b.Alloc("out", model.Float, 20, hl.Heads*D)
	for _, blocks := range [][]int32{{0}, {0, 2}} {
		var bt model.Batch
		bt.Add(0, 0, make([]int32, 20), true)
		bt.SetBlocks(blocks)
		b.SetBatch(&bt)
		b.Attention(out, qkv, cache, 0)
		if err := b.ReadFloat32(make([]float32, 1), out, 0); err == nil {
			t.Errorf("blocks %v for 20 positions of a 2-block pool: no error", blocks)
		}
	}
	if _, err := b.NewKVCache(model.KVConfig{Layers: 1, Slots: 1, Capacity: 40, HeadLayout: hl, BlockSize: 24, Blocks: 2}); err == nil {
		t.Error("a block size that is not a multiple of 16 was accepted")
	}
}

// TestKVBudgetCounts: the budget holds 4 times as many FP8 positions as
// float32 ones, and blocks are counted like slots.
func TestKVBudgetCounts(t *testing.T) {
	b, err := New(model.BackendOptions{KVCacheBytes: 1 << 20, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hl := model.HeadLayout{Heads: 4, KVHeads: 2, HeadDim: 16} // 2 layers: K and V, 128 elements a position
	c := model.KVConfig{Layers: 2, Capacity: 64, HeadLayout: hl, BlockSize: 32}
	if got := b.MaxKVSlots(c); got != (1<<20)/(128*4*64) {
		t.Errorf("float32 slots: %d", got)
	}
	if got := b.MaxKVBlocks(c); got != (1<<20)/(128*4*32) {
		t.Errorf("float32 blocks: %d", got)
	}
	c.FP8 = true
	if got := b.MaxKVBlocks(c); got != (1<<20)/(128*32) {
		t.Errorf("FP8 blocks: %d", got)
	}
}

//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// fp8KV is a random FP8 cache's scales, such that values up to scale
// (randVals') map below 448, E4M3's largest.
func fp8KV(r interface{ Float32() float32 }, scale float32) KVFP8 {
	return KVFP8{On: true, K: scale / 448 * (1 + r.Float32()), V: scale / 448 * (1 + r.Float32())}
}

// TestAttentionFP8 writes whole random sequences into an FP8 cache with
// KVWriteFP8 (whose codes must be engine/fp8.Encode's of the values times
// the scales' reciprocals, bit for bit) and attends their last tokens on
// every configuration attention_tc_f8.cu instantiates: decode tokens
// after contexts on both sides of the 16-key tiles, unsplit, split and
// merged by attn_combine or by the last block, and prefill chunks after
// cached tokens. The reference is engine/cpu's RefAttention over the
// cache's decoded values (codes times the scales), as the CPU backend
// reads its FP8 cache; every kernel must also agree with the first.
func TestAttentionFP8(t *testing.T) {
	decode := []attnSeq{{0, 1}, {14, 1}, {16, 1}, {200, 1}, {999, 1}}
	prefill := []attnSeq{{37, 45}, {5, 64}, {0, 17}, {300, 50}}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {8, 2, 128}, {3, 3, 64}} {
			for _, rn := range []struct {
				name   string
				seqs   []attnSeq
				rows   int
				splits []int
			}{
				{"decode", decode, AttnRowsTiny, []int{1, 3, -3}},
				{"decode", decode, AttnRowsSmall, []int{1}},
				{"prefill", prefill, AttnRowsLarge, []int{1}},
				{"prefill", prefill, AttnRowsXL, []int{1}},
			} {
				for _, splits := range rn.splits {
					t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/%s/rows%d/split%d", dt, a.Heads, a.KVHeads, a.HeadDim, rn.name, rn.rows, splits), func(t *testing.T) {
						if a.Heads/a.KVHeads > rn.rows {
							t.Skip("group larger than the block's rows")
						}
						kernels := attnKernelsFor(attnTCPagedKernels[a.HeadDim], rn.rows, false)
						if len(kernels) == 0 {
							t.Skipf("no kernel of %d rows at head dimension %d", rn.rows, a.HeadDim)
						}
						// Decode kernels in each form (f8Forms): the codes
						// converted in registers (_f8r, the default), decoded
						// through shared memory (_f8), and the products on the
						// E4M3 tensor cores (_f8q, _f8p).
						for _, form := range f8Forms {
							t.Run(form.name, func(t *testing.T) {
								do(t, func(t testing.TB, g *GPU) {
									defer keepSwitches(g)()
									form.set(t, g, a.HeadDim)
									checkAttentionFP8(t, g, dt, a, rn.seqs, rn.rows, splits, kernels, attnRefs)
								})
							})
						}
					})
				}
			}
		}
	}
}

// f8Forms are the decode kernels' forms over an FP8 cache, as the switches
// pick them: _f8r (the codes converted in registers, XRUN_CUDA_ATTN_F8_REGS),
// _f8 (decoded in shared memory), _f8q (Q K^T on the E4M3 tensor cores) and
// _f8p (P V too; XRUN_CUDA_ATTN_F8_MMA: head dimension 128, sm_89 and
// later, else skipped), and _f8t (_f8r with the products' roles swapped:
// XRUN_CUDA_ATTN_F8_SWAP; launches it does not serve run _f8r).
var f8Forms = []f8Form{{"f8r", true, "0", "0"}, {"f8", false, "0", "0"}, {"f8q", true, "qk", "0"}, {"f8p", true, "qkpv", "0"},
	{"f8t", true, "0", "1"}}

type f8Form struct {
	name string
	regs bool
	mma  string // XRUN_CUDA_ATTN_F8_MMA
	swap string // XRUN_CUDA_ATTN_F8_SWAP: "0" or "1", never auto's choice
}

// suffix is the form's ending of a kernel's name (as GPU.attention adds it).
func (f f8Form) suffix() string {
	switch {
	case f.mma == "qk":
		return "_f8q"
	case f.mma == "qkpv":
		return "_f8p"
	case f.swap == "1":
		return "_f8t"
	case f.regs:
		return "_f8r"
	}
	return "_f8"
}

// set sets g's switches to the form, or skips t where g or the head
// dimension has no such kernels.
func (f f8Form) set(t testing.TB, g *GPU, headDim int) {
	if f.mma != "0" && (headDim != 128 || !fp8TensorCores(g.Info) || g.nvrtc != 0 && g.nvrtc < 1204) {
		t.Skipf("_%s: head dimension 128 on sm_89 or later with NVRTC 12.4 or later, not %d on %s with %d.%d", f.name, headDim, g.Info.Arch(), g.nvrtc/100, g.nvrtc%100)
	}
	g.sw.CUDAAttnF8Regs, g.sw.CUDAAttnF8MMA, g.sw.CUDAAttnF8Swap = f.regs, f.mma, f.swap
}

// fp8Cache allocates an [slots][KV][capacity][D] FP8 cache of codes 0x7f
// (E4M3's NaN) for K and one for V.
func fp8Cache(t testing.TB, g *GPU, n int) (Buffer, Buffer) {
	poison := make([]uint8, n)
	for i := range poison {
		poison[i] = 0x7f
	}
	return devUploadT(t, g, poison), devUploadT(t, g, poison)
}

// checkAttentionFP8 runs kernels over an FP8 cache of random sequences and
// checks them against refs of qkv with the keys and values decoded as the
// cache holds them (attnRefs, or a reference of the kernels' own roundings).
func checkAttentionFP8(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, rows, splits int, kernels []attnTC,
	refsOf func([]attnSeq, []float32, AttnShape) [][]float32) {
	kernels = runnable(g, kernels, splits)
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	pos, slot, items, total, capacity := attnBatch(seqs, AttnItemTokens(a, rows))
	slots := len(seqs) + 1
	qkv := randVals(r, dt, total*W, 1.5)
	q8 := fp8KV(r, 1.5)
	kc, vc := fp8Cache(t, g, slots*KV*capacity*D)
	qkvB := devUpload(t, g, dt, qkv)
	if err := g.KVWriteFP8(g.Stream, dt, kc, vc, qkvB, devUploadT(t, g, pos), devUploadT(t, g, slot), total, capacity, KVPages{}, a, q8); err != nil {
		t.Fatal(err)
	}
	kCodes, vCodes := devCodes(t, g, kc, kc.Bytes), devCodes(t, g, vc, vc.Bytes)
	// The reference reads the keys and values as the cache holds them:
	// qkv with those decoded. The codes must be fp8.Encode's.
	kinv, vinv := 1/q8.K, 1/q8.V
	deq := append([]float32(nil), qkv...)
	bad := 0
	for tok := range total {
		at := (int(slot[tok])*KV*capacity + int(pos[tok])) * D
		for h := range KV {
			for d := range D {
				ki, vi := tok*W+(H+h)*D+d, tok*W+(H+KV+h)*D+d
				wk, wv := fp8.Encode(qkv[ki]*kinv), fp8.Encode(qkv[vi]*vinv)
				if c := at + h*capacity*D + d; (kCodes[c] != wk || vCodes[c] != wv) && bad < 5 {
					bad++
					t.Errorf("token %d head %d dim %d: codes %#02x %#02x, want %#02x %#02x", tok, h, d, kCodes[c], vCodes[c], wk, wv)
				}
				deq[ki], deq[vi] = fp8.Decode(wk)*q8.K, fp8.Decode(wv)*q8.V
			}
		}
	}
	refs := refsOf(seqs, deq, a)
	l := AttnLaunch{Items: devUploadT(t, g, items), N: len(items) / 4, Rows: rows, Splits: splits, ShortKeys: -1, FP8: q8}
	checkKernels(t, g, dt, a, seqs, refs, qkvB, kc, vc, capacity, l, kernels)
}

// TestAttentionFP8Rope checks the _rope_f8 decode kernels: the past
// tokens go into a poisoned FP8 cache through Rope and KVWriteFP8, then
// one launch rotates the new tokens, writes their keys and values into
// the cache as E4M3 codes and attends them. The output must match
// RefRoPE + RefAttention over the decoded cache, and the cache must then
// hold the new keys (encoded from their rotation in float32: within one
// E4M3 step of the reference's, which rounds through the storage type
// first for the past keys only) and values (bit for bit).
func TestAttentionFP8Rope(t *testing.T) {
	contexts := []int{1, 15, 16, 17, 200, 257}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {8, 2, 128}} {
			for _, splits := range []int{1, -3} {
				t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/split%d", dt, a.Heads, a.KVHeads, a.HeadDim, splits), func(t *testing.T) {
					var seqs []attnSeq
					for _, ctx := range contexts {
						seqs = append(seqs, attnSeq{ctx - 1, 1})
					}
					for _, form := range f8Forms {
						t.Run(form.name, func(t *testing.T) {
							do(t, func(t testing.TB, g *GPU) {
								defer keepSwitches(g)()
								form.set(t, g, a.HeadDim)
								for _, c := range attnTCRopePagedKernels[a.HeadDim] {
									checkAttentionFP8Rope(t, g, dt, a, seqs, splits, c)
								}
							})
						})
					}
				})
			}
		}
	}
}

func checkAttentionFP8Rope(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, splits int, kern attnTC) {
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	posP, slotP, posN, _, items, nPast, nNew, capacity := ropeBatch(seqs)
	slots := len(seqs) + 1
	table := model.RopeTable(model.Config{Heads: H, KVHeads: KV, HeadDim: D, RopeTheta: 10000}, capacity)
	past := randVals(r, dt, max(1, nPast)*W, 1.5)
	fresh := randVals(r, dt, nNew*W, 1.5)
	q8 := fp8KV(r, 2.2) // rotated values reach |x| sqrt(2)
	var ip, in int
	tab := devUploadT(t, g, table)
	kc, vc := fp8Cache(t, g, slots*KV*capacity*D)
	if nPast > 0 {
		pb := devUpload(t, g, dt, past)
		kv := pb.Slice(H*D*dt.Size(), pb.Bytes-H*D*dt.Size())
		if err := g.Rope(g.Stream, dt, pb, kv, devUploadT(t, g, posP), tab, nPast, H, KV, D, W, W); err != nil {
			t.Fatal(err)
		}
		if err := g.KVWriteFP8(g.Stream, dt, kc, vc, pb, devUploadT(t, g, posP), devUploadT(t, g, slotP), nPast, capacity, KVPages{}, a, q8); err != nil {
			t.Fatal(err)
		}
	}
	// The reference: the past keys rotated and rounded as Rope stores
	// them, the new ones rotated in float32; all through E4M3.
	rotP, rotN := append([]float32(nil), past...), append([]float32(nil), fresh...)
	cpu.RefRoPE(rotP, posP, table, nPast, W, H, D)
	cpu.RefRoPE(rotP[H*D:], posP, table, nPast, W, KV, D)
	rotP = dt.Decode(dt.Encode(rotP))
	cpu.RefRoPE(rotN, posN, table, nNew, W, H, D)
	cpu.RefRoPE(rotN[H*D:], posN, table, nNew, W, KV, D)
	deq := func(x, s float32) float32 { return fp8.Decode(fp8.Encode(x*(1/s))) * s }
	var ref []float32
	ip, in = 0, 0
	for _, s := range seqs {
		L := s.past + s.n
		q := make([]float32, s.n*H*D)
		k := make([]float32, L*KV*D)
		v := make([]float32, L*KV*D)
		for p := range L {
			krow, vrow := rotP, past
			at := ip + p
			if p >= s.past {
				krow, vrow, at = rotN, fresh, in+p-s.past
				copy(q[(p-s.past)*H*D:], dt.Decode(dt.Encode(rotN[at*W:at*W+H*D])))
			}
			for j := range KV * D {
				k[p*KV*D+j] = deq(krow[at*W+H*D+j], q8.K)
				v[p*KV*D+j] = deq(vrow[at*W+(H+KV)*D+j], q8.V)
			}
		}
		o := make([]float32, s.n*H*D)
		refAttention(o, q, k, v, s.n, s.past, H, KV, D)
		ref = append(ref, o...)
		ip += s.past
		in += s.n
	}
	fold := splits < 0
	splits = max(splits, -splits)
	out := devPoisoned(t, g, dt, nNew*H*D)
	l := AttnLaunch{Items: devUploadT(t, g, items), N: len(items) / 4, Rows: AttnRowsTiny, Splits: splits, ShortKeys: -1,
		Rope: tab, FP8: q8}
	if splits > 1 {
		l.Work = devPoisoned(t, g, F16, AttnWorkBytes(l.N*KV*splits, AttnRowsTiny, D)/2)
	}
	if fold {
		l.Counters = devUploadT(t, g, make([]int32, l.N*KV))
	}
	runAttention(t, g, dt, out, devUpload(t, g, dt, fresh), kc, vc, capacity, a, l, kern)
	checkRel(t, fmt.Sprintf("%s_rope f8", kern), download(t, g, dt, out, nNew*H*D), ref)
	// The new tokens' codes in the cache.
	kCodes, vCodes := devCodes(t, g, kc, kc.Bytes), devCodes(t, g, vc, vc.Bytes)
	bad := 0
	in = 0
	for i, s := range seqs {
		for j := range s.n {
			p, row := s.past+j, in+j
			for h := range KV {
				at := ((i+1)*KV+h)*capacity*D + p*D
				for d := range D {
					kx := rotN[row*W+(H+h)*D+d]
					gk := float64(fp8.Decode(kCodes[at+d]) * q8.K)
					wv := fp8.Encode(fresh[row*W+(H+KV+h)*D+d] * (1 / q8.V))
					if (vCodes[at+d] != wv || math.Abs(gk-float64(kx)) > math.Abs(float64(kx))/8+float64(q8.K)/512) && bad < 5 {
						bad++
						t.Errorf("%s: sequence %d position %d head %d dim %d: key %g (code %#02x) for %g, value code %#02x, want %#02x", kern, i, p, h, d, gk, kCodes[at+d], kx, vCodes[at+d], wv)
					}
				}
			}
		}
		in += s.n
	}
}

// TestAttnTCF8Kernels checks, without a GPU, that attention_tc_f8.cu
// instantiates, over a contiguous and a paged cache, exactly the paged
// configurations (the ones Attention maps an FP8 launch onto, pagedTC),
// with and without RoPE folded in; the decode ones (one row warp) also in
// their _f8r form (f8Regs), and at head dimension 128 over a contiguous
// cache their _f8q and _f8p forms (f8MMA), the others not.
func TestAttnTCF8Kernels(t *testing.T) {
	src, err := kernelSource("attention_tc_f8")
	if err != nil {
		t.Fatal(err)
	}
	for _, macro := range []string{"ATTN_TC_F8_K", "ATTN_TC_F8_KP"} {
		inst := map[string]bool{}
		for _, m := range regexp.MustCompile(macro+`\(T, (\d+), (\d+), (\d+), (\d+), (\d+), (true|false), \w*, (true|false), (true|false), (true|false), (f8[rqp]?)\)`).FindAllStringSubmatch(src, -1) {
			if f := m[10]; (m[7] == "true") != (f != "f8") || (m[8] == "true") != (f == "f8q" || f == "f8p") || (m[9] == "true") != (f == "f8p") {
				t.Errorf("%s: REGS %s, QM %s, PM %s named _%s", macro, m[7], m[8], m[9], f)
			}
			inst[strings.Join(m[1:7], ",")+","+m[10]] = true
		}
		for _, fam := range []struct {
			rope    string
			kernels map[int][]attnTC
		}{{"false", attnTCPagedKernels}, {"true", attnTCRopePagedKernels}} {
			for D, cs := range fam.kernels {
				for _, c := range cs {
					if c.wg {
						continue // attention_wg.cu: TestAttnWGKernels
					}
					forms := []string{"f8"}
					if c.rowWarps == 1 {
						forms = append(forms, "f8r")
					}
					if c.rowWarps == 1 && D == 128 && macro == "ATTN_TC_F8_K" {
						forms = append(forms, "f8q", "f8p") // contiguous only
					}
					for _, f := range forms {
						key := fmt.Sprintf("%d,%d,%d,%d,%d,%s,%s", D, c.rowWarps, c.keyWarps, c.keyTile, c.stages, fam.rope, f)
						if !inst[key] {
							t.Errorf("%s: %s (head dimension %d, rope %s) is not instantiated as _%s", macro, c, D, fam.rope, f)
						}
						delete(inst, key)
					}
				}
			}
		}
		for k := range inst {
			t.Errorf("%s(%s) is instantiated but never launched", macro, k)
		}
	}
}

// TestF8MMAForm checks, without a GPU, which kernels XRUN_CUDA_ATTN_F8_MMA
// puts an FP8-cache launch on: _f8q / _f8p for the _f8r configurations of
// head dimension 128 over a contiguous cache, on sm_89 and later; _f8r
// (no form) for a paged cache, other head dimensions, prefill
// configurations or XRUN_CUDA_ATTN_F8_REGS=0; and an error naming the
// architecture before sm_89, or the NVRTC before 12.4 (an unknown one, 0,
// is not checked).
func TestF8MMAForm(t *testing.T) {
	decode, prefill := attnTC{1, 4, 16, 2, false}, attnTC{4, 1, 32, 2, false}
	for _, c := range []struct {
		mma          string
		regs         bool
		major, minor int
		nvrtc        int
		tc           attnTC
		headDim      int
		paged        bool
		want, err    string
	}{
		{"0", true, 9, 0, 1300, decode, 128, false, "", ""},
		{"qk", true, 9, 0, 1300, decode, 128, false, "q", ""},
		{"qkpv", true, 9, 0, 1300, decode, 128, false, "p", ""},
		{"qkpv", true, 8, 9, 1300, decode, 128, false, "p", ""},
		{"qkpv", true, 9, 0, 1300, decode, 128, true, "", ""},
		{"qkpv", true, 9, 0, 1300, decode, 64, false, "", ""},
		{"qkpv", true, 9, 0, 1300, prefill, 128, false, "", ""},
		{"qkpv", false, 9, 0, 1300, decode, 128, false, "", ""},
		{"qk", true, 8, 0, 1300, decode, 128, false, "", "sm_80"},
		{"qkpv", true, 8, 6, 1300, decode, 128, false, "", "sm_86"},
		{"qk", true, 9, 0, 1203, decode, 128, false, "", "NVRTC 12.4"},
		{"qk", true, 9, 0, 0, decode, 128, false, "q", ""},
	} {
		g := &GPU{Info: DeviceInfo{Major: c.major, Minor: c.minor}, nvrtc: c.nvrtc}
		g.sw.CUDAAttnF8MMA, g.sw.CUDAAttnF8Regs = c.mma, c.regs
		got, err := g.f8MMA(c.tc, c.headDim, c.paged)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "XRUN_CUDA_ATTN_F8_MMA=")):
			t.Errorf("%+v: %q, %v; want an error naming %s and the switch", c, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%+v: %q, %v; want %q", c, got, err, c.want)
		}
	}
}

// TestRopeKVFP8 checks the fused RoPE + FP8 cache write against the two
// kernels it replaces, Rope then KVWriteFP8 (which TestAttentionFP8 holds
// to engine/fp8's codes): the rotated rows and every cache byte, contiguous
// and paged, on poisoned caches, bit for bit. The scales make the largest
// keys and values saturate.
func TestRopeKVFP8(t *testing.T) {
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {4, 2, 16}} {
			for _, bs := range []int{0, 16} {
				t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/block%d", dt, a.Heads, a.KVHeads, a.HeadDim, bs), func(t *testing.T) {
					do(t, func(t testing.TB, g *GPU) {
						r := newRand(t)
						const tokens, slots, capacity = 23, 5, 64
						W, D, KV := a.Width(), a.HeadDim, a.KVHeads
						table := model.RopeTable(model.Config{Heads: a.Heads, KVHeads: KV, HeadDim: D, RopeTheta: 10000}, capacity)
						pos, slot := make([]int32, tokens), make([]int32, tokens)
						for i := range pos { // distinct (slot, position) pairs
							slot[i], pos[i] = int32(i%slots), int32(i/slots*3+r.IntN(3))
						}
						var pages KVPages
						cacheBytes := slots * KV * capacity * D
						if bs > 0 {
							// Each slot's blocks scattered over the pool.
							per := capacity / bs
							tables := make([]int32, slots*per)
							for i, b := range r.Perm(slots * per) {
								tables[i] = int32(b)
							}
							pages = KVPages{Tables: devUploadT(t, g, tables), Stride: per, BlockSize: bs}
						}
						q := KVFP8{On: true, K: 1.5 / 448, V: 1.2 / 448}
						qkv := randVals(r, dt, tokens*W, 2)
						posB, slotB, tab := devUploadT(t, g, pos), devUploadT(t, g, slot), devUploadT(t, g, table)
						rowsU, rowsF := devUpload(t, g, dt, qkv), devUpload(t, g, dt, qkv)
						kU, vU := devCodesPoisoned(t, g, cacheBytes), devCodesPoisoned(t, g, cacheBytes)
						kF, vF := devCodesPoisoned(t, g, cacheBytes), devCodesPoisoned(t, g, cacheBytes)
						off := a.Heads * D * dt.Size()
						if err := g.Rope(g.Stream, dt, rowsU, rowsU.Slice(off, rowsU.Bytes-off), posB, tab, tokens, a.Heads, KV, D, W, W); err != nil {
							t.Fatal(err)
						}
						if err := g.KVWriteFP8(g.Stream, dt, kU, vU, rowsU, posB, slotB, tokens, capacity, pages, a, q); err != nil {
							t.Fatal(err)
						}
						if err := g.RopeKVFP8(g.Stream, dt, kF, vF, rowsF, posB, slotB, tab, tokens, capacity, pages, a, q); err != nil {
							t.Fatal(err)
						}
						if got, want := devBits(t, g, rowsF, tokens*W), devBits(t, g, rowsU, tokens*W); !slices.Equal(got, want) {
							t.Errorf("rotated rows differ from Rope's")
						}
						written := 0
						for _, c := range [][2]Buffer{{kF, kU}, {vF, vU}} {
							got, want := devCodes(t, g, c[0], cacheBytes), devCodes(t, g, c[1], cacheBytes)
							for i := range want {
								if got[i] != want[i] {
									t.Fatalf("cache byte %d is %#02x, want %#02x (Rope, then KVWriteFP8)", i, got[i], want[i])
								}
								if want[i] != 0xff {
									written++
								}
							}
						}
						// Every token's keys and values: no finite value
						// encodes to the poison (0xff, -NaN).
						if want := 2 * tokens * KV * D; written != want {
							t.Errorf("%d cache bytes written, want %d", written, want)
						}
					})
				})
			}
		}
	}
}

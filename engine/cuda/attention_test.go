//go:build cgo && linux

package cuda

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestAttention writes whole random sequences into the cache with KVWrite,
// then attends the last n tokens of each (a prefill chunk after past cached
// tokens, or one decode token) and compares with engine/cpu's RefAttention:
// fresh inputs each run, output poisoned first. Every case runs on the
// CUDA-core kernel and, where the head dimension has one, on the default
// tensor-core kernel of the launch's rows, and the two must also agree.
func TestAttention(t *testing.T) {
	cases := []struct {
		a    AttnShape
		seqs []attnSeq
	}{
		{AttnShape{32, 4, 64}, []attnSeq{{0, 128}, {70, 1}, {200, 1}, {5, 37}, {0, 1}}},
		{AttnShape{32, 8, 128}, []attnSeq{{130, 1}, {0, 100}, {64, 64}}},
		{AttnShape{4, 2, 16}, []attnSeq{{0, 9}, {3, 1}, {0, 1}}},
		{AttnShape{8, 2, 32}, []attnSeq{{17, 3}, {300, 1}}},
		{AttnShape{16, 1, 64}, []attnSeq{{0, 70}, {90, 1}}},
	}
	for _, dt := range dtypes {
		for ci, c := range cases {
			for _, rows := range []int{AttnRowsTiny, AttnRowsSmall, AttnRowsLarge} {
				for _, splits := range []int{1, 3, -3} { // -3: three splits merged by their last block
					for _, short := range attnShorts(splits) {
						t.Run(fmt.Sprintf("%s/%d_H%d_KV%d_D%d/rows%d/split%d/short%d", dt, ci, c.a.Heads, c.a.KVHeads, c.a.HeadDim, rows, splits, short), func(t *testing.T) {
							if c.a.Heads/c.a.KVHeads > rows || rows == AttnRowsTiny && c.a.HeadDim < 32 {
								t.Skip("group larger than the block's rows, or no such kernel")
							}
							kernels := append([]attnTC{{}}, attnTCDefaultsFor(c.a.HeadDim, rows)...)
							do(t, func(t testing.TB, g *GPU) { checkAttention(t, g, dt, c.a, c.seqs, rows, splits, short, kernels) })
						})
					}
				}
			}
		}
	}
}

// attnShorts are the AttnLaunch.ShortKeys a check runs with: never short,
// and, for splits merged by their last block (the only launches that take
// short items), items of up to 256 keys done unsplit (the default).
func attnShorts(splits int) []int {
	if splits < -1 {
		return []int{-1, 256}
	}
	return []int{-1}
}

// withSwap runs check, and where the launch has AttnRowsTiny rows a block
// runs it again on the swapped kernels (XRUN_CUDA_ATTN_SWAP: the _sw
// forms of the plain, RoPE and paged kernels).
func withSwap(g *GPU, rows int, check func()) {
	check()
	if rows == AttnRowsTiny {
		defer keepSwitches(g)()
		g.sw.CUDAAttnSwap = true
		check()
	}
}

// TestAttentionTC checks every tensor-core configuration (attnTCKernels)
// against the reference and against the CUDA-core kernel: decode tokens after contexts
// on both sides of the key tiles' edges (1, 63, 64, 65, 200 and 1000 keys)
// with and without splits (and short items done unsplit), and prefill
// chunks of 1 to 64 tokens after cached ones, mostly not multiples of 16
// rows; groups of 8, 4 and 1 query heads per KV head; head dimensions 64
// and 128.
func TestAttentionTC(t *testing.T) {
	var decode []attnSeq
	for _, ctx := range []int{1, 63, 64, 65, 200, 1000} {
		decode = append(decode, attnSeq{ctx - 1, 1})
	}
	prefill := []attnSeq{{37, 45}, {5, 64}, {100, 1}, {64, 23}, {1, 17}, {300, 50}}
	for _, dt := range dtypes {
		for _, D := range []int{64, 128} {
			for _, a := range []AttnShape{{32, 4, D}, {8, 2, D}, {3, 3, D}} {
				type run struct {
					name   string
					seqs   []attnSeq
					rows   int
					splits []int
				}
				runs := []run{
					{"decode", decode, AttnRowsTiny, []int{1, 3, -3, 8, -8}},
					{"decode", decode, AttnRowsSmall, []int{1, -3}},
					{"prefill", prefill, AttnRowsLarge, []int{1, -3}},
					{"prefill", prefill, AttnRowsXL, []int{1}},
				}
				for _, rn := range runs {
					for _, splits := range rn.splits {
						for _, short := range attnShorts(splits) {
							if rn.name == "prefill" && short >= 0 {
								continue
							}
							t.Run(fmt.Sprintf("%s/D%d_G%d/%s/rows%d/split%d/short%d", dt, D, a.Heads/a.KVHeads, rn.name, rn.rows, splits, short), func(t *testing.T) {
								kernels := attnKernelsFor(attnTCKernels[D], rn.rows, true) // the CUDA-core kernel, to agree with
								if len(kernels) == 0 {
									t.Skipf("no kernel of %d rows at head dimension %d", rn.rows, D)
								}
								do(t, func(t testing.TB, g *GPU) {
									withSwap(g, rn.rows, func() { checkAttention(t, g, dt, a, rn.seqs, rn.rows, splits, short, kernels) })
								})
							})
						}
					}
				}
			}
		}
	}
}

// TestAttnWGKernels checks, without a GPU, that attention_wg.cu
// instantiates exactly the warpgroup-MMA configurations the lists hold
// (attnWG), each over a 16-bit and an FP8 cache (the latter also with
// E4M3 products), contiguous and paged, under the names the launcher asks
// for.
func TestAttnWGKernels(t *testing.T) {
	src, err := kernelSource("attention_wg")
	if err != nil {
		t.Fatal(err)
	}
	inst := map[string]bool{}
	for _, m := range regexp.MustCompile(`ATTN_WG\(T, (\d+), ([01]), ([01]), (\w+)\)`).FindAllStringSubmatch(src, -1) {
		wgs, _ := strconv.Atoi(m[1])
		want := fmt.Sprint(4 * wgs)
		if m[3] == "1" {
			want += "_paged"
		}
		if m[2] == "1" {
			want += "_f8"
		}
		if m[4] != want {
			t.Errorf("ATTN_WG(T, %s, %s, %s, %s): named m%s, want m%s", m[1], m[2], m[3], m[4], m[4], want)
		}
		inst["attention_wg_f16_d128_m"+m[4]] = true
	}
	// The E4M3-products forms (XRUN_CUDA_ATTN_WG_E4M3), over an FP8 cache.
	for _, m := range regexp.MustCompile(`ATTN_WG_E\(T, (\d+), ([01]), (\w+)\)`).FindAllStringSubmatch(src, -1) {
		wgs, _ := strconv.Atoi(m[1])
		want := fmt.Sprint(4 * wgs)
		if m[2] == "1" {
			want += "_paged"
		}
		want += "_f8e"
		if m[3] != want {
			t.Errorf("ATTN_WG_E(T, %s, %s, %s): named m%s, want m%s", m[1], m[2], m[3], m[3], want)
		}
		inst["attention_wg_f16_d128_m"+m[3]] = true
	}
	for _, c := range attnWG {
		if !c.wg || !c.fits(AttnRowsLarge) || !slices.Contains(attnTCKernels[128], c) || !slices.Contains(attnTCPagedKernels[128], c) {
			t.Errorf("%s: not a listed prefill configuration at head dimension 128", c)
		}
		for _, suf := range []string{"", "_paged", "_f8", "_paged_f8", "_f8e", "_paged_f8e"} {
			name := c.kernel(F16, 128) + suf
			if !inst[name] {
				t.Errorf("%s: %s is not instantiated in attention_wg.cu", c, name)
			}
			delete(inst, name)
		}
	}
	for k := range inst {
		t.Errorf("attention_wg.cu instantiates %s, which the launcher does not list", k)
	}
	for D, cs := range attnTCKernels {
		for _, c := range cs {
			if c.wg && (D != 128 || !slices.Contains(attnWG, c) && c != attnWS) {
				t.Errorf("head dimension %d lists %s", D, c)
			}
		}
	}
	// The warp-specialised form (attention_ws.cu), 16-bit and FP8 caches,
	// contiguous and paged, with the stages the launcher sizes.
	src, err = kernelSource("attention_ws")
	if err != nil {
		t.Fatal(err)
	}
	if !attnWS.ws() || !attnWS.fits(AttnRowsXL) || !slices.Contains(attnTCKernels[128], attnWS) || !slices.Contains(attnTCPagedKernels[128], attnWS) {
		t.Errorf("%s: not a listed warp-specialised prefill configuration at head dimension 128", attnWS)
	}
	if m := regexp.MustCompile(`#define WS_STAGES (\d+)`).FindStringSubmatch(src); m == nil || m[1] != strconv.Itoa(attnWS.stages) {
		t.Errorf("attention_ws.cu: WS_STAGES %v, the launcher sizes %d stages", m, attnWS.stages)
	}
	inst = map[string]bool{}
	for _, m := range regexp.MustCompile(`ATTN_WS\(T, ([01]), ([01]), (\w*)\)`).FindAllStringSubmatch(src, -1) {
		want := ""
		if m[2] == "1" {
			want += "_paged"
		}
		if m[1] == "1" {
			want += "_f8"
		}
		if m[3] != want {
			t.Errorf("ATTN_WS(T, %s, %s, %s): suffix %q, want %q", m[1], m[2], m[3], m[3], want)
		}
		inst["attention_ws_f16_d128_m8"+m[3]] = true
	}
	for _, suf := range []string{"", "_paged", "_f8", "_paged_f8"} {
		if name := attnWS.kernel(F16, 128) + suf; !inst[name] {
			t.Errorf("%s: %s is not instantiated in attention_ws.cu", attnWS, name)
		}
	}
}

// attnTCDefaultsFor is the default tensor-core configurations that may
// serve launches of rows query rows per block (by launch size), once each.
func attnTCDefaultsFor(headDim, rows int) []attnTC {
	var cs []attnTC
	for _, c := range attnTCDefaults[headDim] {
		if c.fits(rows) && !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return cs
}

// TestAttnTCKernels checks, without a GPU, that every configuration the
// launcher may ask for is one attention_tc.cu instantiates, and that its
// rows fit: a name missing from the module would only fail on a GPU. The
// same for the decode configurations with RoPE folded in.
func TestAttnTCKernels(t *testing.T) {
	src, err := kernelSource("attention_tc")
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct {
		macro, suffix string
		kernels       map[int][]attnTC
	}{{"ATTN_TC", "", attnTCKernels}, {"ATTN_TC_ROPE", "_rope", attnTCRopeKernels},
		{"ATTN_TC_PAGED", "_paged", attnTCPagedKernels}, {"ATTN_TC_ROPE_PAGED", "_rope_paged", attnTCRopePagedKernels}} {
		inst := map[string]bool{}
		for _, m := range regexp.MustCompile(fam.macro+`\(T, (\d+), (\d+), (\d+), (\d+), (\d+)\)`).FindAllStringSubmatch(src, -1) {
			inst[strings.Join(m[1:], ",")] = true
		}
		for D, cs := range fam.kernels {
			for _, c := range cs {
				if c.wg {
					continue // attention_wg.cu: TestAttnWGKernels
				}
				key := fmt.Sprintf("%d,%d,%d,%d,%d", D, c.rowWarps, c.keyWarps, c.keyTile, c.stages)
				if !inst[key] {
					t.Errorf("head dimension %d: %s%s is not instantiated in attention_tc.cu", D, c, fam.suffix)
				}
				if strings.HasPrefix(fam.suffix, "_rope") && (!c.fits(AttnRowsTiny) || !c.fits(AttnRowsSmall)) {
					t.Errorf("head dimension %d: %s%s is not a decode configuration", D, c, fam.suffix)
				}
				delete(inst, key)
			}
		}
		for k := range inst {
			t.Errorf("attention_tc.cu instantiates %s(%s), which the launcher does not list", fam.macro, k)
		}
	}
	for D, cs := range attnTCKernels {
		for i, c := range attnTCDefaults[D] {
			if !slices.Contains(cs, c) {
				t.Errorf("head dimension %d: default %s is not in attnTCKernels", D, c)
			}
			if rows := []int{AttnRowsTiny, AttnRowsTiny, AttnRowsLarge}[i]; !c.fits(rows) {
				t.Errorf("head dimension %d: default %d (%s) does not take %d rows", D, i, c, rows)
			}
		}
	}
	for D, ds := range attnTCRopeDefaults {
		for _, c := range ds {
			if !c.hasRope(D) {
				t.Errorf("head dimension %d: RoPE default %s is not in attnTCRopeKernels", D, c)
			}
			// pagedTC falls back on the defaults.
			if !slices.Contains(attnTCRopePagedKernels[D], c) {
				t.Errorf("head dimension %d: RoPE default %s has no _rope_paged kernel", D, c)
			}
		}
	}
	for D, c := range attnTCRopeSingle {
		if !c.hasRope(D) {
			t.Errorf("head dimension %d: single-sequence RoPE choice %s is not in attnTCRopeKernels", D, c)
		}
	}
	// The single-sequence choice is one item's only; paged launches fall
	// back on the few-blocks default (pagedTC).
	g := &GPU{Info: DeviceInfo{SMs: 132, SharedPerBlock: 227 << 10}}
	for _, c := range []struct {
		D, items, blocks int
		want             attnTC
	}{
		{64, 1, 32, attnTCRopeSingle[64]},
		{64, 4, 128, attnTCRopeDefaults[64][0]},
		{64, 512, 2048, attnTCRopeDefaults[64][1]},
		{128, 1, 64, attnTCRopeDefaults[128][0]},
	} {
		if got, ok := g.attnTCRopeDefault(c.D, AttnRowsTiny, c.items, c.blocks); !ok || got != c.want {
			t.Errorf("attnTCRopeDefault(D %d, %d items, %d blocks) = %s, %t; want %s", c.D, c.items, c.blocks, got, ok, c.want)
		}
	}
	// A GPU whose blocks cannot have its shared memory (sm_89: 99 KiB) runs
	// the few-blocks default.
	small := &GPU{Info: DeviceInfo{SMs: 142, SharedPerBlock: 99 << 10}}
	if got, ok := small.attnTCRopeDefault(64, AttnRowsTiny, 1, 32); !ok || got != attnTCRopeDefaults[64][0] {
		t.Errorf("one item with 99 KiB of shared memory a block runs %s, want %s", got, attnTCRopeDefaults[64][0])
	}
	if got := g.pagedTC(attnTCRopeSingle[64], 64, AttnRowsTiny, 32, true); got != attnTCRopeDefaults[64][0] {
		t.Errorf("a paged single-sequence launch runs %s, want %s", got, attnTCRopeDefaults[64][0])
	}
	for D, ds := range attnTCDefaults {
		for _, c := range ds {
			if !slices.Contains(attnTCPagedKernels[D], c) {
				t.Errorf("head dimension %d: default %s has no _paged kernel", D, c)
			}
		}
	}
	for D, cs := range attnTCPagedKernels {
		for _, c := range cs {
			if !slices.Contains(attnTCKernels[D], c) {
				t.Errorf("head dimension %d: paged %s is not in attnTCKernels", D, c)
			}
		}
	}
	for D, cs := range attnTCRopePagedKernels {
		for _, c := range cs {
			if !c.hasRope(D) {
				t.Errorf("head dimension %d: paged %s is not in attnTCRopeKernels", D, c)
			}
		}
	}
}

// TestAttentionRope checks the decode attention with RoPE and the cache
// write folded in (AttnLaunch.Rope; every _rope kernel) against engine/cpu
// and against the unfused path (RopeKV, then the default kernel): the past
// tokens' keys and values go into a poisoned cache through RopeKV, the new
// tokens' positions stay poisoned (NaN: a kernel that read them from the
// cache rather than from the QKV rows fails), then one launch attends the
// new tokens. Its output must match RefRoPE + RefAttention, and the cache
// must then hold the new tokens' rotated keys and their values. Contexts
// on both sides of the 16-key tiles and of the 256-key short limit, one to
// three new tokens a sequence (as many as the block's rows hold: an item
// is a whole sequence), with and without splits (merged by the last block
// or by attn_combine), short items on and off; TinyLlama (32 x 4 heads of
// 64), Llama 3.2 1B (32 x 8 of 64), heads of 128 (32 x 8, 8 x 2) and one
// query head per KV head.
func TestAttentionRope(t *testing.T) {
	contexts := []int{1, 15, 16, 17, 64, 200, 255, 256, 257, 1000}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 64}, {32, 8, 128}, {8, 2, 128}, {3, 3, 64}} {
			G := a.Heads / a.KVHeads
			for _, rows := range []int{AttnRowsTiny, AttnRowsSmall} {
				if G > rows {
					continue
				}
				var seqs []attnSeq
				for i, ctx := range contexts {
					n := min(ctx, 1+i%min(rows/G, 3))
					seqs = append(seqs, attnSeq{ctx - n, n})
				}
				for _, splits := range []int{1, 3, -3, -8} {
					for _, short := range attnShorts(splits) {
						t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/rows%d/split%d/short%d", dt, a.Heads, a.KVHeads, a.HeadDim, rows, splits, short), func(t *testing.T) {
							do(t, func(t testing.TB, g *GPU) {
								// Those this GPU can launch: the 16 key warps of
								// the single-sequence choice take 144 KiB.
								var kernels []attnTC
								for _, c := range attnTCRopeKernels[a.HeadDim] {
									if c.fits(rows) && c.smem(a.HeadDim) <= g.Info.SharedPerBlock {
										kernels = append(kernels, c)
									}
								}
								withSwap(g, rows, func() { checkAttentionRope(t, g, dt, a, seqs, rows, splits, short, kernels) })
							})
						})
					}
				}
			}
		}
	}
}

func checkAttentionRope(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, rows, splits, short int, kernels []attnTC) {
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	posP, slotP, posN, slotN, items, nPast, nNew, capacity := ropeBatch(seqs)
	slots := len(seqs) + 1 // slot 0 stays unused
	table := model.RopeTable(model.Config{Heads: H, KVHeads: KV, HeadDim: D, RopeTheta: 10000}, capacity)
	past := randVals(r, dt, max(1, nPast)*W, 1.5)
	fresh := randVals(r, dt, nNew*W, 1.5)
	var ip, in int

	// The reference: queries and keys rotated, rounded as stored.
	rotP, rotN := append([]float32(nil), past...), append([]float32(nil), fresh...)
	cpu.RefRoPE(rotP[H*D:], posP, table, nPast, W, KV, D)
	cpu.RefRoPE(rotN, posN, table, nNew, W, H, D)
	cpu.RefRoPE(rotN[H*D:], posN, table, nNew, W, KV, D)
	rotP, rotN = dt.Decode(dt.Encode(rotP)), dt.Decode(dt.Encode(rotN))
	var ref, kRef, vRef []float32
	ip, in = 0, 0
	for _, s := range seqs {
		L := s.past + s.n
		q := make([]float32, s.n*H*D)
		k := make([]float32, L*KV*D)
		v := make([]float32, L*KV*D)
		for p := range L {
			var row, vrow []float32
			if p < s.past {
				row = rotP[(ip+p)*W : (ip+p+1)*W]
				vrow = past[(ip+p)*W : (ip+p+1)*W]
			} else {
				row = rotN[(in+p-s.past)*W : (in+p-s.past+1)*W]
				vrow = fresh[(in+p-s.past)*W : (in+p-s.past+1)*W]
				copy(q[(p-s.past)*H*D:], row[:H*D])
				kRef = append(kRef, row[H*D:(H+KV)*D]...)
				vRef = append(vRef, vrow[(H+KV)*D:]...)
			}
			copy(k[p*KV*D:], row[H*D:(H+KV)*D])
			copy(v[p*KV*D:], vrow[(H+KV)*D:])
		}
		o := make([]float32, s.n*H*D)
		refAttention(o, q, k, v, s.n, s.past, H, KV, D)
		ref = append(ref, o...)
		ip += s.past
		in += s.n
	}

	tab := devUploadT(t, g, table)
	itemsB := devUploadT(t, g, items)
	fold := splits < 0
	splits = max(splits, -splits)
	// cacheWith returns a poisoned cache holding the past tokens' keys and
	// values (and, with news, the new tokens' too), as RopeKV writes them.
	cacheWith := func(news bool) (kc, vc Buffer) {
		kc = devPoisoned(t, g, dt, slots*KV*capacity*D)
		vc = devPoisoned(t, g, dt, slots*KV*capacity*D)
		if nPast > 0 {
			if err := g.RopeKV(g.Stream, dt, kc, vc, devUpload(t, g, dt, past), devUploadT(t, g, posP), devUploadT(t, g, slotP), tab, nPast, capacity, a); err != nil {
				t.Fatal(err)
			}
		}
		if news {
			if err := g.RopeKV(g.Stream, dt, kc, vc, devUpload(t, g, dt, fresh), devUploadT(t, g, posN), devUploadT(t, g, slotN), tab, nNew, capacity, a); err != nil {
				t.Fatal(err)
			}
		}
		return kc, vc
	}
	launch := func(rope Buffer) AttnLaunch {
		l := AttnLaunch{Items: itemsB, N: len(items) / 4, Rows: rows, Splits: splits, ShortKeys: short, Rope: rope}
		if splits > 1 {
			l.Work = devPoisoned(t, g, F16, AttnWorkBytes(l.N*KV*splits, rows, D)/2)
		}
		if fold {
			l.Counters = devUploadT(t, g, make([]int32, l.N*KV))
		}
		return l
	}

	// The unfused path, to agree with.
	kc, vc := cacheWith(true)
	out := devPoisoned(t, g, dt, nNew*H*D)
	if err := g.Attention(g.Stream, dt, out, devUpload(t, g, dt, rotN), kc, vc, capacity, a, launch(Buffer{})); err != nil {
		t.Fatal(err)
	}
	unfused := download(t, g, dt, out, nNew*H*D)
	checkRel(t, "unfused (RopeKV, then attention)", unfused, ref)

	for _, kern := range kernels {
		kc, vc := cacheWith(false)
		qkvB := devUpload(t, g, dt, fresh)
		out := devPoisoned(t, g, dt, nNew*H*D)
		runAttention(t, g, dt, out, qkvB, kc, vc, capacity, a, launch(tab), kern)
		got := download(t, g, dt, out, nNew*H*D)
		checkRel(t, fmt.Sprintf("%s_rope: attention", kern), got, ref)
		checkRel(t, fmt.Sprintf("%s_rope against the unfused path", kern), got, unfused)
		kAll, vAll := download(t, g, dt, kc, slots*KV*capacity*D), download(t, g, dt, vc, slots*KV*capacity*D)
		var kGot, vGot []float32
		for i, s := range seqs {
			for p := s.past; p < s.past+s.n; p++ {
				for hh := range KV {
					at := (((i+1)*KV+hh)*capacity + p) * D
					kGot = append(kGot, kAll[at:at+D]...)
					vGot = append(vGot, vAll[at:at+D]...)
				}
			}
		}
		checkRel(t, fmt.Sprintf("%s_rope: cached keys", kern), kGot, kRef)
		checkRel(t, fmt.Sprintf("%s_rope: cached values", kern), vGot, vRef)
	}
}

// runAttention runs launch l on kern and waits for it; a launch with
// counters runs twice, and its counters must be back at zero.
func runAttention(t testing.TB, g *GPU, dt DType, out, qkv, kc, vc Buffer, capacity int, a AttnShape, l AttnLaunch, kern attnTC) {
	runs := 1
	if l.Counters.Bytes > 0 {
		runs = 2
	}
	for range runs {
		if err := g.attention(g.Stream, dt, out, qkv, kc, vc, capacity, a, l, kern); err != nil {
			t.Fatal(err)
		}
	}
	if l.Counters.Bytes > 0 {
		cnt := make([]int32, l.Counters.Bytes/4)
		if err := DownloadSlice(g.Stream, cnt, l.Counters); err != nil {
			t.Fatal(err)
		}
		for i, c := range cnt {
			if c != 0 {
				t.Fatalf("%s: counter %d is %d after the launch, want 0", kern, i, c)
			}
		}
	}
	if err := g.Stream.Sync(); err != nil {
		t.Fatal(err)
	}
}

// attnSeq is one sequence of an attention check: past cached tokens, n new.
type attnSeq struct{ past, n int }

// checkAttention runs one launch of the sequences' new tokens on each of
// the kernels, on the same inputs, and checks each against the reference
// and against the first kernel.
func checkAttention(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, rows, splits, short int, kernels []attnTC) {
	kernels = runnable(g, kernels, splits)
	r := newRand(t)
	KV, D, W := a.KVHeads, a.HeadDim, a.Width()
	pos, slot, items, total, capacity := attnBatch(seqs, AttnItemTokens(a, rows))
	slots := len(seqs) + 1
	qkv := randVals(r, dt, total*W, 1.5)
	kc := devPoisoned(t, g, dt, slots*KV*capacity*D)
	vc := devPoisoned(t, g, dt, slots*KV*capacity*D)
	qkvB := devUpload(t, g, dt, qkv)
	if err := g.KVWrite(g.Stream, dt, kc, vc, qkvB, devUploadT(t, g, pos), devUploadT(t, g, slot), total, capacity, a); err != nil {
		t.Fatal(err)
	}
	refs := attnRefs(seqs, qkv, a)
	l := AttnLaunch{Items: devUploadT(t, g, items), N: len(items) / 4, Rows: rows, Splits: splits, ShortKeys: short}
	checkKernels(t, g, dt, a, seqs, refs, qkvB, kc, vc, capacity, l, kernels)
}

// ropeBatch lays seqs out as the RoPE checks take them: the past tokens
// (nPast in all) one after another, each one's position and slot
// (sequence i in slot i + 1), the same for the new tokens (nNew), one
// work item per sequence (all of its new tokens), and the longest
// sequence (capacity).
func ropeBatch(seqs []attnSeq) (posP, slotP, posN, slotN, items []int32, nPast, nNew, capacity int) {
	for _, s := range seqs {
		capacity = max(capacity, s.past+s.n)
		nPast += s.past
		nNew += s.n
	}
	posP, slotP = make([]int32, nPast), make([]int32, nPast)
	posN, slotN = make([]int32, nNew), make([]int32, nNew)
	ip, in := 0, 0
	for i, s := range seqs {
		for p := range s.past {
			posP[ip], slotP[ip] = int32(p), int32(i+1)
			ip++
		}
		items = append(items, int32(in), int32(s.n), int32(i+1), int32(s.past))
		for j := range s.n {
			posN[in+j], slotN[in+j] = int32(s.past+j), int32(i+1)
		}
		in += s.n
	}
	return posP, slotP, posN, slotN, items, nPast, nNew, capacity
}

// attnRefs is engine/cpu's RefAttention of each sequence's new tokens over
// its whole rows of qkv (laid out as attnBatch lays them).
func attnRefs(seqs []attnSeq, qkv []float32, a AttnShape) [][]float32 {
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	refs := make([][]float32, len(seqs))
	start := 0
	for i, s := range seqs {
		L := s.past + s.n
		q := make([]float32, s.n*H*D)
		k := make([]float32, L*KV*D)
		v := make([]float32, L*KV*D)
		for p := range L {
			row := qkv[(start+p)*W : (start+p+1)*W]
			copy(k[p*KV*D:], row[H*D:(H+KV)*D])
			copy(v[p*KV*D:], row[(H+KV)*D:])
			if p >= s.past {
				copy(q[(p-s.past)*H*D:], row[:H*D])
			}
		}
		refs[i] = make([]float32, s.n*H*D)
		refAttention(refs[i], q, k, v, s.n, s.past, H, KV, D)
		start += L
	}
	return refs
}

// attnBatch lays seqs out as KVWrite and a launch take them: whole
// sequences one after another (sequence i in slot i + 1; slot 0 stays
// unused), each token's position and slot, and the work items of their
// new tokens, per tokens an item at most.
func attnBatch(seqs []attnSeq, per int) (pos, slot, items []int32, total, capacity int) {
	for _, s := range seqs {
		capacity = max(capacity, s.past+s.n)
		total += s.past + s.n
	}
	pos, slot = make([]int32, total), make([]int32, total)
	start := 0
	for i, s := range seqs {
		for p := range s.past + s.n {
			pos[start+p], slot[start+p] = int32(p), int32(i+1)
		}
		for t0 := s.past; t0 < s.past+s.n; t0 += per {
			items = append(items, int32(start+t0), int32(min(per, s.past+s.n-t0)), int32(i+1), int32(t0))
		}
		start += s.past + s.n
	}
	return pos, slot, items, total, capacity
}

// checkKernels runs launch l over the cache (splits negative: merged by
// the last block) on each kernel, and checks the new tokens' outputs of
// every sequence against refs and against the first kernel's.
func checkKernels(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, refs [][]float32, qkvB, kc, vc Buffer, capacity int, l AttnLaunch, kernels []attnTC) {
	H, KV, D := a.Heads, a.KVHeads, a.HeadDim
	total := 0
	for _, s := range seqs {
		total += s.past + s.n
	}
	fold := l.Splits < 0
	l.Splits = max(l.Splits, -l.Splits)
	var first []float32
	for _, kern := range kernels {
		out := devPoisoned(t, g, dt, total*H*D)
		if l.Splits > 1 {
			l.Work = devPoisoned(t, g, F16, AttnWorkBytes(l.N*KV*l.Splits, l.Rows, D)/2)
		}
		if fold {
			l.Counters = devUploadT(t, g, make([]int32, l.N*KV))
		}
		runAttention(t, g, dt, out, qkvB, kc, vc, capacity, a, l, kern)
		got := download(t, g, dt, out, total*H*D)
		var news []float32 // the outputs of the new tokens, sequence after sequence
		start := 0
		for i, s := range seqs {
			L := s.past + s.n
			seg := got[(start+s.past)*H*D : (start+L)*H*D]
			checkRel(t, fmt.Sprintf("%s: sequence %d (past %d, %d new)", kern, i, s.past, s.n), seg, refs[i])
			news = append(news, seg...)
			start += L
		}
		if first == nil {
			first = news
		} else {
			checkRel(t, fmt.Sprintf("%s against %s", kern, kernels[0]), news, first)
		}
	}
}

func TestOps(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				r := newRand(t)
				const rows, cols = 37, 2048
				x, y := randVals(r, dt, rows*cols, 2), randVals(r, dt, rows*cols, 2)
				xb := devUpload(t, g, dt, x)
				if err := g.Add(g.Stream, dt, xb, devUpload(t, g, dt, y), rows*cols); err != nil {
					t.Fatal(err)
				}
				sum := make([]float32, len(x))
				for i := range sum {
					sum[i] = x[i] + y[i]
				}
				checkRel(t, "add", download(t, g, dt, xb, rows*cols), sum)

				pick := []int32{36, 0, 5, 5, 17}
				out := devPoisoned(t, g, dt, len(pick)*cols)
				if err := g.GatherRows(g.Stream, dt, out, xb, devUploadT(t, g, pick), len(pick), cols); err != nil {
					t.Fatal(err)
				}
				var want []float32
				for _, p := range pick {
					want = append(want, sum[int(p)*cols:int(p+1)*cols]...)
				}
				checkRel(t, "gather_rows", download(t, g, dt, out, len(pick)*cols), want)

				// qk-norm: RMSNorm of each query and key head, values untouched.
				a := AttnShape{Heads: 8, KVHeads: 2, HeadDim: 128}
				const tokens, eps = 5, 1e-6
				W := a.Width()
				qkv := randVals(r, dt, tokens*W, 3)
				qw, kw := randVals(r, dt, a.HeadDim, 1), randVals(r, dt, a.HeadDim, 1)
				qb := devUpload(t, g, dt, qkv)
				if err := g.HeadNorm(g.Stream, dt, qb, devUpload(t, g, dt, qw), devUpload(t, g, dt, kw), tokens, a, eps); err != nil {
					t.Fatal(err)
				}
				ref := append([]float32(nil), qkv...)
				for tk := range tokens {
					for h := range a.Heads + a.KVHeads {
						seg := ref[tk*W+h*a.HeadDim : tk*W+(h+1)*a.HeadDim]
						w := qw
						if h >= a.Heads {
							w = kw
						}
						cpu.RefRMSNorm(seg, append([]float32(nil), seg...), w, 1, a.HeadDim, eps)
					}
				}
				checkRel(t, "head_norm", download(t, g, dt, qb, tokens*W), ref)
			})
		})
	}
}

// f8Swap takes the _f8t kernels for unfolded decode launches of at most
// 8 rows on the configurations that have them, with the codes converted
// in registers: with the switch at 1 over any cache, under auto where the
// cache holds at most attnF8SwapMaxKeys positions a sequence (fixed
// slots' capacity, or a block table's row), never at 0; every default
// decode configuration that launches unfolded over an FP8 cache has one.
func TestF8Swap(t *testing.T) {
	on := &GPU{sw: model.Switches{CUDAAttnF8Swap: "1", CUDAAttnF8Regs: true}}
	auto := &GPU{sw: model.Switches{CUDAAttnF8Swap: "auto", CUDAAttnF8Regs: true}}
	def := attnTCDefaults[128][1]
	rope := AttnLaunch{Rows: AttnRowsTiny, Rope: Buffer{Ptr: 1}}
	short, long := attnF8SwapMaxKeys, attnF8SwapMaxKeys+1
	for _, c := range []struct {
		name    string
		g       *GPU
		tc      attnTC
		l       AttnLaunch
		maxKeys int
		want    bool
	}{
		{"decode, 8 rows", on, def, AttnLaunch{Rows: AttnRowsTiny}, long, true},
		{"decode, 16 rows", on, def, AttnLaunch{Rows: AttnRowsSmall}, short, false},
		{"RoPE folded in", on, def, rope, short, false},
		{"switch off", &GPU{sw: model.Switches{CUDAAttnF8Swap: "0", CUDAAttnF8Regs: true}}, def, AttnLaunch{Rows: AttnRowsTiny}, short, false},
		{"auto, short cache", auto, def, AttnLaunch{Rows: AttnRowsTiny}, short, true},
		{"auto, long cache", auto, def, AttnLaunch{Rows: AttnRowsTiny}, long, false},
		{"auto, RoPE folded in", auto, def, rope, short, false},
		{"shared-memory decode", &GPU{sw: model.Switches{CUDAAttnF8Swap: "1"}}, def, AttnLaunch{Rows: AttnRowsTiny}, short, false},
		{"no _f8t kernel", on, attnTC{1, 2, 16, 3, false}, AttnLaunch{Rows: AttnRowsTiny}, short, false},
		{"prefill", on, attnTCDefaults[128][2], AttnLaunch{Rows: AttnRowsLarge}, short, false},
	} {
		if got := c.g.f8Swap(c.tc, 128, c.l, c.maxKeys); got != c.want {
			t.Errorf("%s: f8Swap %v, want %v", c.name, got, c.want)
		}
	}
	if got := (KVPages{}).seqKeys(256); got != 256 {
		t.Errorf("fixed slots of 256: seqKeys %d", got)
	}
	if got := (KVPages{Stride: 9, BlockSize: 32}).seqKeys(32); got != 288 {
		t.Errorf("9 blocks of 32 a row: seqKeys %d, want 288", got)
	}
	for D, ds := range attnTCDefaults {
		for _, d := range ds[:2] {
			if !slices.Contains(attnF8SwapKernels[D], d) {
				t.Errorf("head dimension %d: decode default %s has no _f8t kernel", D, d)
			}
		}
	}
	for D, cs := range attnF8SwapKernels {
		for _, c := range cs {
			if c.rowWarps != 1 || c.keyWarps < 2 || !slices.Contains(attnTCPagedKernels[D], c) {
				t.Errorf("head dimension %d: _f8t configuration %s is not a decode one of several key warps with FP8 kernels", D, c)
			}
		}
	}
}

// TestAttnFoldPays pins the fold rule to the launches it was measured on
// (attnFoldFP8MaxItems): a 16-bit cache folds at any width, an FP8 one up
// to 1,024 items, so TinyLlama's B=256 folds and Llama-3.1-8B's B=256 and
// B=2048 do not.
func TestAttnFoldPays(t *testing.T) {
	tiny, llama := AttnShape{32, 4, 64}, AttnShape{32, 8, 128}
	f8 := KVFP8{On: true, K: 1, V: 1}
	for _, c := range []struct {
		a    AttnShape
		n    int
		fp8  KVFP8
		want bool
	}{
		{llama, 2048, KVFP8{}, true},
		{tiny, 1, f8, true},
		{tiny, 256, f8, true},
		{tiny, 257, f8, false},
		{llama, 128, f8, true},
		{llama, 129, f8, false},
		{llama, 256, f8, false},
		{llama, 2048, f8, false},
	} {
		if got := AttnFoldPays(c.a, AttnLaunch{N: c.n, Rows: AttnRowsTiny, FP8: c.fp8}); got != c.want {
			t.Errorf("AttnFoldPays(%+v, N=%d, FP8 %v) = %v, want %v", c.a, c.n, c.fp8.On, got, c.want)
		}
	}
}

// TestAttnSplitsFor checks the decode launch's key split on an H100's 132
// multiprocessors: narrow launches split to about two blocks a
// multiprocessor (TinyLlama at batch 1), a few long items into splits of
// at least 640 KiB of keys and values (the 20000/2000 row's 40 sequences,
// over FP8 and 16-bit caches), short or many items not at all, and the
// workspace every split fits in.
func TestAttnSplitsFor(t *testing.T) {
	tiny, llama := AttnShape{32, 4, 64}, AttnShape{32, 8, 128}
	const sms = 132
	for _, c := range []struct {
		a             AttnShape
		n, keys, elem int
		want          int
	}{
		{tiny, 1, 255, 2, 8},
		{tiny, 16, 255, 2, 4},
		{tiny, 64, 255, 2, 1},
		{tiny, 256, 255, 2, 1},
		{llama, 40, 21000, 1, 8},
		{llama, 40, 21000, 2, 8},
		{llama, 40, 4200, 1, 1}, // 2 ways: 537 KB a split
		{llama, 40, 4200, 2, 3},
		{llama, 40, 1050, 2, 1},
		{llama, 40, 0, 2, 1},
		{llama, 65, 21000, 2, 5}, // 520 blocks: up to 20 a multiprocessor
		{llama, 66, 21000, 2, 1}, // 528 blocks: wide enough
		{llama, 183, 5000, 1, 1},
		{llama, 16, 21000, 1, 8},
		{llama, 0, 21000, 1, 1},
	} {
		got := AttnSplitsFor(sms, c.n, c.a, c.keys, c.elem)
		if got != c.want {
			t.Errorf("AttnSplitsFor(%d, %d items, KV %d, %d keys of %d bytes) = %d, want %d", sms, c.n, c.a.KVHeads, c.keys, c.elem, got, c.want)
		}
		if blocks := c.n * c.a.KVHeads; got > 1 {
			if need := AttnWorkBytes(blocks*got, AttnRowsSmall, c.a.HeadDim); need > AttnSplitWorkBytes(sms) {
				t.Errorf("%d items x %d splits need %d bytes of workspace, AttnSplitWorkBytes gives %d", c.n, got, need, AttnSplitWorkBytes(sms))
			}
			if need := AttnCounterBytes(blocks); need > AttnSplitCounterBytes(sms) {
				t.Errorf("%d items split need %d bytes of counters, AttnSplitCounterBytes gives %d", c.n, need, AttnSplitCounterBytes(sms))
			}
		}
	}
}

// TestAttnPrefillRows checks the prefill launch's rows a block
// (AttnPrefillRows): 128 at head dimension 128 under `auto` from 512 keys a
// chunk over an FP8 cache (fixed slots or paged), 2,048 over a paged
// 16-bit one, 16,384 over a 16-bit contiguous one; at any length under
// `128`; never under `64`, at head
// dimension 64, or where XRUN_CUDA_ATTN_TC keeps the tensor cores off or
// names a configuration of 64 rows; a name of the 128-row configuration
// keeps it.
func TestAttnPrefillRows(t *testing.T) {
	tiny, llama := AttnShape{32, 4, 64}, AttnShape{32, 8, 128}
	sw := func(xl, tc string) model.Switches { return model.Switches{CUDAAttnXL: xl, CUDAAttnTC: tc} }
	for _, c := range []struct {
		sw         model.Switches
		a          AttnShape
		keys       int
		fp8, paged bool
		want       int
	}{
		{sw("auto", "auto"), llama, 512, true, false, AttnRowsXL},
		{sw("auto", "auto"), llama, 511, true, false, AttnRowsLarge},
		{sw("auto", "auto"), llama, 512, true, true, AttnRowsXL},
		{sw("auto", "auto"), llama, 511, true, true, AttnRowsLarge},
		{sw("64", "auto"), llama, 20000, true, true, AttnRowsLarge},
		{sw("128", "auto"), llama, 20000, true, true, AttnRowsXL},
		{sw("auto", "auto"), llama, 2048, false, true, AttnRowsXL},
		{sw("auto", "auto"), llama, 2047, false, true, AttnRowsLarge},
		{sw("auto", "auto"), llama, 16384, false, false, AttnRowsXL},
		{sw("auto", "auto"), llama, 16383, false, false, AttnRowsLarge},
		{sw("auto", "auto"), llama, 128, true, true, AttnRowsLarge},
		{sw("auto", "auto"), tiny, 20000, true, false, AttnRowsLarge},
		{sw("128", "auto"), llama, 128, false, false, AttnRowsXL},
		{sw("128", "auto"), tiny, 20000, false, false, AttnRowsLarge},
		{sw("64", "auto"), llama, 20000, true, false, AttnRowsLarge},
		{sw("auto", "0"), llama, 20000, true, false, AttnRowsLarge},
		{sw("128", "tc-m4-k1-t64-s2"), llama, 20000, true, false, AttnRowsLarge},
		{sw("128", "tc-m8-k1-t64-s2"), llama, 100, false, false, AttnRowsXL},
		{sw("auto", "wg-m8-k1-t64-s2"), llama, 20000, true, false, AttnRowsXL},
		{sw("auto", "wg-m4-k1-t64-s2"), llama, 20000, true, false, AttnRowsLarge},
	} {
		if got := AttnPrefillRows(c.sw, c.a, c.keys, c.fp8, c.paged, false); got != c.want {
			t.Errorf("AttnPrefillRows(%s / %s, D=%d, %d keys, fp8 %v, paged %v) = %d, want %d",
				c.sw.CUDAAttnXL, c.sw.CUDAAttnTC, c.a.HeadDim, c.keys, c.fp8, c.paged, got, c.want)
		}
	}
	// On the warpgroup MMA (head dimension 128): from 128 keys over every
	// cache; never at head dimension 64.
	for _, c := range []struct {
		a          AttnShape
		keys       int
		fp8, paged bool
		want       int
	}{
		{llama, 128, true, false, AttnRowsXL},
		{llama, 127, true, false, AttnRowsLarge},
		{llama, 128, true, true, AttnRowsXL},
		{llama, 127, true, true, AttnRowsLarge},
		{llama, 128, false, true, AttnRowsXL},
		{llama, 128, false, false, AttnRowsXL},
		{llama, 127, false, false, AttnRowsLarge},
		{llama, 20000, false, false, AttnRowsXL},
		{tiny, 20000, true, true, AttnRowsLarge},
	} {
		if got := AttnPrefillRows(sw("auto", "auto"), c.a, c.keys, c.fp8, c.paged, true); got != c.want {
			t.Errorf("AttnPrefillRows(wg, D=%d, %d keys, fp8 %v, paged %v) = %d, want %d", c.a.HeadDim, c.keys, c.fp8, c.paged, got, c.want)
		}
	}
	// Every configuration it can pick takes its rows.
	for d, c := range attnTCXL {
		if !c.fits(AttnRowsXL) || !slices.Contains(attnTCKernels[d], c) || !slices.Contains(attnTCPagedKernels[d], c) {
			t.Errorf("attnTCXL[%d] = %s: not a listed 16-bit and paged configuration of %d rows", d, c, AttnRowsXL)
		}
	}
}

// runnable is the configurations of kernels whose kernels serve launches
// split splits ways (negative: merged by the last block) on g (attnTC.runsOn):
// the warpgroup-MMA ones on Hopper, unsplit.
func runnable(g *GPU, kernels []attnTC, splits int) []attnTC {
	return slices.DeleteFunc(slices.Clone(kernels), func(c attnTC) bool { return !c.runsOn(g.Info, max(splits, -splits)) })
}

// attnKernelsFor is the configurations of list that take rows query rows a
// block, after the CUDA-core kernel ({}) where withCore asks for it and it
// takes them (at most AttnRowsLarge).
func attnKernelsFor(list []attnTC, rows int, withCore bool) []attnTC {
	var ks []attnTC
	if withCore && rows <= AttnRowsLarge {
		ks = append(ks, attnTC{})
	}
	for _, c := range list {
		if c.fits(rows) {
			ks = append(ks, c)
		}
	}
	return ks
}

// TestAttnSwapKernels checks, without a GPU, the _sw kernels: attention_tc.cu
// instantiates exactly what attnSwapKernels and attnSwapRopeKernels list,
// each over fixed slots and paged, every one a decode configuration of
// its family's lists, every decode default among them; and swap16 routes
// launches of at most 8 rows there with the switch on, with or without
// RoPE folded in, and nothing else.
func TestAttnSwapKernels(t *testing.T) {
	src, err := kernelSource("attention_tc")
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct {
		macro, suffix string
		kernels, of   map[int][]attnTC
	}{
		{"ATTN_TC_SW", ", false, )", attnSwapKernels, attnTCKernels},
		{"ATTN_TC_SW", ", true, _rope)", attnSwapRopeKernels, attnTCRopeKernels},
		{"ATTN_TC_SWP", ", false, _paged)", attnSwapKernels, attnTCPagedKernels},
		{"ATTN_TC_SWP", ", true, _rope_paged)", attnSwapRopeKernels, attnTCRopePagedKernels},
	} {
		inst := map[string]bool{}
		re := regexp.MustCompile(fam.macro + `\(T, (\d+), (\d+), (\d+), (\d+)` + regexp.QuoteMeta(fam.suffix))
		for _, m := range re.FindAllStringSubmatch(src, -1) {
			inst[strings.Join(m[1:], ",")] = true
		}
		for D, cs := range fam.kernels {
			for _, c := range cs {
				key := fmt.Sprintf("%d,%d,%d,%d", D, c.keyWarps, c.keyTile, c.stages)
				if c.rowWarps != 1 || c.keyWarps < 2 || !inst[key] || !slices.Contains(fam.of[D], c) {
					t.Errorf("head dimension %d: %s%s: not an instantiated decode configuration of several key warps in its family", D, c, fam.suffix)
				}
				delete(inst, key)
			}
		}
		for k := range inst {
			t.Errorf("attention_tc.cu instantiates %s(%s%s), which the launcher does not list", fam.macro, k, fam.suffix)
		}
	}
	for D, ds := range attnTCDefaults {
		for _, d := range ds[:2] {
			if !slices.Contains(attnSwapKernels[D], d) {
				t.Errorf("head dimension %d: decode default %s has no _sw kernel", D, d)
			}
		}
		for _, d := range attnTCRopeDefaults[D] {
			if !slices.Contains(attnSwapRopeKernels[D], d) {
				t.Errorf("head dimension %d: RoPE default %s has no _rope_sw kernel", D, d)
			}
		}
	}
	on, off := &GPU{sw: model.Switches{CUDAAttnSwap: true}}, &GPU{}
	rope := AttnLaunch{Rows: AttnRowsTiny, Rope: Buffer{Ptr: 1}}
	for _, c := range []struct {
		name string
		g    *GPU
		tc   attnTC
		l    AttnLaunch
		want bool
	}{
		{"decode, 8 rows", on, attnTCDefaults[64][1], AttnLaunch{Rows: AttnRowsTiny}, true},
		{"RoPE folded in", on, attnTCRopeDefaults[64][1], rope, true},
		{"RoPE folded in, no _rope_sw kernel", on, attnTC{1, 8, 16, 2, false}, rope, false},
		{"16 rows", on, attnTCDefaults[64][1], AttnLaunch{Rows: AttnRowsSmall}, false},
		{"switch off", off, attnTCDefaults[64][1], AttnLaunch{Rows: AttnRowsTiny}, false},
		{"prefill", on, attnTCDefaults[64][2], AttnLaunch{Rows: AttnRowsLarge}, false},
	} {
		if got := c.g.swap16(c.tc, 64, c.l); got != c.want {
			t.Errorf("%s: swap16 %v, want %v", c.name, got, c.want)
		}
	}
}

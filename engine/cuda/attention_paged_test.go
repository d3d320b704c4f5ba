//go:build cgo && linux

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// pagedLayout is a paged cache's block tables for sequences of the given
// lengths in slots 1, 2, ... (slot 0 unused, as the contiguous checks
// leave it): the blocks drawn in a random order from a pool with spare
// blocks, so that no sequence's blocks are consecutive by luck. Entries
// past a sequence's blocks point far outside the pool: a kernel that read
// one would fault or fail the comparison.
type pagedLayout struct {
	bs, stride, blocks int
	tables             []int32 // [slots][stride]
}

func newPagedLayout(r *rand.Rand, lens []int, bs int) pagedLayout {
	stride, need := 1, 0
	for _, L := range lens {
		stride = max(stride, (L+bs-1)/bs)
		need += (L + bs - 1) / bs
	}
	p := pagedLayout{bs: bs, stride: stride, blocks: need + 3}
	perm := r.Perm(p.blocks)
	p.tables = make([]int32, (len(lens)+1)*stride)
	for i := range p.tables {
		p.tables[i] = 1 << 24
	}
	next := 0
	for i, L := range lens {
		for b := range (L + bs - 1) / bs {
			p.tables[(i+1)*stride+b] = int32(perm[next])
			next++
		}
	}
	return p
}

// row is where position pos of slot's KV head h starts in a paged cache
// (elements), and contig the same in a contiguous one of capacity
// positions.
func (p pagedLayout) row(slot, h, pos, KV, D int) int {
	blk := int(p.tables[slot*p.stride+pos/p.bs])
	return ((blk*KV+h)*p.bs + pos%p.bs) * D
}

func contigRow(slot, h, pos, KV, D, capacity int) int { return ((slot*KV+h)*capacity + pos) * D }

// TestPagedAttention checks every kernel that reads or writes a paged
// cache against its contiguous twin on fresh random input: KVWritePaged
// must put every key and value where the block tables say (the same bits
// KVWrite puts in a contiguous cache), and the paged attention launches
// (the CUDA-core kernel and every _paged tensor-core configuration; decode
// and prefill rows; unsplit, split and merged by the last block) must give
// what the contiguous ones give, and what engine/cpu's RefAttention gives.
// Sequences cross block edges (contexts of 1, 63..65, 200 and 1000 keys,
// prefill chunks of 45, 50 and 64 after cached tokens) for blocks of 16
// and 32 positions (smaller than and as large as the tensor-core kernels'
// 32-key tiles).
func TestPagedAttention(t *testing.T) {
	seqs := []attnSeq{{0, 45}, {0, 1}, {62, 1}, {63, 1}, {64, 1}, {199, 1}, {5, 64}, {300, 50}, {999, 1}}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {8, 2, 32}, {4, 2, 16}} {
			for _, bs := range []int{16, 32} {
				for _, rows := range []int{AttnRowsTiny, AttnRowsSmall, AttnRowsLarge, AttnRowsXL} {
					for _, splits := range []int{1, 3, -3} {
						if rows >= AttnRowsLarge && splits != 1 {
							continue // prefill launches are never split
						}
						t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/block%d/rows%d/split%d", dt, a.Heads, a.KVHeads, a.HeadDim, bs, rows, splits), func(t *testing.T) {
							if a.Heads/a.KVHeads > rows || rows == AttnRowsTiny && a.HeadDim < 32 {
								t.Skip("group larger than the block's rows, or no such kernel")
							}
							kernels := attnKernelsFor(attnTCPagedKernels[a.HeadDim], rows, true)
							if len(kernels) == 0 {
								t.Skipf("no kernel of %d rows at head dimension %d", rows, a.HeadDim)
							}
							do(t, func(t testing.TB, g *GPU) {
								withSwap(g, rows, func() { checkPagedAttention(t, g, dt, a, seqs, bs, rows, splits, kernels) })
							})
						})
					}
				}
			}
		}
	}
}

func checkPagedAttention(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, bs, rows, splits int, kernels []attnTC) {
	kernels = runnable(g, kernels, splits)
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	pos, slot, items, total, capacity := attnBatch(seqs, AttnItemTokens(a, rows))
	lens := seqLens(seqs)
	slots := len(seqs) + 1
	pl := newPagedLayout(r, lens, bs)
	qkv := randVals(r, dt, total*W, 1.5)
	qkvB, posB, slotB := devUpload(t, g, dt, qkv), devUploadT(t, g, pos), devUploadT(t, g, slot)
	kc, vc := devPoisoned(t, g, dt, slots*KV*capacity*D), devPoisoned(t, g, dt, slots*KV*capacity*D)
	if err := g.KVWrite(g.Stream, dt, kc, vc, qkvB, posB, slotB, total, capacity, a); err != nil {
		t.Fatal(err)
	}
	pages := KVPages{Tables: devUploadT(t, g, pl.tables), Stride: pl.stride, BlockSize: bs}
	kp, vp := devPoisoned(t, g, dt, pl.blocks*KV*bs*D), devPoisoned(t, g, dt, pl.blocks*KV*bs*D)
	if err := g.KVWritePaged(g.Stream, dt, kp, vp, qkvB, posB, slotB, total, pages, a); err != nil {
		t.Fatal(err)
	}
	checkPagedCache(t, g, dt, a, pl, lens, capacity, kc, vc, kp, vp, func(i, p int) bool { return true })

	refs := attnRefs(seqs, qkv, a)
	fold := splits < 0
	splits = max(splits, -splits)
	want := slices.Concat(refs...)
	for _, kern := range kernels {
		run := func(k, v Buffer, p KVPages) []float32 {
			out := devPoisoned(t, g, dt, total*H*D)
			l := AttnLaunch{Items: devUploadT(t, g, items), N: len(items) / 4, Rows: rows, Splits: splits, ShortKeys: -1, Pages: p}
			if splits > 1 {
				l.Work = devPoisoned(t, g, F16, AttnWorkBytes(l.N*KV*splits, rows, D)/2)
			}
			if fold {
				l.Counters = devUploadT(t, g, make([]int32, l.N*KV))
			}
			runAttention(t, g, dt, out, qkvB, k, v, capacity, a, l, kern)
			return newOutputs(seqs, download(t, g, dt, out, total*H*D), H*D)
		}
		contig := run(kc, vc, KVPages{})
		paged := run(kp, vp, pages)
		checkRel(t, fmt.Sprintf("%s contiguous", kern), contig, want)
		checkRel(t, fmt.Sprintf("%s paged", kern), paged, want)
		checkRel(t, fmt.Sprintf("%s paged against contiguous", kern), paged, contig)
	}
}

// checkPagedCache compares, for every position p of sequence i (slot i+1)
// that keep(i, p) selects, the paged cache's K and V rows with the
// contiguous cache's: the same bits.
func checkPagedCache(t testing.TB, g *GPU, dt DType, a AttnShape, pl pagedLayout, lens []int, capacity int, kc, vc, kp, vp Buffer, keep func(i, p int) bool) {
	KV, D := a.KVHeads, a.HeadDim
	n := (len(lens) + 1) * KV * capacity * D
	kC, vC := download(t, g, dt, kc, n), download(t, g, dt, vc, n)
	kP, vP := download(t, g, dt, kp, pl.blocks*KV*pl.bs*D), download(t, g, dt, vp, pl.blocks*KV*pl.bs*D)
	bad := 0
	for i, L := range lens {
		for p := range L {
			if !keep(i, p) {
				continue
			}
			for h := range KV {
				c, q := contigRow(i+1, h, p, KV, D, capacity), pl.row(i+1, h, p, KV, D)
				for e := range D {
					if kC[c+e] != kP[q+e] || vC[c+e] != vP[q+e] {
						if bad++; bad <= 5 {
							t.Errorf("sequence %d position %d KV head %d element %d: paged K %g V %g, contiguous K %g V %g",
								i, p, h, e, kP[q+e], vP[q+e], kC[c+e], vC[c+e])
						}
					}
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d cache elements differ in all", bad)
	}
}

// TestPagedAttentionRope checks the paged cache's RoPE paths against the
// contiguous ones: RopeKVPaged writes the past tokens (the same bits as
// RopeKV), then every _rope_paged decode kernel rotates and writes the new
// tokens itself while it attends; its output must match the contiguous
// _rope kernel's and RefRoPE + RefAttention's, and the new tokens' cached
// keys and values the contiguous cache's. Contexts on both sides of block
// edges, one to three new tokens a sequence, unsplit and split.
func TestPagedAttentionRope(t *testing.T) {
	contexts := []int{1, 15, 16, 17, 33, 64, 200, 257, 1000}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {3, 3, 64}} {
			G := a.Heads / a.KVHeads
			for _, bs := range []int{16, 32} {
				for _, rows := range []int{AttnRowsTiny, AttnRowsSmall} {
					if G > rows {
						continue
					}
					var seqs []attnSeq
					for i, ctx := range contexts {
						n := min(ctx, 1+i%min(rows/G, 3))
						seqs = append(seqs, attnSeq{ctx - n, n})
					}
					for _, splits := range []int{1, -3} {
						t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/block%d/rows%d/split%d", dt, a.Heads, a.KVHeads, a.HeadDim, bs, rows, splits), func(t *testing.T) {
							kernels := attnKernelsFor(attnTCRopePagedKernels[a.HeadDim], rows, false)
							do(t, func(t testing.TB, g *GPU) {
								withSwap(g, rows, func() { checkPagedRope(t, g, dt, a, seqs, bs, rows, splits, kernels) })
							})
						})
					}
				}
			}
		}
	}
}

func checkPagedRope(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, bs, rows, splits int, kernels []attnTC) {
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	posP, slotP, posN, _, items, nPast, nNew, capacity := ropeBatch(seqs)
	lens := seqLens(seqs)
	slots := len(seqs) + 1
	pl := newPagedLayout(r, lens, bs)
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
	var ref []float32
	ip, in = 0, 0
	for _, s := range seqs {
		L := s.past + s.n
		q, k, v := make([]float32, s.n*H*D), make([]float32, L*KV*D), make([]float32, L*KV*D)
		for p := range L {
			var row, vrow []float32
			if p < s.past {
				row, vrow = rotP[(ip+p)*W:(ip+p+1)*W], past[(ip+p)*W:(ip+p+1)*W]
			} else {
				row, vrow = rotN[(in+p-s.past)*W:(in+p-s.past+1)*W], fresh[(in+p-s.past)*W:(in+p-s.past+1)*W]
				copy(q[(p-s.past)*H*D:], row[:H*D])
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
	pages := KVPages{Tables: devUploadT(t, g, pl.tables), Stride: pl.stride, BlockSize: bs}
	fold := splits < 0
	splits = max(splits, -splits)
	posPB, slotPB := devUploadT(t, g, posP), devUploadT(t, g, slotP)
	launch := func(p KVPages) AttnLaunch {
		l := AttnLaunch{Items: itemsB, N: len(items) / 4, Rows: rows, Splits: splits, ShortKeys: -1, Rope: tab, Pages: p}
		if splits > 1 {
			l.Work = devPoisoned(t, g, F16, AttnWorkBytes(l.N*KV*splits, rows, D)/2)
		}
		if fold {
			l.Counters = devUploadT(t, g, make([]int32, l.N*KV))
		}
		return l
	}
	for _, kern := range kernels {
		kc, vc := devPoisoned(t, g, dt, slots*KV*capacity*D), devPoisoned(t, g, dt, slots*KV*capacity*D)
		kp, vp := devPoisoned(t, g, dt, pl.blocks*KV*bs*D), devPoisoned(t, g, dt, pl.blocks*KV*bs*D)
		if nPast > 0 {
			// RopeKV rotates the rows in place: each gets rows of its own.
			if err := g.RopeKV(g.Stream, dt, kc, vc, devUpload(t, g, dt, past), posPB, slotPB, tab, nPast, capacity, a); err != nil {
				t.Fatal(err)
			}
			if err := g.RopeKVPaged(g.Stream, dt, kp, vp, devUpload(t, g, dt, past), posPB, slotPB, tab, nPast, pages, a); err != nil {
				t.Fatal(err)
			}
		}
		outC, outP := devPoisoned(t, g, dt, nNew*H*D), devPoisoned(t, g, dt, nNew*H*D)
		runAttention(t, g, dt, outC, devUpload(t, g, dt, fresh), kc, vc, capacity, a, launch(KVPages{}), kern)
		runAttention(t, g, dt, outP, devUpload(t, g, dt, fresh), kp, vp, capacity, a, launch(pages), kern)
		contig, paged := download(t, g, dt, outC, nNew*H*D), download(t, g, dt, outP, nNew*H*D)
		checkRel(t, fmt.Sprintf("%s_rope contiguous", kern), contig, ref)
		checkRel(t, fmt.Sprintf("%s_rope_paged", kern), paged, ref)
		checkRel(t, fmt.Sprintf("%s_rope_paged against contiguous", kern), paged, contig)
		// Every position now cached: the past ones by RopeKV(Paged), the
		// new ones by the kernels.
		checkPagedCache(t, g, dt, a, pl, lens, capacity, kc, vc, kp, vp, func(i, p int) bool { return true })
	}
}

// TestPagedLaunchChecks: a paged launch with no block table, a block size
// that is not a power of two, or a configuration without a _paged kernel
// is refused before anything is queued.
func TestPagedLaunchChecks(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		a := AttnShape{32, 4, 64}
		buf := devPoisoned(t, g, F16, 1<<16)
		items := devUploadT(t, g, []int32{0, 1, 0, 0})
		for _, p := range []KVPages{{Tables: buf, Stride: 4, BlockSize: 24}, {Tables: Buffer{}, Stride: 4, BlockSize: 16}, {Tables: buf, Stride: 0, BlockSize: 16}} {
			if err := g.KVWritePaged(g.Stream, F16, buf, buf, buf, buf, buf, 1, p, a); err == nil {
				t.Errorf("KVWritePaged with %+v: no error", p)
			}
			l := AttnLaunch{Items: items, N: 1, Rows: AttnRowsSmall, Splits: 1, Pages: p}
			if err := g.Attention(g.Stream, F16, buf, buf, buf, buf, 0, a, l); err == nil {
				t.Errorf("Attention with %+v: no error", p)
			}
		}
		p := KVPages{Tables: buf, Stride: 4, BlockSize: 16}
		l := AttnLaunch{Items: items, N: 1, Rows: AttnRowsSmall, Splits: 1, Pages: p}
		if err := g.attention(g.Stream, F16, buf, buf, buf, buf, 0, a, l, attnTC{1, 4, 32, 2, false}); err == nil {
			t.Error("a configuration without a _paged kernel: no error")
		}
	})
}

// TestPagedTC checks, without a GPU, which tensor-core configuration a
// paged launch runs on: the one asked for where it has a _paged kernel,
// else the default for the launch's rows and size (which always has one:
// TestAttnTCKernels); the CUDA-core kernel stays the CUDA-core one.
func TestPagedTC(t *testing.T) {
	g := &GPU{Info: DeviceInfo{SMs: 132}}
	few, many := 2*132, 2*132+1
	for _, c := range []struct {
		tc         attnTC
		D, rows, n int
		rope       bool
		want       attnTC
	}{
		{attnTC{}, 64, AttnRowsTiny, few, false, attnTC{}},
		{attnTC{1, 8, 16, 2, false}, 64, AttnRowsTiny, few, false, attnTC{1, 8, 16, 2, false}},
		{attnTC{1, 4, 32, 2, false}, 64, AttnRowsTiny, few, false, attnTCDefaults[64][0]},
		{attnTC{1, 4, 32, 2, false}, 64, AttnRowsSmall, many, false, attnTCDefaults[64][1]},
		{attnTC{4, 1, 64, 2, false}, 64, AttnRowsLarge, many, false, attnTCDefaults[64][2]},
		{attnTC{1, 2, 16, 3, false}, 128, AttnRowsTiny, many, false, attnTCDefaults[128][1]},
		{attnTC{1, 8, 16, 2, false}, 64, AttnRowsTiny, few, true, attnTCRopeDefaults[64][0]},
		{attnTC{1, 4, 16, 3, false}, 64, AttnRowsTiny, many, true, attnTC{1, 4, 16, 3, false}},
		{attnTC{1, 4, 16, 3, false}, 128, AttnRowsTiny, many, true, attnTCRopeDefaults[128][1]},
	} {
		got := g.pagedTC(c.tc, c.D, c.rows, c.n, c.rope)
		if got != c.want {
			t.Errorf("pagedTC(%s, D %d, rows %d, %d blocks, rope %t) = %s, want %s", c.tc, c.D, c.rows, c.n, c.rope, got, c.want)
		}
		list := attnTCPagedKernels[c.D]
		if c.rope {
			list = attnTCRopePagedKernels[c.D]
		}
		if got.rowWarps > 0 && (!slices.Contains(list, got) || !got.fits(c.rows)) {
			t.Errorf("pagedTC(%s, D %d, rows %d): %s has no _paged kernel for these rows", c.tc, c.D, c.rows, got)
		}
	}
}

// TestPagedAttentionFP8 checks the FP8 kernels over a paged cache (E4M3
// codes read through block tables; attention_tc_f8.cu's _paged kernels),
// which no other check runs: the same random sequences go into an FP8
// cache of fixed slots and into a paged one through KVWriteFP8, and every
// tensor-core configuration's launch over the pages must agree with its
// launch over the slots (TestAttentionFP8 checks those against the CPU),
// decode rows and prefill rows, 64 and 128 a block, blocks of 16 and 32
// positions.
func TestPagedAttentionFP8(t *testing.T) {
	seqs := []attnSeq{{0, 45}, {0, 1}, {62, 1}, {63, 1}, {199, 1}, {5, 64}, {300, 50}, {999, 1}}
	for _, dt := range dtypes {
		for _, a := range []AttnShape{{32, 4, 64}, {32, 8, 128}, {8, 2, 128}} {
			for _, bs := range []int{16, 32} {
				for _, rows := range []int{AttnRowsTiny, AttnRowsSmall, AttnRowsLarge, AttnRowsXL} {
					t.Run(fmt.Sprintf("%s/H%d_KV%d_D%d/block%d/rows%d", dt, a.Heads, a.KVHeads, a.HeadDim, bs, rows), func(t *testing.T) {
						kernels := attnKernelsFor(attnTCPagedKernels[a.HeadDim], rows, false)
						if a.Heads/a.KVHeads > rows || len(kernels) == 0 {
							t.Skipf("no kernel of %d rows for %d query heads a KV head at head dimension %d", rows, a.Heads/a.KVHeads, a.HeadDim)
						}
						do(t, func(t testing.TB, g *GPU) {
							if rows != AttnRowsTiny {
								checkPagedAttentionFP8(t, g, dt, a, seqs, bs, rows, kernels)
								return
							}
							// The decode kernels' _f8r and _f8t forms, each
							// named (XRUN_CUDA_ATTN_F8_SWAP's auto takes _f8t
							// for caches as short as these).
							defer keepSwitches(g)()
							for _, swap := range []string{"0", "1"} {
								g.sw.CUDAAttnF8Swap = swap
								checkPagedAttentionFP8(t, g, dt, a, seqs, bs, rows, kernels)
							}
						})
					})
				}
			}
		}
	}
}

func checkPagedAttentionFP8(t testing.TB, g *GPU, dt DType, a AttnShape, seqs []attnSeq, bs, rows int, kernels []attnTC) {
	kernels = runnable(g, kernels, 1)
	r := newRand(t)
	H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
	pos, slot, items, total, capacity := attnBatch(seqs, AttnItemTokens(a, rows))
	lens := seqLens(seqs)
	pl := newPagedLayout(r, lens, bs)
	qkv := randVals(r, dt, total*W, 1.5)
	q8 := fp8KV(r, 1.5)
	qkvB, posB, slotB := devUpload(t, g, dt, qkv), devUploadT(t, g, pos), devUploadT(t, g, slot)
	pages := KVPages{Tables: devUploadT(t, g, pl.tables), Stride: pl.stride, BlockSize: bs}
	kc, vc := fp8Cache(t, g, (len(seqs)+1)*KV*capacity*D)
	kp, vp := fp8Cache(t, g, pl.blocks*KV*bs*D)
	for _, c := range []struct {
		k, v Buffer
		p    KVPages
	}{{kc, vc, KVPages{}}, {kp, vp, pages}} {
		if err := g.KVWriteFP8(g.Stream, dt, c.k, c.v, qkvB, posB, slotB, total, capacity, c.p, a, q8); err != nil {
			t.Fatal(err)
		}
	}
	itemsB := devUploadT(t, g, items)
	for _, kern := range kernels {
		run := func(k, v Buffer, p KVPages) []float32 {
			out := devPoisoned(t, g, dt, total*H*D)
			l := AttnLaunch{Items: itemsB, N: len(items) / 4, Rows: rows, Splits: 1, ShortKeys: -1, Pages: p, FP8: q8}
			runAttention(t, g, dt, out, qkvB, k, v, capacity, a, l, kern)
			return newOutputs(seqs, download(t, g, dt, out, total*H*D), H*D)
		}
		contig, paged := run(kc, vc, KVPages{}), run(kp, vp, pages)
		checkRel(t, fmt.Sprintf("%s paged against fixed slots", kern), paged, contig)
		if !slices.Equal(paged, contig) {
			t.Logf("%s: paged outputs not bitwise equal to the fixed slots'", kern)
		}
	}
}

// newOutputs is the new tokens' rows of width w of out, an output laid out
// as attnBatch lays out the sequences (whole sequences one after another),
// sequence after sequence.
func newOutputs(seqs []attnSeq, out []float32, w int) []float32 {
	var got []float32
	start := 0
	for _, s := range seqs {
		got = append(got, out[(start+s.past)*w:(start+s.past+s.n)*w]...)
		start += s.past + s.n
	}
	return got
}

// seqLens is each sequence's length, cached and new tokens.
func seqLens(seqs []attnSeq) []int {
	lens := make([]int, len(seqs))
	for i, s := range seqs {
		lens[i] = s.past + s.n
	}
	return lens
}

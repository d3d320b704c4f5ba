//go:build cgo && linux

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// BenchmarkAttention times the CUDA-core attention kernel against every
// tensor-core configuration (attnTCKernels) on the launches a TinyLlama-
// 1.1B engine makes (32 query heads over 4 KV heads of 64, fp16): decode at
// batch 256 and 64 after 129..256 cached positions (128 in / 128 out),
// decode at batch 1 after 256 split 8 ways, and a prefill iteration of 64
// prompts of 128 tokens (8192 rows); plus, with heads of 128 (8 KV heads:
// Llama-3.1-8B), prefill iterations of 4 prompts of 2,048 tokens and of 64
// of 128, decode at batch 256 and wider, and the long contexts of
// TensorRT-LLM's 20000/2000 row (decode at about 21,000 positions, a
// prefill chunk after 12,288). The caches rotate among enough copies to
// exceed the L2 cache, so each launch streams its keys and values from HBM
// as one layer of a forward pass does. Reported: us/launch, the K/V bytes
// read per second (every key of every item once) and the tensor-core work
// per second (Q K^T and P V, 4 x head dimension FLOPs a query head and
// causal query-key pair: the figure that matters for prefill). The
// .../paged runs time the
// kernels over a paged cache (KVPages: blocks of 32 positions, each slot's
// blocks in a random order), against their contiguous twins; the .../f8
// runs the FP8 kernels (attention_tc_f8.cu) over a cache of one byte a
// value, whose KV-GB/s count those bytes (.../f8/paged: the prefill
// configurations over a paged one); the .../rope runs time the decode
// launches as the engine makes them, with RoPE and the new token's cache
// write folded in (the _rope kernels); .../sw and .../rope/sw the decode
// configurations' _sw form (XRUN_CUDA_ATTN_SWAP).
func BenchmarkAttention(b *testing.B) {
	type scen struct {
		name   string
		a      AttnShape
		seqs   []attnSeq
		rows   int
		splits int
		// lpt: the items longest first (by their last key), as the
		// engine lays out prefill items; otherwise in order.
		lpt bool
	}
	dev := testGPU(b)
	const dt = F16
	decodeSeqs := func(n, lo, hi int) []attnSeq {
		r := rand.New(rand.NewPCG(1, 2)) // the same contexts for every kernel
		s := make([]attnSeq, n)
		for i := range s {
			s[i] = attnSeq{lo - 1 + r.IntN(hi-lo+1), 1}
		}
		return s
	}
	// prompts is n prompts of l tokens, nothing cached.
	prompts := func(n, l int) []attnSeq {
		s := make([]attnSeq, n)
		for i := range s {
			s[i] = attnSeq{0, l}
		}
		return s
	}
	// Llama-3.1-8B's prefill at TensorRT-LLM's 2048/128 row: 4 prompts of
	// 2,048 tokens (one 8,192-token iteration), and of 128 tokens.
	long, short := prompts(4, 2048), prompts(64, 128)
	tiny := AttnShape{32, 4, 64}
	scens := []scen{
		{"decode/B=256", tiny, decodeSeqs(256, 129, 256), AttnRowsTiny, 1, false},
		{"decode/B=64", tiny, decodeSeqs(64, 129, 256), AttnRowsTiny, 1, false},
		{"decode/B=1", tiny, []attnSeq{{255, 1}}, AttnRowsTiny, AttnMaxSplits, false},
		{"prefill/T=8192", tiny, prompts(64, 128), AttnRowsLarge, 1, false},
		{"prefill-D128/T=4x2048", AttnShape{32, 8, 128}, long, AttnRowsLarge, 1, false},
		{"prefill-D128/T=4x2048-r128", AttnShape{32, 8, 128}, long, AttnRowsXL, 1, false},
		{"prefill-D128/T=64x128", AttnShape{32, 8, 128}, short, AttnRowsLarge, 1, false},
		{"prefill-D128/T=64x128-r128", AttnShape{32, 8, 128}, short, AttnRowsXL, 1, false},
		{"prefill-D128/T=16x512", AttnShape{32, 8, 128}, prompts(16, 512), AttnRowsLarge, 1, false},
		{"prefill-D128/T=16x512-r128", AttnShape{32, 8, 128}, prompts(16, 512), AttnRowsXL, 1, false},
		{"prefill-D128/T=8x1024", AttnShape{32, 8, 128}, prompts(8, 1024), AttnRowsLarge, 1, false},
		{"prefill-D128/T=8x1024-r128", AttnShape{32, 8, 128}, prompts(8, 1024), AttnRowsXL, 1, false},
		{"decode-D128/B=256", AttnShape{32, 8, 128}, decodeSeqs(256, 129, 256), AttnRowsTiny, 1, false},
		// Llama-3.1-8B's steady state at TensorRT-LLM's 128/128 row.
		{"decode-D128/B=2048", AttnShape{32, 8, 128}, decodeSeqs(2048, 129, 256), AttnRowsTiny, 1, false},
		// Half that batch: between the widths where folding RoPE into the
		// FP8 decode pays and where it does not (cuda.AttnFoldPays).
		{"decode-D128/B=1024", AttnShape{32, 8, 128}, decodeSeqs(1024, 129, 256), AttnRowsTiny, 1, false},
		// The 128/2048 row's one wave with an FP8 cache on an H100 (444
		// requests, contexts 129 to 2,176 over the run).
		{"decode-D128/B=444-long", AttnShape{32, 8, 128}, decodeSeqs(444, 129, 2176), AttnRowsTiny, 1, false},
		// The 128/4096 row's one wave (228 requests, contexts 129 to 4,224).
		{"decode-D128/B=228-4k", AttnShape{32, 8, 128}, decodeSeqs(228, 129, 4224), AttnRowsTiny, 1, false},
		// The 20000/2000 row's decode: 40 requests of about 21,000 cached
		// positions, 320 items, unsplit and split 2, 4 and 8 ways (the
		// engine's 8: AttnSplitsFor).
		{"decode-D128/B=40-20k", AttnShape{32, 8, 128}, decodeSeqs(40, 20000, 22000), AttnRowsTiny, 1, false},
		{"decode-D128/B=40-20k-s2", AttnShape{32, 8, 128}, decodeSeqs(40, 20000, 22000), AttnRowsTiny, 2, false},
		{"decode-D128/B=40-20k-s4", AttnShape{32, 8, 128}, decodeSeqs(40, 20000, 22000), AttnRowsTiny, 4, false},
		{"decode-D128/B=40-20k-s8", AttnShape{32, 8, 128}, decodeSeqs(40, 20000, 22000), AttnRowsTiny, AttnMaxSplits, false},
		// Fewer keys a sequence, as many items: where splitting stops paying.
		{"decode-D128/B=40-4k", AttnShape{32, 8, 128}, decodeSeqs(40, 4000, 4400), AttnRowsTiny, 1, false},
		{"decode-D128/B=40-4k-s2", AttnShape{32, 8, 128}, decodeSeqs(40, 4000, 4400), AttnRowsTiny, 2, false},
		{"decode-D128/B=40-4k-s4", AttnShape{32, 8, 128}, decodeSeqs(40, 4000, 4400), AttnRowsTiny, 4, false},
		{"decode-D128/B=40-1k", AttnShape{32, 8, 128}, decodeSeqs(40, 1000, 1100), AttnRowsTiny, 1, false},
		{"decode-D128/B=40-1k-s2", AttnShape{32, 8, 128}, decodeSeqs(40, 1000, 1100), AttnRowsTiny, 2, false},
		{"decode-D128/B=40-1k-s4", AttnShape{32, 8, 128}, decodeSeqs(40, 1000, 1100), AttnRowsTiny, 4, false},
		// Its chunked prefill: a chunk of 8,192 prompt tokens after 12,288
		// cached ones (2.2 TFLOP of Q K^T and P V a layer).
		{"prefill-D128/T=8192-after-12288", AttnShape{32, 8, 128}, []attnSeq{{12288, 8192}}, AttnRowsLarge, 1, false},
		{"prefill-D128/T=8192-after-12288-r128", AttnShape{32, 8, 128}, []attnSeq{{12288, 8192}}, AttnRowsXL, 1, false},
		{"prefill-D128/T=8192-after-12288-r128-lpt", AttnShape{32, 8, 128}, []attnSeq{{12288, 8192}}, AttnRowsXL, 1, true},
		{"prefill-D128/T=4x2048-r128-lpt", AttnShape{32, 8, 128}, long, AttnRowsXL, 1, true},
	}
	for _, sc := range scens {
		a := sc.a
		H, KV, D, W := a.Heads, a.KVHeads, a.HeadDim, a.Width()
		capacity, rowsTotal, keys, pairs := 0, 0, 0, 0
		var items []int32
		per := AttnItemTokens(a, sc.rows)
		for i, s := range sc.seqs {
			capacity = max(capacity, s.past+s.n)
			for t0 := s.past; t0 < s.past+s.n; t0 += per {
				n := min(per, s.past+s.n-t0)
				items = append(items, int32(rowsTotal+t0-s.past), int32(n), int32(i+1), int32(t0))
				keys += t0 + n
				pairs += n*t0 + n*(n+1)/2 // token t0 + i attends to t0 + i + 1 keys
			}
			rowsTotal += s.n
		}
		if sc.lpt {
			quads := make([][4]int32, len(items)/4)
			for i := range quads {
				quads[i] = [4]int32(items[4*i:])
			}
			slices.SortStableFunc(quads, func(x, y [4]int32) int { return int(y[3]+y[1]) - int(x[3]+x[1]) })
			for i, q := range quads {
				copy(items[4*i:], q[:])
			}
		}
		cacheBytes := (len(sc.seqs) + 1) * KV * capacity * D * dt.Size()
		copies := min(4, max(1, ceilDiv(4*dev.Info.L2Bytes, 2*cacheBytes)))
		const bs = 32
		stride := ceilDiv(capacity, bs)
		pagedBlocks := (len(sc.seqs)+1)*stride + 1
		pagedBytes := pagedBlocks * KV * bs * D * dt.Size()
		tables := make([]int32, (len(sc.seqs)+1)*stride)
		for i, blk := range rand.New(rand.NewPCG(3, 4)).Perm(len(tables)) {
			tables[i] = int32(blk)
		}
		var caches, pagedCaches []Buffer
		var qkv, out, itemsB, work, cnt, tablesB Buffer
		n := len(items) / 4
		do(b, func(t testing.TB, g *GPU) {
			alloc := func(bytes int) Buffer {
				buf, err := g.Alloc(bytes)
				if err != nil {
					t.Fatal(err)
				}
				return buf
			}
			for i := range 2 * copies {
				c := alloc(cacheBytes)
				if err := g.RandomFill(g.Stream, dt, c, uint64(i+1), 0, 1); err != nil {
					t.Fatal(err)
				}
				caches = append(caches, c)
				pc := alloc(pagedBytes)
				if err := g.RandomFill(g.Stream, dt, pc, uint64(i+1), 0, 1); err != nil {
					t.Fatal(err)
				}
				pagedCaches = append(pagedCaches, pc)
			}
			tablesB = alloc(len(tables) * 4)
			if err := UploadSlice(g.Stream, tablesB, tables); err != nil {
				t.Fatal(err)
			}
			qkv, out = alloc(rowsTotal*W*dt.Size()), alloc(rowsTotal*H*D*dt.Size())
			if err := g.RandomFill(g.Stream, dt, qkv, 99, 0, 1); err != nil {
				t.Fatal(err)
			}
			itemsB = alloc(len(items) * 4)
			if err := UploadSlice(g.Stream, itemsB, items); err != nil {
				t.Fatal(err)
			}
			work = alloc(AttnWorkBytes(n*KV*sc.splits, sc.rows, D))
			cnt = alloc(AttnCounterBytes(n * KV))
			if err := g.Stream.Zero(cnt); err != nil {
				t.Fatal(err)
			}
		})
		// The warpgroup-MMA configurations run on Hopper, unsplit.
		offGPU := func(c attnTC) bool { return !c.runsOn(dev.Info, sc.splits) }
		kernels := slices.DeleteFunc(attnKernelsFor(attnTCKernels[D], sc.rows, true), offGPU)
		for _, kern := range kernels {
			b.Run(fmt.Sprintf("%s/%s", sc.name, kern), func(b *testing.B) {
				var d time.Duration
				do(b, func(t testing.TB, g *GPU) {
					l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt}
					d = timeLaunches(b, t, g, 2*copies, func(i int) error {
						c := i % copies
						return g.attention(g.Stream, dt, out, qkv, caches[2*c], caches[2*c+1], capacity, a, l, kern)
					})
				})
				reportAttn(b, d, keys*KV*D*2*dt.Size(), pairs*H*4*D)
			})
			// The decode configurations' _sw form (XRUN_CUDA_ATTN_SWAP).
			if sc.rows == AttnRowsTiny && slices.Contains(attnSwapKernels[D], kern) {
				b.Run(fmt.Sprintf("%s/%s/sw", sc.name, kern), func(b *testing.B) {
					var d time.Duration
					var regs int
					do(b, func(t testing.TB, g *GPU) {
						defer keepSwitches(g)()
						g.sw.CUDAAttnSwap = true
						regs = kernelRegs(t, g, "attention_tc", kern.kernel(dt, D)+"_sw")
						l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt}
						d = timeLaunches(b, t, g, 2*copies, func(i int) error {
							c := i % copies
							return g.attention(g.Stream, dt, out, qkv, caches[2*c], caches[2*c+1], capacity, a, l, kern)
						})
					})
					reportAttn(b, d, keys*KV*D*2*dt.Size(), pairs*H*4*D)
					b.ReportMetric(float64(regs), "regs")
				})
			}
		}
		paged := slices.DeleteFunc(attnKernelsFor(attnTCPagedKernels[D], sc.rows, true), offGPU)
		for _, kern := range paged {
			b.Run(fmt.Sprintf("%s/%s/paged", sc.name, kern), func(b *testing.B) {
				var d time.Duration
				do(b, func(t testing.TB, g *GPU) {
					l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt,
						Pages: KVPages{Tables: tablesB, Stride: stride, BlockSize: bs}}
					d = timeLaunches(b, t, g, 2*copies, func(i int) error {
						c := i % copies
						return g.attention(g.Stream, dt, out, qkv, pagedCaches[2*c], pagedCaches[2*c+1], capacity, a, l, kern)
					})
				})
				reportAttn(b, d, keys*KV*D*2*dt.Size(), pairs*H*4*D)
			})
		}
		for _, kern := range paged { // the FP8 kernels are the paged configurations
			if kern.rowWarps == 0 {
				continue
			}
			// Decode configurations in each form (f8Forms): .../f8 converts
			// in registers, .../f8-smem decodes each tile into shared
			// memory first, .../f8q does Q K^T on the E4M3 tensor cores,
			// .../f8p P V too (head dimension 128, sm_89 and later); each
			// with fp16 and
			// bf16 queries (their conversions differ). The buffers are
			// 16-bit either way.
			forms := []f8Form{f8Forms[0]}
			if kern.rowWarps == 1 {
				forms = append(forms, f8Form{"f8-smem", false, "0", "0"})
			}
			if kern.rowWarps == 1 && D == 128 && fp8TensorCores(dev.Info) {
				forms = append(forms, f8Forms[2:4]...)
			}
			if kern.rowWarps == 1 && sc.rows == AttnRowsTiny && slices.Contains(attnF8SwapKernels[D], kern) {
				forms = append(forms, f8Forms[4])
			}
			for _, form := range forms {
				for _, fdt := range []DType{F16, BF16} {
					name := fmt.Sprintf("%s/%s/%s", sc.name, kern, form.name)
					if form.name == "f8r" {
						name = fmt.Sprintf("%s/%s/f8", sc.name, kern) // the name earlier figures carry
					}
					b.Run(name+"/"+fdt.String(), func(b *testing.B) {
						var d time.Duration
						var regs int
						do(b, func(t testing.TB, g *GPU) {
							defer keepSwitches(g)()
							g.sw.CUDAAttnF8Regs, g.sw.CUDAAttnF8MMA, g.sw.CUDAAttnF8Swap = form.regs, form.mma, form.swap
							// Prefill configurations have one form, _f8 (f8Regs).
							suffix := form.suffix()
							if kern.rowWarps > 1 {
								suffix = "_f8"
							}
							family := "attention_tc_f8"
							switch {
							case kern.ws():
								family = "attention_ws"
							case kern.wg:
								family = "attention_wg"
							}
							regs = kernelRegs(t, g, family, kern.kernel(fdt, D)+suffix)
							// Random 16-bit caches read as codes: any byte is one.
							l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt,
								FP8: KVFP8{On: true, K: 0.01, V: 0.01}}
							d = timeLaunches(b, t, g, 2*copies, func(i int) error {
								c := i % copies
								return g.attention(g.Stream, fdt, out, qkv, caches[2*c], caches[2*c+1], capacity, a, l, kern)
							})
						})
						reportAttn(b, d, keys*KV*D*2, pairs*H*4*D)
						b.ReportMetric(float64(regs), "regs")
					})
				}
			}
			// The warpgroup-MMA configurations with their products on the
			// E4M3 tensor cores (.../f8e/DTYPE, XRUN_CUDA_ATTN_WG_E4M3).
			// Random bytes as codes include NaNs: timed here, checked by
			// TestAttentionWGE4M3.
			if kern.wg && !kern.ws() {
				for _, fdt := range []DType{F16, BF16} {
					b.Run(fmt.Sprintf("%s/%s/f8e/%s", sc.name, kern, fdt), func(b *testing.B) {
						var d time.Duration
						var regs int
						do(b, func(t testing.TB, g *GPU) {
							defer keepSwitches(g)()
							g.sw.CUDAAttnWGE4M3 = true
							regs = kernelRegs(t, g, "attention_wg", kern.kernel(fdt, D)+"_f8e")
							l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt,
								FP8: KVFP8{On: true, K: 0.01, V: 0.01}}
							d = timeLaunches(b, t, g, 2*copies, func(i int) error {
								c := i % copies
								return g.attention(g.Stream, fdt, out, qkv, caches[2*c], caches[2*c+1], capacity, a, l, kern)
							})
						})
						reportAttn(b, d, keys*KV*D*2, pairs*H*4*D)
						b.ReportMetric(float64(regs), "regs")
					})
				}
			}
			// The prefill configurations over a paged FP8 cache
			// (.../f8/paged/DTYPE): what AttnPrefillRows weighs for such a
			// cache, 64 rows against 128.
			if kern.rowWarps == 1 {
				continue
			}
			for _, fdt := range []DType{F16, BF16} {
				b.Run(fmt.Sprintf("%s/%s/f8/paged/%s", sc.name, kern, fdt), func(b *testing.B) {
					var d time.Duration
					do(b, func(t testing.TB, g *GPU) {
						l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt,
							Pages: KVPages{Tables: tablesB, Stride: stride, BlockSize: bs}, FP8: KVFP8{On: true, K: 0.01, V: 0.01}}
						d = timeLaunches(b, t, g, 2*copies, func(i int) error {
							c := i % copies
							return g.attention(g.Stream, fdt, out, qkv, pagedCaches[2*c], pagedCaches[2*c+1], capacity, a, l, kern)
						})
					})
					reportAttn(b, d, keys*KV*D*2, pairs*H*4*D)
				})
			}
		}
		// Decode as the engine launches it: RoPE and the cache write of the
		// new token folded in (the _rope kernels, AttnLaunch.Rope), over a
		// 16-bit cache (.../rope) and an FP8 one (.../f8/rope/DTYPE); and
		// as XRUN_CUDA_ATTN_ROPE=0 does, RoPE and the write in kernels of
		// their own before the plain decode kernel (.../ropekv: RopeKV;
		// .../f8/ropekv/DTYPE: Rope then KVWriteFP8), timed together: the
		// two ways to a decode step's attention.
		var rope, pos, slot Buffer
		if sc.rows <= AttnRowsSmall {
			do(b, func(t testing.TB, g *GPU) {
				table := model.RopeTable(model.Config{Heads: H, KVHeads: KV, HeadDim: D, RopeTheta: 500000}, capacity)
				var err error
				if rope, err = g.Alloc(len(table) * 4); err != nil {
					t.Fatal(err)
				}
				if err := UploadSlice(g.Stream, rope, table); err != nil {
					t.Fatal(err)
				}
				// Each sequence's new token: its position and its slot (the
				// items' sequence numbers).
				ps, ss := make([]int32, len(sc.seqs)), make([]int32, len(sc.seqs))
				for i, s := range sc.seqs {
					ps[i], ss[i] = int32(s.past), int32(i+1)
				}
				if pos, err = g.Alloc(len(ps) * 4); err != nil {
					t.Fatal(err)
				}
				if slot, err = g.Alloc(len(ss) * 4); err != nil {
					t.Fatal(err)
				}
				if err := UploadSlice(g.Stream, pos, ps); err != nil {
					t.Fatal(err)
				}
				if err := UploadSlice(g.Stream, slot, ss); err != nil {
					t.Fatal(err)
				}
			})
			for _, kern := range attnTCRopePagedKernels[D] {
				if !kern.fits(sc.rows) {
					continue
				}
				// The unfolded runs need one new token a sequence and a plain
				// kernel of kern's configuration.
				unfolded := sc.rows == AttnRowsTiny && len(sc.seqs) == n && slices.Contains(attnTCKernels[D], kern)
				for _, fold := range []bool{true, false} {
					if !fold && !unfolded {
						continue
					}
					run := map[bool]string{true: "rope", false: "ropekv"}[fold]
					forms := []struct {
						name string
						dt   DType
						fp8  KVFP8
						sw   bool // the _sw form (XRUN_CUDA_ATTN_SWAP)
					}{{run, dt, KVFP8{}, false}, {"f8/" + run + "/float16", F16, KVFP8{On: true, K: 0.01, V: 0.01}, false}, {"f8/" + run + "/bfloat16", BF16, KVFP8{On: true, K: 0.01, V: 0.01}, false}}
					if fold && sc.rows == AttnRowsTiny && slices.Contains(attnSwapRopeKernels[D], kern) {
						forms = append(forms, forms[0])
						forms[len(forms)-1].name, forms[len(forms)-1].sw = run+"/sw", true
					}
					for _, f := range forms {
						b.Run(fmt.Sprintf("%s/%s/%s", sc.name, kern, f.name), func(b *testing.B) {
							var d time.Duration
							var regs int
							do(b, func(t testing.TB, g *GPU) {
								family, name := "attention_tc", kern.kernel(f.dt, D)
								if fold {
									name += "_rope"
								}
								if f.sw {
									defer keepSwitches(g)()
									g.sw.CUDAAttnSwap = true
									name += "_sw"
								}
								if f.fp8.On {
									family, name = "attention_tc_f8", name+"_f8r"
								}
								regs = kernelRegs(t, g, family, name)
								tokens, off := len(sc.seqs), H*D*f.dt.Size()
								k := qkv.Slice(off, qkv.Bytes-off)
								l := AttnLaunch{Items: itemsB, N: n, Rows: sc.rows, Splits: sc.splits, Work: work, Counters: cnt, FP8: f.fp8}
								if fold {
									l.Rope = rope
								}
								d = timeLaunches(b, t, g, 2*copies, func(i int) error {
									c := i % copies
									kc, vc := caches[2*c], caches[2*c+1]
									switch {
									case fold:
									case f.fp8.On:
										if err := g.Rope(g.Stream, f.dt, qkv, k, pos, rope, tokens, H, KV, D, W, W); err != nil {
											return err
										}
										if err := g.KVWriteFP8(g.Stream, f.dt, kc, vc, qkv, pos, slot, tokens, capacity, KVPages{}, a, f.fp8); err != nil {
											return err
										}
									default:
										if err := g.RopeKV(g.Stream, f.dt, kc, vc, qkv, pos, slot, rope, tokens, capacity, a); err != nil {
											return err
										}
									}
									return g.attention(g.Stream, f.dt, out, qkv, kc, vc, capacity, a, l, kern)
								})
							})
							per := d.Seconds() / float64(b.N)
							b.ReportMetric(per*1e6, "us/launch")
							bytes := keys * KV * D * 2
							if !f.fp8.On {
								bytes *= dt.Size()
							}
							b.ReportMetric(float64(bytes)/per/1e9, "KV-GB/s")
							b.ReportMetric(float64(regs), "regs")
						})
					}
				}
			}
		}
		do(b, func(t testing.TB, g *GPU) {
			for _, buf := range []Buffer{rope, pos, slot} {
				if buf.Ptr == 0 {
					continue
				}
				if err := g.Free(buf); err != nil {
					t.Fatal(err)
				}
			}
			for _, buf := range slices.Concat(caches, pagedCaches, []Buffer{qkv, out, itemsB, work, cnt, tablesB}) {
				if err := g.Free(buf); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// reportAttn reports a launch's time from d, the time of b.N launches,
// with the KV cache bytes it read and the FLOPs of its products as rates.
func reportAttn(b *testing.B, d time.Duration, kvBytes, flops int) {
	per := d.Seconds() / float64(b.N)
	b.ReportMetric(per*1e6, "us/launch")
	b.ReportMetric(float64(kvBytes)/per/1e9, "KV-GB/s")
	b.ReportMetric(float64(flops)/per/1e12, "TFLOP/s")
}

// kernelRegs is the registers a thread of kernel name (of family) takes as
// this GPU's NVRTC built it: what decides how many blocks an SM holds
// (65,536 registers an SM), reported beside a kernel's time.
func kernelRegs(t testing.TB, g *GPU, family, name string) int {
	f, err := g.function(family, name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.numRegs()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

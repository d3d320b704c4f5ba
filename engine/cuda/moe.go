//go:build cgo && linux

package cuda

import (
	"fmt"
)

// Routing methods of MoERoute (engine/model's Routing* names, in the same
// order the kernels number them).
const (
	MoESoftmaxTopKRenorm = 0 // Mixtral: softmax, top-k, renormalise
	MoETopKSoftmax       = 1 // GPT-OSS, Qwen3-MoE: top-k, softmax over the k
	MoESoftmaxTopK       = 2 // Qwen3-MoE without norm_topk_prob
)

// MoEMaxExperts is the most experts the router kernel takes (32 lanes of 8
// logits each); MoEMaxTopK bounds k (one lane per chosen expert).
const (
	MoEMaxExperts = 256
	MoEMaxTopK    = 32
)

// MoERoute is one routing launch: each of Rows tokens gets K experts and
// weights in Idx (int32 [Rows, K]) and Weights ([Rows, K], compute dtype).
type MoERoute struct {
	// Logits [Rows, Experts] (compute dtype) are routed by Method, unless
	// Forced is set.
	Logits           Buffer
	Idx, Weights     Buffer
	Rows, Experts, K int
	Method           int
	// Forced (int32 [>= Row+Rows, K]) holds the experts from row Row on,
	// each with weight 1/K. With Drift (one uint32 cell) the start row is
	// (Row + a value the kernel advances on every launch) mod Period
	// instead: a graph replays the Row it was captured with, and this keeps
	// the window of a random routing table moving (Period = table rows -
	// Rows keeps it inside the table).
	Forced Buffer
	Row    int
	Drift  Buffer
	Period int
	// Counts (int32 [Experts]), when set, gets one more per routed pair.
	Counts Buffer
	// Slots (int32 [Rows]), when set, marks padding rows (slot == PadSlot):
	// they get expert -1 and weight 0, are not counted, and MoE skips them.
	Slots   Buffer
	PadSlot int
}

// MoERoute queues the routing of r.
func (g *GPU) MoERoute(s *Stream, dt DType, r MoERoute) error {
	es := dt.Size()
	n := r.Rows * r.K
	switch {
	case r.Rows == 0:
		return nil
	case r.Rows < 0 || r.Experts <= 0 || r.K <= 0 || r.K > r.Experts || r.K > MoEMaxTopK:
		return fmt.Errorf("cuda: MoE routing of %d rows to %d of %d experts (k <= %d)", r.Rows, r.K, r.Experts, MoEMaxTopK)
	case r.Idx.Bytes < n*4 || r.Weights.Bytes < n*es:
		return fmt.Errorf("cuda: MoE routing: outputs too small for %d x %d", r.Rows, r.K)
	case r.Counts.Bytes != 0 && r.Counts.Bytes < r.Experts*4, r.Slots.Bytes != 0 && r.Slots.Bytes < r.Rows*4:
		return fmt.Errorf("cuda: MoE routing: counts or slots too small")
	}
	if r.Forced.Bytes != 0 {
		rows := r.Row + r.Rows
		if r.Drift.Bytes != 0 {
			rows = r.Period + r.Rows
			if r.Period <= 0 || r.Drift.Bytes < 4 {
				return fmt.Errorf("cuda: MoE forced routing: drift period %d", r.Period)
			}
		}
		if r.Row < 0 || rows*r.K*4 > r.Forced.Bytes {
			return fmt.Errorf("cuda: MoE forced routing: rows %d..%d beyond the table (%d rows)", r.Row, rows, r.Forced.Bytes/4/r.K)
		}
		f, err := g.function("moe_route", "moe_route_forced_"+dt.suffix())
		if err != nil {
			return err
		}
		period := r.Period
		if r.Drift.Bytes == 0 {
			period = 0
		}
		a := g.argsPack().Ptr(r.Forced).I32(r.Row).Ptr(r.Drift).I32(period).Ptr(r.Idx).Ptr(r.Weights).Ptr(r.Counts).
			Ptr(r.Slots).I32(r.PadSlot).I32(r.Rows).I32(r.Experts).I32(r.K)
		return s.Launch(f, Dim3{X: 1}, Dim3{X: 1024}, r.Experts*4, a)
	}
	switch {
	case r.Experts > MoEMaxExperts:
		return fmt.Errorf("cuda: MoE routing takes at most %d experts, not %d", MoEMaxExperts, r.Experts)
	case r.Method < MoESoftmaxTopKRenorm || r.Method > MoESoftmaxTopK:
		return fmt.Errorf("cuda: MoE routing method %d", r.Method)
	case r.Logits.Bytes < r.Rows*r.Experts*es:
		return fmt.Errorf("cuda: MoE routing: logits too small for %d x %d", r.Rows, r.Experts)
	}
	f, err := g.function("moe_route", "moe_route_"+dt.suffix())
	if err != nil {
		return err
	}
	const warps = 8
	a := g.argsPack().Ptr(r.Logits).Ptr(r.Idx).Ptr(r.Weights).Ptr(r.Counts).Ptr(r.Slots).I32(r.PadSlot).
		I32(r.Rows).I32(r.Experts).I32(r.K).I32(r.Method)
	blocks := min(ceilDiv(r.Rows, warps), 4*g.Info.SMs)
	return s.Launch(f, Dim3{X: blocks}, Dim3{X: 32 * warps}, r.Experts*4, a)
}

// MoEShape is one MoE layer: Rows tokens, each routed to K of Experts
// experts of hidden size Hidden and FFN width FFN (gate_up is
// [Experts][2 FFN][Hidden], down [Experts][Hidden][FFN]).
type MoEShape struct {
	Rows, K, Experts, Hidden, FFN int
}

func (sh MoEShape) check() error {
	switch {
	case sh.Rows < 0 || sh.K <= 0 || sh.Experts <= 0 || sh.K > sh.Experts:
		return fmt.Errorf("cuda: MoE of %d rows, %d of %d experts", sh.Rows, sh.K, sh.Experts)
	case sh.Hidden <= 0 || sh.FFN <= 0 || sh.Hidden%8 != 0 || sh.FFN%8 != 0:
		return fmt.Errorf("cuda: MoE needs hidden and FFN sizes that are positive multiples of 8 (hidden %d, FFN %d)", sh.Hidden, sh.FFN)
	}
	return nil
}

// moeGemmConfig mirrors one MOE_GEMM(...) instantiation of
// kernels/moe_gemm.cu: tiles of at most bm rows of one expert, blocks of
// threads/32 warps that stream weightRows weight rows each, perSM blocks
// per multiprocessor.
type moeGemmConfig struct {
	name                           string
	bm, threads, weightRows, perSM int
	smem                           int // bytes of dynamic shared memory at 2-byte elements
}

// moeStages is the kernels' pipeline depth (ST) and moeBK their k tile.
const (
	moeStages = 4
	moeBK     = 64
)

func newMoEGemmConfig(name string, bm, warps, perSM int) moeGemmConfig {
	return moeGemmConfig{name: name, bm: bm, threads: 32 * warps, weightRows: 32 * warps, perSM: perSM,
		smem: moeStages * (bm + 32*warps) * (moeBK + 8) * 2}
}

var (
	moeGemmSmall  = newMoEGemmConfig("s", 16, 4, 2)  // 81 KB
	moeGemmMedium = newMoEGemmConfig("m", 64, 4, 2)  // 108 KB
	moeGemmLarge  = newMoEGemmConfig("l", 128, 8, 1) // 216 KB
)

// moeStaticSmem bounds the kernels' static shared memory (arow: 8 bytes
// per tile row).
const moeStaticSmem = 8 * 128

// The L2 hints of the own kernels' weight loads (kernels/moe_gemm.cu:
// 1 = 256-byte L2 prefetch, 2 = evict first) are the GPU's
// XRUN_CUDA_MOE_HINTS=0..3, for comparisons. The default is both: every
// expert weight is read once per layer, so keeping it in L2 only pushes
// out the activations every block rereads. Measured on an H200
// (BenchmarkMoE, balanced routing, µs per layer, hints 0 / 1 / 2 / 3):
// Mixtral B64 802 / 899 / 775 / 727, B256 1002 / 1001 / 986 / 1011;
// GPT-OSS-20B B64 482 / 532 / 460 / 433, B256 523 / 571 / 511 / 501.
//
// moeDefaultFlags is the table's default (TestSwitchesMatchKernels).
const moeDefaultFlags = 3

// moeConfigFor picks the row tile, unless tile forces one (the GPU's
// XRUN_CUDA_MOE_TILE: s, m or l, for comparisons; "auto" chooses). An
// expert gets at most sh.Rows rows (each token picks distinct experts), so
// while tokens are at most 16 one 16-row fragment holds any expert (s, two
// blocks per SM); above, the l tiles of up to 128 rows hold an expert's
// rows at decode batches up to 128, and typically (64 per expert for
// Mixtral at 256) beyond, so each weight tile is read once per expert.
// GPUs with less shared memory per block than l needs get m (64 rows).
func moeConfigFor(sh MoEShape, sharedPerBlock int, tile string) moeGemmConfig {
	fits := func(c moeGemmConfig) bool { return sharedPerBlock <= 0 || c.smem+moeStaticSmem <= sharedPerBlock }
	switch tile {
	case "s":
		return moeGemmSmall
	case "m":
		return moeGemmMedium
	case "l":
		return moeGemmLarge
	}
	switch {
	case sh.Rows <= 16:
		return moeGemmSmall
	case fits(moeGemmLarge):
		return moeGemmLarge
	case fits(moeGemmMedium):
		return moeGemmMedium
	}
	return moeGemmSmall
}

// Split-K of the own down GEMM: its grid is (tiles, H / weightRows), which
// at decode is about one block per multiprocessor (Mixtral: 8 experts x 16
// slices), too few to keep HBM busy and too coarse to balance experts of
// different sizes. K splits write float32 partials that the combine sums.
// The partials take at most moeSplitRows rows of H floats (and at most
// moeMaxSplits per routed pair), so the workspace stays bounded at prefill
// sizes, where no split is needed.
const (
	moeSplitRows = 2048
	moeMaxSplits = 16
)

// moeSplitsForce, when positive, sets the down GEMM's K splits (tests).
var moeSplitsForce int

// moePartialRows is how many rows of float32 partials the workspace holds
// for n routed pairs.
func moePartialRows(n int) int { return min(moeMaxSplits*n, moeSplitRows) }

// moeDownSplits picks the down GEMM's K splits: doubling while the grid
// (counting one tile per touched expert) is under three waves, each split
// keeps at least 8 k tiles and the partials fit. It returns the k tiles per
// split and the number of splits (none empty).
func moeDownSplits(cfg moeGemmConfig, sh MoEShape, sms int) (kps, splits int) {
	n := sh.Rows * sh.K
	ktiles := ceilDiv(sh.FFN, moeBK)
	s := 1
	if moeSplitsForce > 0 {
		s = max(1, min(moeSplitsForce, moePartialRows(n)/n, ktiles))
	} else {
		blocks := min(sh.Experts, n) * ceilDiv(sh.Hidden, cfg.weightRows)
		for blocks*s < 3*sms*cfg.perSM && ktiles >= 16*s && 2*s*n <= moePartialRows(n) {
			s *= 2
		}
	}
	kps = ceilDiv(ktiles, s)
	return kps, ceilDiv(ktiles, kps)
}

// moeLibraryChunk bounds the rows of one library GEMM: the gate_up and
// activation scratch hold this many rows.
const moeLibraryChunk = 1024

// moeSegment is the rows a library-path segment of c pairs takes (the
// kernels' moe_segment): a power of two from 16 to 256, then a multiple of
// 128, so that few distinct GEMM shapes are planned and timed.
func moeSegment(c int) int {
	switch {
	case c == 0:
		return 0
	case c <= 256:
		s := 16
		for s < c {
			s <<= 1
		}
		return s
	}
	return ceilDiv(c, 128) * 128
}

// moeWork locates the buffers of a MoE launch inside its workspace.
type moeWork struct {
	hdr, cntOffs, order, where, tiles Buffer
	act, ys, xs, gu                   Buffer
	nmax, chunk                       int
	bytes                             int
}

// layout places the buffers for sh at base (base.Bytes == 0: only size
// them). The library path (per-expert GEMMs) pads segments and gathers the
// inputs; the own path reads token rows in place. Every size grows with
// sh.Rows, so a workspace sized for the most rows serves fewer.
func moeLayout(dt DType, sh MoEShape, library bool, base Buffer) moeWork {
	es := dt.Size()
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	w := moeWork{nmax: n}
	if library {
		w.nmax = 2*n + 16*E // moeSegment(c) <= 2c + 16
		w.chunk = min(moeLibraryChunk, w.nmax)
	}
	off := 0
	take := func(bytes int) Buffer {
		b := Buffer{Ptr: base.Ptr + DevicePtr(off), Bytes: bytes}
		off += (bytes + 255) / 256 * 256
		return b
	}
	w.hdr = take(16 * 4)
	w.cntOffs = take((2*E + 1) * 4)
	w.order = take(w.nmax * 4)
	w.where = take(n * 4)
	w.tiles = take((ceilDiv(n, moeGemmSmall.bm) + E) * 16)
	if library {
		w.ys = take(w.nmax * H * es)
	} else { // rounded rows, or the down GEMM's float32 K-split partials
		w.ys = take(max(n*H*es, moePartialRows(n)*H*4))
	}
	if library {
		w.xs = take(w.nmax * H * es)
		w.gu = take(w.chunk * 2 * F * es)
		w.act = take(w.chunk * F * es)
	} else {
		w.act = take(w.nmax * F * es)
	}
	w.bytes = off
	if base.Bytes != 0 && off > base.Bytes {
		panic("cuda: MoE workspace smaller than its layout") // callers check MoEWorkBytes first
	}
	return w
}

// MoEWorkBytes is the workspace MoE (and, with library, MoEBlasLt too)
// needs for sh.
func MoEWorkBytes(dt DType, sh MoEShape, library bool) int {
	b := moeLayout(dt, sh, false, Buffer{}).bytes
	if library {
		b = max(b, moeLayout(dt, sh, true, Buffer{}).bytes)
	}
	return b
}

// moeCheck validates the operands of a MoE launch.
func moeCheck(dt DType, out, x, idx, wts, gateUp, down, work Buffer, sh MoEShape, library bool) error {
	if err := sh.check(); err != nil {
		return err
	}
	es := dt.Size()
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	switch {
	case out.Bytes < sh.Rows*H*es || x.Bytes < sh.Rows*H*es:
		return fmt.Errorf("cuda: MoE input or output smaller than %d x %d", sh.Rows, H)
	case idx.Bytes < n*4 || wts.Bytes < n*es:
		return fmt.Errorf("cuda: MoE routing smaller than %d x %d", sh.Rows, sh.K)
	case gateUp.Bytes < E*2*F*H*es || down.Bytes < E*H*F*es:
		return fmt.Errorf("cuda: MoE expert weights smaller than %d x [2 x %d, %d] and [%d, %d]", E, F, H, H, F)
	case work.Bytes < moeLayout(dt, sh, library, Buffer{}).bytes:
		return fmt.Errorf("cuda: MoE workspace of %d bytes, %d needed", work.Bytes, moeLayout(dt, sh, library, Buffer{}).bytes)
	case x.Ptr%16 != 0 || out.Ptr%16 != 0 || gateUp.Ptr%16 != 0 || down.Ptr%16 != 0:
		return fmt.Errorf("cuda: MoE operands must be 16-byte aligned")
	}
	return nil
}

// moeGroup queues the grouping of the routed pairs by expert.
func (g *GPU) moeGroup(s *Stream, idx Buffer, w moeWork, sh MoEShape, bm int, library bool) error {
	f, err := g.function("moe_group", "moe_group")
	if err != nil {
		return err
	}
	pad := 0
	if library {
		pad = 1
	}
	E := sh.Experts
	cnt := w.cntOffs.Slice(0, E*4)
	offs := w.cntOffs.Slice(E*4, (E+1)*4)
	a := g.argsPack().Ptr(idx).I32(sh.Rows * sh.K).I32(E).I32(bm).I32(pad).Ptr(w.hdr).Ptr(cnt).Ptr(offs).
		Ptr(w.order).Ptr(w.where).Ptr(w.tiles)
	return s.Launch(f, Dim3{X: 1}, Dim3{X: 1024}, 3*E*4, a)
}

// moeCombine queues out[t] = sum_j wts[t][j] ys[where[t k + j]]; with
// splits > 1, ys rows are the sums of that many float32 partials.
func (g *GPU) moeCombine(s *Stream, dt DType, out, wts Buffer, w moeWork, sh MoEShape, splits int) error {
	grid, block := Dim3{X: min(ceilDiv(sh.Rows*sh.Hidden/8, 256), 16*g.Info.SMs)}, Dim3{X: 256}
	if splits > 1 {
		f, err := g.function("moe_group", "moe_combine_split_"+dt.suffix())
		if err != nil {
			return err
		}
		a := g.argsPack().Ptr(out).Ptr(w.ys).Ptr(wts).Ptr(w.where).I32(sh.Rows).I32(sh.K).I32(sh.Hidden).I32(splits).
			U64(uint64(sh.Rows * sh.K * sh.Hidden))
		return s.Launch(f, grid, block, 0, a)
	}
	f, err := g.function("moe_group", "moe_combine_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(out).Ptr(w.ys).Ptr(wts).Ptr(w.where).I32(sh.Rows).I32(sh.K).I32(sh.Hidden)
	return s.Launch(f, grid, block, 0, a)
}

// MoE queues out[t] = sum_j wts[t][j] down_e(silu(gate_e(x[t])) up_e(x[t]))
// with e = idx[t][j] (expert -1: nothing; an id outside the experts: NaN)
// with the engine's own kernels: grouping by expert on the device, the
// grouped gate_up GEMM with SwiGLU fused into it, the grouped down GEMM
// (split over K into float32 partials when its grid is small), and the
// combine, which sums the partials. Nothing is read back, so it can be
// captured in a graph. work holds MoEWorkBytes(dt, sh, false) bytes at
// least.
func (g *GPU) MoE(s *Stream, dt DType, out, x, idx, wts, gateUp, down, work Buffer, sh MoEShape) error {
	if err := moeCheck(dt, out, x, idx, wts, gateUp, down, work, sh, false); err != nil {
		return err
	}
	if sh.Rows == 0 {
		return nil
	}
	w := moeLayout(dt, sh, false, work)
	cfg := moeConfigFor(sh, g.Info.SharedPerBlock, g.sw.CUDAMoETile)
	if err := g.moeGroup(s, idx, w, sh, cfg.bm, false); err != nil {
		return err
	}
	n := sh.Rows * sh.K
	tiles := ceilDiv(n, cfg.bm) + sh.Experts // at least the tiles moe_group writes
	fn := func(name string) (*Function, error) {
		f, err := g.function("moe_gemm", name+"_"+cfg.name+"_"+dt.suffix())
		if err == nil {
			err = f.allowShared(cfg.smem)
		}
		return f, err
	}
	f, err := fn("moe_gate_up")
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(x).Ptr(gateUp).Ptr(w.act).Ptr(w.hdr).Ptr(w.tiles).Ptr(w.order).I32(sh.K).I32(sh.FFN).
		I32(sh.Hidden).I32(g.sw.CUDAMoEHints)
	grid := Dim3{X: tiles, Y: ceilDiv(sh.FFN, cfg.weightRows/2)}
	if err := s.Launch(f, grid, Dim3{X: cfg.threads}, cfg.smem, a); err != nil {
		return err
	}
	if f, err = fn("moe_down"); err != nil {
		return err
	}
	kps, splits := moeDownSplits(cfg, sh, g.Info.SMs)
	part := Buffer{}
	if splits > 1 {
		part = w.ys
	}
	a = g.argsPack().Ptr(w.act).Ptr(down).Ptr(w.ys).Ptr(part).Ptr(w.hdr).Ptr(w.tiles).I32(sh.Hidden).I32(sh.FFN).
		I32(kps).U64(uint64(n * sh.Hidden)).I32(g.sw.CUDAMoEHints)
	grid = Dim3{X: tiles, Y: ceilDiv(sh.Hidden, cfg.weightRows), Z: splits}
	if err := s.Launch(f, grid, Dim3{X: cfg.threads}, cfg.smem, a); err != nil {
		return err
	}
	return g.moeCombine(s, dt, out, wts, w, sh, splits)
}

// MoEBlasLt computes what MoE computes with cuBLASLt GEMMs per expert
// (gemm_plugin auto). cuBLASLt 13.0 has no grouped GEMM whose shapes live on
// the device (that came in 13.1, for Blackwell), so the host must know each
// expert's rows: this copies the counts back and synchronises, and cannot be
// captured in a graph (the backend uses MoE there). Segments are padded to
// moeSegment rows, so only a few GEMM shapes are planned and timed; the
// padding rows are zeros and their outputs are never read.
// work holds MoEWorkBytes(dt, sh, true) bytes at least.
func (g *GPU) MoEBlasLt(s *Stream, dt DType, bl *BlasLt, out, x, idx, wts, gateUp, down, work Buffer, sh MoEShape) error {
	if err := moeCheck(dt, out, x, idx, wts, gateUp, down, work, sh, true); err != nil {
		return err
	}
	if s.capturing {
		return fmt.Errorf("cuda: MoEBlasLt reads the expert counts back and cannot be captured")
	}
	if sh.Rows == 0 {
		return nil
	}
	w := moeLayout(dt, sh, true, work)
	if err := g.moeGroup(s, idx, w, sh, moeGemmSmall.bm, true); err != nil {
		return err
	}
	es, E, H, F := dt.Size(), sh.Experts, sh.Hidden, sh.FFN
	f, err := g.function("moe_group", "moe_gather_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(w.xs).Ptr(x).Ptr(w.hdr).Ptr(w.order).I32(w.nmax).I32(sh.K).I32(H)
	if err := s.Launch(f, Dim3{X: min(ceilDiv(w.nmax*H/8, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a); err != nil {
		return err
	}
	co := make([]int32, 2*E+1)
	if err := DownloadSlice(s, co, w.cntOffs); err != nil {
		return err
	}
	cnt, offs := co[:E], co[E:]
	if int(offs[E]) > w.nmax {
		return fmt.Errorf("cuda: MoE segments take %d rows, room for %d", offs[E], w.nmax)
	}
	up := w.gu.Slice(F*es, w.gu.Bytes-F*es)
	for e := range E {
		if cnt[e] == 0 {
			continue
		}
		seg, o := int(offs[e+1]-offs[e]), int(offs[e])
		wgu := gateUp.Slice(e*2*F*H*es, 2*F*H*es)
		wd := down.Slice(e*H*F*es, H*F*es)
		for c0 := 0; c0 < seg; c0 += w.chunk {
			m := min(w.chunk, seg-c0)
			rows := func(b Buffer) Buffer { return b.Slice((o+c0)*H*es, m*H*es) }
			if err := bl.Matmul(s, dt, w.gu, rows(w.xs), wgu, m, 2*F, H); err != nil {
				return err
			}
			if err := g.SwiGLU(s, dt, w.act, w.gu, up, m, F, 2*F); err != nil {
				return err
			}
			if err := bl.Matmul(s, dt, rows(w.ys), w.act, wd, m, H, F); err != nil {
				return err
			}
		}
	}
	return g.moeCombine(s, dt, out, wts, w, sh, 1)
}

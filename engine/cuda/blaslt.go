//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Values from cublasLt.h, cublas_api.h and library_types.h.
const (
	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F: fp32 accumulation
	cudaR32F         = 0
	cudaR16F         = 2
	cudaR16BF        = 14
	cudaR8FE4M3      = 28 // CUDA_R_8F_E4M3
	ltDescTransA     = 3  // CUBLASLT_MATMUL_DESC_TRANSA
	ltDescTransB     = 4
	cublasOpT        = 1
	// CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER: device
	// float32s that multiply A and B, so D = scale_A · scale_B · A·B.
	ltDescAScale      = 17
	ltDescBScale      = 18
	ltHeuristicsAsked = 32
)

// BlasLtWorkspaceBytes is the workspace cuBLASLt may use: on Hopper the
// fastest kernels want tens of megabytes, and an explicit workspace is what
// lets matmuls be captured in a graph.
const BlasLtWorkspaceBytes = 32 << 20

// ltTuneMaxM is the largest M whose algorithm is chosen by timing the
// heuristic's candidates (decode shapes, where the heuristic's first
// choice was measured far below bandwidth: 1.5 TB/s at M = 1); larger M
// keeps the heuristic's first choice. XRUN_CUDA_LT_TUNE=0 (the GPU's
// switches) turns timing off.
const ltTuneMaxM = 256

// BlasLt is cuBLASLt bound to one GPU (gemm_plugin: auto), with a plan per
// matmul shape: descriptors, layouts and the heuristic's algorithm, so a
// forward pass never asks the heuristic twice.
type BlasLt struct {
	g     *GPU
	h     C.cublasLtHandle_t
	pref  C.cublasLtMatmulPreference_t
	ws    Buffer
	plans map[gemmShape]*ltPlan
	// tuneM, once TuneOnly set it, are the only M whose algorithms are
	// timed (nil: every M up to ltTuneMaxM).
	tuneM map[int]bool
	// built plans so far and the host time spent building and timing them
	// (PlanStats).
	built int
	spent time.Duration
	// seeds are, with XRUN_CUDA_LT_REUSE, the heuristic's choice for the
	// first untimed M of each power-of-two bucket of a shape (ltBucket),
	// which later M of the bucket reuse once cublasLtMatmulAlgoCheck
	// accepts it; reused counts those plans.
	seeds  map[gemmShape]C.cublasLtMatmulAlgo_t
	reused int

	// Timing the candidates of a plan: a buffer larger than the L2 cache
	// that is cleared before each timed matmul (so the weights come from
	// memory, as in a forward pass that streams every layer's), and two
	// events.
	flush    Buffer
	ev0, ev1 *Event
}

type gemmShape struct {
	dt      DType
	m, n, k int
	fp8     bool // E4M3 A and B, D in dt
}

type ltPlan struct {
	forms   []*ltForm
	algo    ltCand
	cands   []ltCand // usable heuristic results, best estimate first, per form
	tuned   bool
	m, n, k int
	// tuneLog says what timing chose: candidates, the chosen index, its
	// time and the heuristic's first choice's.
	tuneLog string
}

// ltForm is one way of posing the product to cuBLASLt: its descriptor and
// the layouts of A, B and D. swapped forms take A = X and B = W (see plan).
type ltForm struct {
	desc    C.cublasLtMatmulDesc_t
	a, b, d C.cublasLtMatrixLayout_t
	swapped bool
	fp8     bool
}

// ltCand is a heuristic result and the form it was asked for.
type ltCand struct {
	res  C.cublasLtMatmulHeuristicResult_t
	form *ltForm
}

// BlasLt returns the GPU's cuBLASLt, creating the handle and its workspace
// on first use (so call it before any capture).
func (g *GPU) BlasLt() (*BlasLt, error) {
	if g.blas != nil {
		return g.blas, nil
	}
	if err := loadBlasLt(); err != nil {
		return nil, err
	}
	b := &BlasLt{g: g, plans: map[gemmShape]*ltPlan{}, seeds: map[gemmShape]C.cublasLtMatmulAlgo_t{}}
	if err := blasErr("cublasLtCreate", C.xr_cublasLtCreate(&b.h), ""); err != nil {
		return nil, err
	}
	if err := blasErr("cublasLtMatmulPreferenceCreate", C.xr_cublasLtMatmulPreferenceCreate(&b.pref), ""); err != nil {
		C.xr_cublasLtDestroy(b.h)
		return nil, err
	}
	if err := blasErr("cublasLtMatmulPreferenceSetAttribute", C.xr_cublasLtMatmulPreferenceSetWorkspace(b.pref, BlasLtWorkspaceBytes), "max workspace"); err != nil {
		b.close()
		return nil, err
	}
	ws, err := g.Alloc(BlasLtWorkspaceBytes)
	if err != nil {
		b.close()
		return nil, err
	}
	b.ws = ws
	if g.sw.CUDALtTune {
		if f, err := g.Alloc(max(2*g.Info.L2Bytes, 64<<20)); err == nil {
			b.flush = f
		}
	}
	g.blas = b
	return b, nil
}

func (b *BlasLt) close() error {
	var errs []error
	for _, p := range b.plans {
		errs = append(errs, p.destroy())
	}
	if b.pref != nil {
		errs = append(errs, blasErr("cublasLtMatmulPreferenceDestroy", C.xr_cublasLtMatmulPreferenceDestroy(b.pref), ""))
	}
	errs = append(errs, b.g.Free(b.ws))
	if b.flush.Bytes > 0 {
		errs = append(errs, b.g.Free(b.flush))
	}
	errs = append(errs, b.ev0.Close(), b.ev1.Close())
	errs = append(errs, blasErr("cublasLtDestroy", C.xr_cublasLtDestroy(b.h), ""))
	b.g.blas = nil
	return errors.Join(errs...)
}

func (p *ltPlan) destroy() error {
	var errs []error
	for _, f := range p.forms {
		errs = append(errs, f.destroy())
	}
	return errors.Join(errs...)
}

func (p *ltForm) destroy() error {
	var errs []error
	for _, l := range []C.cublasLtMatrixLayout_t{p.a, p.b, p.d} {
		if l != nil {
			errs = append(errs, blasErr("cublasLtMatrixLayoutDestroy", C.xr_cublasLtMatrixLayoutDestroy(l), ""))
		}
	}
	if p.desc != nil {
		errs = append(errs, blasErr("cublasLtMatmulDescDestroy", C.xr_cublasLtMatmulDescDestroy(p.desc), ""))
	}
	return errors.Join(errs...)
}

func cudaDataType(dt DType) C.int {
	if dt == BF16 {
		return cudaR16BF
	}
	return cudaR16F
}

// plan returns (building once) the plan for Y[m,n] = X[m,k] W[n,k]^T.
//
// cuBLASLt is column-major. A row-major [r, c] matrix is, byte for byte, a
// column-major [c, r] one, so the row-major product is computed as its
// transpose: Y^T[n,m] = W[n,k] X^T[k,m], with A = W seen as column-major
// [k, n] and transposed, B = X seen as column-major [k, m], D = Y seen as
// column-major [n, m]. This "TN" form is cuBLASLt's best-supported layout.
//
// FP8 (fp8: E4M3 A and B, D in dt): Hopper's FP8 kernels take only this
// TN form (A transposed, B not), which is why the weight is A. Both
// forms below are TN.
func (b *BlasLt) plan(dt DType, m, n, k int, fp8 bool) (*ltPlan, error) {
	key := gemmShape{dt, m, n, k, fp8}
	if p, ok := b.plans[key]; ok {
		return p, nil
	}
	t0 := time.Now()
	defer func() { b.built, b.spent = b.built+1, b.spent+time.Since(t0) }()
	shape := fmt.Sprintf("%s M=%d N=%d K=%d", dt, m, n, k)
	if fp8 {
		shape = "fp8 e4m3 -> " + shape
	}
	p := &ltPlan{m: m, n: n, k: k}
	fail := func(err error) (*ltPlan, error) { p.destroy(); return nil, err }
	// A shape that will not be timed needs the heuristic's first choice
	// only: asking for one result, not 32, spares building a plan (the one
	// cost a timed pass pays for a new prompt-and-decode mix) the rest.
	asked := ltHeuristicsAsked
	if !b.g.sw.CUDALtTune || !b.tunes(m) {
		asked = 1
	}
	// An untimed shape whose bucket has a seed takes the seed's algorithm
	// where cuBLASLt accepts it for this M (XRUN_CUDA_LT_REUSE), sparing
	// the heuristic.
	seedKey := gemmShape{dt, ltBucket(m), n, k, fp8}
	reuse := b.g.sw.CUDALtReuse && asked == 1 && m > 1
	f, err := b.newForm(p, dt, false, fp8, shape)
	if err != nil {
		return fail(err)
	}
	if algo, ok := b.seeds[seedKey]; reuse && ok {
		var res C.cublasLtMatmulHeuristicResult_t
		if C.xr_cublasLtMatmulAlgoCheck(b.h, f.desc, f.a, f.b, f.d, &algo, &res) == 0 && int(res.workspaceSize) <= b.ws.Bytes {
			res.algo, res.state = algo, 0
			p.cands = append(p.cands, ltCand{res: res, form: f})
			b.reused++
		}
	}
	if len(p.cands) == 0 {
		if err := b.heuristics(p, f, shape, asked); err != nil {
			return fail(err)
		}
		if _, ok := b.seeds[seedKey]; reuse && !ok && len(p.cands) > 0 {
			b.seeds[seedKey] = p.cands[0].res.algo
		}
	}
	// At M = 1 the row-major Y[1, n] is also a column-major [1, n] matrix,
	// so the product can be posed the other way round too: D[1, n] =
	// X[1, k] W^T with A = X seen as column-major [k, 1] and transposed,
	// B = W seen as column-major [k, n]. The heuristic offers other
	// kernels for that shape; timing picks among both sets.
	if m == 1 && b.g.sw.CUDALtTune {
		f, err := b.newForm(p, dt, true, fp8, shape)
		if err != nil {
			return fail(err)
		}
		if err := b.heuristics(p, f, shape, ltHeuristicsAsked); err != nil {
			return fail(err)
		}
	}
	if len(p.cands) == 0 {
		return fail(fmt.Errorf("cublasLtMatmulAlgoGetHeuristic: no algorithm for %s within %d bytes of workspace", shape, b.ws.Bytes))
	}
	p.algo = p.cands[0]
	b.plans[key] = p
	return p, nil
}

// ltBucket is M's power-of-two bucket: the smallest power of two >= m.
// TensorRT-LLM's GEMM plugin likewise profiles M by powers of two and
// keeps each tactic for the M of its range.
func ltBucket(m int) int {
	b := 1
	for b < m {
		b <<= 1
	}
	return b
}

// newForm creates one form of p's product (its descriptor and layouts),
// appended to p.forms.
func (b *BlasLt) newForm(p *ltPlan, dt DType, swapped, fp8 bool, shape string) (*ltForm, error) {
	f := &ltForm{swapped: swapped, fp8: fp8}
	p.forms = append(p.forms, f)
	m, n, k := p.m, p.n, p.k
	if err := blasErr("cublasLtMatmulDescCreate", C.xr_cublasLtMatmulDescCreate(&f.desc, cublasCompute32F, cudaR32F), shape); err != nil {
		return nil, err
	}
	if err := blasErr("cublasLtMatmulDescSetAttribute", C.xr_cublasLtMatmulDescSetAttributeInt(f.desc, ltDescTransA, cublasOpT), "TRANSA "+shape); err != nil {
		return nil, err
	}
	type lay struct {
		dst            *C.cublasLtMatrixLayout_t
		rows, cols, ld int
	}
	lays := []lay{{&f.a, k, n, k}, {&f.b, k, m, k}, {&f.d, n, m, n}}
	if swapped { // m == 1
		lays = []lay{{&f.a, k, 1, k}, {&f.b, k, n, k}, {&f.d, 1, n, 1}}
	}
	for i, l := range lays {
		t := cudaDataType(dt)
		if fp8 && i < 2 {
			t = cudaR8FE4M3
		}
		if err := blasErr("cublasLtMatrixLayoutCreate", C.xr_cublasLtMatrixLayoutCreate(l.dst, t, C.uint64_t(l.rows), C.uint64_t(l.cols), C.int64_t(l.ld)), shape); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// heuristics appends the heuristic's usable algorithms for form f of p
// (its best asked, or all it has if none of those is usable) to p.cands.
func (b *BlasLt) heuristics(p *ltPlan, f *ltForm, shape string, asked int) error {
	swapped := f.swapped
	var res [ltHeuristicsAsked]C.cublasLtMatmulHeuristicResult_t
	for {
		var got C.int
		if err := blasErr("cublasLtMatmulAlgoGetHeuristic", C.xr_cublasLtMatmulAlgoGetHeuristic(b.h, f.desc, f.a, f.b, f.d, b.pref,
			C.int(asked), &res[0], &got), shape); err != nil {
			if swapped {
				return nil // the usual form alone then
			}
			return err
		}
		for i := 0; i < int(got); i++ {
			if res[i].state == 0 && int(res[i].workspaceSize) <= b.ws.Bytes {
				p.cands = append(p.cands, ltCand{res: res[i], form: f})
			}
		}
		if len(p.cands) > 0 || asked >= ltHeuristicsAsked {
			return nil
		}
		asked = ltHeuristicsAsked
	}
}

// Prepare builds the plan for a shape ahead of time (before a capture).
func (b *BlasLt) Prepare(dt DType, m, n, k int) error {
	_, err := b.plan(dt, m, n, k, false)
	return err
}

// Matmul queues Y[m,n] = X[m,k] W[n,k]^T on s (row-major; W stored
// [out, in] as Hugging Face stores Linear weights).
func (b *BlasLt) Matmul(s *Stream, dt DType, y, x, w Buffer, m, n, k int) error {
	if err := checkGemm(dt, y, x, w, m, n, k); err != nil {
		return err
	}
	return b.run(s, dt, y, ltOperands{x: x, w: w}, m, n, k, false)
}

// MatmulFP8 queues Y[m,n] = (X[m,k] W[n,k]^T) · scale_x · scale_w on s:
// E4M3 codes, per-tensor scales (one device float32 each), Y in dt,
// through cuBLASLt's FP8 kernels (Hopper and Ada). K must be a multiple
// of 16. Per-row scales are not cuBLASLt's on Hopper: the own FP8 GEMM
// (GPU.GemmFP8) takes those.
func (b *BlasLt) MatmulFP8(s *Stream, dt DType, y Buffer, x, w FP8Operand, m, n, k int) error {
	if err := checkGemmFP8(dt, y, x, w, m, n, k); err != nil {
		return err
	}
	if x.PerRow || w.PerRow || k%16 != 0 {
		return fmt.Errorf("cuda: cuBLASLt FP8 takes per-tensor scales and K %% 16 == 0 (K=%d, per-row X %v, W %v)", k, x.PerRow, w.PerRow)
	}
	return b.run(s, dt, y, ltOperands{x: x.Codes, w: w.Codes, sx: x.Scales, sw: w.Scales}, m, n, k, true)
}

// ltOperands are a matmul's X and W, and their scales under FP8.
type ltOperands struct {
	x, w, sx, sw Buffer
}

// PlanStats is how many plans (GEMM shapes) the library has built so far
// and the host time spent building them and timing their candidates.
func (b *BlasLt) PlanStats() (int, time.Duration) { return b.built, b.spent }

// TuneOnly limits timing to the decode batch sizes ms, the ones the
// engine warms before a run, so that their timing is done before anything
// is measured. Any other M (a prompt's token count, a batch of prompts and
// decodes) then keeps the heuristic's choice: timing its candidates the
// first time a prompt length came up put milliseconds into that request's
// first token, in the timed run. On an H200, serving TinyLlama-1.1B, the
// first of four repeats of every load point had a TTFT p99 of 36 ms at
// 64 req/s and 147 ms at 256 req/s, the later ones 5-6 ms and 23-33 ms
// (the same prompts again, their plans cached).
func (b *BlasLt) TuneOnly(ms []int) {
	b.tuneM = make(map[int]bool, len(ms))
	for _, m := range ms {
		b.tuneM[m] = true
	}
}

// tunes reports whether M's algorithm is chosen by timing.
func (b *BlasLt) tunes(m int) bool {
	return m <= ltTuneMaxM && (b.tuneM == nil || b.tuneM[m])
}

func (b *BlasLt) run(s *Stream, dt DType, y Buffer, o ltOperands, m, n, k int, fp8 bool) error {
	p, err := b.plan(dt, m, n, k, fp8)
	if err != nil {
		return err
	}
	if !p.tuned && !s.capturing {
		p.tuned = true
		if b.g.sw.CUDALtTune && b.tunes(m) && len(p.cands) > 1 {
			t0 := time.Now()
			err := b.tune(s, p, y, o)
			b.spent += time.Since(t0)
			if err != nil {
				return fmt.Errorf("timing cuBLASLt algorithms for %s M=%d N=%d K=%d: %w", dt, m, n, k, err)
			}
		}
	}
	what := fmt.Sprintf("%s M=%d N=%d K=%d", dt, m, n, k)
	if fp8 {
		what = "fp8 " + what
	}
	return blasErr("cublasLtMatmul", b.matmul(s, &p.algo, y, o), what)
}

func (b *BlasLt) matmul(s *Stream, c *ltCand, y Buffer, o ltOperands) C.cublasStatus_t {
	f, A, B, sA, sB := c.form, o.w, o.x, o.sw, o.sx
	if f.swapped {
		A, B, sA, sB = o.x, o.w, o.sx, o.sw
	}
	if f.fp8 {
		// Plans are shared by every weight of a shape, and the scale
		// pointers are read when the matmul is queued: set them each time.
		if st := C.xr_cublasLtMatmulDescSetAttributePtr(f.desc, ltDescAScale, C.CUdeviceptr(sA.Ptr)); st != 0 {
			return st
		}
		if st := C.xr_cublasLtMatmulDescSetAttributePtr(f.desc, ltDescBScale, C.CUdeviceptr(sB.Ptr)); st != 0 {
			return st
		}
	}
	return C.xr_cublasLtMatmul(b.h, f.desc, C.CUdeviceptr(A.Ptr), f.a, C.CUdeviceptr(B.Ptr), f.b, C.CUdeviceptr(y.Ptr), f.d,
		&c.res.algo, C.CUdeviceptr(b.ws.Ptr), C.size_t(b.ws.Bytes), s.s)
}

// ltTuneRuns is how many times each candidate runs when timed; the first
// run is a warm-up, the median of the rest counts.
const ltTuneRuns = 4

// tune times every candidate algorithm of p on the operands at hand (y is
// overwritten; the caller's matmul writes it again) and keeps the fastest,
// as TensorRT-LLM's GEMM plugin profiles its tactics once per shape. Each
// run starts with the L2 cache cleared. Candidates that fail to launch are
// skipped.
func (b *BlasLt) tune(s *Stream, p *ltPlan, y Buffer, o ltOperands) error {
	g := b.g
	if b.flush.Bytes == 0 {
		// Allocated with the handle; a failed allocation only costs the timing.
		return nil
	}
	for _, e := range []**Event{&b.ev0, &b.ev1} {
		if *e == nil {
			ev, err := g.NewEvent()
			if err != nil {
				return err
			}
			*e = ev
		}
	}
	best, bestT, firstT := -1, time.Duration(1<<62), time.Duration(0)
	for i := range p.cands {
		var ts []time.Duration
		for r := range ltTuneRuns {
			if err := s.Zero(b.flush); err != nil {
				return err
			}
			if err := b.ev0.Record(s); err != nil {
				return err
			}
			if st := b.matmul(s, &p.cands[i], y, o); st != 0 {
				ts = nil
				break
			}
			if err := b.ev1.Record(s); err != nil {
				return err
			}
			d, err := Elapsed(b.ev0, b.ev1)
			if err != nil {
				return err
			}
			if r > 0 {
				ts = append(ts, d)
			}
		}
		if len(ts) == 0 {
			continue
		}
		slices.Sort(ts)
		med := ts[len(ts)/2]
		if i == 0 {
			firstT = med
		}
		if med < bestT {
			best, bestT = i, med
		}
	}
	if best >= 0 {
		p.algo = p.cands[best]
		p.tuneLog = fmt.Sprintf("%d candidates, #%d chosen (swapped form %v): %.2f us (heuristic's first %.2f us)", len(p.cands), best,
			p.algo.form.swapped, float64(bestT.Nanoseconds())/1e3, float64(firstT.Nanoseconds())/1e3)
		if b.g.sw.CUDALtLog {
			fmt.Fprintf(os.Stderr, "cuBLASLt M=%d N=%d K=%d: %s\n", p.m, p.n, p.k, p.tuneLog)
		}
	}
	return nil
}

// TuneReport lists, per tuned shape, what timing chose (for benchmarks and
// notes).
func (b *BlasLt) TuneReport() []string {
	var out []string
	for k, p := range b.plans {
		if p.tuneLog != "" {
			out = append(out, fmt.Sprintf("%s M=%d N=%d K=%d: %s", k.dt, k.m, k.n, k.k, p.tuneLog))
		}
	}
	slices.Sort(out)
	return out
}

// checkGemm validates a GEMM's operands against its shape.
func checkGemm(dt DType, y, x, w Buffer, m, n, k int) error {
	es := dt.Size()
	switch {
	case m <= 0 || n <= 0 || k <= 0:
		return fmt.Errorf("cuda: GEMM shape M=%d N=%d K=%d", m, n, k)
	case x.Bytes < m*k*es:
		return fmt.Errorf("cuda: GEMM X holds %d bytes, M=%d x K=%d needs %d", x.Bytes, m, k, m*k*es)
	case w.Bytes < n*k*es:
		return fmt.Errorf("cuda: GEMM W holds %d bytes, N=%d x K=%d needs %d", w.Bytes, n, k, n*k*es)
	case y.Bytes < m*n*es:
		return fmt.Errorf("cuda: GEMM Y holds %d bytes, M=%d x N=%d needs %d", y.Bytes, m, n, m*n*es)
	}
	return nil
}

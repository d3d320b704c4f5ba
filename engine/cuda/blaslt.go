//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Values from cublasLt.h, cublas_api.h and library_types.h.
const (
	cublasCompute32F  = 68 // CUBLAS_COMPUTE_32F: fp32 accumulation
	cudaR32F          = 0
	cudaR16F          = 2
	cudaR16BF         = 14
	ltDescTransA      = 3 // CUBLASLT_MATMUL_DESC_TRANSA
	ltDescTransB      = 4
	cublasOpT         = 1
	ltHeuristicsAsked = 8
)

// BlasLtWorkspaceBytes is the workspace cuBLASLt may use: on Hopper the
// fastest kernels want tens of megabytes, and an explicit workspace is what
// lets matmuls be captured in a graph.
const BlasLtWorkspaceBytes = 32 << 20

// BlasLt is cuBLASLt bound to one GPU (gemm_plugin: auto), with a plan per
// matmul shape: descriptors, layouts and the heuristic's algorithm, so a
// forward pass never asks the heuristic twice.
type BlasLt struct {
	g     *GPU
	h     C.cublasLtHandle_t
	pref  C.cublasLtMatmulPreference_t
	ws    Buffer
	plans map[gemmShape]*ltPlan
}

type gemmShape struct {
	dt      DType
	m, n, k int
}

type ltPlan struct {
	desc    C.cublasLtMatmulDesc_t
	a, b, d C.cublasLtMatrixLayout_t
	algo    C.cublasLtMatmulHeuristicResult_t
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
	b := &BlasLt{g: g, plans: map[gemmShape]*ltPlan{}}
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
	errs = append(errs, blasErr("cublasLtDestroy", C.xr_cublasLtDestroy(b.h), ""))
	b.g.blas = nil
	return errors.Join(errs...)
}

func (p *ltPlan) destroy() error {
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
func (b *BlasLt) plan(dt DType, m, n, k int) (*ltPlan, error) {
	key := gemmShape{dt, m, n, k}
	if p, ok := b.plans[key]; ok {
		return p, nil
	}
	shape := fmt.Sprintf("%s M=%d N=%d K=%d", dt, m, n, k)
	p := &ltPlan{}
	fail := func(err error) (*ltPlan, error) { p.destroy(); return nil, err }
	if err := blasErr("cublasLtMatmulDescCreate", C.xr_cublasLtMatmulDescCreate(&p.desc, cublasCompute32F, cudaR32F), shape); err != nil {
		return fail(err)
	}
	if err := blasErr("cublasLtMatmulDescSetAttribute", C.xr_cublasLtMatmulDescSetAttributeInt(p.desc, ltDescTransA, cublasOpT), "TRANSA "+shape); err != nil {
		return fail(err)
	}
	t := cudaDataType(dt)
	for _, l := range []struct {
		dst        *C.cublasLtMatrixLayout_t
		rows, cols int
	}{{&p.a, k, n}, {&p.b, k, m}, {&p.d, n, m}} {
		if err := blasErr("cublasLtMatrixLayoutCreate", C.xr_cublasLtMatrixLayoutCreate(l.dst, t, C.uint64_t(l.rows), C.uint64_t(l.cols), C.int64_t(l.rows)), shape); err != nil {
			return fail(err)
		}
	}
	var res [ltHeuristicsAsked]C.cublasLtMatmulHeuristicResult_t
	var got C.int
	if err := blasErr("cublasLtMatmulAlgoGetHeuristic", C.xr_cublasLtMatmulAlgoGetHeuristic(b.h, p.desc, p.a, p.b, p.d, b.pref,
		ltHeuristicsAsked, &res[0], &got), shape); err != nil {
		return fail(err)
	}
	found := false
	for i := 0; i < int(got); i++ {
		if res[i].state == 0 && int(res[i].workspaceSize) <= b.ws.Bytes {
			p.algo = res[i]
			found = true
			break
		}
	}
	if !found {
		return fail(fmt.Errorf("cublasLtMatmulAlgoGetHeuristic: no algorithm for %s within %d bytes of workspace (%d candidates)", shape, b.ws.Bytes, got))
	}
	b.plans[key] = p
	return p, nil
}

// Prepare builds the plan for a shape ahead of time (before a capture).
func (b *BlasLt) Prepare(dt DType, m, n, k int) error {
	_, err := b.plan(dt, m, n, k)
	return err
}

// Matmul queues Y[m,n] = X[m,k] W[n,k]^T on s (row-major; W stored
// [out, in] as Hugging Face stores Linear weights).
func (b *BlasLt) Matmul(s *Stream, dt DType, y, x, w Buffer, m, n, k int) error {
	if err := checkGemm(dt, y, x, w, m, n, k); err != nil {
		return err
	}
	p, err := b.plan(dt, m, n, k)
	if err != nil {
		return err
	}
	return blasErr("cublasLtMatmul", C.xr_cublasLtMatmul(b.h, p.desc,
		C.CUdeviceptr(w.Ptr), p.a, C.CUdeviceptr(x.Ptr), p.b, C.CUdeviceptr(y.Ptr), p.d,
		&p.algo.algo, C.CUdeviceptr(b.ws.Ptr), C.size_t(b.ws.Bytes), s.s),
		fmt.Sprintf("%s M=%d N=%d K=%d", dt, m, n, k))
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

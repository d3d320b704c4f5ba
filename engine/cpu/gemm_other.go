//go:build !amd64 || purego

package cpu

func microKernel(rows, k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	goKernel(rows, k, a, lda, b, c, ldc)
}

func gemmKernelName() string { return "cpu_gemm_blocked_go_6x16" }

//go:build !amd64 || purego

package cpu

func microKernel(rows, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	goKernel(rows, k, a, lda, b, ldb, c, ldc)
}

func expSum(x []float32, scale, bias float32) float32 { return goExpSum(x, scale, bias) }

func siluMul(out, g, u []float32) { goSiluMul(out, g[:len(out)], u[:len(out)]) }

func gemmKernelName() string { return "cpu_gemm_blocked_go_6x16" }

func maxOf(x []float32) float32 { return goMax(x) }

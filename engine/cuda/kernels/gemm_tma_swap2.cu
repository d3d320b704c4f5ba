// Swapped kernels of gemm_tma.cuh's template added after gemm_tma_swap.cu
// had grown to the longest compile of a cold kernel cache (150 s of NVRTC
// on an H200 machine's CPU): a family of their own, compiled beside it.
#include "gemm_tma.cuh"

// s2x72: 128 rows of W by 72 of X, eight stages, every kernel of it
// (GEMM_TMA_X). cuBLASLt runs
// GPT-OSS-20B's 16-bit qkv at M = 200 on 128 x 72 tiles in clusters of
// four, and E4M3 TinyLlama's gate_up at 208 on them persistent (Nsight
// Compute, H200, NOTES v68).
GEMM_TMA_X(s2x72, f16, 2, 72, 8)
GEMM_TMA_X(s2x72, bf16, 2, 72, 8)

// s2x200: 128 rows of W by 200 of X, five stages: cuBLASLt's tile for
// Llama-3.2-1B's 16-bit gate_up at M = 193, where s2x208's last 15 rows
// compute nothing (Nsight Compute, H200, NOTES v68).
GEMM_TMA_X(s2x200, f16, 2, 200, 5)
GEMM_TMA_X(s2x200, bf16, 2, 200, 5)

// s2x224: 128 rows of W by 224 of X, five stages: the wide outputs of a
// decode batch of 209-224 rows in one row tile (widePlan).
GEMM_TMA_X(s2x224, f16, 2, 224, 5)
GEMM_TMA_X(s2x224, bf16, 2, 224, 5)

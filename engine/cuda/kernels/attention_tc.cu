// The tensor-core attention kernels over a cache in the compute type: the
// template is attention_tc.cuh, shared with attention_tc_f8.cu (an E4M3
// cache).
#include "attention_tc.cuh"

// Kernel attention_tc_<T>_d<D>_m<MW>_k<KW>_t<KT>_s<ST>[_rope]; the Go side
// (attnTC in attention.go) lists the same configurations and computes the
// dynamic shared memory, KW x ST x 2 tiles of KT x (D + 8) 16-bit values.
// The grid is (items, KV heads, splits). table (the float32 [positions, D]
// RoPE table) is read only by the _rope kernels; shortKeys only by split
// launches (0: never short).
#define ATTN_TC_K(T, D, MW, KW, KT, ST, ROPE, SUF)                                                              \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##SUF(T *out, const T *qkv, T *kc, T *vc,      \
			const int4 *items, int H, int KV, int W, int cap, float scale, float *part, float *ml, int nsplit,  \
			int *counters, int rowsMax, const float *table, int shortKeys) {                                  \
		attention_tc<T, D, MW, KW, KT, ST, ROPE>(out, qkv, kc, vc, items, H, KV, W, cap, scale, part, ml, nsplit, \
			counters, rowsMax, table, shortKeys);                                                             \
	}
#define ATTN_TC(T, D, MW, KW, KT, ST) ATTN_TC_K(T, D, MW, KW, KT, ST, false, )
#define ATTN_TC_ROPE(T, D, MW, KW, KT, ST) ATTN_TC_K(T, D, MW, KW, KT, ST, true, _rope)
// The _paged kernels (suffix _paged, or _rope_paged) take a paged cache
// (cap the block size) and two arguments more, the block tables.
#define ATTN_TC_KP(T, D, MW, KW, KT, ST, ROPE, SUF)                                                             \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##SUF(T *out, const T *qkv, T *kc, T *vc,      \
			const int4 *items, int H, int KV, int W, int bs, float scale, float *part, float *ml, int nsplit,   \
			int *counters, int rowsMax, const float *table, int shortKeys, const int *tables, int stride) {   \
		attention_tc<T, D, MW, KW, KT, ST, ROPE, true>(out, qkv, kc, vc, items, H, KV, W, bs, scale, part, ml,  \
			nsplit, counters, rowsMax, table, shortKeys, tables, stride);                                     \
	}
#define ATTN_TC_PAGED(T, D, MW, KW, KT, ST) ATTN_TC_KP(T, D, MW, KW, KT, ST, false, _paged)
#define ATTN_TC_ROPE_PAGED(T, D, MW, KW, KT, ST) ATTN_TC_KP(T, D, MW, KW, KT, ST, true, _rope_paged)
// Decode (MW = 1) and prefill (MW = 4) configurations, as attnTCKernels
// lists them, and the decode ones with RoPE folded in (attnTCRopeKernels);
// attnTCDefault / attnTCRopeDefault pick among them and BenchmarkAttention
// times them all.
#define ATTN_TC_ALL(T)                                                                                          \
	ATTN_TC(T, 64, 1, 4, 16, 3) ATTN_TC(T, 64, 1, 4, 16, 2) ATTN_TC(T, 64, 1, 4, 32, 2) ATTN_TC(T, 64, 1, 2, 32, 3) \
	ATTN_TC(T, 64, 1, 8, 16, 2) ATTN_TC(T, 64, 4, 1, 64, 2) ATTN_TC(T, 64, 4, 1, 32, 3)                           \
	ATTN_TC(T, 128, 1, 4, 16, 2) ATTN_TC(T, 128, 1, 2, 16, 3) ATTN_TC(T, 128, 4, 1, 64, 2) ATTN_TC(T, 128, 4, 1, 32, 2) \
	ATTN_TC(T, 128, 8, 1, 64, 2) \
	ATTN_TC_ROPE(T, 64, 1, 8, 16, 3) ATTN_TC_ROPE(T, 64, 1, 8, 16, 2) ATTN_TC_ROPE(T, 64, 1, 4, 16, 3)           \
	ATTN_TC_ROPE(T, 64, 1, 16, 16, 2)                                                                         \
	ATTN_TC_ROPE(T, 128, 1, 4, 16, 2) ATTN_TC_ROPE(T, 128, 1, 4, 16, 3)
ATTN_TC_ALL(f16)
ATTN_TC_ALL(bf16)
// Paged: the default configurations only (attnTCPagedKernels,
// attnTCRopePagedKernels), to keep the family's compile short.
#define ATTN_TC_PAGED_ALL(T)                                                                                    \
	ATTN_TC_PAGED(T, 64, 1, 8, 16, 2) ATTN_TC_PAGED(T, 64, 1, 4, 16, 3) ATTN_TC_PAGED(T, 64, 4, 1, 32, 3)       \
	ATTN_TC_PAGED(T, 128, 1, 4, 16, 2) ATTN_TC_PAGED(T, 128, 4, 1, 64, 2) ATTN_TC_PAGED(T, 128, 4, 1, 32, 2)    \
	ATTN_TC_PAGED(T, 128, 8, 1, 64, 2) \
	ATTN_TC_ROPE_PAGED(T, 64, 1, 8, 16, 3) ATTN_TC_ROPE_PAGED(T, 64, 1, 4, 16, 3)                               \
	ATTN_TC_ROPE_PAGED(T, 128, 1, 4, 16, 2)
ATTN_TC_PAGED_ALL(f16)
ATTN_TC_PAGED_ALL(bf16)
// The _sw decode kernels (XRUN_CUDA_ATTN_SWAP): the products with the
// roles swapped (attention_tc.cuh's SW), a KV head's query heads as mma's
// n = 8, over the 16-bit cache; the default decode configurations, with
// and without RoPE folded in, fixed slots and paged.
#define ATTN_TC_SW(T, D, KW, KT, ST, ROPE, SUF)                                                                 \
	extern "C" __global__ void __launch_bounds__(KW * 32)                                                      \
		attention_tc_##T##_d##D##_m1_k##KW##_t##KT##_s##ST##SUF##_sw(T *out, const T *qkv, T *kc, T *vc,      \
			const int4 *items, int H, int KV, int W, int cap, float scale, float *part, float *ml, int nsplit,  \
			int *counters, int rowsMax, const float *table, int shortKeys) {                                  \
		attention_tc<T, D, 1, KW, KT, ST, ROPE, false, false, false, false, false, true>(out, qkv, kc, vc, items, \
			H, KV, W, cap, scale, part, ml, nsplit, counters, rowsMax, table, shortKeys);                     \
	}
#define ATTN_TC_SWP(T, D, KW, KT, ST, ROPE, SUF)                                                                \
	extern "C" __global__ void __launch_bounds__(KW * 32)                                                      \
		attention_tc_##T##_d##D##_m1_k##KW##_t##KT##_s##ST##SUF##_sw(T *out, const T *qkv, T *kc, T *vc,      \
			const int4 *items, int H, int KV, int W, int bs, float scale, float *part, float *ml, int nsplit,   \
			int *counters, int rowsMax, const float *table, int shortKeys, const int *tables, int stride) {   \
		attention_tc<T, D, 1, KW, KT, ST, ROPE, true, false, false, false, false, true>(out, qkv, kc, vc, items,  \
			H, KV, W, bs, scale, part, ml, nsplit, counters, rowsMax, table, shortKeys, tables, stride);      \
	}
#define ATTN_TC_SW_ALL(T)                                                                                       \
	ATTN_TC_SW(T, 64, 8, 16, 2, false, ) ATTN_TC_SW(T, 64, 4, 16, 3, false, )                                 \
	ATTN_TC_SW(T, 64, 8, 16, 3, true, _rope) ATTN_TC_SW(T, 64, 4, 16, 3, true, _rope)                        \
	ATTN_TC_SW(T, 128, 4, 16, 2, false, ) ATTN_TC_SW(T, 128, 4, 16, 2, true, _rope)                          \
	ATTN_TC_SWP(T, 64, 8, 16, 2, false, _paged) ATTN_TC_SWP(T, 64, 4, 16, 3, false, _paged)                  \
	ATTN_TC_SWP(T, 64, 8, 16, 3, true, _rope_paged) ATTN_TC_SWP(T, 64, 4, 16, 3, true, _rope_paged)          \
	ATTN_TC_SWP(T, 128, 4, 16, 2, false, _paged) ATTN_TC_SWP(T, 128, 4, 16, 2, true, _rope_paged)
ATTN_TC_SW_ALL(f16)
ATTN_TC_SW_ALL(bf16)

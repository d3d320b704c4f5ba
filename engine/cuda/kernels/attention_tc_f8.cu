// The tensor-core attention kernels over an FP8 (E4M3) KV cache
// (kv_cache_dtype fp8): attention_tc.cuh with F8, in a family of its own
// (a compile unit beside attention_tc.cu's, cached on disk like every
// family).
//
// The cache holds one byte a value, E4M3(v / scale) with a scale per layer
// for K and one for V (kv_write_f8, attention.cu; the _rope kernels encode
// their new keys and values alike). A stage of a key group holds E4M3
// tiles, streamed with cp.async at half the bytes of a 16-bit cache. The
// _f8 kernels decode each tile in turn into one pair of 16-bit tiles,
// exactly (every E4M3 value is an fp16 and a bf16 value; by cvt on Ada
// and Hopper, else by bit arithmetic, fp16's then times 2^-8: e4m3_h16),
// which the same mma read; the _f8r decode kernels (one row warp: no
// tile to share) load the mma operands from the codes and convert them in
// registers by bit arithmetic alone (e4m3_bits, times 2^-8 or 2^-120).
// The _f8q and _f8p decode kernels (head dimension 128, a contiguous
// cache, sm_89 and later) take their products on the E4M3 tensor cores
// (mma m16n8k32) instead, where _f8r spends most of its issue slots
// converting codes: Q K^T in both (the key codes are B operands as
// ldmatrix hands them, each query row, scaled to E4M3's range, split into
// two E4M3 terms whose products add up: about 8 significant bits, a bf16
// query's), P V in _f8p too (P times 448 split alike, the value codes
// picked into B operands by byte permutes); _f8q does P V as _f8r.
// Natively on Ada and Blackwell only: Hopper's mma.sync has no E4M3 form
// (its FP8 tensor cores are wgmma's), the compiler converts to fp16 and
// runs the 16-bit mma, so there they are slower than _f8r. The _f8t
// decode kernels are _f8r with the products' roles swapped (attention_tc.cuh
// SW), for launches of at most 8 query rows a block.
// The scales, and those powers of two, multiply the scores and the output
// in float32, so no scaled key or value is ever rounded.
// Two arguments more than attention_tc.cu's kernels: ksc and vsc, the
// layer's scales.
#include "attention_tc.cuh"

#define ATTN_TC_F8_K(T, D, MW, KW, KT, ST, ROPE, SUF, REGS, QM, PM, F)                                                \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##SUF##_##F(T *out, const T *qkv, u8 *kc, u8 *vc, \
			const int4 *items, int H, int KV, int W, int cap, float scale, float *part, float *ml, int nsplit,  \
			int *counters, int rowsMax, const float *table, int shortKeys, float ksc, float vsc) {            \
		attention_tc<T, D, MW, KW, KT, ST, ROPE, false, true, REGS, QM, PM>(out, qkv, kc, vc, items, H, KV, W, cap,    \
			scale, part, ml, nsplit, counters, rowsMax, table, shortKeys, nullptr, 0, ksc, vsc);              \
	}
#define ATTN_TC_F8_KP(T, D, MW, KW, KT, ST, ROPE, SUF, REGS, QM, PM, F)                                               \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##SUF##_##F(T *out, const T *qkv, u8 *kc, u8 *vc, \
			const int4 *items, int H, int KV, int W, int bs, float scale, float *part, float *ml, int nsplit,   \
			int *counters, int rowsMax, const float *table, int shortKeys, const int *tables, int stride,     \
			float ksc, float vsc) {                                                                           \
		attention_tc<T, D, MW, KW, KT, ST, ROPE, true, true, REGS, QM, PM>(out, qkv, kc, vc, items, H, KV, W, bs,      \
			scale, part, ml, nsplit, counters, rowsMax, table, shortKeys, tables, stride, ksc, vsc);          \
	}
// The _f8t decode kernels: REGS with the products' roles swapped (SW;
// XRUN_CUDA_ATTN_F8_SWAP), for launches of at most 8 query rows a block.
#define ATTN_TC_F8_KT(T, D, MW, KW, KT, ST)                                                                      \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##_f8t(T *out, const T *qkv, u8 *kc, u8 *vc,    \
			const int4 *items, int H, int KV, int W, int cap, float scale, float *part, float *ml, int nsplit,  \
			int *counters, int rowsMax, const float *table, int shortKeys, float ksc, float vsc) {            \
		attention_tc<T, D, MW, KW, KT, ST, false, false, true, true, false, false, true>(out, qkv, kc, vc, items, H, \
			KV, W, cap, scale, part, ml, nsplit, counters, rowsMax, table, shortKeys, nullptr, 0, ksc, vsc);  \
	}
#define ATTN_TC_F8_KPT(T, D, MW, KW, KT, ST)                                                                     \
	extern "C" __global__ void __launch_bounds__(MW * KW * 32)                                                  \
		attention_tc_##T##_d##D##_m##MW##_k##KW##_t##KT##_s##ST##_paged_f8t(T *out, const T *qkv, u8 *kc,     \
			u8 *vc, const int4 *items, int H, int KV, int W, int bs, float scale, float *part, float *ml,      \
			int nsplit, int *counters, int rowsMax, const float *table, int shortKeys, const int *tables,     \
			int stride, float ksc, float vsc) {                                                               \
		attention_tc<T, D, MW, KW, KT, ST, false, true, true, true, false, false, true>(out, qkv, kc, vc, items, H,  \
			KV, W, bs, scale, part, ml, nsplit, counters, rowsMax, table, shortKeys, tables, stride, ksc, vsc); \
	}
// The configurations of attention.go's attnTCPagedKernels and
// attnTCRopePagedKernels (the defaults, and the former prefill default):
// decode (few blocks, many), prefill, the decode ones with RoPE folded
// in, each over a contiguous and a paged cache; the
// decode ones (one row warp) in both forms, _f8 (the codes decoded into
// 16-bit tiles in shared memory) and _f8r (converted in registers:
// attention_tc.cuh's REGS; XRUN_CUDA_ATTN_F8_REGS chooses); head dimension
// 128's over a contiguous cache also as _f8q and _f8p (attention_tc.cuh's
// QM and PM; XRUN_CUDA_ATTN_F8_MMA).
#define ATTN_TC_F8_ALL(T) \
	ATTN_TC_F8_K(T, 64, 1, 8, 16, 2, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 64, 1, 8, 16, 2, false, , true, false, false, f8r) \
	ATTN_TC_F8_K(T, 64, 1, 4, 16, 3, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 64, 1, 4, 16, 3, false, , true, false, false, f8r) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, false, , true, false, false, f8r) \
	ATTN_TC_F8_K(T, 64, 4, 1, 32, 3, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 128, 4, 1, 32, 2, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 128, 4, 1, 64, 2, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 128, 8, 1, 64, 2, false, , false, false, false, f8) \
	ATTN_TC_F8_K(T, 64, 1, 8, 16, 3, true, _rope, false, false, false, f8) \
	ATTN_TC_F8_K(T, 64, 1, 8, 16, 3, true, _rope, true, false, false, f8r) \
	ATTN_TC_F8_K(T, 64, 1, 4, 16, 3, true, _rope, false, false, false, f8) \
	ATTN_TC_F8_K(T, 64, 1, 4, 16, 3, true, _rope, true, false, false, f8r) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, true, _rope, false, false, false, f8) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, true, _rope, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 64, 1, 8, 16, 2, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 64, 1, 8, 16, 2, false, _paged, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 64, 1, 4, 16, 3, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 64, 1, 4, 16, 3, false, _paged, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 128, 1, 4, 16, 2, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 128, 1, 4, 16, 2, false, _paged, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 64, 4, 1, 32, 3, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 128, 4, 1, 32, 2, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 128, 4, 1, 64, 2, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 128, 8, 1, 64, 2, false, _paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 64, 1, 8, 16, 3, true, _rope_paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 64, 1, 8, 16, 3, true, _rope_paged, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 64, 1, 4, 16, 3, true, _rope_paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 64, 1, 4, 16, 3, true, _rope_paged, true, false, false, f8r) \
	ATTN_TC_F8_KP(T, 128, 1, 4, 16, 2, true, _rope_paged, false, false, false, f8) \
	ATTN_TC_F8_KP(T, 128, 1, 4, 16, 2, true, _rope_paged, true, false, false, f8r) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, false, , true, true, false, f8q) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, true, _rope, true, true, false, f8q) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, false, , true, true, true, f8p) \
	ATTN_TC_F8_K(T, 128, 1, 4, 16, 2, true, _rope, true, true, true, f8p) \
	ATTN_TC_F8_KT(T, 64, 1, 8, 16, 2) ATTN_TC_F8_KT(T, 64, 1, 4, 16, 3) ATTN_TC_F8_KT(T, 128, 1, 4, 16, 2) \
	ATTN_TC_F8_KPT(T, 64, 1, 8, 16, 2) ATTN_TC_F8_KPT(T, 64, 1, 4, 16, 3) ATTN_TC_F8_KPT(T, 128, 1, 4, 16, 2)
ATTN_TC_F8_ALL(f16)
ATTN_TC_F8_ALL(bf16)

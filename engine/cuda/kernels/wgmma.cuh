// Hopper's warpgroup MMA (sm_90a), shared by the own GEMMs that use it:
// gemm_wgmma.cu (cp.async loads) and gemm_tma.cu (TMA loads, warp
// specialised). XR_WGMMA is defined where the instructions exist; the
// kernels compile to traps elsewhere.
#pragma once
#include "common.cuh"
#include "mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define XR_WGMMA 1
#endif

#ifdef XR_WGMMA
// desc is the matrix descriptor of a K-major tile at shared address addr
// in the 128-byte swizzle: the start (16-byte units), the stride between
// 8-row core-matrix groups (1024 bytes: eight rows of 128), the mode (1:
// 128-byte swizzle). The leading offset is unused in this layout.
__device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
	return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// wg_pin keeps the compiler from moving accumulator reads or writes across
// the asynchronous MMAs' fences and waits.
template <int N> __device__ __forceinline__ void wg_pin(float *d) {
#pragma unroll
	for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma_n128 (and _n32 to _n112, _n136, _n160 to _n224, _n256): D[64 x 128] += A[64 x k] B[k x 128],
// both from shared memory (descriptors a, b), fp32 accumulators d in the fragment
// layout of mma.sync's C, repeated every 8 columns (d[4j..4j+3]: column
// block j); k is 16 of fp16 or bf16, 32 of E4M3 (the last argument's
// type): 32 bytes of each row either way. WG_ACC* are the accumulator
// operands (d[0..63], on to d[87] for n176, d[95] for n192 and d[127] for n256), WG_REG*
// their registers.
#define WG_ACC64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WG_ACC128 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define WG_REG64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_REG128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_ACC96 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define WG_REG96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
// The 128 x 176 tile's (n176: 88 accumulators).
#define WG_ACC88 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define WG_REG88 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}"
// The 160-row swapped tile's (n160: 80 accumulators).
#define WG_ACC80 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define WG_REG80 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"
// The narrow tiles' (n64, n80, n96: 32, 40 and 48 accumulators).
#define WG_ACC32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WG_REG32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_ACC40 WG_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define WG_ACC48 WG_ACC40, "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define WG_REG48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define WG_REG40 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
// The 104- and 208-row swapped tiles' (n104, n208: 52 and 104 accumulators).
#define WG_ACC52 WG_ACC48, "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51])
#define WG_REG52 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51}"
// The 200-row swapped tile's (n200: 100 accumulators).
#define WG_ACC100 WG_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99])
#define WG_REG100 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99}"
#define WG_ACC104 WG_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
#define WG_REG104 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103}"
// The 224-row swapped tile's (n224: 112 accumulators).
#define WG_ACC112 WG_ACC104, "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define WG_REG112 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111}"
// The 112-row swapped tile's (n112: 56 accumulators).
#define WG_ACC56 WG_ACC52, "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define WG_REG56 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}"
// The 88-row swapped tiles' (n88: 44 accumulators).
#define WG_ACC44 WG_ACC40, "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define WG_REG44 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43}"
// The swapped tiles' (n32, n40, n48: X's rows on the MMA's N; 16, 20 and 24
// accumulators).
#define WG_ACC16 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define WG_REG16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define WG_ACC20 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])
#define WG_REG20 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19}"
#define WG_ACC24 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define WG_REG24 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}"
// The 72- and 136-row swapped tiles' (n72, n136: 36 and 68 accumulators).
#define WG_ACC36 WG_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define WG_REG36 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}"
#define WG_ACC68 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
#define WG_REG68 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67}"
// WGMMA defines wgmma_nN for operands of type TAG: SHAPE.f32.TY.TY, its
// descriptors and scale-d numbered A, B and S after the accumulators.
// TRANS is the imm-trans-a/b pair (both K-major) for fp16/bf16; the E4M3
// forms take none: K-major is their only layout, and ptxas rejects the
// instruction with them.
#define WGMMA(N, TAG, SHAPE, TY, REGS, ACC, A, B, S, TRANS)                                                \
	__device__ __forceinline__ void wgmma_n##N(float *d, unsigned long long a, unsigned long long b, TAG) { \
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S ", 0;\n"                                        \
					 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " " REGS ", " A ", " B         \
					 ", p, 1, 1" TRANS ";\n}\n"                                                            \
			: ACC                                                                                          \
			: "l"(a), "l"(b), "r"(1));                                                                     \
	}
WGMMA(32, f16, "m64n32k16", "f16", WG_REG16, WG_ACC16, "%16", "%17", "%18", ", 0, 0")
WGMMA(32, bf16, "m64n32k16", "bf16", WG_REG16, WG_ACC16, "%16", "%17", "%18", ", 0, 0")
WGMMA(32, u8, "m64n32k32", "e4m3", WG_REG16, WG_ACC16, "%16", "%17", "%18", "")
WGMMA(40, f16, "m64n40k16", "f16", WG_REG20, WG_ACC20, "%20", "%21", "%22", ", 0, 0")
WGMMA(40, bf16, "m64n40k16", "bf16", WG_REG20, WG_ACC20, "%20", "%21", "%22", ", 0, 0")
WGMMA(40, u8, "m64n40k32", "e4m3", WG_REG20, WG_ACC20, "%20", "%21", "%22", "")
WGMMA(48, f16, "m64n48k16", "f16", WG_REG24, WG_ACC24, "%24", "%25", "%26", ", 0, 0")
WGMMA(48, bf16, "m64n48k16", "bf16", WG_REG24, WG_ACC24, "%24", "%25", "%26", ", 0, 0")
WGMMA(48, u8, "m64n48k32", "e4m3", WG_REG24, WG_ACC24, "%24", "%25", "%26", "")
WGMMA(64, f16, "m64n64k16", "f16", WG_REG32, WG_ACC32, "%32", "%33", "%34", ", 0, 0")
WGMMA(64, bf16, "m64n64k16", "bf16", WG_REG32, WG_ACC32, "%32", "%33", "%34", ", 0, 0")
WGMMA(64, u8, "m64n64k32", "e4m3", WG_REG32, WG_ACC32, "%32", "%33", "%34", "")
WGMMA(72, f16, "m64n72k16", "f16", WG_REG36, WG_ACC36, "%36", "%37", "%38", ", 0, 0")
WGMMA(72, bf16, "m64n72k16", "bf16", WG_REG36, WG_ACC36, "%36", "%37", "%38", ", 0, 0")
WGMMA(72, u8, "m64n72k32", "e4m3", WG_REG36, WG_ACC36, "%36", "%37", "%38", "")
WGMMA(80, f16, "m64n80k16", "f16", WG_REG40, WG_ACC40, "%40", "%41", "%42", ", 0, 0")
WGMMA(80, bf16, "m64n80k16", "bf16", WG_REG40, WG_ACC40, "%40", "%41", "%42", ", 0, 0")
WGMMA(80, u8, "m64n80k32", "e4m3", WG_REG40, WG_ACC40, "%40", "%41", "%42", "")
WGMMA(88, f16, "m64n88k16", "f16", WG_REG44, WG_ACC44, "%44", "%45", "%46", ", 0, 0")
WGMMA(88, bf16, "m64n88k16", "bf16", WG_REG44, WG_ACC44, "%44", "%45", "%46", ", 0, 0")
WGMMA(88, u8, "m64n88k32", "e4m3", WG_REG44, WG_ACC44, "%44", "%45", "%46", "")
WGMMA(96, f16, "m64n96k16", "f16", WG_REG48, WG_ACC48, "%48", "%49", "%50", ", 0, 0")
WGMMA(96, bf16, "m64n96k16", "bf16", WG_REG48, WG_ACC48, "%48", "%49", "%50", ", 0, 0")
WGMMA(96, u8, "m64n96k32", "e4m3", WG_REG48, WG_ACC48, "%48", "%49", "%50", "")
WGMMA(104, f16, "m64n104k16", "f16", WG_REG52, WG_ACC52, "%52", "%53", "%54", ", 0, 0")
WGMMA(104, bf16, "m64n104k16", "bf16", WG_REG52, WG_ACC52, "%52", "%53", "%54", ", 0, 0")
WGMMA(104, u8, "m64n104k32", "e4m3", WG_REG52, WG_ACC52, "%52", "%53", "%54", "")
WGMMA(112, f16, "m64n112k16", "f16", WG_REG56, WG_ACC56, "%56", "%57", "%58", ", 0, 0")
WGMMA(112, bf16, "m64n112k16", "bf16", WG_REG56, WG_ACC56, "%56", "%57", "%58", ", 0, 0")
WGMMA(112, u8, "m64n112k32", "e4m3", WG_REG56, WG_ACC56, "%56", "%57", "%58", "")
WGMMA(128, f16, "m64n128k16", "f16", WG_REG64, WG_ACC64, "%64", "%65", "%66", ", 0, 0")
WGMMA(128, bf16, "m64n128k16", "bf16", WG_REG64, WG_ACC64, "%64", "%65", "%66", ", 0, 0")
WGMMA(128, u8, "m64n128k32", "e4m3", WG_REG64, WG_ACC64, "%64", "%65", "%66", "")
WGMMA(136, f16, "m64n136k16", "f16", WG_REG68, WG_ACC68, "%68", "%69", "%70", ", 0, 0")
WGMMA(136, bf16, "m64n136k16", "bf16", WG_REG68, WG_ACC68, "%68", "%69", "%70", ", 0, 0")
WGMMA(136, u8, "m64n136k32", "e4m3", WG_REG68, WG_ACC68, "%68", "%69", "%70", "")
WGMMA(160, f16, "m64n160k16", "f16", WG_REG80, WG_ACC80, "%80", "%81", "%82", ", 0, 0")
WGMMA(160, bf16, "m64n160k16", "bf16", WG_REG80, WG_ACC80, "%80", "%81", "%82", ", 0, 0")
WGMMA(160, u8, "m64n160k32", "e4m3", WG_REG80, WG_ACC80, "%80", "%81", "%82", "")
WGMMA(176, f16, "m64n176k16", "f16", WG_REG88, WG_ACC88, "%88", "%89", "%90", ", 0, 0")
WGMMA(176, bf16, "m64n176k16", "bf16", WG_REG88, WG_ACC88, "%88", "%89", "%90", ", 0, 0")
WGMMA(176, u8, "m64n176k32", "e4m3", WG_REG88, WG_ACC88, "%88", "%89", "%90", "")
WGMMA(192, f16, "m64n192k16", "f16", WG_REG96, WG_ACC96, "%96", "%97", "%98", ", 0, 0")
WGMMA(192, bf16, "m64n192k16", "bf16", WG_REG96, WG_ACC96, "%96", "%97", "%98", ", 0, 0")
WGMMA(192, u8, "m64n192k32", "e4m3", WG_REG96, WG_ACC96, "%96", "%97", "%98", "")
WGMMA(200, f16, "m64n200k16", "f16", WG_REG100, WG_ACC100, "%100", "%101", "%102", ", 0, 0")
WGMMA(200, bf16, "m64n200k16", "bf16", WG_REG100, WG_ACC100, "%100", "%101", "%102", ", 0, 0")
WGMMA(200, u8, "m64n200k32", "e4m3", WG_REG100, WG_ACC100, "%100", "%101", "%102", "")
WGMMA(208, f16, "m64n208k16", "f16", WG_REG104, WG_ACC104, "%104", "%105", "%106", ", 0, 0")
WGMMA(208, bf16, "m64n208k16", "bf16", WG_REG104, WG_ACC104, "%104", "%105", "%106", ", 0, 0")
WGMMA(208, u8, "m64n208k32", "e4m3", WG_REG104, WG_ACC104, "%104", "%105", "%106", "")
WGMMA(224, f16, "m64n224k16", "f16", WG_REG112, WG_ACC112, "%112", "%113", "%114", ", 0, 0")
WGMMA(224, bf16, "m64n224k16", "bf16", WG_REG112, WG_ACC112, "%112", "%113", "%114", ", 0, 0")
WGMMA(224, u8, "m64n224k32", "e4m3", WG_REG112, WG_ACC112, "%112", "%113", "%114", "")
WGMMA(256, f16, "m64n256k16", "f16", WG_REG128, WG_ACC128, "%128", "%129", "%130", ", 0, 0")
WGMMA(256, bf16, "m64n256k16", "bf16", WG_REG128, WG_ACC128, "%128", "%129", "%130", ", 0, 0")
WGMMA(256, u8, "m64n256k32", "e4m3", WG_REG128, WG_ACC128, "%128", "%129", "%130", "")

// wg_mma_ktile queues one k-tile's MMAs (128 bytes of each row: four steps
// of 32 bytes) of the 64 x BN accumulators from the swizzled tiles at sa
// (64 rows: of X, or of W in a swapped tile) and sb (BN rows: of W, or of
// X), as one commit group.
//
// The descriptors are built once and stepped: a k-step 32 bytes on is 2
// more in the start's 16-byte units. Exact, since shared addresses lie
// below 0x40000 (228 KB at most), so that ((a + 32 kk) & 0x3ffff) >> 4 =
// ((a & 0x3ffff) >> 4) + 2 kk. Rebuilt for every step, each MMA waited on
// a dependent chain of integer instructions: about 90 a k-tile in the
// consumer warp, which bound the narrow tiles (bench/NOTES.md v55).
template <int BN, class E> __device__ __forceinline__ void wg_mma_ktile(float *acc, u32 sa, u32 sb) {
	wg_pin<BN / 2>(acc);
	wg_fence();
	const unsigned long long da = wg_desc(sa), db = wg_desc(sb);
#pragma unroll
	for (int kk = 0; kk < 4; kk++) {
		const unsigned long long a = da + 2 * kk, b = db + 2 * kk;
		if constexpr (BN == 32) {
			wgmma_n32(acc, a, b, E{});
		} else if constexpr (BN == 40) {
			wgmma_n40(acc, a, b, E{});
		} else if constexpr (BN == 48) {
			wgmma_n48(acc, a, b, E{});
		} else if constexpr (BN == 64) {
			wgmma_n64(acc, a, b, E{});
		} else if constexpr (BN == 72) {
			wgmma_n72(acc, a, b, E{});
		} else if constexpr (BN == 80) {
			wgmma_n80(acc, a, b, E{});
		} else if constexpr (BN == 88) {
			wgmma_n88(acc, a, b, E{});
		} else if constexpr (BN == 96) {
			wgmma_n96(acc, a, b, E{});
		} else if constexpr (BN == 104) {
			wgmma_n104(acc, a, b, E{});
		} else if constexpr (BN == 112) {
			wgmma_n112(acc, a, b, E{});
		} else if constexpr (BN == 128) {
			wgmma_n128(acc, a, b, E{});
		} else if constexpr (BN == 136) {
			wgmma_n136(acc, a, b, E{});
		} else if constexpr (BN == 160) {
			wgmma_n160(acc, a, b, E{});
		} else if constexpr (BN == 176) {
			wgmma_n176(acc, a, b, E{});
		} else if constexpr (BN == 192) {
			wgmma_n192(acc, a, b, E{});
		} else if constexpr (BN == 200) {
			wgmma_n200(acc, a, b, E{});
		} else if constexpr (BN == 208) {
			wgmma_n208(acc, a, b, E{});
		} else if constexpr (BN == 224) {
			wgmma_n224(acc, a, b, E{});
		} else {
			wgmma_n256(acc, a, b, E{});
		}
	}
	wg_commit();
}
#endif

// quad_transpose exchanges words among the four lanes of a quad (lane % 4
// = q): lane q leaves with w[e] = what lane e came with in w[q]. Two
// butterfly rounds, two shuffles each, in which every lane of the warp
// takes part.
__device__ __forceinline__ void quad_transpose(u32 (&w)[4], int q) {
#pragma unroll
	for (int b = 1; b <= 2; b <<= 1) { // across lane bit b: registers e and e + b
		const bool hi = q & b;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			if (e & b) continue;
			const u32 r = __shfl_xor_sync(0xffffffffu, hi ? w[e] : w[e + b], b);
			if (hi) {
				w[e] = r;
			} else {
				w[e + b] = r;
			}
		}
	}
}

// quad_store writes one row of JB 8-column blocks from yr on, word(j)
// being block j's pair of outputs in this lane (lane % 4 = q), two 16-bit
// values: the first JB / 4 * 4 blocks, after quad_transpose, as one
// 16-byte store a lane of 8 consecutive outputs; the rest in pairs. Under
// ADD each word is first combined with the pair Y holds there, add(old,
// w). Every lane of the warp calls it (the shuffles); only those with live
// set read or write Y.
template <int JB, bool ADD, class T, class W, class A>
__device__ __forceinline__ void quad_store(T *yr, int q, bool live, W word, A add) {
	constexpr int JQ = JB / 4 * 4;
#pragma unroll
	for (int jj = 0; jj < JQ / 4; jj++) {
		u32 w[4];
#pragma unroll
		for (int e = 0; e < 4; e++) w[e] = word(4 * jj + e);
		quad_transpose(w, q);
		uint4 *y = (uint4 *)(yr + (4 * jj + q) * 8);
		if (!live) continue;
		if constexpr (ADD) {
			const uint4 o = *y;
			w[0] = add(o.x, w[0]), w[1] = add(o.y, w[1]), w[2] = add(o.z, w[2]), w[3] = add(o.w, w[3]);
		}
		*y = make_uint4(w[0], w[1], w[2], w[3]);
	}
#pragma unroll
	for (int j = JQ; j < JB; j++) {
		u32 *y = (u32 *)(yr + j * 8 + q * 2);
		const u32 v = word(j);
		if (live) *y = ADD ? add(*y, v) : v;
	}
}

// wg_store writes a warpgroup's 64 x BN accumulators, this thread's share:
// each 8-column block j holds rows rb and rb + 8 (rb: the warp's 16 rows,
// lane / 4 in), columns n0 + 8j + 2 (lane % 4) and +1; into Y, or split-K
// partials P (gemm_store2), scaled for E4M3 codes by sx (one, or one a row:
// sxRows) and sw (one, or one a column: swRows). Rows past M and columns
// past N are dropped.
template <class T, int BN, bool F8>
__device__ __forceinline__ void wg_store(const float *acc, T *Y, float *P, int M, int N, int rb, int n0, int lane,
	const float *sx, int sxRows, const float *sw, int swRows) {
	const bool pairs = (N & 1) == 0;
	// E4M3 scales: the thread's two rows' read once, and a per-tensor
	// weight scale once, not at every pair of outputs (64 of them for a 64 x
	// 256 tile, each three loads that the stores between them kept the
	// compiler from hoisting). The products are the same: v * (sx * sw).
	float srow[2] = {1.f, 1.f}, swt = 1.f;
	if constexpr (F8) {
#pragma unroll
		for (int h = 0; h < 2; h++) srow[h] = sxRows ? (rb + h * 8 < M ? sx[rb + h * 8] : 0.f) : sx[0];
		if (!swRows) swt = sw[0];
	}
	// A tile whose columns all lie inside Y, its rows 16-byte aligned: each
	// quad trades its words (quad_transpose) so that every lane writes 8
	// consecutive outputs in one 16-byte store, a warp's store 64 bytes of
	// each of its 8 rows, four column blocks at a time. The pairs below
	// write 4 bytes a lane, 16 a row: half of each 32-byte sector, and four
	// times the store instructions; they still write the last two column
	// blocks of the 80- and 176-wide tiles. The values and their rounding
	// are the pairs' own.
	if (P == nullptr && (N & 7) == 0 && n0 + BN <= N && ((unsigned long long)Y & 15) == 0) {
		const int q = lane & 3;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int r = rb + h * 8;
			auto pair = [&](int j) { // column block j's two values, scaled, as one word
				float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
				if constexpr (F8) {
					const int c = n0 + j * 8 + q * 2;
					v0 *= srow[h] * (swRows ? sw[c] : swt);
					v1 *= srow[h] * (swRows ? sw[c + 1] : swt);
				}
				return pack2(v0, v1, T{});
			};
			// Every lane takes part in the shuffles, its row inside Y or not.
			quad_store<BN / 8, false>(Y + (long long)min(r, M - 1) * N + n0, q, r < M, pair, [](u32, u32 w) { return w; });
		}
		return;
	}
#pragma unroll
	for (int j = 0; j < BN / 8; j++) {
		const int c = n0 + j * 8 + (lane & 3) * 2;
		if (c >= N) continue;
		float w0 = swt, w1 = swt;
		if constexpr (F8) {
			if (swRows) w0 = sw[c], w1 = sw[min(c + 1, N - 1)];
		}
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int r = rb + h * 8;
			if (r >= M) continue;
			float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
			if constexpr (F8) {
				v0 *= srow[h] * w0;
				v1 *= srow[h] * w1;
			}
			gemm_store2(Y, P, M, N, r, c, v0, v1, pairs);
		}
	}
}

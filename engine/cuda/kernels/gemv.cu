// Skinny GEMM for decode (gemm_plugin: disable, M <= 8):
// Y[M,N] = X[M,K] W[N,K]^T as a matrix-vector product on the CUDA cores, as
// TensorRT-LLM's cudaCoreGemm does for small M. At M = 1..8 the product is a
// pure stream of W (2 N K bytes, read once) with almost no arithmetic per
// byte, so what matters is having enough 16-byte loads of W in flight to
// cover the memory latency on every multiprocessor, not the tensor cores.
//
// Each warp owns R consecutive rows of W and walks K in 16-byte chunks, lane
// l taking chunks l, l + 32, ...: a warp reads 512 contiguous bytes of each
// of its rows per step, fully coalesced, and each lane issues the loads of
// U steps of every row before it multiplies anything, so L loads per lane
// (8, or 16 in the _l16 kernels) are outstanding at once. W is loaded with
// L1::no_allocate (it is used once) so the rows of X, which every warp
// re-reads, stay in L1. Products accumulate in fp32, one warp reduction
// per output at the end. R grows with N and with M (each chunk of X read
// from L1 then serves R rows of W).
//
// The host (gemvChoose) picks R and L per launch from the kernels'
// register counts: a GEMV of a few MB is a single round of loads per warp,
// and what decides its time is whether all its blocks are resident at
// once. The QKV projection with its RMSNorm at M = 1 (R = 1, L = 8) has
// ~120 registers a thread (ptxas, sm_80): 4 blocks per multiprocessor, 528
// on 132 of them for its 640 blocks, so it ran in two waves, the second a
// whole load latency after the first; R = 2 with L = 16 is the same single
// round per warp in 320 blocks, which fit (3 per multiprocessor).
//
// The first round of W loads is issued before pdl_enter: the weights are
// never written while a forward pass runs, so under programmatic dependent
// launch a GEMV's blocks start streaming their weights while the kernel
// before it (an RMSNorm, the attention: a few blocks at decode) is still
// running, and only the reads of X wait for it. At batch 1 this hides most
// of a small projection's load latency behind the kernel it depends on.
//
// GLU: the MLP's gate_up projection with SwiGLU in its epilogue. W is the
// fused [2F, K] gate_up weight (gate rows first); output column j is
// silu(x . gate_j) * (x . up_j), so a warp reads gate row j and up row
// F + j together and Y is the [M, F] activation the down projection reads:
// the gate_up output and the separate swiglu kernel are never needed. The
// two sums are rounded to the storage type before the product, as the
// unfused path stores them.
//
// NORM: X is the residual stream and each input row is RMSNorm(X[m]) * NW.
// The reciprocal RMS is a common factor of the whole dot product, so the
// loop multiplies W by X * NW and sums the squares of X alongside (every
// warp walks all of K anyway), and the sums are scaled once at the end:
// no extra pass over X and no barrier in front of the loop. (The unfused
// path rounds the normalised row to the storage type first; this skips that
// rounding.) Warp 0 of every block then writes 32 chunks of the
// normalised rows to XO, as the rmsnorm kernel rounds them (every warp
// has every row's 1/rms, and X and NW are in its L1), so the op it
// replaces has still produced its output for any other reader, at the cost
// of one more chunk per lane rather than a serial pass over all of X in
// one warp at the end of the launch. Saves the RMSNorm launch in front of
// the QKV, gate_up and LM-head projections at decode.
//
// EMB (with NORM; the first layer's QKV projection at decode): X is the
// embedding table and input row m is table row ids[m] (a negative id
// -1 - j is fed[j], the previous iteration's pick j not read back yet, as
// the embedding kernel resolves it; an id outside the table reads as NaN,
// as that kernel writes it). Warp 0 of every block writes its chunks of
// the gathered rows to H beside XO, so the embedding's output exists for
// the residual adds after it. This takes the embedding kernel out of the
// decode step, which on an H100 at batch 1 was also the graph's first
// kernel: the projection behind it started some 2.5 us after it ended
// instead of streaming its weights during it, and only from the second
// kernel on did programmatic dependent launch overlap them.
//
// RES: Y is the residual stream and the product is added to it, Y = T(Y +
// T(x W^T)), as the separate add rounds: the output and down projections
// absorb the residual add that follows them. Each output has one owner
// lane, so the read-modify-write needs no atomics. The owner reads its Y
// as soon as pdl_enter allows, beside the first reads of X, rather than
// after the reduction: at batch 1 the output projection's weights are all
// in registers by the time the attention before it ends, and what is left
// of it is a chain of dependent reads, one of which this takes off.
//
// PIPE (the residual GEMVs at M = 1 with 8 loads in flight a lane): the
// next round's loads of W go out before this round's are consumed, so that
// a warp never stands with none in flight. It is for the down projection,
// whose K (5632 at TinyLlama's width) takes three rounds a warp, the most
// of any decode GEMV; the extra registers (8 more loads a lane) still let
// TinyLlama's 512 blocks of either residual GEMV run in one wave. The _l16
// kernels keep their single buffer: 16 more loads would not fit the 168
// registers they are held to.
#include "common.cuh"

#define GV_GLU 1
#define GV_NORM 2
#define GV_RES 4
#define GV_EMB 8

// ld_stream is a 16-byte read of data used once: no L1 allocation, and a
// 256-byte L2 prefetch since the warp goes on to read the rest of the run.
__device__ __forceinline__ pack8 ld_stream(const pack8 *p) {
	pack8 r;
	asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
		: "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
		: "l"(p));
	return r;
}

// gemv_emb is what EMB reads besides X: the ids, the fed picks and the
// table's rows; H receives the gathered rows.
struct gemv_emb {
	const int *ids, *fed;
	int nfed, vocab;
	void *H;
};

template <class T, int MT, int R, int MODE, int L>
__device__ __forceinline__ void gemv(const T *__restrict__ X, const T *__restrict__ W, T *__restrict__ Y,
	const T *__restrict__ NW, T *__restrict__ XO, int M, int N, int K, float eps, gemv_emb em) {
	constexpr bool GLU = MODE & GV_GLU, NORM = MODE & GV_NORM, RES = MODE & GV_RES, EMB = MODE & GV_EMB;
	// RR rows of W per warp (R outputs; both halves of each under GLU); U
	// steps of K per round, so each lane has U x RR = L 16-byte loads of W
	// in flight: L / 2 KB per warp.
	constexpr int RR = GLU ? 2 * R : R;
	constexpr int U = RR >= L ? 1 : L / RR;
	constexpr bool PIPE = RES && MT == 1 && L == 8;
	const int lane = threadIdx.x & 31;
	const int n0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
	const int K8 = K >> 3;
	const pack8 *wr[RR];
#pragma unroll
	for (int r = 0; r < RR; r++) {
		const int row = min(n0 + (r % R), N - 1) + (GLU && r >= R ? N : 0);
		wr[r] = (const pack8 *)(W + (long long)row * K);
	}
	pack8 w[U][RR], wn[PIPE ? U : 1][RR];
	auto loadW = [&](pack8 (*dst)[RR], int c0) {
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = c0 + 32 * u;
			if (c < K8) {
#pragma unroll
				for (int r = 0; r < RR; r++) dst[u][r] = ld_stream(wr[r] + c);
			}
		}
	};
	if (n0 < N) loadW(w, lane);
	pdl_enter(); // X may be the previous kernel's output: read it only now
	if (n0 >= N) return;
	// Where row m of X starts (EMB: its table row; xbad: NaN instead).
	long long xoff[MT];
	bool xbad[MT];
#pragma unroll
	for (int m = 0; m < MT; m++) {
		xoff[m] = (long long)m * K;
		xbad[m] = false;
		if (EMB && m < M) {
			int id = em.ids[m];
			if (id < 0 && -1 - id < em.nfed) id = em.fed[-1 - id];
			xbad[m] = id < 0 || id >= em.vocab;
			xoff[m] = xbad[m] ? 0 : (long long)id * K;
		}
	}
	pack8 xnan;
#pragma unroll
	for (int e = 0; e < 8; e++) pack_set<T>(xnan, e, nan_f32());
	// RES: the owner lane's residual, read now (see RES above).
	T yold{};
	const int ym = lane % MT, yr = lane / MT;
	const bool yown = RES && lane < R * MT && ym < M && n0 + yr < N;
	if (yown) yold = Y[(long long)ym * N + n0 + yr];

	float acc[RR][MT], ss[MT];
#pragma unroll
	for (int m = 0; m < MT; m++) {
		ss[m] = 0.f;
#pragma unroll
		for (int r = 0; r < RR; r++) acc[r][m] = 0.f;
	}

	for (int c0 = lane; c0 < K8; c0 += 32 * U) {
		if (PIPE && c0 + 32 * U < K8) loadW(wn, c0 + 32 * U);
		pack8 xs[U][MT], nw[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = c0 + 32 * u;
			if (NORM && c < K8) nw[u] = *(const pack8 *)(NW + (long long)c * 8);
#pragma unroll
			for (int m = 0; m < MT; m++)
				if (m < M && c < K8) xs[u][m] = EMB && xbad[m] ? xnan : *(const pack8 *)(X + xoff[m] + (long long)c * 8);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if (c0 + 32 * u >= K8) continue;
#pragma unroll
			for (int m = 0; m < MT; m++) {
				if (m >= M) continue;
				float x[8];
#pragma unroll
				for (int e = 0; e < 8; e++) x[e] = pack_get<T>(xs[u][m], e);
				if (NORM) {
#pragma unroll
					for (int e = 0; e < 8; e++) {
						ss[m] = fmaf(x[e], x[e], ss[m]);
						x[e] *= pack_get<T>(nw[u], e);
					}
				}
#pragma unroll
				for (int r = 0; r < RR; r++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float2 wf = unpack2(w[u][r].w[e], T{});
						acc[r][m] = fmaf(x[2 * e], wf.x, acc[r][m]);
						acc[r][m] = fmaf(x[2 * e + 1], wf.y, acc[r][m]);
					}
			}
		}
		// The next round's loads go out once this round's are consumed
		// (under PIPE they went out before, and only move over).
		if (PIPE) {
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int r = 0; r < RR; r++) w[u][r] = wn[PIPE ? u : 0][r];
		} else if (c0 + 32 * U < K8) {
			loadW(w, c0 + 32 * U);
		}
	}
	float inv[MT];
#pragma unroll
	for (int m = 0; m < MT; m++) inv[m] = NORM ? rsqrtf(warp_sum(ss[m]) / (float)K + eps) : 1.f;
	if (NORM && (XO != nullptr || EMB) && threadIdx.x < 32) {
		// Block b's warp 0 (alive: the block's first row is < N) writes
		// chunks 32 b + lane, ... of the M x K8 chunks of XO.
		for (int i = blockIdx.x * 32 + lane; i < M * K8; i += gridDim.x * 32) {
			const int m = i / K8, c = i - m * K8;
			float im = inv[0];
			long long xo = xoff[0];
			bool bad = xbad[0];
#pragma unroll
			for (int mm = 1; mm < MT; mm++)
				if (mm == m) im = inv[mm], xo = xoff[mm], bad = xbad[mm];
			const pack8 xv = EMB && bad ? xnan : *(const pack8 *)(X + xo + (long long)c * 8);
			if (EMB) *(pack8 *)((T *)em.H + (long long)m * K + (long long)c * 8) = xv;
			if (XO == nullptr) continue;
			const pack8 nv = *(const pack8 *)(NW + (long long)c * 8);
			pack8 o = {};
#pragma unroll
			for (int e = 0; e < 8; e++) pack_set<T>(o, e, pack_get<T>(xv, e) * im * pack_get<T>(nv, e));
			*(pack8 *)(XO + (long long)m * K + (long long)c * 8) = o;
		}
	}
	// Every lane ends with every sum; lane r * MT + m writes output (m, n0 + r).
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int m = 0; m < MT; m++) {
			float v = warp_sum(acc[r][m]) * inv[m];
			if (GLU) {
				const float g = to_f32(from_f32<T>(v));
				const float u = to_f32(from_f32<T>(warp_sum(acc[R + r][m]) * inv[m]));
				v = g / (1.f + __expf(-g)) * u;
			}
			if (lane == r * MT + m && m < M && n0 + r < N) {
				// The owner lane of (m, r) is the one that read yold.
				Y[(long long)m * N + n0 + r] = from_f32<T>(RES ? to_f32(yold) + to_f32(from_f32<T>(v)) : v);
			}
		}
}

// Names: gemv<mode>_<dtype>_m<MT>_r<R>[_l16], mode "" (plain), _glu, _norm,
// _normglu, _embnorm or _res; MT is M rounded up to a power of two (M <= MT rows are
// computed); _l16: 16 loads of W in flight per lane instead of 8 (at M = 1
// only, where the registers allow it). For GLU, N is the output width F (W
// has 2F rows). NW and XO are read only under NORM, eps likewise, and
// ids, fed, nfed, vocab and H only under EMB.
// The _l16 kernels are held to 3 blocks a multiprocessor (168 registers),
// which is what lets the QKV GEMV's 320 blocks fit in one wave.
#define GEMVKL(T, MODE, SUF, MT, R, L, LS, BOUNDS)                                                               \
	extern "C" __global__ void BOUNDS gemv##SUF##_##T##_m##MT##_r##R##LS(const T *X, const T *W, T *Y,          \
		const T *NW, T *XO, int M, int N, int K, float eps, const int *ids, const int *fed, int nfed, int vocab,   \
		T *H) {                                                                                                   \
		gemv<T, MT, R, MODE, L>(X, W, Y, NW, XO, M, N, K, eps, gemv_emb{ids, fed, nfed, vocab, H});              \
	}
#define GEMVK(T, MODE, SUF, MT, R) GEMVKL(T, MODE, SUF, MT, R, 8, , __launch_bounds__(128))
#define GEMVK16(T, MODE, SUF, R) GEMVKL(T, MODE, SUF, 1, R, 16, _l16, __launch_bounds__(128, 3))
// Outputs per warp: 1, 2 or 4 (2 rows of W each under GLU, so at most 2).
// The _l16 kernels hold 2 to 4 rows of W a warp (16 loads of one row would
// leave too few registers for the rest).
#define GEMV_ROWS(T, MODE, SUF)                                                                                  \
	GEMVK(T, MODE, SUF, 1, 1) GEMVK(T, MODE, SUF, 1, 2) GEMVK(T, MODE, SUF, 1, 4) GEMVK(T, MODE, SUF, 2, 1)     \
	GEMVK(T, MODE, SUF, 2, 2) GEMVK(T, MODE, SUF, 2, 4) GEMVK(T, MODE, SUF, 4, 2) GEMVK(T, MODE, SUF, 4, 4)     \
	GEMVK(T, MODE, SUF, 8, 4) GEMVK16(T, MODE, SUF, 2) GEMVK16(T, MODE, SUF, 4)
#define GEMV_ROWS_GLU(T, MODE, SUF)                                                                              \
	GEMVK(T, MODE, SUF, 1, 1) GEMVK(T, MODE, SUF, 1, 2) GEMVK(T, MODE, SUF, 2, 1) GEMVK(T, MODE, SUF, 2, 2)     \
	GEMVK(T, MODE, SUF, 4, 2) GEMVK(T, MODE, SUF, 8, 2) GEMVK16(T, MODE, SUF, 1) GEMVK16(T, MODE, SUF, 2)
#define GEMV_T(T)                                                                                                \
	GEMV_ROWS(T, 0, ) GEMV_ROWS(T, GV_NORM, _norm) GEMV_ROWS(T, GV_RES, _res)                                 \
	GEMV_ROWS(T, GV_NORM | GV_EMB, _embnorm)                                                                  \
	GEMV_ROWS_GLU(T, GV_GLU, _glu) GEMV_ROWS_GLU(T, GV_GLU | GV_NORM, _normglu)
GEMV_T(f16)
GEMV_T(bf16)

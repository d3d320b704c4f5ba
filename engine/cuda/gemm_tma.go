//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"slices"
)

// tmaConfig mirrors one GEMM_TMA(...) (GEMM_TMA_X(...) swapped,
// GEMM_TMA_KP(...) alternating) instantiation in kernels/gemm_tma.cu: a
// producer warpgroup issuing TMA loads and rows/64 consumer warpgroups
// multiplying (bn/64 when swapped, two for an alternating tile), a tile of
// rows rows of X by bn of W, stages k-tiles in flight. The names are
// XRUN_CUDA_WGMMA_TILE's, as the cp.async kernels' (gemm_wgmma.cu).
type tmaConfig struct {
	name     string
	rows, bn int
	stages   int
	perSM    int // blocks a multiprocessor holds at once (shared memory)
	// narrow: a 64-row tile for a decode's small projections, K unsplit
	// unless XRUN_CUDA_GEMM_WAVES asks; tmaPlan.cost weighs it by
	// tmaNarrowKTile and tmaNarrowWave.
	narrow bool
	// swap: W's rows on the MMA's M (bn = 64 a consumer warpgroup) and
	// rows of X on its N (gemm_tma.cuh's XR), the output staged in
	// shared memory and stored through the split's reduction, S = 1
	// included.
	swap bool
	// kp: a 64-row tile whose two consumer warpgroups take alternate
	// k-tiles (gemm_tma.cuh's KP), their sums added up in shared memory.
	kp bool
}

var tmaConfigs = map[string]tmaConfig{
	"wg1":  {"wg1", 64, 128, 4, 2, false, false, false},
	"wg2":  {"wg2", 128, 128, 6, 1, false, false, false},
	"wg2m": {"wg2m", 128, 192, 5, 1, false, false, false},
	"wg2w": {"wg2w", 128, 256, 4, 1, false, false, false},
	// 128 x 176: TinyLlama's gate_up (11,264 rows) at M = 256 is 128
	// tiles, where 128 x 192's 118 leave 14 of 132 multiprocessors idle
	// while their MMAs run at about the multiprocessor's peak
	// (BenchmarkGemmPhases, H200: 14.9 of a block's 22.0 us).
	"wg2f": {"wg2f", 128, 176, 5, 1, false, false, false},
	// The narrow tiles: cuBLASLt covers TinyLlama's qkv, o and down at M =
	// 256 with about 128 blocks of 64 rows (80 or 64 columns), K unsplit,
	// 11-13 stages deep, in 8.6, 8.2 and 16.4 us against the 128-row
	// tiles' split K's 12.4, 10.6 and 18.3 (v30's BenchmarkGemm, H100).
	"wg1s": {"wg1s", 64, 64, 12, 1, true, false, false},
	"wg1n": {"wg1n", 64, 80, 10, 1, true, false, false},
	// 64 x 96 for a decode batch of up to 64 rows: TinyLlama's gate_up
	// (11,264 rows of W) in 118 blocks, one wave, each streaming its W
	// slice once, where 64 x 128 tiles need K split three ways, on the
	// cp.async kernels at 1.21x cuBLASLt's time (v44's BenchmarkGemm, H100).
	"wg1m": {"wg1m", 64, 96, 10, 1, true, false, false},
	// 64 x 176, seven stages, K unsplit, W multicast to pairs of row
	// tiles, for 16-bit GEMMs of 65-256 rows whose tiles fill one round
	// (planGemmTMA, tmaRoundFill): cuBLASLt runs Qwen3-30B-A3B's qkv
	// (5,120 rows of W, K 2,048) at M = 256 as one wave of 124 blocks of
	// 64 x 168, seven stages, K unsplit, in clusters of two (Nsight
	// Compute, H200).
	"wg1w": {"wg1w", 64, 176, 7, 1, true, false, false},
	// 64 x 128, eight stages, one block a multiprocessor: wg1's tile with
	// twice the loads in flight, K split across a cluster. cuBLASLt runs
	// Llama-3.1-8B's FP8 down at M = 64 as 128 blocks of 128 rows of W by
	// 64 of X, eight stages of 128 codes, K split four ways (Nsight
	// Compute, H200), 24.5 us against the 64 x 64 tiles' 30.0: a tile
	// twice as wide reads X from L2 half as often.
	"wg1d": {"wg1d", 64, 128, 8, 1, false, false, false},
	// 128 rows of X by 64, 80 or 96 of W, two consumers, K unsplit in
	// one round of about 128 blocks: cuBLASLt runs the E4M3 projections
	// of 4,096-6,144 outputs at M = 256 so, in clusters of two (Nsight
	// Compute, H200, NOTES v67): Llama-3.1-8B's qkv as 96 rows of W by
	// 128 of X, seven stages of 128 codes, its o as 64 x 128, eight,
	// GPT-OSS-20B's qkv as 80 x 128, eight, each 128 blocks. pairPlan
	// takes w2x64 and w2x96; w2x80 is forced only.
	"w2x64": {"w2x64", 128, 64, 8, 1, false, false, false},
	"w2x80": {"w2x80", 128, 80, 8, 1, false, false, false},
	"w2x96": {"w2x96", 128, 96, 7, 1, false, false, false},
	// 192 x 128, five stages, three consumer warpgroups: 129-192 rows in
	// one row tile. At M = 160 and 192 the 128-row tiles' second row tile
	// is three quarters or half empty, and the plan ran the LM heads and
	// gate_ups at 1.20-1.38x cuBLASLt's time (BenchmarkGemm, H200, NOTES
	// v56: TinyLlama's LM head at 160 56.9 us against 44.3). Planned at
	// 161-192 rows (batchPlan).
	"wg3": {"wg3", 192, 128, 5, 1, false, false, false},
	// The swapped tiles: rows of X by 64 or 128 rows of W. At M = 128-256
	// cuBLASLt tiles a decode's small projections by 32-96 rows of X
	// (Nsight Compute, H200): TinyLlama's o at 128 as 128 blocks of 64
	// rows of W by 40 of X, 16 stages; at 192 128 x 32; Qwen3-30B-A3B's o
	// at 192 64 x 32, 16 stages. The unswapped MMA's M puts at least 64
	// rows of X in a tile.
	"s1x32": {"s1x32", 32, 64, 16, 1, false, true, false},
	"s1x40": {"s1x40", 40, 64, 16, 1, false, true, false},
	"s1x48": {"s1x48", 48, 64, 14, 1, false, true, false},
	"s2x32": {"s2x32", 32, 128, 10, 1, false, true, false},
	"s2x48": {"s2x48", 48, 128, 9, 1, false, true, false},
	// 160, 176 and 192 rows of X by 128 of W: a decode's batch of 129-192
	// rows in one row tile with less of it past M than 192 x 128 leaves
	// (at M = 160 a sixth of wg3's rows, none of s2x160's), on two
	// consumers whose MMAs are 128 x 160, 176 or 192 a k-tile (six stages
	// do not fit above 160). batchPlan takes s2x160 at 129-160 rows and
	// s2x176 at 161-176 where K is split; s2x192 is forced only.
	"s2x160": {"s2x160", 160, 128, 6, 1, false, true, false},
	"s2x176": {"s2x176", 176, 128, 5, 1, false, true, false},
	"s2x192": {"s2x192", 192, 128, 5, 1, false, true, false},
	// 80 rows of X by 64, 128 or 192 of W: a decode batch of 129-160 rows
	// in two row tiles, W multicast to the pair (tmaMulticast), as
	// cuBLASLt runs such batches on H200 (Nsight Compute, M = 160):
	// TinyLlama's gate_up as 120 blocks of 192 rows of W by 80 of X in
	// clusters of 4 x 2, 17.1 us (the own plan 21.8); Llama-3.2-1B's qkv
	// as 96 of 64 x 80 in clusters of 4 x 2; TinyLlama's down as 128 of
	// 128 x 80, K split four ways, W multicast to the pair. batchPlan
	// takes s3x80 and s2x80 at 129-160 rows; s1x80 is forced only. s2x88
	// and s3x88 alike at 161-176 rows (cuBLASLt: TinyLlama's gate_up at M
	// = 176 as 120 blocks of 192 x 88).
	"s1x80": {"s1x80", 80, 64, 12, 1, false, true, false},
	"s2x80": {"s2x80", 80, 128, 8, 1, false, true, false},
	"s3x80": {"s3x80", 80, 192, 6, 1, false, true, false},
	"s2x88": {"s2x88", 88, 128, 8, 1, false, true, false},
	"s3x88": {"s3x88", 88, 192, 6, 1, false, true, false},
	// 64 rows of W by 72 or 136 of X, one consumer, K unsplit in one
	// round: cuBLASLt's tiles at M = 136 (Nsight Compute, H200, NOTES v61)
	// for Llama-3.2-1B's qkv and GPT-OSS-20B's o (64 x 72, twelve stages,
	// two row tiles, clusters of 4 x 2) and Llama-3.1-8B's qkv (64 x 136,
	// eight stages, one row tile, clusters of 4 x 1). Forced only: the
	// plans take them on two consumers (below).
	// 104 rows of X by 128 or 192 of W (two row tiles at 193-208 rows, W
	// multicast to the pair where K is unsplit) and 208 by 128 (one):
	// cuBLASLt runs the wide outputs at M = 208 so (Nsight Compute, H200,
	// NOTES v67): Llama-3.1-8B's LM head as 132 blocks of 128 rows of W by
	// 208 of X, five stages, in clusters of two, its gate_up likewise in
	// clusters of four, TinyLlama's gate_up as 120 blocks of 192 x 104 in
	// clusters of 4 x 2; where the 128-row tiles, 48 of their 256 rows
	// past M, ran 1.17-1.24x its time. widePlan and wideSplit take them.
	"s2x104": {"s2x104", 104, 128, 7, 1, false, true, false},
	"s3x104": {"s3x104", 104, 192, 5, 1, false, true, false},
	"s2x208": {"s2x208", 208, 128, 5, 1, false, true, false},
	// 72 rows of X by 128 of W: cuBLASLt's tile for GPT-OSS-20B's 16-bit
	// qkv at M = 200 and, persistent, E4M3 TinyLlama's gate_up at 208
	// (NOTES v68), in gemm_tma_swap2.cu (tmaSwap2); its persistent kernels
	// store the last of its nine 8-row blocks alone. thirdsPlan takes it.
	"s2x72": {"s2x72", 72, 128, 8, 1, false, true, false},
	// 200 rows of X by 128 of W: cuBLASLt's tile for Llama-3.2-1B's 16-bit
	// gate_up at M = 193 (NOTES v68); widePlan's at 193-200 rows.
	"s2x200": {"s2x200", 200, 128, 5, 1, false, true, false},
	// 224 rows of X by 128 of W: widePlan's tile at 209-224 rows, one row
	// tile where s2x208 takes two and 128 x 256 computes up to 47 rows
	// for nothing; persistent on four stages beside half its staged
	// outputs (tmaSwapPersistPasses).
	"s2x224": {"s2x224", 224, 128, 5, 1, false, true, false},
	"s1x72":  {"s1x72", 72, 64, 12, 1, false, true, false},
	"s1x136": {"s1x136", 136, 64, 8, 1, false, true, false},
	// Those 64-row tiles of W (and s1x48's) on two consumers taking
	// alternate k-tiles, as cuBLASLt runs them (384 threads a block,
	// Nsight Compute, H200, NOTES v61), stages even. The plans at 129-144
	// rows take them where they took the one-consumer tiles (p1x48,
	// 16-bit: swapRound; p1x136: narrowRow), p1x72 unsplit in one round
	// (narrowPair), and for E4M3 codes p1x48 at 129-192 (narrowCodes).
	"p1x48":  {"p1x48", 48, 64, 14, 1, false, true, true},
	"p1x72":  {"p1x72", 72, 64, 12, 1, false, true, true},
	"p1x136": {"p1x136", 136, 64, 8, 1, false, true, true},
	// 64 rows of W by 112 of X on alternating consumers, ten stages: a
	// decode batch of 193-224 rows in two row tiles. cuBLASLt runs
	// GPT-OSS-20B's 16-bit o at M = 216 on 64 x 112 tiles, nine stages,
	// clusters of 4 x 2 (Nsight Compute, H200, NOTES v70).
	"p1x112": {"p1x112", 112, 64, 10, 1, false, true, true},
	// p1x72 and p1x48 in clusters (tmaClusters).
	"p1x72c13":  {"p1x72c13", 72, 64, 12, 1, false, true, true},
	"p1x72c21":  {"p1x72c21", 72, 64, 12, 1, false, true, true},
	"p1x72c23":  {"p1x72c23", 72, 64, 12, 1, false, true, true},
	"p1x112c21": {"p1x112c21", 112, 64, 10, 1, false, true, true},
	"p1x112c22": {"p1x112c22", 112, 64, 10, 1, false, true, true},
	"p1x48c12":  {"p1x48c12", 48, 64, 14, 1, false, true, true},
	"p1x48c13":  {"p1x48c13", 48, 64, 14, 1, false, true, true},
	// p1m, p1s and wg1n in clusters (tmaClusters).
	"p1mc21":  {"p1mc21", 64, 96, 10, 1, false, false, true},
	"p1mc41":  {"p1mc41", 64, 96, 10, 1, false, false, true},
	"p1mc42":  {"p1mc42", 64, 96, 10, 1, false, false, true},
	"p1sc21":  {"p1sc21", 64, 64, 12, 1, false, false, true},
	"p1sc41":  {"p1sc41", 64, 64, 12, 1, false, false, true},
	"wg1nc21": {"wg1nc21", 64, 80, 10, 1, false, false, false},
	// 64 x 64, 64 x 80 and 64 x 96 on two consumers that each take half
	// of W's tile every k-tile (tmaHalves), alone and in clusters.
	"h1s":    {"h1s", 64, 64, 12, 1, true, false, false},
	"h1n":    {"h1n", 64, 80, 10, 1, true, false, false},
	"h1m":    {"h1m", 64, 96, 10, 1, true, false, false},
	"h1sc21": {"h1sc21", 64, 64, 12, 1, true, false, false},
	"h1nc21": {"h1nc21", 64, 80, 10, 1, true, false, false},
	"h1mc21": {"h1mc21", 64, 96, 10, 1, true, false, false},
	"h1mc41": {"h1mc41", 64, 96, 10, 1, true, false, false},
	// The alternating tiles: 64 x 64 and 64 x 96 as wg1s and wg1m, two
	// consumer warpgroups taking alternate k-tiles. One consumer's
	// per-k-tile instructions bound the narrow tiles (Nsight Compute and
	// the SASS, H200, bench/NOTES.md v55), where cuBLASLt runs such tiles
	// (TinyLlama's o at M = 128 as 40 x 64, qkv at 256 as 96 x 64) on
	// three warpgroups. Planned at 97-128 rows (kpPlan).
	"p1s": {"p1s", 64, 64, 12, 1, false, false, true},
	"p1m": {"p1m", 64, 96, 10, 1, false, false, true},
}

// tmaCluster is a clustered configuration's unclustered twin (the same
// tile, stages and threads) and its clusters' shape: X row tiles by Y
// column tiles.
type tmaCluster struct {
	twin  string
	shape Dim3
}

// tmaClusters: the configurations whose blocks run in clusters
// (gemm_tma_swap_cl.cu, gemm_tma_cl.cu), W's loads multicast to the X
// blocks of a column tile and X's to the Y of a row tile, K unsplit.
// cuBLASLt runs the narrow tiles at 129-256 rows in clusters of 4 x 2, 2 x
// 4, 2 x 1 or 1 x 2 (Nsight Compute, H200, bench/NOTES.md v62).
// narrowPair plans p1x72c21, narrowCluster p1mc21 / p1mc41 / p1mc42,
// twoRowsPlan p1x112c21; the others are forced only (X's multicast lost,
// NOTES v63; p1x112c22 too, NOTES v70).
var tmaClusters = map[string]tmaCluster{
	"p1x72c13": {"p1x72", Dim3{X: 1, Y: 3, Z: 1}}, "p1x72c21": {"p1x72", Dim3{X: 2, Y: 1, Z: 1}}, "p1x72c23": {"p1x72", Dim3{X: 2, Y: 3, Z: 1}},
	"p1x48c12": {"p1x48", Dim3{X: 1, Y: 2, Z: 1}}, "p1x48c13": {"p1x48", Dim3{X: 1, Y: 3, Z: 1}},
	"p1x112c21": {"p1x112", Dim3{X: 2, Y: 1, Z: 1}}, "p1x112c22": {"p1x112", Dim3{X: 2, Y: 2, Z: 1}},
	"p1mc21": {"p1m", Dim3{X: 2, Y: 1, Z: 1}}, "p1mc41": {"p1m", Dim3{X: 4, Y: 1, Z: 1}}, "p1mc42": {"p1m", Dim3{X: 4, Y: 2, Z: 1}},
	"p1sc21": {"p1s", Dim3{X: 2, Y: 1, Z: 1}}, "p1sc41": {"p1s", Dim3{X: 4, Y: 1, Z: 1}},
	"wg1nc21": {"wg1n", Dim3{X: 2, Y: 1, Z: 1}},
	"h1sc21":  {"h1s", Dim3{X: 2, Y: 1, Z: 1}}, "h1nc21": {"h1n", Dim3{X: 2, Y: 1, Z: 1}}, "h1mc21": {"h1m", Dim3{X: 2, Y: 1, Z: 1}},
	"h1mc41": {"h1m", Dim3{X: 4, Y: 1, Z: 1}},
}

// tmaHalves: the configurations whose two consumers each take half of W's
// tile every k-tile (gemm_tma_half.cu, gemm_tma.cuh's NS), where an
// alternating tile's take alternate k-tiles whole: K unsplit, no
// epilogue kernels. planGemmTMA takes h1s for wg1s; the others are forced
// only.
var tmaHalves = map[string]bool{"h1s": true, "h1n": true, "h1m": true, "h1sc21": true, "h1nc21": true, "h1mc21": true, "h1mc41": true}

// tmaHalfTwin: each half tile's one-consumer tile (the same tile and
// stages, unclustered), whose kernels GemmEpilogue runs in its place.
var tmaHalfTwin = map[string]string{"h1s": "wg1s", "h1n": "wg1n", "h1m": "wg1m", "h1sc21": "wg1s", "h1nc21": "wg1n", "h1mc21": "wg1m", "h1mc41": "wg1m"}

// tmaNarrow are the narrow configurations, in the order planGemmTMA weighs
// them.
var tmaNarrow = []string{"wg1s", "wg1n", "wg1m"}

// tmaSmallRows is the largest M planGemmTMA weighs the narrow tiles at:
// above it a projection's narrow tiles take more than a wave.
const tmaSmallRows = 256

// tmaNarrowKTile and tmaNarrowWave are a narrow tile's k-tile and wave in
// the cost model's units (tmaPlan.cost), measured: BenchmarkGemm on an
// H100 timed 64 x 64 blocks, one wave of 128 (M = 256), at 8.3 us over 32
// k-tiles (o) and 19.7 over 88 (down), 64 x 80 blocks (104) at 8.8 and
// 20.2, where the split 128 x 128 tiles of o and down took 10.7 and 18.4
// (38 and 57 units): 0.20 us a k-tile, about 2 us a wave. Loading
// bounds these tiles, not their MMAs: a 64 x 64 k-tile carries half the
// bytes of a 128 x 128 one and a quarter of its products, and takes
// about half its time. So down (88 k-tiles) stays on the split 128-row
// tiles, and qkv and o (32) go narrow.
const (
	tmaNarrowKTile = 0.7
	tmaNarrowWave  = 7
)

// threads is the producer's warpgroup and a consumer's for each 64 rows
// of X (of W in a swapped tile; two for an alternating tile's 64).
func (c tmaConfig) threads() int {
	if c.kp || tmaHalves[c.name] {
		return 3 * 128
	}
	if c.swap {
		return (c.bn/64 + 1) * 128
	}
	return (c.rows/64 + 1) * 128
}

// module is the kernel family holding the configuration's kernels: the
// swapped tiles' gemm_tma_swap.cu (of alternating consumers
// gemm_tma_swap_kp.cu), the clustered ones' gemm_tma_swap_cl.cu and
// gemm_tma_cl.cu, the others' gemm_tma.cu.
func (c tmaConfig) module() string {
	if tmaHalves[c.name] {
		return "gemm_tma_half"
	}
	if _, ok := tmaClusters[c.name]; ok && c.swap {
		return "gemm_tma_swap_cl"
	} else if ok {
		return "gemm_tma_cl"
	}
	if c.swap && c.kp {
		return "gemm_tma_swap_kp"
	}
	if tmaSwap2[c.name] {
		return "gemm_tma_swap2"
	}
	if c.swap {
		return "gemm_tma_swap"
	}
	return "gemm_tma"
}

// tmaSwap2: the swapped configurations whose kernels gemm_tma_swap2.cu
// holds rather than gemm_tma_swap.cu.
var tmaSwap2 = map[string]bool{"s2x72": true, "s2x200": true, "s2x224": true}

// tiles is how many of the configuration's tiles cover an m x n output.
func (c tmaConfig) tiles(m, n int) int { return ceilDiv(m, c.rows) * ceilDiv(n, c.bn) }

// smem is the dynamic shared memory of the configuration's kernels that
// take a tile a block (tmaPlan.smem).
func (c tmaConfig) smem() int { return tmaPlan{cfg: c}.smem() }

// tmaMaxCluster is the largest split of K: the blocks of one output tile
// form a cluster (portable clusters hold at most 8) and add their partial
// tiles through each other's shared memory. A cluster's blocks must run at
// once on one GPC, whose sizes differ, so how many blocks of a split fit
// at once depends on the split, and not monotonically (an H100's driver
// counts 132, 117, 120, 110, 102, 105 and 120 places for clusters of 1 or
// 2 up to 8 blocks of one a multiprocessor): the planner weighs every
// split up to this one by that count (tmaSlots), not only powers of two.
const tmaMaxCluster = 8

// The cost model's constants, in k-tiles of one block's time: filling the
// pipeline before the first MMA, and the cluster's reduction of a split.
const (
	tmaFill   = 2
	tmaReduce = 2
)

// tmaReduceBlock is what each block of a split adds to the cluster's
// reduction when plans of different tile widths are compared, in k-tiles
// of a 128 x 128 tile, scaled by the tile's area: the partial tiles the
// cluster adds grow with both. BenchmarkGemm on an H100 at TinyLlama's M =
// 128 shapes: qkv on 128 x 128 tiles split 4 ways took 9.9 us, on 128 x
// 192 split 8 ways 11.3, though its waves and k-tiles cost less (the o
// projection: 9.7 against 10.8). The split of one tile's K keeps
// tmaReduce, with which its plans were measured.
const tmaReduceBlock = 1

// tmaWave is what a wave of blocks costs besides its k-tiles, in k-tiles of
// a 128 x 128 tile (about 0.28 us at the H100's peak), when plans of
// different tile widths are compared: the launch, the barriers' set-up,
// the pipeline's first loads, the epilogue. BenchmarkGemm on an H100 at
// TinyLlama's M = 256 shapes puts it near 8 us: one wave of 128 x 128
// blocks of 16 k-tiles (qkv, split two ways) took 12.4 us, one of 128 x
// 192 blocks of 8 took 12.5, and the o projection's 128 blocks in
// clusters of 4 (two waves where a GPC holds fewer) 16.8 against 12.0 in
// one wave of 88. With it, the prefill choices measured at M = 2048 hold
// (128 x 256 for o, gate_up, down and the LM head, 128 x 192 for qkv).
const tmaWave = 24

// tmaNarrowRows is the largest M planGemmTMA gives the 64-row tile.
const tmaNarrowRows = 64

// Up to tmaNarrowRows rows a narrow tile, K unsplit, is weighed against
// the 64 x 128 tile's split of K, which runs on the cp.async kernels
// (partial tiles through global memory, then a launch that adds them).
// Both stream W from HBM once: the narrow tiles on at most one block a
// multiprocessor, each block its k-tiles in turn, so that few blocks of
// many k-tiles take longer than W's bytes; the split at a lower rate, with
// a fixed cost besides. tmaPlan.smallCost puts a narrow plan at its waves
// (tmaNarrowKTile, tmaNarrowWave), but no less than one wave's set-up
// plus W's bytes at tmaHBMShare of the HBM's rate; the split at
// tmaSplitFixed plus W's bytes at tmaSplitShare, no less than
// tmaSplitFloor. BenchmarkGemm at M = 64, us, narrow against split (H100;
// H200):
//   - the split keeps Qwen3's o, 64 k-tiles on 32 blocks of 64 x 64
//     (12.8 against 10.9; 12.6 against 9.4), TinyLlama's down, 88
//     k-tiles (16.9 against 13.4; 16.7 against 11.0), and Llama-3.2-1B's,
//     128 (23.6 against 20.5; 23.7 against 15.3);
//   - Llama-3.1-8B's down, 224 k-tiles on 64 blocks, goes narrow on the
//     H100 (45.5 against 51.9), whose HBM the split streams at 2.3 TB/s,
//     and keeps the split on the H200 (41.8 against 36.9);
//   - the narrow tiles take Llama-3.1-8B's qkv (20.8 against 27.2; 17.4
//     against 21.1) and o (15.5 against 19.9; 14.0 against 15.0),
//     Llama-3.2-1B's gate_up (26.6 against 35.1, two waves of 64 x 64),
//     GPT-OSS-20B's qkv (13.8 against 18.7) and TinyLlama's qkv, o and
//     gate_up, where the split's fixed cost dominates (9.4 and 9.2 us on
//     the H200 for 10 and 8 MB of W).
const (
	tmaSplitFixed = 21 // about 6 us
	tmaSplitFloor = 34 // about 9.5 us
	// tmaHBMShare and tmaSplitShare are the shares of the HBM's copy
	// rate (Ceilings) at which the narrow tiles and the split stream W:
	// 2.6 and 2.3 TB/s of the H100's 3.0 measured, 3.3 and 3.2 of the
	// H200's 4.3.
	tmaHBMShare   = 0.8
	tmaSplitShare = 0.75
	// tmaUnitSec is the cost model's unit in seconds: a k-tile of a 128
	// x 128 tile at the H100's peak (tmaWave).
	tmaUnitSec = 0.28e-6
)

// tmaDevice is what planGemmTMA needs of the GPU: its multiprocessors;
// slots(cfg, s), the blocks of cfg in clusters of s it runs at once (nil:
// every multiprocessor's, uniformSlots); and unitBytes, the bytes of W it
// streams from HBM in one unit of the cost model (tmaUnitBytes).
type tmaDevice struct {
	sms       int
	slots     func(tmaConfig, int) int
	unitBytes float64
}

// tmaUnitBytes is unitBytes for the GPU named name: tmaHBMShare of its
// known copy rate, an H100's where none is known.
func tmaUnitBytes(name string) float64 {
	c, _, ok := KnownCeilings(name)
	if !ok {
		c, _, _ = KnownCeilings("H100")
	}
	return tmaHBMShare * c.BytesPerSec * tmaUnitSec
}

// smallCost is a narrow plan's cost up to tmaNarrowRows rows (E4M3 codes:
// tmaFP8NarrowRows), w the units W takes to stream from HBM at
// tmaHBMShare: its waves, or one wave's set-up and w where that is more.
func (p tmaPlan) smallCost(m, n int, slots func(tmaConfig, int) int, w float64) float64 {
	return max(p.cost(m, n, slots), tmaNarrowWave+w)
}

// deeper is p or q, q the 64 x 128 tile eight stages deep (wg1d) with K
// split by the cost model, for a GEMM of 33-64 rows: q where its blocks
// make one round of places and p is a split of 64 x 128 (the cp.async
// kernels' partials), a narrow tile in more than one round where q needs
// no split, or a narrow tile that leaves half the multiprocessors idle
// and gives each block at least tmaDeepKTiles k-tiles for each block it
// runs (the fewer blocks and the longer each one's stream, the more a
// split gains). Each q block reads X's k-tile once for 128 rows of W where the
// narrow ones read it for 64-96, and the split puts every multiprocessor
// to work. BenchmarkGemm(FP8) at M = 64 from a captured graph (H200, 2
// samples), us, the plan against q forced, cuBLASLt: 16-bit TinyLlama's o
// 7.18 / 6.37 / 5.87, qkv 7.25 / 6.75 / 6.20, down 10.98 / 9.75 / 10.77,
// Llama-3.2-1B's qkv 7.66 / 6.90 / 6.22, gate_up 20.84 / 18.38 / 19.17,
// down 15.41 / 12.68 / 13.51, Llama-3.1-8B's o 14.29 / 12.58 / 12.02, down
// 37.55 / 35.15 / 34.32, GPT-OSS-20B's o 13.46 / 9.73 / 9.73, Qwen3's o
// 9.07 / 8.40 / 9.39; E4M3 Llama-3.1-8B's down 29.91 / 26.42 / 24.45,
// Qwen3's o 11.52 / 10.31 / 10.02, Llama-3.2-1B's gate_up 17.96 / 14.45 /
// 14.79. It lost where the narrow blocks filled most of the GPU (the qkv
// of Llama-3.1-8B, GPT-OSS-20B and Qwen3, 2-19 %), or streamed fewer
// k-tiles (E4M3 TinyLlama's qkv and o and Llama-3.2-1B's qkv, 16 of 128
// codes, 3-4 %; Llama-3.1-8B's o, 64 blocks of 32, 5 %).
func (p tmaPlan) deeper(q tmaPlan, m, n, sms int, slots func(tmaConfig, int) int) tmaPlan {
	qb, pb := q.cfg.tiles(m, n)*q.splits, p.cfg.tiles(m, n)*p.splits
	switch {
	case qb > slots(q.cfg, q.splits):
		return p
	case p.cfg.name == "wg1" && p.splits > 1,
		p.cfg.narrow && pb > slots(p.cfg, 1) && q.splits == 1,
		p.cfg.narrow && 2*pb <= sms && float64(p.kps) >= tmaDeepKTiles*float64(pb):
		return q
	}
	return p
}

// tmaDeepKTiles: a narrow plan's k-tiles a block over its blocks from
// which deeper splits it on wg1d (E4M3 TinyLlama's o: 16 k-tiles on 32
// blocks, kept; 16-bit, 32 on 32, split).
const tmaDeepKTiles = 0.6

// tmaPlan is the launch of the TMA GEMM for one shape: splits blocks (a
// cluster) share each output tile, kps k-tiles each; blocks > 0 (K
// unsplit): that many persistent blocks take the tiles in turn
// (XRUN_CUDA_GEMM_PERSIST).
type tmaPlan struct {
	cfg         tmaConfig
	splits, kps int
	blocks      int
	// mc: W's loads multicast to clusters of the two row tiles of each
	// column tile (withMulticast; XRUN_CUDA_GEMM_MULTICAST).
	mc bool
}

// tmaMulticast: the configurations whose W loads withMulticast multicasts,
// the 128-row tiles, 64 x 176 and the swapped 80-, 88- and 104-row tiles.
var tmaMulticast = map[string]bool{"wg2": true, "wg2m": true, "wg2w": true, "wg2f": true, "wg1w": true, "s1x80": true, "s2x80": true, "s3x80": true, "s2x88": true, "s3x88": true, "s2x104": true, "s3x104": true}

// withMulticast is p with W's loads multicast to clusters of two blocks,
// the row tiles of one column tile (gemm_tma.cuh), where its launch allows
// it and it has been measured to pay: 16-bit values on the tiles of
// tmaMulticast, K unsplit (a split's cluster is its own), the m rows' row
// tiles even and, on persistent blocks, those blocks in pairs (slots2: the blocks the
// GPU runs at once in clusters of two). Each of W's tiles then crosses
// from L2 once for the pair where each block read all of it; cuBLASLt's
// kernels for a decode's GEMMs run in such pairs (Nsight Compute, H200, M
// = 256: TinyLlama's LM head and Llama-3.1-8B's gate_up on nvjet_..._1x2
// kernels in clusters of two, their L2 hit rate 34-36 % against the own
// kernels' 53 %). BenchmarkGemm on an H200, own against own-nomc, medians
// of 3: at M = 2048 every zoo shape as fast or faster (geometric mean
// 0.975, LM heads 0.958-0.981); at M = 256 the persistent 128 x 256 tiles
// (LM heads, gate_ups) 0.968, 128 x 176 1.00; but the narrow 64-row tiles
// at M = 128 and 256 1.08 (64 x 64), 1.02 (64 x 80) and 0.98 (64 x 96),
// and E4M3 codes on 128 x 128 at M = 256 1.04 (BenchmarkGemmFP8, nine
// shapes): those stay without. 64 x 176 where the planner takes it
// (tmaRoundFill; forced, two H200s, 20 launches a sample, medians of 10):
// TinyLlama's gate_up at M = 128 17.5 us against 19.4 without,
// GPT-OSS-20B's qkv at 256 19.6 against 20.0, Qwen3-30B-A3B's qkv 14.9
// against 14.5.
func (p tmaPlan) withMulticast(m, slots2 int, fp8 bool) tmaPlan {
	if fp8 || !tmaMulticast[p.cfg.name] || p.splits != 1 || ceilDiv(m, p.cfg.rows)%2 != 0 || p.blocks > 0 && slots2 < 2 {
		return p
	}
	if p.blocks > 0 {
		p.blocks = slots2 / 2 * 2
	}
	p.mc = true
	return p
}

// cluster is the launch's cluster shape: a clustered tile's (tmaClusters),
// the split's blocks of one tile along Z, or a multicast's two row tiles
// along X.
func (p tmaPlan) cluster() Dim3 {
	if c, ok := tmaClusters[p.cfg.name]; ok {
		return c.shape
	}
	if p.mc {
		return Dim3{X: 2, Y: 1, Z: 1}
	}
	return Dim3{X: 1, Y: 1, Z: max(p.splits, 1)}
}

// tmaPersist: the configurations with persistent kernels (gemm_tma.cu's
// GEMM_TMA_P, gemm_tma_swap_p.cu's GEMM_TMA_XP), for 16-bit values and
// E4M3 codes. The LM heads of a decode batch of 129-192 rows, on s2x160
// and wg3 (batchPlan), make 250-1,571 tiles, two rounds of blocks or
// more, which each block without them took launched afresh: its pipeline
// filled again, its stores under no loads. BenchmarkGemm(FP8) from a
// captured graph, one H200, 3 samples, over cuBLASLt, persistent against
// a block a tile (NOTES v60): the five LM heads at M = 136 / 160 16-bit
// 1.07-1.09 / 1.03-1.14 (1.12-1.26 / 1.08-1.23), E4M3 0.98-1.12 /
// 0.96-1.06 (1.17-1.35 / 1.15-1.26); on wg3 at 176 / 192 16-bit
// 1.08-1.14 / 1.01-1.10 (1.14-1.22 / 1.07-1.14), E4M3 0.94-1.07 /
// 0.94-1.02 (1.00-1.10 / 0.98-1.07); Llama-3.1-8B's gate_up 0.93-1.01x
// the time before (E4M3 0.89-0.98x).
var tmaPersist = map[string]bool{"wg2": true, "wg2m": true, "wg2w": true, "wg3": true, "s2x160": true, "s2x208": true, "s2x72": true, "s2x200": true, "s2x224": true}

// tmaSwapPersistStages is the stages of a swapped tile's persistent
// kernels (gemm_tma_swap_p.cu), which stage their outputs in shared
// memory of their own beside them (tmaPlan.smem): s2x160's six do not fit
// beside its 160 x 136 16-bit values, nor s2x208's five beside its 208 x
// 136; s2x224's four fit beside half of its 224 x 136 (tmaSwapPersistPasses).
var tmaSwapPersistStages = map[string]int{"s2x160": 5, "s2x208": 4, "s2x72": 8, "s2x200": 4, "s2x224": 4}

// tmaSwapPersistPasses is the passes in which a swapped tile's persistent
// kernels stage their outputs (gemm_tma_swap_p.cu's EPP), rows/passes of
// X each; 1 where absent.
var tmaSwapPersistPasses = map[string]int{"s2x224": 2}

// persist is p on persistent blocks, one for each of the places slots the
// GPU holds, where its launch allows it and gains by it: a configuration
// with those kernels, K unsplit, and more tiles of the m x
// n output (W's n rows; under GLU the fused 2n) than places, so that a
// block would otherwise be launched and filled again.
func (p tmaPlan) persist(m, n int, slots int) tmaPlan {
	if tiles := p.cfg.tiles(m, n); tmaPersist[p.cfg.name] && p.splits == 1 && slots > 0 && tiles > slots {
		p.blocks = slots
	}
	return p
}

// String is the plan as TestTMAPlansGolden and BenchmarkGemm show it: the
// tile (tmaConfigs), /S where K is split S ways, xB on B persistent blocks,
// mc where W is multicast to pairs of row tiles.
func (p tmaPlan) String() string {
	s := p.cfg.name
	switch {
	case p.blocks > 0:
		s += fmt.Sprintf(" x%d", p.blocks)
	case p.splits > 1:
		s += fmt.Sprintf("/%d", p.splits)
	}
	if p.mc {
		s += " mc"
	}
	return s
}

// stages is how many k-tiles the plan's kernel has in flight.
func (p tmaPlan) stages() int {
	if p.blocks > 0 && p.cfg.swap {
		return tmaSwapPersistStages[p.cfg.name]
	}
	return p.cfg.stages
}

// smem is the dynamic shared memory of the plan's kernel (gemm_tma.cuh):
// the stages (a tile row is 128 bytes), 1024 bytes to align the first on
// for the 128-byte swizzle, and two mbarriers a stage; a swapped tile's
// persistent kernel then its staged outputs, 16 bytes aligned, rows of the
// tile's bn + 8 16-bit values.
func (p tmaPlan) smem() int {
	st := p.stages()
	b := st*(p.cfg.rows+p.cfg.bn)*128 + 1024 + 16*st
	if p.blocks > 0 && p.cfg.swap {
		b += 16 + p.cfg.rows/max(1, tmaSwapPersistPasses[p.cfg.name])*(p.cfg.bn+8)*2
	}
	return b
}

// module is the kernel family holding the plan's kernels: the persistent
// ones gemm_tma_swap_p.cu (swapped tiles) or gemm_tma_p.cu, the others
// their configuration's.
func (p tmaPlan) module() string {
	switch {
	case p.blocks > 0 && p.cfg.swap:
		return "gemm_tma_swap_p"
	case p.blocks > 0:
		return "gemm_tma_p"
	}
	return p.cfg.module()
}

// unpersisted is p for GemmEpilogue's kernels: a swapped tile's persistent
// kernels have no epilogue, so there it runs a block a tile.
func (p tmaPlan) unpersisted() tmaPlan {
	if p.cfg.swap {
		p.blocks = 0
	}
	return p
}

// tile is the plan's part of its kernels' names.
func (p tmaPlan) tile() string {
	if p.blocks > 0 {
		return p.cfg.name + "_p"
	}
	return p.cfg.name
}

// planGemmTMA picks the tile (the one tile names; else, unless tile is
// "wide", at 129-192 rows batchPlan's (one row tile, or two of 80 rows)
// where it takes one, or s2x48 where swapTakes says; else by M: 64 x 128 up
// to M = 64, or a narrow tile where that would split K, and from 33 rows 64
// x 128 eight stages deep where tmaPlan.deeper says; above it 128 x 128 for
// E4M3 codes (above tmaFP8WideRows 128 x 256 where its rounds of persistent
// blocks fill), and for 16-bit values the 128 x 256 tile where it needs no
// split, else 128 x 128, or 128 x 192 where the cost model puts that below
// either: tmaPlan.cost; up to M = 256 128 x 176 or a narrow tile, unsplit,
// where the model puts it lower still, and above 64 rows 64 x 176 where its
// tiles fill one round (tmaRoundFill), unless tile is "wide"; at 129-144
// rows a narrow plan onto swapRound's swapped tiles), then the split of K:
// with waves (XRUN_CUDA_GEMM_WAVES) > 0 the smallest power of two that
// gives waves blocks a multiprocessor; else none where the tiles
// fill the GPU's slots, and otherwise the split up to tmaMaxCluster whose
// estimated time (waves of blocks times their k-tiles, plus the fill and
// the reduction) is least. slots(cfg, s) is how many blocks of cfg in
// clusters of s the GPU runs at once (nil: sms multiprocessors of cfg.perSM
// blocks each, as if clusters packed them all). gemm.yaml's batch 256 with
// `disable` on an H100: 78,287 and 78,174 output tok/s with every split
// weighed, 75,911, 75,790 and 75,542 with powers of two only (o and down
// split 3 ways, 96 blocks in one wave, where 2 ways left 64 and 4 ways
// needed two waves).
func planGemmTMA(m, n, k int, d tmaDevice, fp8 bool, tile string, waves int) tmaPlan {
	sms, slots := d.sms, d.slots
	if slots == nil {
		slots = func(c tmaConfig, s int) int { return uniformSlots(sms, c, s) }
	}
	split := func(cfg tmaConfig) tmaPlan { return splitGemmTMA(cfg, m, n, k, sms, slots, fp8, waves) }
	if _, ok := tmaConfigs[tile]; ok {
		return split(tmaConfigs[tile])
	}
	// narrow is p, or where p splits K the narrow tile, unsplit, that
	// smallCost puts below the split: where HBM bounds several narrow
	// tiles alike, the one of fewer waves (TinyLlama's gate_up on 118
	// blocks of 64 x 96, one wave, not 176 of 64 x 64: 14.8 against 18.1
	// us, H200). E4M3 codes alike, W a byte an element (a k-tile of 128
	// codes moves the bytes of 64 values).
	narrow := func(p tmaPlan) tmaPlan {
		if tile == "wide" || p.splits == 1 {
			return p
		}
		es := 2.0
		if fp8 {
			es = 1
		}
		w := float64(n) * float64(k) * es / d.unitBytes
		best, bestWaves := max(tmaSplitFloor, tmaSplitFixed+w*tmaHBMShare/tmaSplitShare), 0.0
		for _, name := range tmaNarrow {
			q := split(tmaConfigs[name])
			if c, cw := q.smallCost(m, n, slots, w), q.cost(m, n, slots); c < best || c == best && cw < bestWaves {
				p, best, bestWaves = q, c, cw
			}
		}
		return p
	}
	if tile != "wide" {
		if q, ok := batchPlan(m, n, k, fp8, split, slots); ok {
			return q
		}
		if swapTakes(m, n, k) {
			return split(tmaConfigs["s2x48"])
		}
	}
	switch {
	case m <= tmaNarrowRows:
		// 64 x 128, unless it needs K split (which runs on the cp.async
		// kernels, tmaPlanFor) and a narrow tile, unsplit, costs less
		// (smallCost): TinyLlama's qkv and o on 64 x 64, gate_up on 64 x
		// 96, at M = 64 (BenchmarkGemm, H200: 7.50, 6.99 and 14.69 us
		// against the split's 9.93, 10.40 and 20.29, cuBLASLt's 7.69,
		// 7.52 and 15.35); down's 88 k-tiles keep the split (11.2 against
		// 16.6 on 64 x 64). BenchmarkGemmFP8 on an H200 at M = 64 timed
		// the narrow tiles below the 64 x 128 split on the zoo's
		// projections (TinyLlama's o 11.5 us against 18.9, GPT-OSS-20B's
		// qkv 15.4 against 20.6).
		p := narrow(split(tmaConfigs["wg1"]))
		if tile != "wide" && m > tmaNarrowRows/2 {
			p = p.deeper(split(tmaConfigs["wg1d"]), m, n, sms, slots)
		}
		if q, ok := kpCodes(p, m, n, fp8, split, slots); ok && tile != "wide" {
			p = q
		}
		return p
	case !fp8:
		// 128 x 256 where the tiles fill the GPU unsplit; where K must
		// be split, 128 x 128 (BenchmarkGemm, H200, M = 256, split:
		// qkv 11.1 us against 13.2 on 128 x 256, gate_up 33.5 against
		// 43.9).
		p := split(tmaConfigs["wg2w"])
		if p.splits != 1 {
			p = split(tmaConfigs["wg2"])
		}
		// 128 x 192 where its waves are cheaper: TinyLlama's gate_up at M
		// = 256 is 118 tiles, one wave on 132 multiprocessors, where 128
		// x 128 needs two (176 tiles) and 128 x 256 (88) a split
		// (BenchmarkGemm, H100: 29.5 us against 36.2 on 128 x 128); at M
		// = 128, 59 tiles split two ways, one wave, where 128 x 128's
		// split of 4 takes three (24.4 us against 32.6).
		if q := split(tmaConfigs["wg2m"]); q.cost(m, n, slots) < p.cost(m, n, slots) {
			p = q
		}
		// Up to tmaSmallRows, the tiles sized for a decode's outputs where
		// the model puts them below: 128 x 176, and the narrow ones (no
		// split to reduce, one warpgroup's MMAs a block). Tile "wide"
		// leaves them out.
		if tile != "wide" && m <= tmaSmallRows {
			for _, name := range append([]string{"wg2f"}, tmaNarrow...) {
				if q := split(tmaConfigs[name]); q.cost(m, n, slots) < p.cost(m, n, slots) {
					p = q
				}
			}
			// Above tmaNarrowRows, 64 x 176 where its tiles make one
			// round at least tmaRoundFill full, whatever the model says
			// (its narrow k-tile is calibrated on 64-96 columns).
			if q := split(tmaConfigs["wg1w"]); m > tmaNarrowRows && (q.fillsRound(m, n, slots) || rowWaste(m, 128) > rowWaste(m, 64) && p.cfg.rows == 128 && q.fillsRoundBy(m, n, slots, tmaRoundFillRagged)) {
				p = q
			}
			if q, ok := kpPlan(m, n, k, split, slots); ok {
				p = q
			}
			p = swapRound(p, m, n, k, fp8, slots)
			if q, ok := kpWide(p, m, n, k, slots); ok {
				p = q
			}
			if q, ok := narrowCluster(p, m, n, slots); ok {
				p = q
			}
			p = pastRowsPlan(p, m, n, k, fp8, slots, waves)
			if waves == 0 {
				p = wideSplit(p, m, fp8, split)
			}
			if m > tmaNarrowRows && p.cfg.name == "wg1s" && p.splits == 1 {
				// 64 x 64 on two consumers of 32 columns each (h1s), whose
				// per-k-tile chains are half wg1s's one consumer's. One
				// H200, 3 samples, over cuBLASLt (BenchmarkGemm, NOTES
				// v64), through the plan against wg1s forced: TinyLlama's
				// qkv at 96-192 rows 1.01-1.11 against 1.07-1.16, its o at
				// 96-256 1.02-1.13 against 1.09-1.19, Llama-3.2-1B's qkv at
				// 128 1.06 against 1.12 (at 96 1.13 both). The alternating
				// p1s ran 1.12-1.18 where wg1s was planned at 128 / 256.
				p = tmaPlan{cfg: tmaConfigs["h1s"], splits: 1, kps: p.kps}
			}
		}
		if tile != "wide" {
			p = aboveBatchPlan(p, m, n, k, fp8, slots)
		}
		return p
	default:
		// E4M3 codes: 128 x 128, and above tmaFP8WideRows 128 x 256 where its
		// tiles outnumber the places (persistent blocks) and fill their
		// last round nearly as well (tmaFP8WideFill): BenchmarkGemmFP8 on
		// an H200 at M = 2048 timed 128 x 256 at 0.91-0.97x 128 x 128's
		// time on the LM heads, gate_ups, and Llama-3.1-8B's qkv, o and
		// down (256-12,576 tiles), and at 1.03-1.22x where its tiles were
		// one round (128: TinyLlama's o and down, Qwen3-30B-A3B's o) or
		// left the last round a fifth empty or more (160-320: the qkv of
		// TinyLlama, Qwen3 and GPT-OSS-20B); TinyLlama's gate_up (704
		// tiles, 5.3 rounds) 1.03x. At M = 256, on persistent blocks and
		// with the epilogue's scales read once a tile, the same rule takes
		// it for the LM heads and Llama-3.1-8B's gate_up, 0.87-0.97x 128 x
		// 128's time; the other shapes there make fewer tiles than places.
		p := split(tmaConfigs["wg2"])
		if m > tmaFP8WideRows {
			q := split(tmaConfigs["wg2w"])
			t256, t128 := q.cfg.tiles(m, n), p.cfg.tiles(m, n)
			s256, s128 := slots(q.cfg, 1), slots(p.cfg, 1)
			if q.splits == 1 && t256 > s256 && roundFill(t256, s256) >= tmaFP8WideFill*roundFill(t128, s128) {
				p = q
			}
		}
		// From two row tiles up to tmaSmallRows, 128 x 176 or 128 x 192 in
		// one round of places where 128 x 128, unsplit, takes more: the
		// cost model's waves, whose split costs are not calibrated for
		// codes (it puts Llama-3.1-8B's qkv at M = 256 on 128 x 192 split
		// two ways at half the time of 128 x 128 split four; both ran 25
		// us), are weighed only there. TinyLlama's gate_up at M = 256:
		// 128 tiles of 128 x 176 in 23.2 us, 118 of 128 x 192 in 24.7,
		// 176 of 128 x 128 (two rounds) in 29.9 (BenchmarkGemmFP8, H200,
		// NOTES v47; v49: 25.2 on 128 x 192, 28.2 persistent 128 x 128).
		if tile != "wide" && p.splits == 1 && m > tmaFP8WideRows && m <= tmaSmallRows && p.cfg.tiles(m, n) > slots(p.cfg, 1) {
			for _, name := range []string{"wg2m", "wg2f"} {
				q := split(tmaConfigs[name])
				if q.splits == 1 && q.cfg.tiles(m, n) <= slots(q.cfg, 1) && q.cost(m, n, slots) < p.cost(m, n, slots) {
					p = q
				}
			}
		}
		// Up to tmaFP8NarrowRows and tmaFP8NarrowK, where 128 x 128 splits
		// K, the narrow tiles unsplit as at M <= tmaNarrowRows; above
		// tmaFP8RoundRows only where they make one round of places.
		if m <= tmaFP8NarrowRows && (k <= tmaFP8NarrowK || rowWaste(m, 128) > rowWaste(m, 64)) {
			if q := narrow(p); m <= tmaFP8RoundRows || q.cfg.tiles(m, n) <= slots(q.cfg, 1) {
				p = q
			}
		}
		if tile != "wide" {
			if q, ok := kpCodes(p, m, n, fp8, split, slots); ok {
				p = q
			}
			p = pastRowsPlan(p, m, n, k, fp8, slots, waves)
			p = swapRound(p, m, n, k, fp8, slots)
			p = aboveBatchPlan(p, m, n, k, fp8, slots)
		}
		return p
	}
}

// aboveBatchPlan is p moved by the rules for tmaSmallRows < m <=
// tmaRoundRows, both dtypes alike: roundPlan, then rows160Plan.
func aboveBatchPlan(p tmaPlan, m, n, k int, fp8 bool, slots func(tmaConfig, int) int) tmaPlan {
	if q, ok := roundPlan(p, m, n, k, fp8, slots); ok {
		p = q
	}
	if q, ok := rows160Plan(p, m, n, k, fp8, slots); ok {
		p = q
	}
	return p
}

// tmaRoundRows bounds roundPlan: above tmaSmallRows, the rows of X it was
// timed at (a prefill chunk's, or a decode batch with prompts beside it).
const tmaRoundRows = 1024

// tmaRoundTiles are the tiles roundPlan weighs: 128 rows of X by 64 to 256
// of W, the first of those that cost alike taken.
var tmaRoundTiles = []string{"wg2", "wg2m", "wg2w", "wg2f", "w2x64", "w2x80", "w2x96"}

// roundPlan is, for an m x n GEMM over k of tmaSmallRows < m <=
// tmaRoundRows rows, the tile of tmaRoundTiles, K unsplit, whose tiles
// make one round of places at the least cost (tmaPlan.cost), where that is
// below p's. Above tmaSmallRows the planner had weighed 128 x 128, 192 and
// 256 alone (E4M3 codes 128 and 256), and split K where their tiles left
// the GPU half idle, or ran two rounds: one H200, 2 samples (forward and
// reversed), over cuBLASLt, M = 384 / 512 / 768 / 1,024, the split plans
// at 1.15-1.50x on the projections of 2,048-3,072 outputs (16-bit
// TinyLlama's o 1.50 / 1.29 / 1.37 on 128 x 128 or 192 split two ways,
// E4M3 GPT-OSS-20B's o 1.52 at 384 split three ways), and E4M3 codes in
// two rounds at 1.19-1.45x (Llama-3.1-8B's qkv at 384, GPT-OSS-20B's o at
// 768), where one round of 128 x 64, 80 or 96 tiles (cuBLASLt's form at
// M = 193-256, NOTES v67) ran 0.95-1.18x (TinyLlama's o 1.14 / 1.05 /
// 1.14, E4M3 GPT-OSS-20B's o 0.98 at 384) and of 128 x 176 or 192
// 1.00-1.16x (E4M3 Llama-3.1-8B's qkv 1.16 at 384, 1.00 at 512).
func roundPlan(p tmaPlan, m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaSmallRows || m > tmaRoundRows {
		return p, false
	}
	kps := ceilDiv(k, tmaKTile(fp8))
	best, bestCost, ok := p, p.cost(m, n, slots), false
	for _, name := range tmaRoundTiles {
		q := tmaPlan{cfg: tmaConfigs[name], splits: 1, kps: kps}
		if q.cfg.tiles(m, n) > slots(q.cfg, 1) {
			continue
		}
		if c := q.cost(m, n, slots); c < bestCost {
			best, bestCost, ok = q, c, true
		}
	}
	return best, ok
}

// rows160Plan is, for an m x n GEMM over k of tmaSmallRows < m <= 320
// rows, s2x160 K unsplit (on persistent blocks where its tiles outnumber
// the places: tmaPlanFor) in place of p's three row tiles of 128 where
// those outnumber the places or s2x160 costs less (tmaPlan.cost): two
// row tiles of 160 compute 0-63 rows past M, three of 128 64-127. Forced,
// one H200, 1 sample, over cuBLASLt, M = 272 / 300 (NOTES v71): the
// 16-bit LM heads 1.18-1.21 / 1.08-1.19 on s2x160 against 1.40-1.57 /
// 1.27-1.48 on 128 x 256, Llama-3.2-1B's gate_up 1.20 / 1.21 against 1.39
// / 1.33, Llama-3.1-8B's qkv 1.19 / 1.19 against 1.31 / 1.33 on 128 x
// 176; E4M3 at 300 the LM heads 1.02-1.12 against 1.13-1.27, the gate_ups
// of Llama-3.1-8B and Llama-3.2-1B 1.07 / 1.06 against 1.17 / 1.21.
// TinyLlama's gate_up (132 tiles of 128 x 256, one round) keeps its
// plan: on s2x160 1.33 / 1.24 against 1.26 / 1.31 (E4M3 1.24 against
// 1.13), as do the projections of one round of 128 x 64-96 (roundPlan).
// At 340 rows s2x176's two row tiles tied or lost on the LM heads.
func rows160Plan(p tmaPlan, m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	q := tmaPlan{cfg: tmaConfigs["s2x160"], splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}
	if m <= tmaSmallRows || m > 2*q.cfg.rows || p.cfg.rows != 128 || p.cfg.swap {
		return p, false
	}
	if p.splits == 1 && p.cfg.tiles(m, n) > slots(p.cfg, 1) || q.cost(m, n, slots) < p.cost(m, n, slots) {
		return q, true
	}
	return p, false
}

// tmaSwapRoundRows and tmaSwapRoundFill bound where swapRound moves a
// narrow plan: above tmaKPRows up to three row tiles of 48 rows, onto
// tiles that fill one round of places at least tmaSwapRoundFill full.
const (
	tmaSwapRoundRows = 144
	tmaSwapRoundFill = 0.7
)

// tmaSwapRound: the swapped tiles swapRound weighs.
var tmaSwapRound = []string{"p1x48", "s2x32", "s2x48"}

// swapRound is p, or for an m x n GEMM over k that p puts on a narrow
// 64-row tile (wg1s, wg1n, wg1m; E4M3 codes wg1n, wg1m) at tmaKPRows < M
// <= tmaSwapRoundRows the swapped tile of 48 or 32 rows of X
// (tmaSwapRound; E4M3 codes those of 128 rows of W), K unsplit, of the
// most tiles in one round of places at least tmaSwapRoundFill full. There
// the 64-row tiles compute 48-63 rows past M (three row tiles), the
// 48-row ones at most 15. Forced at M = 136 first (NOTES v60), then the
// rule against the plan before, alternated on one H200, 3 samples, over
// cuBLASLt, M = 130 / 136 / 144: 16-bit TinyLlama's qkv on s1x48 (120
// tiles of 132 places) 1.16 / 1.16 / 1.15 against 1.33 / 1.31 / 1.26 on
// wg1s, its o on s1x48 (96) 1.15 / 1.15 / 1.16 against 1.24 / 1.21 /
// 1.17, Llama-3.2-1B's qkv on s2x32 (120) 1.00 / 1.26 / 1.24 against 1.07
// / 1.33 / 1.30 on wg1n; E4M3 Llama-3.1-8B's o on s2x48 (96) 1.16 / 1.09
// / 1.12 against 1.36 / 1.26 / 1.26 on wg1m, GPT-OSS-20B's o on s2x32
// (115) 1.18 / 1.05 / 1.09 against 1.28 / 1.18 / 1.18 on wg1n,
// Llama-3.2-1B's qkv 1.02 / 1.01 / 1.02 against 1.11 / 1.08 / 1.05. E4M3
// TinyLlama's qkv and o, at 1.03-1.09 on wg1s, lost on s1x48 (1.00-1.06x)
// and tied on s2x32 (0.98-1.02x). At M = 160 (four row tiles of 48, five
// of 32) the forced tiles tied or lost. 16-bit values take 48 x 64 on two
// consumers taking alternate k-tiles (p1x48), as cuBLASLt runs its 64-row
// tiles of W: forced, one H200, 2 samples, over cuBLASLt, M = 130 / 136 /
// 144, TinyLlama's qkv 1.03 / 1.11 / 1.10 against s1x48's 1.08 / 1.15 /
// 1.15, its o 1.10 / 1.11 / 1.06 against 1.15 / 1.15 / 1.10 (NOTES v62).
func swapRound(p tmaPlan, m, n, k int, fp8 bool, slots func(tmaConfig, int) int) tmaPlan {
	if !slices.Contains(tmaNarrow, p.cfg.name) || fp8 && p.cfg.name == "wg1s" || m <= tmaKPRows || m > tmaSwapRoundRows {
		return p
	}
	best, most := p, 0
	for _, name := range tmaSwapRound {
		if fp8 && tmaConfigs[name].bn < 128 {
			continue // 64 rows of W a block
		}
		q := tmaPlan{cfg: tmaConfigs[name], splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}
		if t := q.cfg.tiles(m, n); q.fillsRoundBy(m, n, slots, tmaSwapRoundFill) && t > most {
			best, most = q, t
		}
	}
	return best
}

// tmaKPMinRows, tmaKPRows and tmaKPMaxKTiles bound where planGemmTMA takes
// an alternating tile (kpPlan): 16-bit GEMMs of two row tiles of 64, the
// second more than half full (tmaKPMinRows < M <= tmaKPRows), in one round
// of places, each block's k-tiles at most tmaKPMaxKTiles; 64 x 64 where
// that round splits K two ways (the single consumer's 64 blocks become 128
// of half the k-tiles), else 64 x 96 unsplit; failing both, 64 x 64
// unsplit over at most tmaKPWideMaxKTiles. BenchmarkGemm from a captured
// graph, one H200, 3 samples, us, the rule against 03ed30e's plan and
// cuBLASLt (NOTES v56), M = 128: TinyLlama's o on 64 x 64 split two ways (16
// k-tiles) 6.52 / 6.78 / 6.25, its down (44) 11.84 / 11.87 / 12.89,
// Qwen3-30B-A3B's o (32) 9.55 / 10.37 / 10.26; on 64 x 96 unsplit
// GPT-OSS-20B's qkv (45) 12.54 / 13.17 / 10.79, Qwen3-30B-A3B's qkv (32)
// 9.24 / 9.82 / 8.01; at M = 112 likewise, but Qwen3-30B-A3B's qkv 9.74 /
// 9.58. The forms left out lost or tied: 64 x 64 unsplit (TinyLlama's qkv
// 7.21 against wg1s's 7.08), 64 x 96 split two ways (its qkv 7.58 against
// 7.16), either split three ways (its o on 64 x 96 7.22), blocks of 64
// k-tiles (Llama-3.2-1B's down 15.86 against 14.95, Llama-3.1-8B's o 15.28
// against 14.47). At M = 96 the plans lost 3.5-8 % (TinyLlama's down 13.29
// against 12.30), and at M = 256 they won nowhere by more than 2.5 %.
// With the producer's loop on uniform registers (NOTES v65) 64 x 64 unsplit
// over 49-64 k-tiles won where neither form fits (NOTES v66, one
// H200, 5 samples, over cuBLASLt, M = 104 / 112 / 128): GPT-OSS-20B's o
// 1.09 / 1.09 / 1.09 against 128 x 128 split four ways 1.17 / 1.16 / 1.15,
// Llama-3.1-8B's o 1.21 / 0.96 / 1.01 against split three ways 1.24 / 0.97
// / 1.05.
const (
	tmaKPMinRows   = 96
	tmaKPRows      = 128
	tmaKPMaxKTiles = 48
	tmaKPMaxSplit  = 2
)

// kpPlan is the alternating tile planGemmTMA takes for a 16-bit m x n GEMM,
// if any (tmaKPRows); split is its split of K for a configuration.
func kpPlan(m, n, k int, split func(tmaConfig) tmaPlan, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaKPMinRows || m > tmaKPRows {
		return tmaPlan{}, false
	}
	for _, c := range []struct {
		name   string
		splits int
	}{{"p1s", 2}, {"p1m", 1}} {
		q := split(tmaConfigs[c.name])
		if q.splits == c.splits && q.kps <= tmaKPMaxKTiles && q.cfg.tiles(m, n)*q.splits <= slots(q.cfg, q.splits) {
			return q, true
		}
	}
	// Else 64 x 64 unsplit over up to tmaKPWideMaxKTiles k-tiles a block,
	// its tiles one round.
	q := tmaPlan{cfg: tmaConfigs["p1s"], splits: 1, kps: ceilDiv(k, tmaKTile(false))}
	if q.kps > tmaKPMaxKTiles && q.kps <= tmaKPWideMaxKTiles && q.cfg.tiles(m, n) <= slots(q.cfg, 1) {
		return q, true
	}
	return tmaPlan{}, false
}

// batchPlan is the tile planGemmTMA takes for an m x n GEMM over k of
// tmaKPRows < M <= 192 rows (a decode batch), if any, 16-bit or E4M3.
// First, up to 136 rows, one row tile of 64 rows of W (narrowRow), up to
// 144 two of 72 rows of X by 64 of W (narrowPair), and for E4M3 codes
// three or four of 48 (narrowCodes). Then, up to 176 rows, two row tiles
// (80 rows of X up to 160, 88 up to 176) by 128 rows of W (s2x80, s2x88)
// with K unsplit where their blocks fill a round of places more than
// tmaBatchRowFill; up to 144 rows s2x48 in their place where its three row
// tiles make a round (rowRound). Then one row tile: 160 x 128 (s2x160,
// swapped) up to 160 rows, 192 x 128 (wg3) above, and for 16-bit values
// at 161-176 176 x 128 (s2x176) where it splits K;
// taken unsplit where its tiles fill a round of places (tmaRoundFill),
// split where each block keeps tmaBatchMinKTiles k-tiles or more and the
// blocks fill tmaBatchSplitFill of a round of the split's places; a 16-bit
// split of four ways or more on the pair of 192-row tiles instead where
// those fit (splitPair). Else, up to 176 rows, the two row tiles again:
// the narrow outputs over long K (swapTakes' shapes; E4M3 codes above K =
// 4,096) on s2x80 or s2x88 split by the cost model, the others on 192 rows
// of W (s3x80, s3x88; W multicast to the pair unsplit; for E4M3 codes
// unsplit only) under the same bounds, its unsplit round tmaBatchPairFill
// full. It comes before the other tiles and s2x48 (swapTakes): where the
// 128-row tiles leave 96 of 256 rows past M at M = 160, these leave none
// (s2x160, s2x176, s2x80) or a sixth (wg3 at 160; at 176 a twelfth).
//
// BenchmarkGemm from a captured graph, one H200, 2 samples, forced, over
// cuBLASLt (NOTES v57), against the plan before: at M = 144 and 160
// s2x160 1.02-1.23 on the LM heads (the plan 1.15-1.41), the gate_ups of
// Llama-3.2-1B and Llama-3.1-8B 1.05-1.15 (1.21-1.41), split Llama-3.1-8B's
// down (three ways) 1.02-1.07 (1.57-1.79), o 0.99-1.05 (1.15-1.18), qkv
// (two) 1.16-1.17 (1.40-1.50), Llama-3.2-1B's down (six) 1.04-1.08
// (1.26-1.39), GPT-OSS-20B's o (four) 1.05-1.23 (1.20-1.50); at M = 176
// wg3 likewise 1.06-1.22 on those shapes against 1.15-1.44. The splits
// left out lost: fewer k-tiles a block (TinyLlama's gate_up in four, 8:
// 1.99 against 1.32; its qkv and o, Llama-3.2-1B's qkv and GPT-OSS-20B's
// qkv, 5-9 k-tiles: 1.28-1.87 against 0.98-1.31; Qwen3-30B-A3B's o in six,
// 11: 1.23 against 1.10 at 144), and too few blocks for the round
// (Qwen3-30B-A3B's qkv in two, 80 blocks of 132 places: 1.33 against 1.22
// at 160, 1.34 against 1.04 at 192). The swapped 192-row tile (s2x192) ran
// within a few percent of wg3 at 176 and 192. The one-row-tile rule
// against the plan before it, alternated on one H200, 3 samples: of the
// 20 shapes within 15 % of cuBLASLt at M = 136 10 (before: 2), 144 11
// (4), 160 14 (6), 176 14 (8), 192 17 (16); geometric mean of the times
// 0.87-0.94 at 136-176.
//
// The 80-row tiles (NOTES v58; cuBLASLt runs TinyLlama's gate_up at M =
// 136-176 as 192 rows of W by 72-88 of X, its down at 160 as 128 x 80
// split four ways): alternated against the plan before on one H200, 3
// samples, over cuBLASLt, at M = 136 / 144 / 160: TinyLlama's gate_up on
// s3x80 1.14 / 1.12 / 1.08 (wg2f 1.42 / 1.37 / 1.28), its down on s2x80
// split three ways 1.13 / 1.10 / 1.08 (s2x48 1.18 / 1.15 / 1.28),
// GPT-OSS-20B's qkv on s3x80 split two ways 1.07 / 1.28 / 1.18 (wg1w 1.24
// / 1.41 / 1.27), Qwen3-30B-A3B's o 1.14 / 1.12 / 0.99 (1.13 / 1.13 /
// 1.12) and qkv 1.19 / 1.34 / 1.24 (1.23 / 1.35 / 1.21); gemm.yaml at
// batch 160 with `disable` 70,722 and 70,282 output tok/s against 67,256
// and 67,162 (both builds with a kernel change since reverted that slowed
// the narrow tiles; the final build's narrow tiles ran as before it).
// s2x176 at M = 176 against wg3: the splits 0.94-0.98x its time
// (Llama-3.1-8B's down 1.03 against 1.10 of cuBLASLt's), the unsplit LM
// heads 1.02-1.03x, which keep wg3.
//
// s2x80 unsplit first, where its blocks fill more than half a round (NOTES
// v59): the qkv projections of 5,120-6,144 outputs, alternated against the
// plan before on one H200, 3 samples, over cuBLASLt, at M = 136 / 144 /
// 160: 16-bit GPT-OSS-20B's 1.21 / 1.11 / 1.10 (s3x80 split two ways 1.34
// / 1.23 / 1.21), Llama-3.1-8B's 1.11 / 1.12 / 1.04 (s2x160 split two
// ways 1.21 / 1.22 / 1.13), Qwen3-30B-A3B's 0.87 / 1.19 / 1.12 (1.00 /
// 1.34 / 1.26); E4M3 GPT-OSS-20B's 1.20 / 1.06 / 1.09 (128 x 128 1.53 /
// 1.39 / 1.33), Llama-3.1-8B's 1.18 / 1.08 / 1.07 (1.24 / 1.19 / 1.19),
// Qwen3-30B-A3B's 1.18 / 1.12 / 1.10 (1.48 / 1.33 / 1.19).
//
// E4M3 codes take the 80-row tiles too (NOTES v59), s3x80 unsplit only: in
// the same runs TinyLlama's gate_up on s3x80 1.10 / 1.14 / 1.10 (wg2f 1.31
// / 1.36 / 1.28), its down on s2x80 split three ways 1.11 / 1.09 / 1.03
// (s2x48 split two ways 1.14 / 1.13 / 1.12), Llama-3.2-1B's down 1.07 /
// 1.07 / 0.96 (1.10 / 1.09 / 1.08); Qwen3-30B-A3B's o, K = 4,096, 1.09 /
// 1.11 / 1.14 against 1.07 / 1.09 / 1.16, and at 168 / 176 1.15 / 1.09
// against 1.10 / 1.04, keeps s2x48.
//
// At 161-176 rows the same on 88-row tiles (s2x88, s3x88; NOTES v59),
// alternated against the plan before, 3 samples, over cuBLASLt, M = 168
// / 176: 16-bit TinyLlama's gate_up on s3x88 1.14 / 1.11 (wg2f 1.29 /
// 1.23), its down on s2x88 split three ways 1.07 / 0.94 (s2x48 1.17 /
// 1.02), the qkv projections on s2x88 unsplit 1.03-1.06 / 0.99-1.12
// (1.07-1.16 / 1.06-1.19); E4M3 the qkv projections 1.06-1.11 /
// 1.08-1.13 (1.17-1.22 / 1.18-1.23), TinyLlama's gate_up 1.21 / 1.20
// (1.32 / 1.30); gemm.yaml at batch 176 with `disable` 76,072 and 76,212
// output tok/s against 73,660 and 73,474.
//
// The one-row-tile rule for E4M3 codes, BenchmarkGemmFP8, the rule
// against the plan before, alternated on one H200, 3 samples, over
// cuBLASLt's FP8 (k-tiles of 128 codes): Llama-3.1-8B's down at 144 / 160 /
// 176 0.94 / 0.92 / 0.92 (1.28 / 1.25 / 1.03), gate_up 1.18 / 1.08 / 0.99
// (1.68 / 1.42 / 1.20), the LM heads 1.15-1.33 / 1.04-1.24 / 1.00-1.17
// (1.38-1.75 / 1.33-1.59 / 1.14-1.47); within 15 % at M = 144 9 of 20
// (before 8), 160 9 (6), 176 16 (10), 192 16 (11); geometric mean of the
// times 0.88 / 0.90 / 0.93 / 0.95. The splits it leaves out lost
// (Llama-3.1-8B's o, 11 k-tiles a block: 1.37 on wg3 at 160 against
// 1.17).
func batchPlan(m, n, k int, fp8 bool, split func(tmaConfig) tmaPlan, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaKPRows || m > tmaConfigs["wg3"].rows {
		return tmaPlan{}, false
	}
	if p, ok := narrowRow(m, n, k, fp8, slots); ok {
		return p, true
	}
	if p, ok := narrowPair(m, n, k, fp8, slots); ok {
		return p, true
	}
	if p, ok := narrowCodes(m, n, k, fp8, slots); ok {
		return p, true
	}
	// The two row tiles that cover m rows, if any: of 80 rows up to 160,
	// of 88 up to 176.
	two, three := "", ""
	switch {
	case m <= 2*tmaConfigs["s2x80"].rows:
		two, three = "s2x80", "s3x80"
	case m <= 2*tmaConfigs["s2x88"].rows:
		two, three = "s2x88", "s3x88"
	}
	if two != "" {
		// K unsplit where their blocks fill most of one round: the qkv
		// projections of 5,120-6,144 outputs, which the one-row tile would
		// split or leave to 64 x 176.
		if p := (tmaPlan{cfg: tmaConfigs[two], splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}); p.fillsRoundBy(m, n, slots, tmaBatchRowFill) {
			// Up to three row tiles of 48, s2x48 unsplit where its blocks
			// make one round tmaSwapRoundFill full (rowRound).
			if q, ok := rowRound(m, n, k, fp8, slots); ok {
				return q, true
			}
			return p, true
		}
	}
	one := "wg3"
	if m <= tmaConfigs["s2x160"].rows {
		one = "s2x160"
	}
	q := split(tmaConfigs[one])
	ok := q.batchFits(m, n, slots, tmaRoundFill)
	if ok && !fp8 && two != "" {
		// A split of four ways or more on the pair of row tiles of 192
		// rows of W (splitPair).
		if r, ok := splitPair(q, three, m, n, k, slots); ok {
			return r, true
		}
	}
	if ok && q.splits > 1 && !fp8 && m > tmaConfigs["s2x160"].rows && m <= tmaConfigs["s2x176"].rows {
		// A split at 161-176 rows on s2x176, none of its rows past M; its
		// tiles staged for the store cost where wg3's unsplit tiles store
		// from registers.
		if r := split(tmaConfigs["s2x176"]); r.splits > 1 && r.batchFits(m, n, slots, tmaRoundFill) {
			return r, true
		}
	}
	if ok {
		return q, true
	}
	if two == "" {
		return tmaPlan{}, false
	}
	// Narrow outputs over long K split on 128 rows of W (swapTakes'
	// shapes; E4M3 codes above K = 4,096, where Qwen3-30B-A3B's o, 32
	// k-tiles, ran at 1.02-1.06x s2x48's time at M = 136, 144, 168 and
	// 176), the others on 192 under the same bounds.
	if n <= tmaSwapN && k >= tmaSwapK && (!fp8 || k > tmaSwapK) {
		return split(tmaConfigs[two]), true
	}
	// E4M3 codes unsplit only: Llama-3.1-8B's o split two ways, 16
	// k-tiles a block, ran at 1.31 of cuBLASLt's time against 1.18 on the
	// narrow 64 x 96 at M = 160 (one sample, NOTES v58).
	q = split(tmaConfigs[three])
	return q, (!fp8 || q.splits == 1) && q.batchFits(m, n, slots, tmaBatchPairFill)
}

// narrowRow is the plan batchPlan takes first for an m x n GEMM over k of
// tmaKPRows < M <= 136 rows, 16-bit or E4M3, if any: one row tile of 136
// rows of X by 64 of W on two consumers (p1x136), K unsplit or split two
// ways, where each block keeps tmaNarrowRowMinKTiles to
// tmaNarrowRowMaxKTiles k-tiles (E4M3 codes unsplit) and the blocks make
// one round of places at least tmaSwapRoundFill full. cuBLASLt runs
// Llama-3.1-8B's qkv at M = 136 on that tile, 96 blocks, K unsplit
// (Nsight Compute, H200, NOTES v61).
// BenchmarkGemm(FP8) from a captured graph, one H200, forced, 2 samples
// (E4M3 1), us, at M = 130 / 136: 16-bit Llama-3.1-8B's qkv 19.9 / 20.0
// against the plan's 21.1 / 20.4 (s2x80, W multicast), its o split two
// ways (128 blocks of 32 k-tiles) 14.5 / 14.6 against 16.4 / 16.4 (s2x160
// split three ways); E4M3 its qkv 16.7 / 16.8 against 18.7 / 18.3. Blocks
// of 16 k-tiles lost (Llama-3.2-1B's qkv split two ways 9.1 / 9.0 against
// 8.7 / 8.5), as did four-way splits (GPT-OSS-20B's and Qwen3-30B-A3B's
// qkv 1.8-2.1x the plan's time). The tile runs on two consumers taking
// alternate k-tiles (p1x136), as cuBLASLt's: forced, one H200, 2 samples,
// over cuBLASLt, M = 130 / 136, 16-bit Llama-3.1-8B's o 1.10 / 0.95
// against s1x136's 1.13 / 0.98, its qkv 1.14 / 1.10 against 1.15 / 1.10;
// E4M3 its qkv 1.05 / 1.05 against 1.07 / 1.07 (NOTES v62).
func narrowRow(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	c := tmaConfigs["p1x136"]
	if m <= tmaKPRows || m > c.rows {
		return tmaPlan{}, false
	}
	kt, most := ceilDiv(k, tmaKTile(fp8)), 2
	if fp8 {
		// E4M3 codes unsplit: their one-row splits (Llama-3.1-8B's down
		// on s2x160 three ways, 0.92-0.94x cuBLASLt's time, NOTES v58)
		// were not timed against it.
		most = 1
	}
	for s := 1; s <= most; s++ {
		p := splitKTiles(c, kt, s)
		blocks, places := c.tiles(m, n)*s, slots(c, s)
		if p.splits == s && p.kps >= tmaNarrowRowMinKTiles && p.kps <= tmaNarrowRowMaxKTiles &&
			blocks <= places && float64(blocks) >= tmaSwapRoundFill*float64(places) {
			return p, true
		}
	}
	return tmaPlan{}, false
}

// tmaNarrowRowMinKTiles and tmaNarrowRowMaxKTiles bound narrowRow's
// k-tiles a block: the o and qkv projections it timed (32 and 64); the
// long-K downs (112 and more a block split two ways) keep the plans they
// had.
const (
	tmaNarrowRowMinKTiles = 32
	tmaNarrowRowMaxKTiles = 64
)

// narrowPair is the plan batchPlan takes for an m x n GEMM over k of
// tmaKPRows < M <= 144 rows after narrowRow, 16-bit or E4M3, if any: two
// row tiles of 72 rows of X by 64 of W on two consumers taking alternate
// k-tiles (p1x72), K unsplit, where each block keeps tmaNarrowRowMinKTiles to
// tmaNarrowRowMaxKTiles k-tiles and the blocks make one round of places at
// least tmaSwapRoundFill full. cuBLASLt runs Llama-3.2-1B's qkv at M = 136
// on 64 x 72, 96 blocks, K unsplit, 384 threads (Nsight Compute, H200,
// NOTES v61). BenchmarkGemm from a captured graph, one H200, forced, 2
// samples, over cuBLASLt, M = 130 / 136 / 144 (NOTES v62): Llama-3.2-1B's
// qkv 1.16 / 1.16 / 1.15 against the plan's 1.29 / 1.25 / 1.24 (s2x32),
// Llama-3.1-8B's o at 144 (128 blocks) 0.95 against 1.01 (s2x160 split
// three ways); E4M3 its o 1.08 / 1.04 / 1.10 against 1.17 / 1.10 / 1.14
// (s2x48). GPT-OSS-20B's o (90 blocks, 68 % of a round) tied its plan
// (1.28 / 1.28 / 1.22 against 1.27 / 1.25 / 1.20, v61), as did E4M3
// Llama-3.2-1B's qkv (16 k-tiles of 128 codes) on s2x32.
//
// For 16-bit values at tmaNarrowRowMaxKTiles k-tiles a block (K = 4,096)
// the pair of row tiles runs as a cluster whose blocks each load half of
// W's tile into both (p1x72c21), where its blocks fill a round at least
// tmaRoundFillRagged full: GPT-OSS-20B's o (90 blocks) and Llama-3.1-8B's
// (128). BenchmarkGemm from a captured graph, one H200, 3 samples, over
// cuBLASLt (NOTES v63). Forced unsplit at M = 136 / 144: GPT-OSS-20B's o
// 1.22 / 1.17 against p1x72's 1.28 / 1.23, Llama-3.1-8B's o 1.03 / 0.92
// against 1.10 / 0.97, Qwen3-30B-A3B's o (64 blocks) 1.23 / 1.25 against
// 1.32 / 1.34 (its plan, s2x80 split three ways, 1.11); at 32 k-tiles it
// tied or lost (Llama-3.2-1B's qkv 1.15 / 1.15 against 1.14 / 1.13,
// TinyLlama's qkv 1.09 / 1.10 against 1.07 / 1.08), and clusters
// multicasting X too (1 x 3, 2 x 3) lost to both. Through the plan at 130
// / 136 / 144: GPT-OSS-20B's o 1.22 / 1.19 / 1.16 against the plan
// before's 1.28 / 1.24 / 1.19 (s3x80 split four ways), Llama-3.1-8B's o
// at 144 0.92 against 1.00 (p1x72).
func narrowPair(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	c := tmaConfigs["p1x72"]
	kt := ceilDiv(k, tmaKTile(fp8))
	if m <= tmaKPRows || m > 2*c.rows || kt < tmaNarrowRowMinKTiles || kt > tmaNarrowRowMaxKTiles {
		return tmaPlan{}, false
	}
	if q := tmaConfigs["p1x72c21"]; !fp8 && kt == tmaNarrowRowMaxKTiles {
		if t, s := q.tiles(m, n), slots(q, 2); t <= s && float64(t) >= tmaRoundFillRagged*float64(s) {
			return tmaPlan{cfg: q, splits: 1, kps: kt}, true
		}
	}
	p := tmaPlan{cfg: c, splits: 1, kps: kt}
	return p, p.fillsRoundBy(m, n, slots, tmaSwapRoundFill)
}

// tmaClusterMinKTiles is the fewest k-tiles a block streams for
// narrowCluster to multicast W in four row tiles: at 32 (K = 2,048) the
// clusters tied or lost (NOTES v63, v64; TinyLlama's qkv at 256 1.16-1.17
// on p1mc41 / p1mc42 against p1m's 1.07 in v65). In two row tiles
// tmaClusterPairMinKTiles: with the producer's loop on uniform registers
// Qwen3-30B-A3B's qkv (32) ran 1.05 / 1.09 / 1.11 on p1mc21 against p1m's
// 1.11 / 1.14 / 1.15 at M = 104 / 112 / 128 (one H200, 5 samples, over
// cuBLASLt, NOTES v66).
const (
	tmaClusterMinKTiles     = 45
	tmaClusterPairMinKTiles = 32
)

// tmaClusterNarrow: narrowCluster's clustered 64 x 96 tiles by the row
// tiles they join, in the order it weighs them.
var tmaClusterNarrow = map[int][]string{2: {"p1mc21"}, 4: {"p1mc42", "p1mc41"}}

// narrowCluster is the plan for a 16-bit m x n GEMM whose plan p is
// 64 x 96 (wg1m or p1m) with K unsplit, in two or four row tiles, each
// block streaming at least tmaClusterPairMinKTiles or tmaClusterMinKTiles
// k-tiles, if its clusters
// fit one round: the 64 x 96 tile on alternating consumers in clusters of
// the row tiles of a column tile, each block loading a half or a quarter
// of W's tile into them all (p1mc21, p1mc41), so that L2 serves W's bytes
// once for them; in four row tiles first in clusters of two column tiles
// as well, each block loading half of X's box into both (p1mc42,
// cuBLASLt's shape for GPT-OSS-20B's o at M = 256: Nsight Compute, H200,
// NOTES v62). BenchmarkGemm from a captured graph, one H200, forced, 3
// samples, over cuBLASLt (NOTES v64): GPT-OSS-20B's o at 256 1.22 on
// p1mc41 against wg1m's 1.34 and p1m's 1.31; at 128 GPT-OSS-20B's qkv
// 1.12 on p1mc21 against p1m's 1.15 and Llama-3.1-8B's 1.11 against
// wg1m's 1.15. There p1mc42 lost (1.31) while the producer's issue bound
// the narrow tiles; with the producer's loop on uniform registers (NOTES
// v65, 2 and 3 samples) GPT-OSS-20B's o at 256 ran 1.13 on p1mc42
// against 1.15-1.21 on p1mc41 and 1.24-1.26 on p1m. W's multicast gains
// little over 32 k-tiles a block (TinyLlama's qkv at 256 1.18 on p1mc41
// against p1m's 1.18, Llama-3.2-1B's on p1mc21 1.18 against 1.17: v64).
func narrowCluster(p tmaPlan, m, n int, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	rt := ceilDiv(m, 64)
	names, ok := tmaClusterNarrow[rt]
	if !ok || p.splits != 1 || p.cfg.name != "wg1m" && p.cfg.name != "p1m" || p.kps < tmaClusterMinKTiles && (rt != 2 || p.kps < tmaClusterPairMinKTiles) {
		return tmaPlan{}, false
	}
	for _, name := range names {
		q, sh := tmaConfigs[name], tmaClusters[name].shape
		if clusterBlocks(q, m, n) <= slots(q, sh.X*sh.Y) {
			return tmaPlan{cfg: q, splits: 1, kps: p.kps}, true
		}
	}
	return tmaPlan{}, false
}

// clusterBlocks is the blocks tmaPlan.grid launches for an m x n output
// on the clustered configuration c, K unsplit: whole clusters, those past
// M or N among them.
func clusterBlocks(c tmaConfig, m, n int) int {
	sh := tmaClusters[c.name].shape
	return ceilDiv(ceilDiv(m, c.rows), sh.X) * sh.X * ceilDiv(ceilDiv(n, c.bn), sh.Y) * sh.Y
}

// tmaKPWideMaxKTiles bounds kpWide's k-tiles a block: TinyLlama's down at
// M = 256 (88) tied on p1m (1.155 against 1.150 on 128 x 128 split three
// ways, NOTES v65).
const tmaKPWideMaxKTiles = 64

// kpWide is the plan for a 16-bit m x n GEMM over k at tmaKPRows < M <=
// tmaSmallRows whose plan p is a narrow tile of one consumer (wg1n, wg1m)
// with K unsplit, or 128-row tiles splitting K, if any: 64 x 96 on two
// consumers taking alternate k-tiles (p1m), K unsplit, where its tiles
// make one round of places and each block streams at most
// tmaKPWideMaxKTiles. With the producer's loop on uniform registers the
// alternating tile's consumers no longer wait on its loads (NOTES v65):
// BenchmarkGemm from a captured graph, one H200, forced, 2-3 samples, over
// cuBLASLt, M = 256: TinyLlama's qkv 1.07-1.09 against wg1n's 1.22-1.23,
// Llama-3.2-1B's qkv 1.07 against wg1m's 1.14-1.19, Qwen3-30B-A3B's o
// 1.12-1.14 against 128 x 128 split three ways 1.18-1.24; M = 160 / 192,
// Llama-3.2-1B's qkv 1.20 / 0.97 against wg1n's 1.24 / 1.12. TinyLlama's
// o kept h1s (1.10 against p1m's 1.12). narrowCluster then takes the
// plans of 45 k-tiles or more into clusters: Qwen3-30B-A3B's o at M =
// 200 / 232 / 256, 5 samples, ran 1.13 / 1.14 / 1.13 on p1mc42 against
// p1m's 1.68 / 1.26 / 1.10, whose last row tile's ragged X box cost it
// most at 200 (p1mc41 1.26 / 1.15 / 1.15).
func kpWide(p tmaPlan, m, n, k int, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaKPRows || m > tmaSmallRows {
		return tmaPlan{}, false
	}
	narrow := p.splits == 1 && (p.cfg.name == "wg1n" || p.cfg.name == "wg1m")
	if !narrow && (p.splits == 1 || p.cfg.rows != 128 || p.cfg.swap) {
		return tmaPlan{}, false
	}
	c := tmaConfigs["p1m"]
	q := tmaPlan{cfg: c, splits: 1, kps: ceilDiv(k, tmaKTile(false))}
	return q, q.kps <= tmaKPWideMaxKTiles && c.tiles(m, n) <= slots(c, 1)
}

// tmaKPCodesFill and tmaKPCodesMaxKTiles bound kpCodes: its blocks fill
// at least tmaKPCodesFill of one round of places (64 blocks of 132 won,
// below that none was timed), each streaming at most tmaKPCodesMaxKTiles
// k-tiles of 128 codes (Llama-3.2-1B's down at 256 rows, 64, won;
// Llama-3.1-8B's down at 128, 112, was not timed, and kpWide keeps 16-bit
// blocks to 64 too).
const (
	tmaKPCodesFill      = 0.45
	tmaKPCodesMaxKTiles = 64
)

// kpCodes is the plan for an E4M3 m x n GEMM of tmaNarrowRows/2 < M <=
// tmaSmallRows whose plan p splits K on unswapped tiles, if any: 64 x 64
// on two consumers taking alternate k-tiles (p1s), K split as an alternating
// tile's split takes it (two ways at most, one round of places), where its
// blocks fill tmaKPCodesFill of the round and each streams at most
// tmaKPCodesMaxKTiles k-tiles. The plans it replaces split K on 64 x 128
// (wg1d) or 128 x 128 into clusters whose reduction costs what the
// alternating consumers save. BenchmarkGemmFP8 from a captured graph, one
// H200, 3 samples, over cuBLASLt's FP8 (NOTES v67), the rule against the
// old plan's tile forced: TinyLlama's down (44 k-tiles) at 80 / 96 / 112 /
// 128 rows 0.98 / 1.02 / 0.98 / 1.02 on p1s split two ways against
// 1.14 / 1.20 / 1.19 / 1.21 (128 x 128 split six ways), at 208 / 224 / 240
// / 256 0.96 / 0.99 / 1.02 / 1.01 unsplit against 1.10 / 1.13 / 1.17 /
// 1.16 (split three ways); Llama-3.2-1B's down (64) 0.93-0.97 against
// 1.03-1.07 and 0.95-1.06 against 1.00-1.13; GPT-OSS-20B's o at 48 / 64
// 1.00 / 1.04 against 1.14 / 1.17 (64 x 128 split four ways),
// Llama-3.1-8B's down 0.99 / 0.99 against 1.08 / 1.08 (three ways);
// TinyLlama's and Llama-3.2-1B's downs at 64 rows, 64 blocks, 0.85 and
// 0.87 against 0.93 and 0.89 (six ways).
func kpCodes(p tmaPlan, m, n int, fp8 bool, split func(tmaConfig) tmaPlan, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if !fp8 || p.splits == 1 || p.cfg.swap || m <= tmaNarrowRows/2 || m > tmaSmallRows {
		return tmaPlan{}, false
	}
	q := split(tmaConfigs["p1s"])
	blocks, places := q.cfg.tiles(m, n)*q.splits, slots(q.cfg, q.splits)
	return q, q.kps <= tmaKPCodesMaxKTiles && blocks <= places && float64(blocks) >= tmaKPCodesFill*float64(places)
}

// pastRowsPlan is p, or for an m x n GEMM over k past wg3's 192 rows the
// plan pairPlan takes, over it widePlan's or else thirdsPlan's, if any;
// p where XRUN_CUDA_GEMM_WAVES sets the splits (waves).
func pastRowsPlan(p tmaPlan, m, n, k int, fp8 bool, slots func(tmaConfig, int) int, waves int) tmaPlan {
	if waves != 0 {
		return p
	}
	if q, ok := pairPlan(m, n, k, fp8, slots); ok {
		p = q
	}
	if q, ok := widePlan(m, n, k, fp8, slots); ok {
		return q
	}
	if q, ok := thirdsPlan(m, n, k, fp8, slots); ok {
		return q
	}
	if q, ok := twoRowsPlan(p, m, n, slots); ok {
		return q
	}
	return p
}

// twoRowsPlan is the plan for an m x n GEMM at 193-224 rows whose plan p
// is narrowCluster's (64 x 96 on alternating consumers in clusters, four
// row tiles of 64 rows of X, up to 63 past M), if any: 64 rows of W by
// 112 of X on alternating consumers, two row tiles (up to 31 rows past
// M), W multicast to the pair (p1x112c21), K unsplit as p's, where its
// clusters make one round at least tmaRoundFillRagged full: GPT-OSS-20B's
// o, 90 blocks of 64 k-tiles. cuBLASLt runs it at 216 on 64 x 112 tiles
// in clusters (Nsight Compute, H200, NOTES v70). BenchmarkGemm from a
// captured graph, one H200, 3 samples, over cuBLASLt (NOTES v70), M = 193
// / 200 / 208 / 216 / 224: through the plan 1.10 / 1.13 / 1.13 / 1.10 /
// 1.13 against p1mc42's 1.20 / 1.18 / 1.20 / 1.17 / 1.16 forced; p1x112
// unclustered 1.10-1.18, p1x112c22 1.18-1.23. Not for E4M3 codes
// (GPT-OSS-20B's o 1.03-1.05 against wg1m's 1.01-1.02, 2 samples), nor
// Llama-3.1-8B's o (pairPlan's w2x64 0.92-1.04, p1x112 0.97-1.05).
func twoRowsPlan(p tmaPlan, m, n int, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if c, ok := tmaClusters[p.cfg.name]; !ok || c.twin != "p1m" || p.splits != 1 || m <= tmaConfigs["wg3"].rows || m > 2*tmaConfigs["p1x112"].rows {
		return tmaPlan{}, false
	}
	q, sh := tmaConfigs["p1x112c21"], tmaClusters["p1x112c21"].shape
	blocks, places := clusterBlocks(q, m, n), slots(q, sh.X*sh.Y)
	return tmaPlan{cfg: q, splits: 1, kps: p.kps}, blocks <= places && float64(blocks) >= tmaRoundFillRagged*float64(places)
}

// tmaPairFill and tmaPairMaxK bound pairPlan: its tiles fill at least
// tmaPairFill of one round of places (108-128 blocks of 132 timed), over K
// of at most tmaPairMaxK (timed up to 4,096).
const (
	tmaPairFill = 0.8
	tmaPairMaxK = 4096
)

// pairPlan is the plan for an m x n GEMM over k, 16-bit or E4M3, of two
// row tiles of 128 rows past one of 192 (wg3's) up to tmaSmallRows, if
// any: 128 rows of X by 64 of W (w2x64) where its tiles make one round of
// places, else by 96 (w2x96) where those do, K unsplit, the round at least
// tmaPairFill full and K at most tmaPairMaxK (planGemmTMA: not where
// XRUN_CUDA_GEMM_WAVES sets the splits); W not multicast, which lost on
// them in 5 of 7 shapes forced. cuBLASLt runs E4M3 projections of
// 4,096-6,144 outputs at M = 256 on such tiles (tmaConfigs).
// BenchmarkGemm(FP8) from a captured graph, one H200, 3 samples, over
// cuBLASLt (NOTES v67), through the plan against the old plan's tile
// forced, M = 208 / 224 / 240: 16-bit Llama-3.1-8B's o on w2x64 0.95 /
// 1.09 / 0.90 against 1.02 / 1.17 / 1.03 (128 x 128 split two ways), its
// qkv on w2x96 1.05 / 1.16 / 1.08 against 1.18 / 1.19 / 1.22 (128 x 192
// split two ways), GPT-OSS-20B's qkv 1.07 / 1.07 / 1.02 against 1.14 /
// 1.09 / 1.06 (64 x 176, W multicast), Qwen3-30B-A3B's 1.05 / 1.09 / 1.04
// against 1.11 / 1.14 / 1.09; E4M3 Llama-3.1-8B's o 1.00 / 0.98 / 0.92
// against 1.20 / 1.17 / 1.10, its qkv 0.97 / 0.93 / 1.05 against 1.08 /
// 1.02 / 1.16 (128 x 128), the qkv of GPT-OSS-20B and Qwen3-30B-A3B 1.06-1.14
// against 1.13-1.19 (as 64 x 176 with W multicast, 1.08-1.13). At 256 the
// zoo's 16-bit and E4M3 projections all came within 15 % with it. Forced,
// w2x80 where w2x64 takes two rounds lost to w2x96 (GPT-OSS-20B's 16-bit
// qkv 1.17 against 1.12) or tied; w2x96 in 86 blocks lost (Llama-3.1-8B's
// o, which the cost model then splits four ways, 1.60-1.96).
func pairPlan(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaConfigs["wg3"].rows || m > tmaSmallRows || k > tmaPairMaxK {
		return tmaPlan{}, false
	}
	for _, name := range []string{"w2x64", "w2x96"} {
		c := tmaConfigs[name]
		if t, s := c.tiles(m, n), slots(c, 1); t <= s {
			return tmaPlan{cfg: c, splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}, float64(t) >= tmaPairFill*float64(s)
		}
	}
	return tmaPlan{}, false
}

// tmaWideFill and tmaWideSplitFill bound widePlan's 16-bit plans: s2x208's
// tiles fill at least tmaWideFill of a round of places, else s3x104's
// blocks make one round at least tmaWideSplitFill full.
const (
	tmaWideFill      = 0.9
	tmaWideSplitFill = 0.8
)

// widePlan is the plan for an m x n GEMM over k, 16-bit or E4M3, of
// 193-224 rows (past wg3's 192, within one row tile of s2x224), if any:
// 128 rows of W by all of X's on two consumers (s2x200 up to 200 rows,
// s2x208 up to 208, s2x224 up to 224: the one computing fewest rows past
// M), K unsplit, where its tiles outnumber the places (then on persistent
// blocks, tmaPlan.persist) or, for 16-bit values, fill a round at
// least tmaWideFill; else, for 16-bit values up to 208 rows, 192 rows of
// W by 104 of X on three consumers (s3x104) where its blocks make one
// round at least tmaWideSplitFill full (planGemmTMA: not where
// XRUN_CUDA_GEMM_WAVES sets the splits). The 128-row tiles the plans took
// there compute two row tiles of X, up to 63 rows past M.
// BenchmarkGemm(FP8) from a captured
// graph, one H200, 3 samples, over cuBLASLt (NOTES v68), forced against
// the plan before, M = 193 / 200 / 208: the five 16-bit LM heads on
// persistent s2x208 1.04-1.12 / 1.03-1.12 / 1.01-1.10 against 1.19-1.30 /
// 1.18-1.28 / 1.14-1.24 (128 x 256 persistent, W multicast), a block a
// tile 1.06-1.25; Llama-3.1-8B's gate_up 1.09 / 1.06 / 1.01 against 1.29
// / 1.25 / 1.20, Llama-3.2-1B's (128 tiles) 1.16 / 1.11 / 1.06 against
// 1.25 / 1.24 / 1.19; TinyLlama's gate_up on s3x104 (118 blocks, W
// multicast) 1.10 / 1.12 / 1.11 against 1.16 / 1.19 / 1.17 (128 x 176),
// where s2x208's 88 tiles split four ways took 2.0. E4M3 codes at 208:
// Llama-3.1-8B's gate_up and LM head and TinyLlama's LM head 0.91
// against 1.03-1.09; through the plan at 193-208 the five E4M3 LM heads
// and Llama-3.1-8B's gate_up 0.90-1.04. Not for E4M3 codes in one round:
// Llama-3.2-1B's gate_up 1.16-1.21 against 1.07-1.12 on 128 x 128
// persistent, TinyLlama's on s2x208 or s3x104 1.38 / 1.17 against 1.17.
// s2x200 against s2x208, both forced, three runs of 3 samples (NOTES v69),
// M = 193 / 200: 16-bit Llama-3.2-1B's gate_up 1.07-1.15 / 1.12-1.19
// against 1.11-1.23 / 1.11-1.18, TinyLlama's LM head 1.02-1.06 /
// 0.99-1.09 against 1.04-1.08 / 1.02-1.13; through the plan against
// s2x208 forced, E4M3 LM heads and Llama-3.1-8B's gate_up 0.91-0.96
// against 0.92-0.98. s2x224 at M = 216 / 224 against 128 x 256 (W
// multicast, persistent), 3 samples (NOTES v69): 16-bit a block a tile
// 1.10-1.20 / 1.02-1.15 against 1.13-1.23 / 1.10-1.18 (the LM heads over
// K of 2,048 tied or lost up to 3 %, those over 2,880-4,096 and the
// gate_ups gained 1-10 %), E4M3 persistent 0.97-1.06 / 0.90-1.00 against
// 1.00-1.11 / 0.96-1.07 (Llama-3.1-8B's gate_up at 216 lost, 1.06
// against 1.00). s2x224 persistent on four stages, its outputs staged in
// two passes (tmaSwapPersistPasses), against a block a tile on five, 3
// samples (NOTES v70), M = 216 / 224: the 16-bit LM heads 0.97-1.06 /
// 1.00-1.05 against 1.04-1.19 / 1.03-1.18, Llama-3.1-8B's gate_up 1.08 /
// 1.01 against 1.19 / 1.08; E4M3 0.95-1.01 / 0.88-0.98, where three
// stages had run 0.97-1.06 / 0.90-1.00.
func widePlan(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	if m <= tmaConfigs["wg3"].rows || m > tmaConfigs["s2x224"].rows {
		return tmaPlan{}, false
	}
	// The tile of one row tile computing the fewest rows past M.
	var c tmaConfig
	for _, name := range []string{"s2x224", "s2x208", "s2x200"} {
		if m <= tmaConfigs[name].rows {
			c = tmaConfigs[name]
		}
	}
	kps := ceilDiv(k, tmaKTile(fp8))
	if t, s := c.tiles(m, n), slots(c, 1); t > s || !fp8 && float64(t) >= tmaWideFill*float64(s) {
		return tmaPlan{cfg: c, splits: 1, kps: kps}, true
	}
	q := tmaPlan{cfg: tmaConfigs["s3x104"], splits: 1, kps: kps}
	return q, !fp8 && wideRows(m) && q.fillsRoundBy(m, n, slots, tmaWideSplitFill)
}

// tmaThirdsRows, tmaThirdsRounds and tmaThirdsMinKTiles,
// tmaThirdsMaxKTiles bound thirdsPlan: three row tiles of 72 past wg3's
// 192; E4M3 codes on persistent blocks in at most two rounds; p1x72's
// blocks 33-64 k-tiles each (the one o projection timed streams 64).
const (
	tmaThirdsRows      = 216
	tmaThirdsRounds    = 2
	tmaThirdsMinKTiles = 33
	tmaThirdsMaxKTiles = 64
)

// thirdsPlan is the plan for an m x n GEMM over k of 193-216 rows (three
// row tiles of 72) where widePlan takes none, if any, K unsplit: for
// 16-bit values 128 rows of W by 72 of X (s2x72) where its tiles make one
// round of places at least tmaPairFill full over K of at most
// tmaPairMaxK, in place of pairPlan's w2x96, whose two row tiles of 128
// compute up to 63 rows past M where three of 72 compute up to 23 (the
// qkv projections of 5,120 outputs, 120 tiles), else 64 rows of W by 72
// of X on two consumers taking alternate k-tiles (p1x72) where its blocks
// make one round at least
// tmaRoundFillRagged full, each streaming tmaThirdsMinKTiles to
// tmaThirdsMaxKTiles k-tiles (Qwen3-30B-A3B's o, 96 blocks); for E4M3
// codes s2x72 where its tiles outnumber the places in at most
// tmaThirdsRounds rounds at least tmaWideFill full (then on persistent
// blocks, tmaPlan.persist: TinyLlama's gate_up, 264 tiles). cuBLASLt runs
// GPT-OSS-20B's 16-bit qkv at 200 on 128 x 72, Qwen3-30B-A3B's o at 193
// on 64 x 72 (12 stages, as p1x72), E4M3 TinyLlama's gate_up at 208 on
// 128 x 72 persistent (Nsight Compute, H200, NOTES v68). BenchmarkGemm(FP8)
// from a captured graph, one H200, 3 samples, over cuBLASLt (NOTES v69),
// forced against the plan before, M = 193 / 200 / 208 / 216: 16-bit
// GPT-OSS-20B's qkv 0.97 / 0.87 / 1.02 / 1.05 against 1.04 / 0.95 / 1.18
// / 1.22 (w2x96), Qwen3-30B-A3B's 0.91 / 1.02 / 0.95 / 1.04 against 0.95
// / 1.07 / 1.01 / 1.11, its o on p1x72 1.04 / 1.04 / 0.89 (193-208)
// against 1.13 / 1.12 / 0.99 (p1mc42); E4M3 TinyLlama's gate_up 1.14 /
// 1.15 / 1.13 / 1.14 against 1.18 / 1.18 / 1.16 / 1.17 (wg2f). Not: E4M3
// GPT-OSS-20B's qkv, 1.14-1.17 against w2x96's 1.11-1.15; E4M3 in more
// rounds, where each column tile's third read of W costs more than the
// rounds' fill saves (Llama-3.2-1B's gate_up, 2.9 rounds, 1.12-1.18
// against 1.08-1.12 on 128 x 128 persistent; Llama-3.1-8B's LM head at
// 216, 23 rounds, 1.28 against 1.12); 16-bit TinyLlama's gate_up, 1.12 /
// 0.96 / 1.00 against s3x104's 1.05 / 0.92 / 0.98; GPT-OSS-20B's o on
// p1x72, 135 blocks in two rounds, 1.60-1.62 against 1.13-1.15.
func thirdsPlan(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	c := tmaConfigs["s2x72"]
	if m <= tmaConfigs["wg3"].rows || m > tmaThirdsRows {
		return tmaPlan{}, false
	}
	kps := ceilDiv(k, tmaKTile(fp8))
	p := tmaPlan{cfg: c, splits: 1, kps: kps}
	if t, s := c.tiles(m, n), slots(c, 1); fp8 {
		return p, t > s && t <= tmaThirdsRounds*s && roundFill(t, s) >= tmaWideFill
	}
	if k <= tmaPairMaxK && p.fillsRoundBy(m, n, slots, tmaPairFill) {
		return p, true
	}
	q := tmaPlan{cfg: tmaConfigs["p1x72"], splits: 1, kps: kps}
	return q, kps >= tmaThirdsMinKTiles && kps <= tmaThirdsMaxKTiles && q.fillsRoundBy(m, n, slots, tmaRoundFillRagged)
}

// wideRows is whether widePlan weighs s3x104 and wideSplit s2x104 for m
// rows: past wg3's one row tile of 192, within their two of 104.
func wideRows(m int) bool { return m > tmaConfigs["wg3"].rows && m <= tmaConfigs["s2x208"].rows }

// wideSplit is p, or for 16-bit values where p splits K on a 128-row tile
// at widePlan's 193-208 rows, 128 rows of W by 104 of X (s2x104, two row
// tiles) at its own split: the downs, whose 2,048-4,096 outputs make too
// few tiles to go unsplit. BenchmarkGemm from a captured graph, one H200,
// 2 samples, over cuBLASLt (NOTES v68), forced against the plan, M = 193
// / 200 / 208: TinyLlama's down 1.08 / 1.07 / 1.03 (split three ways)
// against 1.17 / 1.19 / 1.16 (128 x 128 split three ways), Llama-3.2-1B's
// 1.07 / 1.04 / 1.01 against 1.21 / 1.24 / 1.19, Llama-3.1-8B's 1.07 /
// 1.06 / 1.02 (two ways) against 1.15 / 1.14 / 1.10; s3x104 and s2x208
// split 1.08-1.46, w2x64 1.09-1.26. Through the plan, 3 samples: the
// three downs 1.04-1.11.
func wideSplit(p tmaPlan, m int, fp8 bool, split func(tmaConfig) tmaPlan) tmaPlan {
	if fp8 || p.splits == 1 || p.cfg.rows != 128 || p.cfg.swap || !wideRows(m) {
		return p
	}
	return split(tmaConfigs["s2x104"])
}

// narrowCodes is the plan batchPlan takes for E4M3 codes, m x n over k, at
// 129-192 rows (three or four row tiles of 48) after narrowPair, if any:
// 48 rows of X by 64 of W on two consumers taking alternate k-tiles
// (p1x48), K unsplit, where each block keeps tmaNarrowCodesMinKTiles to
// tmaNarrowCodesMaxKTiles k-tiles of 128 codes and the blocks make one
// round of places at least tmaSwapRoundFill full: the o projections of
// 2,048 outputs, and at 129-144 rows TinyLlama's qkv. BenchmarkGemmFP8
// from a captured graph, one H200, over cuBLASLt's FP8 (NOTES v62). Forced,
// 3 samples, M = 130 / 136 / 144: TinyLlama's qkv 0.95 / 0.98 / 0.94
// against the plan's 1.09 / 1.07 / 1.02 (wg1s), its o 0.96 / 0.97 / 0.96
// against 1.08 / 1.06 / 1.05, Qwen3-30B-A3B's o 1.07 / 1.01 / 1.05 against
// 1.13 / 1.07 / 1.08 (s2x48 split two ways); the rule at 129-144 against
// the plan before, alternated, 3 samples: 0.94 / 0.99 / 0.97 against 1.08
// / 1.07 / 1.04, 0.96 / 0.99 / 0.97 against 1.09 / 1.07 / 1.04, 1.07 /
// 1.05 / 1.06 against 1.13 / 1.11 / 1.10. At 145-192 likewise, M = 152 /
// 160 / 176 / 192: Qwen3-30B-A3B's o 1.10 / 1.11 / 1.04 / 1.03 against
// 1.16 / 1.16 / 1.10 / 1.08, TinyLlama's o 0.95 / 0.96 / 0.97 / 0.98 against 0.97 / 1.00 / 1.01
// / 1.03 (wg1s). 16-bit values lost (TinyLlama's o 1.177 against wg1s's
// 1.132 at 160), as did TinyLlama's qkv at 160 (160 blocks, two rounds:
// 1.40 against 1.05).
func narrowCodes(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	c := tmaConfigs["p1x48"]
	p := tmaPlan{cfg: c, splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}
	return p, fp8 && m > tmaKPRows && m <= 4*c.rows && p.kps >= tmaNarrowCodesMinKTiles && p.kps <= tmaNarrowCodesMaxKTiles &&
		p.fillsRoundBy(m, n, slots, tmaSwapRoundFill)
}

// tmaNarrowCodesMinKTiles and tmaNarrowCodesMaxKTiles bound narrowCodes's
// k-tiles a block: the o projections it timed; the downs of 2,048 outputs
// (44-64 k-tiles) keep the split on s2x80 they had (1.03-1.11 of
// cuBLASLt's time, NOTES v59).
const (
	tmaNarrowCodesMinKTiles = 16
	tmaNarrowCodesMaxKTiles = 32
)

// rowRound is the plan batchPlan takes for an m x n GEMM over k, 16-bit
// or E4M3, in place of s2x80 unsplit (its blocks more than tmaBatchRowFill
// of a round, the qkv projections) at tmaKPRows < M <= tmaSwapRoundRows,
// if any: s2x48, K unsplit, where its three row tiles make one round of
// places at least tmaSwapRoundFill full. cuBLASLt runs GPT-OSS-20B's and
// Qwen3-30B-A3B's qkv at M = 136 on that tile, 128 rows of W by 48 of X,
// 120 blocks, K unsplit (Nsight Compute, H200, NOTES v61), where s2x80's
// 80 blocks leave 24 of 160 rows empty. BenchmarkGemm(FP8) from a captured
// graph, one H200, forced, over cuBLASLt, at M = 130 / 136 / 144: 16-bit
// Qwen3-30B-A3B's qkv on s2x48 1.09 / 1.11 / 1.09 against s2x80's 1.19 /
// 1.21 / 1.18 (3 samples), GPT-OSS-20B's 1.19 / 1.22 / 1.19 against 1.31 /
// 1.21 / 1.17; E4M3 (2 samples) Qwen3-30B-A3B's 1.01 / 1.03 / 1.02
// against 1.12 / 1.18 / 1.12, GPT-OSS-20B's 1.08 / 1.07 / 1.09 against
// 1.18 / 1.20 / 1.14. Llama-3.1-8B's qkv, 144 blocks, two rounds, lost
// (16-bit 1.59-1.69 against 1.11-1.22).
func rowRound(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	q := tmaPlan{cfg: tmaConfigs["s2x48"], splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}
	return q, m > tmaKPRows && m <= tmaSwapRoundRows && q.fillsRoundBy(m, n, slots, tmaSwapRoundFill)
}

// splitPair is the plan batchPlan takes for a 16-bit m x n GEMM over k in
// place of q, the one-row tile split four ways or more, if any: the pair
// of row tiles of 192 rows of W (three, s3x80 or s3x88) split as many
// ways, each block tmaBatchMinKTiles k-tiles or more, its blocks in one
// round of the split's places. GPT-OSS-20B's o (K = 4,096, s2x160 or
// s2x176 split four ways) from a captured graph, one H200, forced, 3
// samples, over cuBLASLt (NOTES v61): s3x80/4 at M = 130 / 136 / 144 /
// 152 / 160 1.29 / 1.26 / 1.21 / 1.19 / 1.01 against 1.30 / 1.28 / 1.23
// / 1.24 / 1.04, s3x88/4 at 168 / 176 1.18 / 1.04 against 1.24 / 1.09
// (v60's sweep alike: 0.94-0.97x the time). The other splits on s3x80
// the cost model made (Llama-3.1-8B's o five ways and down eight,
// Llama-3.2-1B's down five) lost 9-60 %.
func splitPair(q tmaPlan, three string, m, n, k int, slots func(tmaConfig, int) int) (tmaPlan, bool) {
	const minSplit = 4
	if q.splits < minSplit {
		return tmaPlan{}, false
	}
	r := splitKTiles(tmaConfigs[three], ceilDiv(k, tmaKTile(false)), q.splits)
	return r, r.splits == q.splits && r.kps >= tmaBatchMinKTiles && r.cfg.tiles(m, n)*r.splits <= slots(r.cfg, r.splits)
}

// batchFits reports whether batchPlan takes p for an m x n GEMM: unsplit
// where its tiles fill at least fill of a round of places, split where
// each block keeps tmaBatchMinKTiles k-tiles or more and the blocks fill
// tmaBatchSplitFill of a round of the split's places.
func (p tmaPlan) batchFits(m, n int, slots func(tmaConfig, int) int, fill float64) bool {
	tiles := float64(p.cfg.tiles(m, n))
	return p.splits == 1 && tiles >= fill*float64(slots(p.cfg, 1)) ||
		p.splits > 1 && p.kps >= tmaBatchMinKTiles && tiles*float64(p.splits) >= tmaBatchSplitFill*float64(slots(p.cfg, p.splits))
}

// tmaBatchPairFill is how full a round batchPlan wants s3x80's blocks,
// unsplit (W multicast to the pair of row tiles): TinyLlama's gate_up at
// M = 129-160 makes 118 of them for 132 places.
const tmaBatchPairFill = 0.85

// tmaBatchRowFill is how full a round batchPlan wants s2x80's or s2x88's
// blocks, K unsplit: GPT-OSS-20B's and Qwen3-30B-A3B's qkv at M = 129-176
// make 80 of them for 132 places.
const tmaBatchRowFill = 0.55

// tmaBatchMinKTiles and tmaBatchSplitFill bound batchPlan's splits.
const (
	tmaBatchMinKTiles = 16
	tmaBatchSplitFill = 2.0 / 3
)

// swapTakes reports whether planGemmTMA puts an m x n GEMM over k on the
// swapped 48 x 128 tile (s2x48: 48 rows of X by 128 of W, K split by the
// cost model), 16-bit or E4M3: between tmaSwapRows and tmaSwapMaxRows
// rows, where the 128-row tiles leave most of a row tile empty, on
// narrow outputs (n up to tmaSwapN) over long K (from tmaSwapK); at
// 129-176 rows batchPlan puts them on s2x80 or s2x88 first (E4M3 codes
// above K = 4,096).
// BenchmarkGemm(FP8) from a captured graph (one H200, 2 samples, NOTES
// v54), us, s2x48 against the plan it replaces and cuBLASLt: 16-bit at M =
// 160 TinyLlama's down 15.68 / 18.88 / 12.18, Llama-3.2-1B's 22.23 /
// 25.11 / 15.60, Qwen3-30B-A3B's o 12.31 / 16.08 / 10.52; at 192 15.09 /
// 17.44 / 12.41, 20.54 / 22.68 / 18.07, 11.46 / 13.62 / 9.90; E4M3 at 160
// TinyLlama's down 15.59 / 18.47 / 13.91, Llama-3.2-1B's 19.43 / 22.46 /
// 17.38, Qwen3-30B-A3B's o 13.34 / 13.20 / 11.18; at 192 15.43 / 17.49 /
// 14.23, 18.60 / 20.14 / 17.16, 13.26 / 13.48 / 11.55. Wider outputs lost
// (Llama-3.1-8B's o and down, GPT-OSS-20B's o: 1.02-1.12x the plan), as did
// short K (TinyLlama's o, qkv) and M = 128 and 256 (the 16-bit down at
// 128: 14.30 against 12.02).
func swapTakes(m, n, k int) bool {
	return m >= tmaSwapRows && m <= tmaSwapMaxRows && n <= tmaSwapN && k >= tmaSwapK
}

const (
	tmaSwapRows    = 129
	tmaSwapMaxRows = 192
	tmaSwapN       = 2048
	tmaSwapK       = 4096
)

// tmaRoundFill is how full planGemmTMA wants one round of 64 x 176 tiles
// before it takes them for a 16-bit GEMM of 65-256 rows. BenchmarkGemm on
// two H200s, 100 launches a sample, medians of 10, against the plan it
// replaces (128 x 176 split two ways): TinyLlama's gate_up at M = 128
// (128 tiles of 132 places) 16.6 us against 19.8 (cuBLASLt 16.5),
// Qwen3-30B-A3B's qkv at 256 (120) 13.9 against 15.2 (13.2), GPT-OSS-20B's
// qkv at 256 (120) 19.5 against 19.6 (16.8). Forced where its tiles left
// a round a quarter empty or more, or took two, it lost (20 launches a
// sample: Llama-3.1-8B's o at 256, 96 tiles, 23.2 against the plan's
// 20.5; its qkv, 140, 42.0 against 28.8; TinyLlama's gate_up at 256, 256,
// 31.0 against 24.6).
const tmaRoundFill = 0.9

// fillsRound reports whether p, K unsplit, covers an m x n output in one
// round of the GPU's places, at least tmaRoundFill of them.
func (p tmaPlan) fillsRound(m, n int, slots func(tmaConfig, int) int) bool {
	return p.fillsRoundBy(m, n, slots, tmaRoundFill)
}

// fillsRoundBy is fillsRound with fill in place of tmaRoundFill.
func (p tmaPlan) fillsRoundBy(m, n int, slots func(tmaConfig, int) int, fill float64) bool {
	t, s := p.cfg.tiles(m, n), slots(p.cfg, 1)
	return p.splits == 1 && t <= s && float64(t) >= fill*float64(s)
}

// tmaRoundFillRagged is tmaRoundFill where the 128-row tiles would leave
// rows of their last row tile empty that 64-row tiles fill (M = 129-192):
// there 64 x 176 (three row tiles, W not multicast) beat the 128-row plans
// in 90-105 tiles, 0.68-0.80 of a round. BenchmarkGemm from a captured
// graph, one H200, M = 192, us: Qwen3-30B-A3B's qkv 11.81 against 15.32
// on 128 x 176 split two ways (cuBLASLt 9.58), GPT-OSS-20B's 16.30
// against 19.15 (16.68), Llama-3.1-8B's 25.62 against 27.60 on 128 x 192
// split two ways (21.65). In 72 tiles or fewer it lost (Llama-3.1-8B's o
// and down, 20.57 against 19.80 and 71.17 against 59.70).
const tmaRoundFillRagged = 0.65

// rowWaste is how many rows tiles of rows rows compute past m.
func rowWaste(m, rows int) int { return ceilDiv(m, rows)*rows - m }

// tmaFP8NarrowRows and tmaFP8NarrowK bound the E4M3 GEMMs of more than
// tmaNarrowRows rows on which planGemmTMA weighs the narrow tiles,
// unsplit, against a split of 128 x 128 (smallCost); above
// tmaFP8RoundRows, only where the narrow tiles make one round of places.
// BenchmarkGemmFP8 on an H200 at M = 128 (NOTES v47, v50), the tile
// smallCost picks against the split: the qkv and o projections of K =
// 2048-4096 0.83-0.97x its time (GPT-OSS-20B's qkv 16.0 us on 64 x 80
// against 19.2, TinyLlama's o 12.4 on 64 x 64 against 14.0, Llama-3.1-8B's
// qkv 19.5 on 64 x 96 against 20.4); the downs, K = 5632 and 14336, 1.05x
// and 1.08x, a block running all of K's k-tiles where the split shares
// them. At M = 256, timed from a captured graph (two H200s, NOTES v52), in
// one round of 120-128 tiles they ran 0.81-0.89x the split 128 x 128
// tiles' time: TinyLlama's o 10.2 us on 64 x 64 against 12.6 (cuBLASLt
// 9.6), its qkv 10.6 on 64 x 80 against 13.2, Llama-3.2-1B's qkv 10.9 on
// 64 x 96 against 13.6, Qwen3-30B-A3B's o 13.7 against 15.3, GPT-OSS-20B's
// o 14.9 against 16.8; in two rounds (172-256 tiles) 1.20-1.25x
// (Llama-3.1-8B's o and qkv, the qkv of Qwen3-30B-A3B and GPT-OSS-20B).
const (
	tmaFP8NarrowRows = 256
	tmaFP8NarrowK    = 4096
	tmaFP8RoundRows  = 128
)

// tmaFP8WideRows is the M above which planGemmTMA weighs 128 x 256 for
// E4M3 codes: two row tiles or more. On one row tile it ran 1.0-1.4x
// 128 x 128's time on the shapes that have the tiles for it (the LM
// heads and gate_ups at M = 128, BenchmarkGemmFP8, H200).
const tmaFP8WideRows = 128

// tmaFP8WideFill is how well, against 128 x 128's, the 128 x 256 tiles of
// an E4M3 GEMM above tmaFP8WideRows must fill their rounds of places to be
// planned (planGemmTMA): TinyLlama's LM head at M = 2048 (2,000 tiles,
// 0.95 of 16 rounds; 128 x 128 0.98) ran at 0.97x on them, its gate_up
// (704, 0.89; 0.97) at 1.03x.
const tmaFP8WideFill = 0.95

// roundFill is the share of places that tiles fill over the rounds they
// take on slots places.
func roundFill(tiles, slots int) float64 {
	slots = max(1, slots)
	return float64(tiles) / float64(ceilDiv(tiles, slots)*slots)
}

// uniformSlots is the blocks of cfg in clusters of s that sms
// multiprocessors hold if the clusters could use every one of them.
func uniformSlots(sms int, cfg tmaConfig, s int) int {
	s = max(s, 1)
	return sms * cfg.perSM / s * s
}

// tmaKTile is how many elements of K a k-tile holds: 128 bytes of a row,
// 64 16-bit values or 128 codes.
func tmaKTile(fp8 bool) int {
	if fp8 {
		return 128
	}
	return 64
}

// splitKTiles is cfg's plan with ktiles k-tiles split about s ways: s
// blocks of the same k-tiles each, fewer where s of them would leave the
// last empty.
func splitKTiles(cfg tmaConfig, ktiles, s int) tmaPlan {
	kps := ceilDiv(ktiles, s)
	return tmaPlan{cfg: cfg, splits: ceilDiv(ktiles, kps), kps: kps}
}

// splitGemmTMA is planGemmTMA's split of K for the tile cfg.
func splitGemmTMA(cfg tmaConfig, m, n, k, sms int, slots func(tmaConfig, int) int, fp8 bool, waves int) tmaPlan {
	bk := tmaKTile(fp8)
	tiles := cfg.tiles(m, n)
	ktiles := ceilDiv(k, bk)
	maxS := min(tmaMaxCluster, ktiles)
	split := func(s int) tmaPlan { return splitKTiles(cfg, ktiles, s) }
	if waves > 0 {
		// The narrow tiles too: the switch sets every TMA plan's split (the
		// kernels reduce any tile's split in its cluster, TestGemmTMASplits).
		s := 1
		for s < maxS && tiles*s < waves*sms {
			s *= 2
		}
		return split(min(s, maxS))
	}
	if cfg.narrow {
		return split(1)
	}
	if cfg.kp {
		// An alternating tile: the most blocks that still make one round
		// of places, K split two ways at most. Its split came from the
		// 128-row tiles' cost model at first, which put TinyLlama's qkv
		// at M = 128 on 64 x 64 split three ways, 240 blocks in two
		// rounds: 14.1 us against 7.2 for the plan's 80; split three ways
		// in one round of 132 it lost too (its o on 64 x 96, 7.22 against
		// 6.53 on 64 x 64 split two ways; BenchmarkGemm, H200, NOTES v56).
		best := split(1)
		for s := 2; s <= min(maxS, tmaKPMaxSplit); s++ {
			if p := split(s); p.splits == s && tiles*s <= slots(cfg, s) {
				best = p
			}
		}
		return best
	}
	if tiles >= slots(cfg, 1) {
		return split(1) // the tiles alone fill the GPU (prefill): a split only adds its reduction
	}
	best, bestCost := split(1), ktiles+tmaFill
	for s := 2; s <= maxS; s++ {
		p := split(s)
		if p.splits != s {
			continue // the same k-tiles per block as a smaller split
		}
		// Clusters of s blocks must each fit in one GPC, so fewer than
		// the multiprocessors' blocks may run at once.
		if cost := ceilDiv(tiles*s, max(1, slots(cfg, s)))*(p.kps+tmaFill) + tmaReduce; cost < bestCost {
			best, bestCost = p, cost
		}
	}
	return best
}

// cost is the plan's estimated time across tile widths, in k-tiles of a 128
// x 128 tile: waves of blocks, each its k-tiles scaled by the tile's width
// over 128 (the MMAs of a k-tile grow with it) plus tmaWave, and the
// cluster's reduction where K is split (tmaReduceBlock); a narrow tile's
// waves by its own measured costs.
func (p tmaPlan) cost(m, n int, slots func(tmaConfig, int) int) float64 {
	blocks := p.cfg.tiles(m, n) * p.splits
	waves := float64(ceilDiv(blocks, max(1, slots(p.cfg, p.splits))))
	if p.cfg.narrow {
		return waves * (float64(p.kps)*tmaNarrowKTile + tmaNarrowWave)
	}
	w := waves * (float64(p.kps*p.cfg.bn*p.cfg.rows)/(128*128) + tmaWave)
	if p.splits > 1 {
		w += float64(tmaReduceBlock*p.splits*p.cfg.bn*p.cfg.rows) / (128 * 128)
	}
	return w
}

// grid is the launch's blocks for an m x n output in tiles of wide
// columns: the row tiles along X, so that blocks launched together share
// their column tiles of W. A decode's few row tiles then read each of W's
// tiles once from memory in the same wave: with the columns along X,
// TinyLlama's LM head at M = 256 (250 tiles of 128 x 256, two waves)
// read all of W in each wave.
func (p tmaPlan) grid(m, n, wide int) (Dim3, error) {
	if p.blocks > 0 {
		return Dim3{X: p.blocks, Y: 1, Z: 1}, nil
	}
	g := Dim3{X: ceilDiv(m, p.cfg.rows), Y: ceilDiv(n, wide), Z: p.splits}
	if c, ok := tmaClusters[p.cfg.name]; ok {
		// Whole clusters: the blocks past M or N load their shares of the
		// operands (zeros past the edges) and store nothing.
		g.X, g.Y = ceilDiv(g.X, c.shape.X)*c.shape.X, ceilDiv(g.Y, c.shape.Y)*c.shape.Y
	}
	if g.Y > 65535 {
		return Dim3{}, fmt.Errorf("cuda: TMA GEMM: N=%d needs %d column tiles, at most 65535", n, g.Y)
	}
	return g, nil
}

// tmaPlanFor is the TMA kernels' plan for a launch, and whether to use it:
// on Hopper with the warpgroup MMA, a driver that encodes tensor maps and
// launches clusters, and XRUN_CUDA_GEMM_TMA: `1` always; `auto` where K is
// not split, and where the 128-row tiles or the narrow ones split it (the
// narrow ones only under XRUN_CUDA_GEMM_WAVES). BenchmarkGemm and
// BenchmarkGemmFP8 on an H200 (us): unsplit, the TMA kernels take
// 0.70-0.84x the cp.async kernels' time (M = 2048: qkv 53.2 against 69.9,
// gate_up 175 against 246; FP8 gate_up 584 against 745); split at M = 256
// on 128 x 128 tiles, the cluster's reduction mostly beats global partials
// (FP8 o 22.2 against 33.5, down 45.7 against 65.7; fp16 qkv 11.1 against
// 15.8, gate_up 33.5 against 37.5, down 25.4 against 21.4); at M = 64 the
// 64-row tiles' splits do not (FP8 o 22.3 against 19.8, fp16 down 14.6
// against 12.2). At 16-bit M = 128 the TMA splits won once their plans
// counted the clusters that fit (H100: qkv 10.0 against 11.1, o 9.7
// against 10.3, gate_up 32.7 against 34.8; gemm.yaml's batch 128 with
// `disable`, 49,822 against 47,374 output tok/s), where before (H200,
// batch 128) they had lost, 0.741x of auto against 0.772x.
func (g *GPU) tmaPlanFor(m, n, k int, fp8 bool) (tmaPlan, bool) {
	mode := g.sw.CUDAGemmTMA
	if !g.wgmma() || mode == "0" || !g.tma || !g.launchEx {
		return tmaPlan{}, false
	}
	// tmaSlots counts multiprocessors itself where it cannot ask the driver.
	slots := func(c tmaConfig, s int) int { return g.tmaSlots(c, fp8, s) }
	d := tmaDevice{sms: g.Info.SMs, slots: slots, unitBytes: tmaUnitBytes(g.Info.Name)}
	p := planGemmTMA(m, n, k, d, fp8, g.sw.CUDAWgmmaTile, g.sw.CUDAGemmWaves)
	if s := g.sw.CUDAGemmSplit; s > 0 {
		// XRUN_CUDA_GEMM_SPLIT: the plan's tile at the split asked for (a
		// clustered tile's twin: a split's cluster is its own).
		cfg := p.cfg
		if c, ok := tmaClusters[cfg.name]; ok && s > 1 {
			cfg = tmaConfigs[c.twin]
		}
		if !tmaHalves[cfg.name] { // whose kernels never split
			p = splitKTiles(cfg, ceilDiv(k, tmaKTile(fp8)), min(s, tmaMaxCluster))
		}
	}
	if g.sw.CUDAGemmPersist {
		p = p.persist(m, n, slots(p.cfg, 1))
	}
	if g.sw.CUDAGemmMulticast {
		p = p.withMulticast(m, slots(p.cfg, 2), fp8)
	}
	if _, ok := tmaClusters[p.cfg.name]; ok {
		// A clustered tile's cluster is its multicast's: K unsplit.
		p = tmaPlan{cfg: p.cfg, splits: 1, kps: ceilDiv(k, tmaKTile(fp8))}
	}
	// Only wg1 has cp.async kernels to run its split on.
	return p, mode == "1" || p.splits == 1 || p.cfg.name != "wg1"
}

// EpilogueRows is the smallest M from which every 16-bit GEMM runs on the
// TMA kernels (tmaPlanFor), so that GemmEpilogue takes its SwiGLU or
// residual add; 0 where no such M is (not Hopper, XRUN_CUDA_GEMM_TMA=0,
// the 64-row tile forced, whose splits stay on cp.async). The backend
// holds GEMMs back for the epilogue only from there: below it the GEMM
// and the op would run apart, and an add would lose its fusion with the
// RMSNorm after it.
func (g *GPU) EpilogueRows() int {
	mode, tile := g.sw.CUDAGemmTMA, g.sw.CUDAWgmmaTile
	switch {
	case !g.wgmma() || mode == "0" || !g.tma || !g.launchEx:
		return 0
	case mode == "1":
		return 1
	case tile == "wg1":
		return 0
	}
	if _, ok := tmaConfigs[tile]; ok {
		return 1
	}
	return tmaNarrowRows + 1 // the 128-row tiles, split or not
}

// tmaSlotsKey names one count of co-resident blocks (tmaSlots).
type tmaSlotsKey struct {
	cfg      string
	fp8      bool
	clusterZ int
}

// tmaSlots is how many blocks of cfg's kernel in clusters of s blocks the
// GPU runs at once: the driver's count of co-resident clusters
// (cuOccupancyMaxActiveClusters) times s. A cluster must fit in one GPC,
// and GPCs differ in size, so clusters of 4 or 8 blocks of one a
// multiprocessor leave some idle: on an H100 (132 of them) the driver
// counts 120 places for either, so 128 blocks in clusters of 4 ran in two
// waves where the multiprocessors' count promised one. Without the
// driver's answer it is that count.
func (g *GPU) tmaSlots(cfg tmaConfig, fp8 bool, s int) int {
	uniform := uniformSlots(g.Info.SMs, cfg, s)
	if s <= 1 || g.tmaSlotsSeen == nil {
		return uniform
	}
	key := tmaSlotsKey{cfg.name, fp8, s}
	if v, ok := g.tmaSlotsSeen[key]; ok {
		return v
	}
	v := uniform
	name := "gemm_tma_" + cfg.name + "_f16"
	if fp8 {
		name = "gemm_tma_f8_" + cfg.name + "_bf16"
	}
	if f, err := g.function(cfg.module(), name); err == nil && f.allowShared(cfg.smem()) == nil {
		var n C.int
		if C.xr_max_active_clusters(&n, f.f, C.uint(cfg.threads()), C.uint(cfg.smem()), C.uint(s)) == 0 && n > 0 {
			v = min(uniform, int(n)*s)
		}
	}
	g.tmaSlotsSeen[key] = v
	return v
}

// tmapKey is what a tensor map encodes: a row-major rows x inner matrix of
// es-byte elements at ptr, read in boxes of boxRows rows.
type tmapKey struct {
	ptr                      DevicePtr
	inner, rows, boxRows, es int
}

// tensorMap returns the TMA descriptor of buffer b as a rows x inner
// matrix, 128-byte rows of a box swizzled as wgmma reads them, rows and
// columns past the edges read as zeros. Encoding is host work only; the
// maps are kept, since a decode step multiplies the same buffers at the
// same shapes every time.
func (g *GPU) tensorMap(b Buffer, rows, inner, boxRows, es int) (*[128]byte, error) {
	key := tmapKey{b.Ptr, inner, rows, boxRows, es}
	if m, ok := g.tmaps[key]; ok {
		return m, nil
	}
	if len(g.tmaps) >= 1<<14 {
		clear(g.tmaps) // shapes seen once (prompts of every length): start over
	}
	const (
		u8, u16    = 0, 1 // CU_TENSOR_MAP_DATA_TYPE_UINT8, _UINT16: the bytes move as they are
		swizzle128 = 3    // CU_TENSOR_MAP_SWIZZLE_128B
		l2Promo256 = 3    // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
	)
	dtype := u16
	if es == 1 {
		dtype = u8
	}
	m := new([128]byte)
	rc := C.xr_tensor_map_2d((*C.uchar)(&m[0]), C.int(dtype), C.CUdeviceptr(b.Ptr), C.ulonglong(inner), C.ulonglong(rows),
		C.ulonglong(inner*es), C.uint(128/es), C.uint(boxRows), swizzle128, l2Promo256)
	if err := cuErrf("cuTensorMapEncodeTiled", rc, "%d x %d matrix of %d-byte elements at %#x, boxes of %d rows", rows, inner, es, b.Ptr, boxRows); err != nil {
		return nil, err
	}
	g.tmaps[key] = m
	return m, nil
}

// tmaMapRows is the rows X's tensor map gives an m x k matrix (es-byte
// elements) in buffer x read in tiles of tile rows: m rounded up to whole
// tiles where x holds them, so that the last tile's box reads rows past M
// from memory rather than having the TMA fill them with zeros, which cost
// that tile's blocks a quarter of their time at 8 rows of 64 (bench/NOTES.md
// v66). Those rows' outputs are past M: no epilogue stores them, and an
// output row reads no other row of X, so whatever they hold is harmless.
func tmaMapRows(x Buffer, m, k, es, tile int) int {
	if r := ceilDiv(m, tile) * tile; r*k*es <= x.Bytes {
		return r
	}
	return m
}

// GemmInputRows is the rows to allocate a GEMM input of up to rows rows
// for: rows rounded up to 128, so that X's tensor map can cover the last
// row tile of any M up to rows whole on the 64- and 128-row tiles
// (tmaMapRows); the swapped tiles' boxes of 48-192 rows where the rounding
// reaches, the rest then filled with zeros as before. It costs at most 127
// rows a buffer.
func GemmInputRows(rows int) int {
	return ceilDiv(rows, 128) * 128
}

// tmaLaunch is one launch of a TMA kernel: Y, X (m x k) and W (rowsW x
// k, es-byte elements), W's tensor map in boxes of wide rows (the tile's
// width, half of it under GLU) and n the output width; scales appends the
// E4M3 codes' scales after Y and trace the timeline buffer last
// (gemm_tma_trace.cu's kernels).
type tmaLaunch struct {
	module, name string
	y, x, w      Buffer
	es, m, n, k  int
	rowsW, wide  int
	scales       func(a *Args) *Args
	trace        *Buffer
}

// launchTMA queues l by plan p: the one launch path of the TMA kernels, so
// the engine's GEMMs, its fused epilogues and the traced kernels of
// BenchmarkGemmPhases pass the same maps, arguments, grid and cluster.
func (g *GPU) launchTMA(s *Stream, p tmaPlan, l tmaLaunch) error {
	// A multicast's blocks load shares of the tiles they have in common:
	// 1 / Y of X's box for the Y column tiles of a cluster, 1 / X of W's
	// tile for its X row tiles (under GLU, as without: the first X / 2
	// blocks the gate rows, the others the up rows). A split's clusters lie
	// along Z.
	cl := p.cluster()
	tx, err := g.tensorMap(l.x, tmaMapRows(l.x, l.m, l.k, l.es, p.cfg.rows), l.k, p.cfg.rows/cl.Y, l.es)
	if err != nil {
		return err
	}
	box := l.wide
	if cl.X > 1 {
		box = p.cfg.bn / cl.X
	}
	tw, err := g.tensorMap(l.w, l.rowsW, l.k, box, l.es)
	if err != nil {
		return err
	}
	f, err := g.function(l.module, l.name)
	if err != nil {
		return err
	}
	smem := p.smem()
	if err := f.allowShared(smem); err != nil {
		return err
	}
	a := g.argsPack().Blob(tx).Blob(tw).Ptr(l.y)
	if l.scales != nil {
		a = l.scales(a)
	}
	a.I32(l.m).I32(l.n).I32(l.k).I32(p.kps).I32(b2i(g.sw.CUDAGemmEarlyW))
	if l.trace != nil {
		a.Ptr(*l.trace)
	}
	grid, err := p.grid(l.m, l.n, l.wide)
	if err != nil {
		return err
	}
	return s.LaunchCluster(f, grid, Dim3{X: p.cfg.threads()}, smem, a, cl)
}

// launchGemmTMA queues Y = X W^T on the TMA kernels by plan p: X is m x k,
// W n x k, es-byte elements (1: E4M3 codes, whose scales scales appends
// after Y).
func (g *GPU) launchGemmTMA(s *Stream, dt DType, y, x, w Buffer, p tmaPlan, es, m, n, k int, scales func(a *Args) *Args) error {
	name := "gemm_tma_" + p.tile() + "_" + dt.suffix()
	if scales != nil {
		name = "gemm_tma_f8_" + p.tile() + "_" + dt.suffix()
	}
	return g.launchTMA(s, p, tmaLaunch{module: p.module(), name: name, y: y, x: x, w: w, es: es, m: m, n: n, k: k,
		rowsW: n, wide: p.cfg.bn, scales: scales})
}

// epiDims is W's rows for an n-wide output of GemmEpilogue and the rows of
// its tensor map's box on tiles bn wide: under GLU W is the fused [2n, k]
// gate_up weight and a tile's bn columns are bn / 2 gate and as many up
// rows, two boxes a stage.
func epiDims(n, bn int, glu bool) (rowsW, wide int) {
	if glu {
		return 2 * n, bn / 2
	}
	return n, bn
}

// epiPlan is the plan whose epilogue kernels GemmEpilogue runs for p: a
// swapped tile's a block a tile (unpersisted), a half tile's one-consumer
// twin (tmaHalfTwin), the halves having none.
func (p tmaPlan) epiPlan() tmaPlan {
	if t, ok := tmaHalfTwin[p.cfg.name]; ok {
		return tmaPlan{cfg: tmaConfigs[t], splits: 1, kps: p.kps}
	}
	return p.unpersisted()
}

// launchGemmEpi queues GemmEpilogue's kernel by plan p (of the unfused
// GEMM's rowsW x k weight), as epiPlan has it.
func (g *GPU) launchGemmEpi(s *Stream, dt DType, y, x, w Buffer, p tmaPlan, m, n, k int, glu bool) error {
	p = p.epiPlan()
	rowsW, wide := epiDims(n, p.cfg.bn, glu)
	kind := "res"
	if glu {
		kind = "glu"
	}
	return g.launchTMA(s, p, tmaLaunch{module: p.module(), name: "gemm_tma_" + kind + "_" + p.tile() + "_" + dt.suffix(),
		y: y, x: x, w: w, es: dt.Size(), m: m, n: n, k: k, rowsW: rowsW, wide: wide})
}

// GemmEpilogue queues the own GEMM above the GEMV's rows with SwiGLU
// (fu.GLU: W is the fused [2n, k] gate_up weight, gate rows first; y[m, n]
// = silu(x Wg^T) * (x Wu^T)) or the residual add (fu.Residual: y += x W^T)
// in the TMA kernels' epilogue, rounding as the separate kernels store.
// ok is false, and nothing is queued, where the launch would not run on
// the TMA kernels (not Hopper, XRUN_CUDA_GEMM_TMA, a split the policy
// keeps on cp.async): the caller then runs the GEMM and the op apart.
func (g *GPU) GemmEpilogue(s *Stream, dt DType, y, x, w Buffer, m, n, k int, fu GemvFusion) (ok bool, err error) {
	if fu.Norm != nil || fu.GLU == fu.Residual || dt != F16 && dt != BF16 {
		return false, fmt.Errorf("cuda: GEMM epilogue: exactly one of SwiGLU and the residual add, 16-bit, no norm (got %+v, %s)", fu, dt)
	}
	es := dt.Size()
	rowsW, _ := epiDims(n, 0, fu.GLU)
	switch {
	case m <= 0 || n <= 0 || k <= 0 || k%8 != 0:
		return false, fmt.Errorf("cuda: GEMM epilogue shape M=%d N=%d K=%d (K a multiple of 8)", m, n, k)
	case x.Bytes < m*k*es || w.Bytes < rowsW*k*es || y.Bytes < m*n*es:
		return false, fmt.Errorf("cuda: GEMM epilogue buffers too small for M=%d N=%d K=%d", m, n, k)
	case x.Ptr%16 != 0 || w.Ptr%16 != 0 || y.Ptr%4 != 0:
		return false, fmt.Errorf("cuda: GEMM epilogue needs 16-byte aligned X and W")
	}
	// The plan of the unfused GEMM: under GLU its 2n columns make the same
	// tiles as n outputs of half-width tiles.
	p, onTMA := g.tmaPlanFor(m, rowsW, k, false)
	if !onTMA {
		return false, nil
	}
	return true, g.launchGemmEpi(s, dt, y, x, w, p, m, n, k, fu.GLU)
}

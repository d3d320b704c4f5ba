package engine

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine/model"
)

// Switch is an environment variable that changes how the built-in engine
// runs: ablations for A/B comparisons and debugging aids. Every one is an
// entry of Switches, which is their documentation too (the README's table
// is generated from it), and code reads them only through it, so that a
// run can tell which are not at their defaults and record them.
type Switch struct {
	Name string
	// Default is the value in effect when the variable is unset, or set to
	// anything Values does not allow (the engine then ignores it).
	Default string
	// Values are what the variable may be set to, for people.
	Values  string
	Meaning string
	// Recorded says the switch changes what is measured: a run records
	// it, when not at its default, in every cell.json, in results.json's
	// environment and in the cells' fingerprints, so that --resume never
	// mixes repeats measured under two settings.
	Recorded bool
	// effective maps the variable's text to the value in effect.
	effective func(raw string) string
}

// Value is the switch's value in effect in the environment getenv reads:
// Default unless the variable holds an allowed value, which is then given
// in one canonical spelling ("08" is "8"), so that two settings with the
// same effect compare equal.
func (s *Switch) Value(getenv func(string) string) string { return s.effective(getenv(s.Name)) }

// FlagSwitch is a switch that is on or off ("1" or "0"); only the value
// that is not its default changes anything.
type FlagSwitch struct{ Switch }

func flagSwitch(name string, on bool, recorded bool, meaning string) FlagSwitch {
	def, flip := "0", "1"
	if on {
		def, flip = "1", "0"
	}
	return FlagSwitch{Switch{Name: name, Default: def, Values: "`" + flip + "`", Meaning: meaning, Recorded: recorded,
		effective: func(raw string) string {
			if raw == flip {
				return flip
			}
			return def
		}}}
}

// On reads the flag from the environment getenv reads.
func (f *FlagSwitch) On(getenv func(string) string) bool { return f.Value(getenv) == "1" }

// IntSwitch is a switch holding an integer from Min to Max.
type IntSwitch struct {
	Switch
	Min, Max int
}

func intSwitch(name string, def, lo, hi int, values, meaning string) IntSwitch {
	d := strconv.Itoa(def)
	return IntSwitch{Switch: Switch{Name: name, Default: d, Values: values, Meaning: meaning, Recorded: true,
		effective: func(raw string) string {
			if v, err := strconv.Atoi(raw); err == nil && v >= lo && v <= hi {
				return strconv.Itoa(v)
			}
			return d
		}}, Min: lo, Max: hi}
}

// pow2Switch is an IntSwitch holding a power of two from lo to hi.
func pow2Switch(name string, def, lo, hi int, meaning string) IntSwitch {
	s := intSwitch(name, def, lo, hi, fmt.Sprintf("a power of two, `%d`..`%d`", lo, hi), meaning)
	d := s.Default
	s.effective = func(raw string) string {
		if v, err := strconv.Atoi(raw); err == nil && v >= lo && v <= hi && v&(v-1) == 0 {
			return strconv.Itoa(v)
		}
		return d
	}
	return s
}

// Int reads the switch from the environment getenv reads.
func (s *IntSwitch) Int(getenv func(string) string) int {
	v, _ := strconv.Atoi(s.Value(getenv))
	return v
}

// ChoiceSwitch is a switch holding one of a set of names.
type ChoiceSwitch struct{ Switch }

func choiceSwitch(name, def string, allowed func(string) bool, values, meaning string) ChoiceSwitch {
	return ChoiceSwitch{Switch{Name: name, Default: def, Values: values, Meaning: meaning, Recorded: true,
		effective: func(raw string) string {
			if allowed(raw) {
				return raw
			}
			return def
		}}}
}

// Get reads the switch from the environment getenv reads.
func (c *ChoiceSwitch) Get(getenv func(string) string) string { return c.Value(getenv) }

// wgmmaTiles is what XRUN_CUDA_WGMMA_TILE takes: engine/cuda's tile
// configurations (TestSwitchesMatchKernels holds the two lists equal) and
// "wide".
var wgmmaTiles = []string{"wg1", "wg2", "wg2m", "wg2w", "wg2f", "wg1s", "wg1n", "wg1m", "wg1w", "wg1d", "w2x64", "w2x80", "w2x96", "s1x32", "s1x40", "s1x48", "s2x32", "s2x48", "s2x160", "s2x176", "s2x192", "s1x80", "s2x80", "s3x80", "s2x88", "s3x88", "s1x72", "s1x136", "s2x104", "s3x104", "s2x208", "s2x72", "s2x200", "s2x224", "p1x48", "p1x72", "p1x112", "p1x136", "p1x72c13", "p1x72c21", "p1x72c23", "p1x48c12", "p1x48c13", "p1x112c21", "p1x112c22", "p1mc21", "p1mc41", "p1mc42", "p1sc21", "p1sc41", "wg1nc21", "h1s", "h1n", "h1m", "h1sc21", "h1nc21", "h1mc21", "h1mc41", "p1s", "p1m", "wg3", "wide"}

// wgmmaTileValues is wgmmaTiles as the switch table lists them.
func wgmmaTileValues() string {
	q := make([]string, len(wgmmaTiles))
	for i, v := range wgmmaTiles {
		q[i] = "`" + v + "`"
	}
	return strings.Join(q, ", ")
}

// attnTCName is what attnTC.String (engine/cuda) names a tensor-core
// attention configuration.
var attnTCName = regexp.MustCompile(`^(tc|wg|ws)-m[1-9][0-9]*-k[1-9][0-9]*-t[1-9][0-9]*-s[1-9][0-9]*$`)

// SwitchTable is the type of Switches: a field per switch, so that each is
// read with its own type.
type SwitchTable struct {
	Overlap           FlagSwitch
	CUDAGraphs        FlagSwitch
	CUDAPDL           FlagSwitch
	CUDAFuse          FlagSwitch
	CUDAFuseNorm      FlagSwitch
	CUDAFP8Fuse       FlagSwitch
	CUDAGemmEpi       FlagSwitch
	CUDAGemmEarlyW    FlagSwitch
	CUDAGemmPersist   FlagSwitch
	CUDAGemmMulticast FlagSwitch
	CUDAGemv          FlagSwitch
	CUDAGemvMaxM      IntSwitch
	CUDAGemvPlan      FlagSwitch
	CUDAL2Prefetch    IntSwitch
	CUDAWgmma         FlagSwitch
	CUDAWgmmaFP8      FlagSwitch
	CUDAWgmmaTile     ChoiceSwitch
	CUDAGemmWaves     IntSwitch
	CUDAGemmSplit     IntSwitch
	CUDAGemmTMA       ChoiceSwitch
	CUDAAttnTC        ChoiceSwitch
	CUDAAttnSplit     FlagSwitch
	CUDAAttnRope      ChoiceSwitch
	CUDAAttnShort     IntSwitch
	CUDAAttnXL        ChoiceSwitch
	CUDAAttnWG        FlagSwitch
	CUDAAttnWGE4M3    FlagSwitch
	CUDAAttnWS        FlagSwitch
	CUDAAttnF8Regs    FlagSwitch
	CUDAAttnF8MMA     ChoiceSwitch
	CUDAAttnF8Swap    ChoiceSwitch
	CUDAAttnSwap      FlagSwitch
	CUDAMoETile       ChoiceSwitch
	CUDAMoEHints      IntSwitch
	CUDAMoELibrary    FlagSwitch
	CUDALtTune        FlagSwitch
	CUDALtReuse       FlagSwitch
	CUDASync          FlagSwitch
	CUDALtLog         FlagSwitch
	MeasureCeilings   FlagSwitch
	MLAAbsorb         FlagSwitch
	KVPaged           FlagSwitch
	CUDAKVPaged       ChoiceSwitch
	KVBlock           IntSwitch
	WarmShapes        FlagSwitch
}

// Switches are all of the engine's switches: their table, not their
// values. ParseSwitches reads the values once per engine (engine.New, or a
// backend or device opened on its own) into a model.Switches that is
// passed to the code they change; tests set that value, not the
// environment.
var Switches = SwitchTable{
	Overlap: flagSwitch("XRUN_OVERLAP", true, true,
		"the overlap scheduler: each iteration is queued before the previous one's tokens are read back; `0` runs every iteration synchronously"),
	CUDAGraphs: flagSwitch("XRUN_CUDA_GRAPHS", true, true, "CUDA graphs for decode; `0` launches decode eagerly too"),
	CUDAPDL:    flagSwitch("XRUN_CUDA_PDL", true, true, "programmatic dependent launch (Hopper and newer); `0` launches without it"),
	CUDAFuse:   flagSwitch("XRUN_CUDA_FUSE", true, true, "ops held back and fused into the op that consumes them (RoPE into attention, the decode GEMVs' epilogues); `0` runs each in a kernel of its own"),
	CUDAFuseNorm: flagSwitch("XRUN_CUDA_FUSE_NORM", true, true,
		"RMSNorm folded into the decode GEMVs' prologue; `0` keeps it in a kernel of its own"),
	CUDAGemmEpi: flagSwitch("XRUN_CUDA_GEMM_EPILOGUE", true, true,
		"gemm_plugin disable above the GEMV's rows on Hopper: the gate_up GEMM applies SwiGLU and the output and down GEMMs add the residual in their epilogue, on the TMA kernels (with XRUN_CUDA_FUSE), from the M where those run every launch (above 64 rows by default: XRUN_CUDA_GEMM_TMA); `0` writes the products and runs the swiglu and add kernels"),
	CUDAGemmEarlyW: flagSwitch("XRUN_CUDA_GEMM_EARLY_W", true, true,
		"the own GEMM's TMA kernels (Hopper, above the GEMV's rows) request their first k-tiles of the weight before waiting for the kernel before (programmatic dependent launch), as the GEMVs do; `0` requests them after the wait"),
	CUDAGemmPersist: flagSwitch("XRUN_CUDA_GEMM_PERSIST", true, true,
		"on Hopper, the own GEMM's TMA kernels (16-bit and E4M3) with K unsplit on 128-row tiles, and for a decode batch of 129-192 rows on 192 x 128 tiles and the swapped 160-row ones, where the output's tiles make more than one wave, launch one block a multiprocessor that takes tile after tile, its weight and input loads for the next tile running under the last one's stores (persistent: on an H200, TinyLlama-1.1B's GEMMs at M = 2048 2-6 % faster, its LM head at M = 256 3 %, gemm.yaml's batch 256 with `disable` +0.7 %, the zoo's LM heads at M = 136-192 2-14 % for 16-bit values and 2-24 % for E4M3 codes); `0` launches a block a tile"),
	CUDAGemmMulticast: flagSwitch("XRUN_CUDA_GEMM_MULTICAST", true, true,
		"on Hopper, the own GEMM's 16-bit TMA kernels on 128-row tiles and on 64 x 176 ones (XRUN_CUDA_WGMMA_TILE's wg1w) with K unsplit and an even number of row tiles run the two row tiles of each column tile as a cluster, each block loading half of the weight's tile into both (TMA multicast), so that the weight crosses from L2 once for the pair (on an H200, the zoo's GEMMs at M = 2048 2.5 % faster, LM heads at M = 256 3 %; the other 64-row tiles and E4M3 codes measured slower, and stay without); `0` has each block load all of it"),
	CUDAFP8Fuse: flagSwitch("XRUN_CUDA_FP8_FUSE", true, true,
		"dtype fp8: an FP8 GEMM whose input has a static scale (a checkpoint's input_scale, or calibrated at load) has it quantized by the RMSNorm or SwiGLU producing it, in the same kernel (with XRUN_CUDA_FUSE); `0` runs the norm or SwiGLU, then a quantize kernel"),
	CUDAGemv: flagSwitch("XRUN_CUDA_GEMV", true, true,
		"the own GEMM's CUDA-core GEMV for small M; `0` puts every M on the tensor-core tiles (as `XRUN_CUDA_GEMV_MAXM=0`)"),
	CUDAGemvMaxM: intSwitch("XRUN_CUDA_GEMV_MAXM", 4, 0, 8, "`0`..`8`",
		"the largest M the own GEMM serves with the CUDA-core GEMV; larger M runs on the tensor-core tiles"),
	CUDAGemvPlan: flagSwitch("XRUN_CUDA_GEMV_PLAN", true, true,
		"the GEMV's launch plan chosen by the kernels' register counts; `0` keeps the older plan, blind to them"),
	CUDAL2Prefetch: intSwitch("XRUN_CUDA_L2_PREFETCH", 15, 0, 100, "`0`..`100`",
		"the percent of each dense layer's gate_up weight (the leading rows of its gate half and of its up half) read into L2 from a side stream while the layer's QKV projection, attention and output projection run, at decode on the own GEMM's GEMV rows (gemm_plugin: disable, M up to XRUN_CUDA_GEMV_MAXM) on Hopper and later, where those QKV and output weights and the prefetch fit in L2 together (else the weights read after it would evict it; not at Llama-3.1-8B's width); between those latency-bound kernels the memory is mostly idle (on an H100, TinyLlama-1.1B fp16 at batch 1: 1,178 output tok/s at 15 against 1,142 at 0; 10: 1,161-1,169, 20: 1,176, 25: 1,157-1,164, 50: 1,032, where the prefetch spills into the gate_up GEMV's own stream); `0` prefetches nothing"),
	CUDAWgmma: flagSwitch("XRUN_CUDA_WGMMA", true, true,
		"on Hopper, the own GEMM (gemm_plugin: disable) above the GEMV's rows runs on the warpgroup MMA (gemm_wgmma.cu: wgmma.mma_async from swizzled shared memory); `0` keeps it on the mma.sync tiles (gemm.cu) that other GPUs run"),
	CUDAWgmmaTile: choiceSwitch("XRUN_CUDA_WGMMA_TILE", "auto", func(v string) bool { return slices.Contains(wgmmaTiles, v) },
		wgmmaTileValues(), "the warpgroup-MMA GEMMs' tile, chosen by M: 64 x 128 up to M = 64 (fp16/bf16: split-K to one block per multiprocessor, or a narrow tile, K unsplit, where the cost model puts it below: TinyLlama-1.1B's gate_up at batch 64 on 64 x 96; from 33 rows 64 x 128 eight stages deep with K split in a cluster where the narrow tiles would leave half the multiprocessors idle or the split would run on the cp.async kernels: its qkv, o and down at batch 64), 128 x 128 above (fp8 above M = 128: 128 x 256 where its tiles fill rounds of persistent blocks, and up to M = 256 128 x 176 or 128 x 192 where those make one round and 128 x 128 more), fp16/bf16 128 x 256 above M = 128 (on the TMA kernels above M = 64, where it needs no split of K), or on the TMA kernels 128 x 192 where that covers the output in fewer or fuller waves, and for fp16/bf16 at 65 to 256 rows 128 x 176 (TinyLlama-1.1B's gate_up at batch 256: 128 blocks where 128 x 192 makes 118) or 64 x 64, 64 x 80 or 64 x 96 with K unsplit (its qkv projection at batch 128, qkv and o at 256) where the cost model puts those below the others; a name forces it (`wg2m`: 128 x 192, TMA kernels only; `wg2w`: 128 x 256; `wg2f`: 128 x 176, TMA kernels only; `wg1s`, `wg1n`, `wg1m`: 64 x 64, 64 x 80 and 64 x 96, K unsplit, TMA kernels only; `wg1w`: 64 x 176, K unsplit, TMA kernels only, chosen by M for fp16/bf16 at 65 to 256 rows where its tiles fill at least 90 % of one round of the GPU's multiprocessors: TinyLlama-1.1B's gate_up at batch 128, Qwen3-30B-A3B's qkv at 256; `wg1d`: 64 x 128 eight stages deep, one block a multiprocessor, K split by the cost model, TMA kernels only; `w2x64`, `w2x80`, `w2x96`: 128 rows of X by 64, 80 or 96 rows of W on two consumer warpgroups, K split by the cost model, TMA kernels only, chosen by M (fp16/bf16 and fp8) at 193 to 256 rows over K of up to 4,096: `w2x64` where its tiles make one round of the GPU's multiprocessors at least 80 % full, else `w2x96` likewise, K unsplit (Llama-3.1-8B's o and qkv and the qkv projections of GPT-OSS-20B and Qwen3-30B-A3B at batch 208 to 256), and at 257 to 1,024 rows (a prefill chunk's or a mixed batch's), with `wg2`, `wg2m`, `wg2w` and `wg2f`, the one whose tiles, K unsplit, make one round of the GPU's multiprocessors at the least cost, where that is below the choice by M's (TinyLlama-1.1B's qkv and o at 384 and 512 rows); `s1x32`, `s1x40`, `s1x48`, `s2x32`, `s2x48`: the swapped tiles, 32, 40 or 48 rows of X by 64 or 128 rows of W with W's rows on the MMA's M, K split by the cost model, TMA kernels only, `s2x48` chosen by M for outputs of up to 2,048 columns over K of at least 4,096 at 161 to 192 rows (fp8: 129 to 192): TinyLlama-1.1B's down at batch 192, and with K unsplit in place of `s2x80` at 129 to 144 rows where its blocks make one round of the GPU's multiprocessors: the qkv projections of GPT-OSS-20B and Qwen3-30B-A3B at batch 136; `s2x160`, `s2x176`, `s2x192`: the swapped tiles of a decode's whole batch, 160, 176 or 192 rows of X by 128 of W, K split by the cost model, TMA kernels only, `s2x160` chosen by M at 129 to 160 rows as `wg3` above it, and at 257 to 320 rows in place of three row tiles of 128 where those run on persistent blocks or cost more (the LM heads and the gate_ups of Llama-3.2-1B and Llama-3.1-8B at 300 rows), `s2x176` at 161 to 176 rows where it splits K (fp16/bf16); `s1x80`, `s2x80`, `s3x80`, `s2x88`, `s3x88`: 80 or 88 rows of X by 64, 128 or 192 rows of W, K split by the cost model, W multicast to the two row tiles where K is unsplit, TMA kernels only, chosen by M (fp16/bf16 and fp8) at 129 to 160 rows (80) and 161 to 176 (88): `s2x80` or `s2x88` with K unsplit first where its blocks fill more than 55 % of a round (the qkv projections of GPT-OSS-20B, Qwen3-30B-A3B and Llama-3.1-8B at batch 160), then where the one-row tiles are not taken `s2x80` or `s2x88` for outputs of up to 2,048 columns over K of at least 4,096 (fp8: above 4,096; TinyLlama-1.1B's down at batch 160), else `s3x80` or `s3x88` where its tiles fill most of a round unsplit or (fp16/bf16) its split leaves each block at least 16 k-tiles (TinyLlama-1.1B's gate_up at batch 160 and 176), and for fp16/bf16 where `s2x160` or `s2x176` would split K four ways or more, split as many ways where the blocks make one round and keep 16 k-tiles each (GPT-OSS-20B's o at batch 145 to 176); `s1x72`, `s1x136`: 72 or 136 rows of X by 64 rows of W, K split by the cost model, TMA kernels only; `s2x104`, `s3x104`, `s2x208`: 104 rows of X by 128 or 192 rows of W (W multicast to the two row tiles where K is unsplit) or 208 by 128, K split by the cost model, TMA kernels only, chosen by M at 193 to 208 rows: `s2x208` with K unsplit where its tiles outnumber the GPU's multiprocessors, on persistent blocks (the LM heads and Llama-3.1-8B's gate_up at batch 193 to 208), or for fp16/bf16 fill at least 90 % of one round of them (Llama-3.2-1B's gate_up), else for fp16/bf16 `s3x104` unsplit where its blocks make one round at least 80 % full (TinyLlama-1.1B's gate_up), and for fp16/bf16 `s2x104` at its own split in place of a plan that splits K on 128-row tiles (the downs of TinyLlama-1.1B, Llama-3.2-1B and Llama-3.1-8B); `s2x72`, `s2x200`, `s2x224`: 72, 200 or 224 rows of X by 128 rows of W, K split by the cost model, TMA kernels only, chosen by M: `s2x200` in place of `s2x208` at 193 to 200 rows, `s2x224` as `s2x208` at 209 to 224 rows (its tiles outnumbering the multiprocessors, on persistent blocks, or for fp16/bf16 filling 90 % of one round: the LM heads and the gate_ups of Llama-3.2-1B and Llama-3.1-8B), `s2x72` K unsplit at 193 to 216 rows where `s2x208` and `s3x104` are not taken, for fp16/bf16 where its tiles make one round of the GPU's multiprocessors at least 80 % full over K of up to 4,096 (the qkv projections of GPT-OSS-20B and Qwen3-30B-A3B), for fp8 on persistent blocks where its tiles make at most two rounds at least 90 % full (TinyLlama-1.1B's gate_up); `p1x48`, `p1x72`, `p1x112`, `p1x136`: 48, 72, 112 or 136 rows of X by 64 rows of W on two consumer warpgroups taking alternate k-tiles, K split at most two ways where the blocks still make one round, TMA kernels only, chosen by M: `p1x136` at 129 to 136 rows where K unsplit (fp16/bf16: or split two ways) leaves each block 32 to 64 k-tiles and the blocks make one round of the GPU's multiprocessors (Llama-3.1-8B's qkv and, fp16/bf16, o at batch 136), then `p1x72` unsplit likewise at 129 to 144 rows (Llama-3.2-1B's fp16/bf16 qkv and fp8 Llama-3.1-8B's o at batch 144; for fp16/bf16 over 64 k-tiles `p1x72c21` where its blocks make one round at least 65 % full: the o projections of Llama-3.1-8B and GPT-OSS-20B at batch 144), `p1x72` also unsplit for fp16/bf16 at 193 to 216 rows where `s2x72` is not taken and its blocks make one round at least 65 % full, each streaming 33 to 64 k-tiles (Qwen3-30B-A3B's o), `p1x48` unsplit for fp16/bf16 in place of a narrow tile at 129 to 144 rows where its three row tiles make one round at least 70 % full (TinyLlama-1.1B's qkv and o at batch 136) and for fp8 at 129 to 192 rows where its three or four row tiles do with 16 to 32 k-tiles a block (the o projections of 2,048 outputs at batch 136 to 192, TinyLlama-1.1B's qkv at 136); `p1x72c13`, `p1x72c21`, `p1x72c23`, `p1x48c12`, `p1x48c13`, `p1x112c21`, `p1x112c22`: `p1x72`, `p1x48` and `p1x112` in thread-block clusters of 1 x 3, 2 x 1, 2 x 3, 1 x 2, 1 x 3, 2 x 1 and 2 x 2 row tiles by column tiles, the weight's loads multicast to the row tiles of a column tile and the input's to the column tiles of a row tile, K unsplit (with XRUN_CUDA_GEMM_SPLIT above 1 the unclustered tile split), TMA kernels only, `p1x72c21` chosen by M as above, `p1x112c21` for fp16/bf16 at 193 to 224 rows in place of `p1mc42` or `p1mc41` where its clusters make one round of the GPU's multiprocessors at least 65 % full (GPT-OSS-20B's o at batch 193 to 224); `p1mc21`, `p1mc41`, `p1mc42`, `p1sc21`, `p1sc41`, `wg1nc21`: `p1m`, `p1s` and `wg1n` in clusters of 2 x 1, 4 x 1 or 4 x 2 row tiles by column tiles, multicast likewise, K unsplit, TMA kernels only, `p1mc21`, `p1mc42` and `p1mc41` chosen by M for fp16/bf16 where a 64 x 96 plan in two row tiles streams at least 32 k-tiles a block or in four at least 45, in four row tiles `p1mc42` where its clusters of eight fit one round, else `p1mc41` (the qkv projections of Llama-3.1-8B, GPT-OSS-20B and Qwen3-30B-A3B at batch 128, the o projections of GPT-OSS-20B and Qwen3-30B-A3B at 256); `h1s`, `h1n`, `h1m`, `h1sc21`, `h1nc21`, `h1mc21`, `h1mc41`: 64 x 64, 64 x 80 and 64 x 96 on two consumer warpgroups that each take half of the weight's tile every k-tile, alone or in clusters of 2 x 1 or 4 x 1, K unsplit, TMA kernels only (the fused SwiGLU and residual add run the one-consumer tile), `h1s` chosen by M for fp16/bf16 above 64 rows in place of `wg1s` (TinyLlama-1.1B's qkv at batch 128, its o at 256); `p1s`, `p1m`: 64 x 64 and 64 x 96 with two consumer warpgroups taking alternate k-tiles, K split at most two ways where the blocks still make one round of the GPU's multiprocessors, TMA kernels only, chosen by M for fp16/bf16 at 97 to 128 rows where each block runs at most 48 k-tiles: `p1s` where that splits K two ways (TinyLlama-1.1B's o and down at batch 128), else `p1m` unsplit (Qwen3-30B-A3B's qkv at 128, which then runs in clusters as `p1mc21`), failing both `p1s` unsplit where each block runs 49 to 64 k-tiles (the o projections of Llama-3.1-8B and GPT-OSS-20B at batch 128), for fp8 `p1s` at 33 to 256 rows in place of a plan that splits K on 64- or 128-row tiles where its blocks make one round at least 45 % full and each runs at most 64 k-tiles (the downs of TinyLlama-1.1B and Llama-3.2-1B at batch 64 to 256, GPT-OSS-20B's o and Llama-3.1-8B's down at 64), and `p1m` unsplit at 129 to 256 rows in place of `wg1n` or `wg1m` unsplit or of 128-row tiles splitting K where its tiles make one round and each block streams at most 64 k-tiles (the qkv projections of TinyLlama-1.1B and Llama-3.2-1B at batch 256); `wg3`: 192 x 128 with three consumer warpgroups, K split by the cost model, TMA kernels only, chosen by M at 161 to 192 rows (fp16/bf16 and fp8), before `s2x48`, where its tiles fill a round of the GPU's multiprocessors unsplit (the LM heads and the gate_ups of Llama-3.2-1B and Llama-3.1-8B at batch 192) or its split leaves each block at least 16 k-tiles and the blocks fill two thirds of a round (Llama-3.1-8B's qkv, o and down at batch 192; at 161 to 176 rows fp16/bf16 such splits run on `s2x176`)); `wide`: the choice by M without the tiles sized for decode batches (128 x 176, the narrow and the alternating ones)"),
	CUDAGemmWaves: intSwitch("XRUN_CUDA_GEMM_WAVES", 0, 0, 8, "`0`..`8`",
		"the own GEMM's split-K target, blocks per multiprocessor: `0` chooses by M (one on the warpgroup-MMA fp16/bf16 tiles up to M = 64, else two); `1`..`8` sets it, for every tile (the narrow 64-row ones, otherwise K unsplit, too)"),
	CUDAGemmSplit: intSwitch("XRUN_CUDA_GEMM_SPLIT", 0, 0, 8, "`0`..`8`",
		"on Hopper, the own GEMM's launches on the TMA kernels split K this many ways, whatever tile the planner or XRUN_CUDA_WGMMA_TILE chose (fewer where that many would leave a block no k-tiles; the split's blocks add their partial tiles in a thread-block cluster; `1`: K unsplit), to time a tile at a split of one's choice; `0` leaves the split to the planner"),
	CUDAGemmTMA: choiceSwitch("XRUN_CUDA_GEMM_TMA", "auto", func(v string) bool { return v == "1" || v == "0" },
		"`1`, `0`", "on Hopper, the own GEMM's warpgroup-MMA tiles (16-bit and E4M3) fed by TMA loads from a producer warpgroup through an mbarrier pipeline (gemm_tma.cu) where a launch does not split K (prefill chunks, wide outputs) or splits it over more than 64 rows, the cp.async kernels with split-K partials in global memory (gemm_wgmma.cu) where a launch of at most 64 rows splits it; `1` puts every launch on TMA (a split then adds its partial tiles inside a thread-block cluster), `0` none"),
	CUDAWgmmaFP8: flagSwitch("XRUN_CUDA_WGMMA_FP8", true, true,
		"the own FP8 GEMM (dtype fp8, gemm_plugin: disable) above 8 rows on Hopper's warpgroup MMA in its E4M3 form (with XRUN_CUDA_WGMMA); `0` runs it on CUDA-core tiles (fp8.cu), 10-20x slower"),
	CUDAAttnTC: choiceSwitch("XRUN_CUDA_ATTN_TC", "auto", func(v string) bool { return v == "0" || attnTCName.MatchString(v) },
		"`0`, a configuration (`tc-m1-k4-t16-s3`, `wg-m4-k1-t64-s2`, `ws-m8-k1-t64-s3`)",
		"the tensor-core attention kernel, its configuration chosen per launch; `0` puts every attention launch on the CUDA-core kernel, a configuration's name puts the launches it can serve on it (`wg-`: the warpgroup-MMA prefill kernels, Hopper only; `ws-`: their warp-specialised form, a producer warpgroup loading beside the two that multiply)"),
	CUDAAttnSplit: flagSwitch("XRUN_CUDA_ATTN_SPLIT", true, true, "split-K decode attention (an item's keys over several blocks); `0` never splits"),
	CUDAAttnRope: choiceSwitch("XRUN_CUDA_ATTN_ROPE", "auto", func(v string) bool { return v == "0" || v == "1" },
		"`1`, `0`",
		"RoPE and the KV cache write folded into decode attention (one kernel less a layer): `auto` folds them except over an FP8 cache at more than 1,024 decode items (sequences times KV heads), where the folded kernel measured slower than the three it replaces (on an H100, Llama-3.1-8B's decode of 2,048 requests: 389 against 349 us, +1.6 % output tok/s at 128/128 unfolded); `1` folds wherever a kernel can, `0` runs them in kernels of their own before it"),
	CUDAAttnShort: intSwitch("XRUN_CUDA_ATTN_SHORT", 256, math.MinInt, math.MaxInt, "an integer",
		"decode items of at most this many keys are done in one pass, unsplit; `0` or less: never"),
	CUDAAttnXL: choiceSwitch("XRUN_CUDA_ATTN_PREFILL_ROWS", "auto", func(v string) bool { return v == "64" || v == "128" },
		"`64`, `128`",
		"query rows a block of prefill attention takes (tokens of an item times the query heads of a KV head): `auto` takes 128 (eight row warps, each 64-key tile of the cache read and, over an FP8 cache, decoded once for twice the rows) at head dimension 128 on the tensor cores where the iteration's prompt chunks attend on average to at least 512 keys over an FP8 cache (fixed slots or paged), 2,048 over a paged 16-bit one, 16,384 over a contiguous 16-bit one, else 64 (on the warpgroup-MMA kernels, XRUN_CUDA_ATTN_WGMMA, whose 128-row blocks run two a multiprocessor: from 128 keys over any cache, where on an H100 64 prompts of 128 tokens took 89 against 100 us over a 16-bit cache, 100 against 122 over a paged FP8 one with bf16 queries); on an H100 at Llama-3.1-8B's heads, a chunk of 8,192 tokens after 12,288 cached ones took 10.7 ms a layer against 12.2 over an FP8 cache (bf16), 11.0 against 13.1 over a paged FP8 one, 9.9 against 10.9 over a paged 16-bit one, while 64 prompts of 128 tokens took 131 against 114 us over a 16-bit cache (end to end, TensorRT-LLM's 20000/2000 row of 40 requests, median of 3: 998 output tok/s against 959; 2048/128 of 600: 2,962 against 2,912); `128` takes 128 wherever a kernel has them (head dimension 128), `64` never"),
	CUDAAttnWG: flagSwitch("XRUN_CUDA_ATTN_WGMMA", true, true,
		"on Hopper, prefill attention at head dimension 128 runs on the warpgroup MMA (attention_wg.cu: wgmma.mma_async, Q and each 64-key tile of K and V read from swizzled shared memory, P from registers), over 16-bit and FP8 caches, fixed slots or paged; `0` keeps it on mma.sync (attention_tc), as other GPUs run it"),
	CUDAAttnWGE4M3: flagSwitch("XRUN_CUDA_ATTN_WG_E4M3", false, true,
		"kv_cache_dtype fp8, on the warpgroup-MMA prefill attention (XRUN_CUDA_ATTN_WGMMA): its products on Hopper's E4M3 tensor cores (attention_wg.cu's _f8e kernels): each query row rounded to E4M3 with a scale of its own, the key codes taken as stored, P times 256 rounded to E4M3 each 64-key tile against the value codes transposed; on an H100 at Llama-3.1-8B's heads a chunk of 8,192 tokens after 12,288 cached ones took 5.74 ms a layer against 6.17 with bf16 queries and 6.98 with fp16, 4 prompts of 2,048 477 against 490 us, 64 prompts of 128 111 against 100 us (end to end, one run each: TensorRT-LLM's 20000/2000 row of 40 requests 1,129 output tok/s against 1,111, 5000/500 of 183 3,056 against 3,030); off by default: P's and Q's roundings are a numerical change the 16-bit products do not make"),
	CUDAAttnWS: flagSwitch("XRUN_CUDA_ATTN_WS", true, true,
		"on Hopper, 128-row prefill launches whose prompt chunks attend on average to at least 1,024 keys over an FP8 cache or 2,048 over a 16-bit one (fixed slots or paged) run on the warp-specialised form of the warpgroup-MMA kernels (attention_ws.cu: a producer warpgroup copies, and over an FP8 cache decodes, each 64-key tile into three stages while two warpgroups, Q in their registers, multiply, each queuing Q K^T of one tile with P V of the one before and taking the softmax under it; bf16 queries over an FP8 cache multiply in fp16); on an H100 at Llama-3.1-8B's heads a chunk of 8,192 tokens after 12,288 cached ones took 4.28 ms a layer against 5.99 over an FP8 cache with bf16 queries, 4.65 against 5.62 over a 16-bit one, 4 prompts of 2,048 362 against 447 us (FP8, bf16), 415 against 459 (paged 16-bit); end to end, one run each on one H100 (before Q moved to registers), TensorRT-LLM's 20000/2000 row of 40 requests 1,163 output tok/s against 1,120, 5000/500 of 183 3,138 against 3,064, 2048/128 of 600 3,232 against 3,193; `0` keeps them on attention_wg.cu"),
	CUDAAttnF8Regs: flagSwitch("XRUN_CUDA_ATTN_F8_REGS", true, true,
		"kv_cache_dtype fp8: decode attention loads its MMA operands from the E4M3 codes and converts them in registers by bit arithmetic (attention_tc_f8.cu's _f8r kernels); `0` decodes each tile into 16-bit tiles in shared memory first, as prefill does"),
	CUDAAttnF8MMA: choiceSwitch("XRUN_CUDA_ATTN_F8_MMA", "0", func(v string) bool { return v == "qk" || v == "qkpv" },
		"`qk`, `qkpv`", "kv_cache_dtype fp8, head dimension 128, a contiguous cache, sm_89 and later: decode attention's products on the E4M3 tensor cores; `qk` Q K^T (attention_tc_f8.cu's _f8q kernels: each query row split into two E4M3 terms, the key codes unconverted), `qkpv` P V too (_f8p: P split alike, the value codes unconverted); `0` converts the codes (XRUN_CUDA_ATTN_F8_REGS chooses how); for Ada and Blackwell, whose mma.sync takes E4M3 natively: Hopper's has no E4M3 form, the compiler converts to fp16 there, and on an H100 both measured slower than `0` (433 and 580 us a launch against 325 at Llama-3.1-8B's decode of 2,048 requests, BenchmarkAttention)"),
	CUDAAttnF8Swap: choiceSwitch("XRUN_CUDA_ATTN_F8_SWAP", "auto", func(v string) bool { return v == "0" || v == "1" },
		"`1`, `0`",
		"kv_cache_dtype fp8: decode launches of at most 8 query rows a block (one token of a KV head's 4 or 8 query heads), RoPE not folded in, take their products with the roles swapped (attention_tc_f8.cu's _f8t kernels): S^T = K Q^T with the key codes as mma's A operand and the queries as its n = 8, O^T = V^T P^T, where _f8r's 16 query rows a warp were three quarters padding at Llama-3.1-8B's 4 query heads a KV head; half the mma and half the output accumulators (96 registers a thread against 164); `auto` swaps where the cache holds at most 1,024 positions a sequence: on an H100 (BenchmarkAttention at Llama-3.1-8B's heads, us a launch) 4 % faster where contexts are short (2,048 sequences of 129-256 keys 303.5 against 317-319, 256 of them 45.4-45.7 against 47.6-47.7), level or 1 % slower where they are long (444 of 129-2,176 keys 392.6-393.5 against 392.4-393.0, 228 of 129-4,224 378.5-379.6 against 374.9-375.8); end to end TensorRT-LLM's 128/128 row of 6,000 requests 29,448 and 29,396 output tok/s against 28,878 and 28,943 (alternating, one run each); `1` swaps at any length, `0` never"),
	CUDAAttnSwap: flagSwitch("XRUN_CUDA_ATTN_SWAP", false, true,
		"`1`: decode launches over a 16-bit cache of at most 8 query rows a block take their products with the roles swapped, as XRUN_CUDA_ATTN_F8_SWAP's _f8t kernels over an FP8 one (attention_tc.cu's _sw kernels: S^T = K Q^T, O^T = V^T P^T, a KV head's query heads as mma's n = 8), with RoPE folded in or not, fixed slots or paged; off, since on an H100 its gain is within a run's noise (TinyLlama-1.1B at batch 256, `disable`: 81,227 and 80,962 output tok/s against 80,756 and 80,728, alternating; the batch-256 decode kernel 21.3 against 22.1 us, BenchmarkAttention)"),
	CUDAMoETile: choiceSwitch("XRUN_CUDA_MOE_TILE", "auto", func(v string) bool { return v == "s" || v == "m" || v == "l" },
		"`s`, `m`, `l`", "the expert GEMMs' row tile, chosen per launch; a size forces it"),
	CUDAMoEHints: intSwitch("XRUN_CUDA_MOE_HINTS", 3, 0, 3, "`0`..`3`",
		"the L2 hints of the expert GEMMs' weight loads: 1 prefetch, 2 evict-first, 3 both"),
	CUDAMoELibrary: flagSwitch("XRUN_CUDA_MOE_LT", true, true,
		"`gemm_plugin: auto` runs the expert GEMMs of eager iterations on cuBLASLt; `0` keeps them on the own grouped kernels there too"),
	CUDALtTune: flagSwitch("XRUN_CUDA_LT_TUNE", true, true,
		"cuBLASLt's algorithm for the decode batch sizes the engine warms (M up to 256) chosen by timing the heuristic's candidates before the run, every other shape taking its first choice; `0` takes its first choice everywhere"),
	// Off until a serving sweep on a GPU says what it saves and costs.
	CUDALtReuse: flagSwitch("XRUN_CUDA_LT_REUSE", false, true,
		"`1`: a cuBLASLt GEMM shape met for the first time, outside the decode batch sizes that are timed, takes the algorithm the heuristic chose for an earlier M of its power-of-two bucket where cublasLtMatmulAlgoCheck accepts it, as TensorRT-LLM's GEMM plugin keeps a tactic per M range; new plans then skip the heuristic (mixed prompt and decode batches meet hundreds of new M, built inside the timed run); by default every new M asks the heuristic"),
	CUDASync: flagSwitch("XRUN_CUDA_SYNC", false, true,
		"`1` synchronises after every kernel launch outside graph capture, so that a fault names its kernel (debugging; slow)"),
	// Printing changes no number.
	CUDALtLog: flagSwitch("XRUN_CUDA_LT_LOG", false, false, "`1` prints each cuBLASLt choice made by timing on stderr"),
	// The cell's record already names where its ceilings came from, and
	// they are no repeat's: nothing to mix under --resume.
	MeasureCeilings: flagSwitch("XRUN_MEASURE_CEILINGS", false, false,
		"`1` measures the roofline's ceilings on a GPU xrun knows them for too, replacing a kept measurement (cell.json's `ceilings` say so)"),
	MLAAbsorb: flagSwitch("XRUN_MLA_ABSORB", true, true,
		"MLA models (DeepSeek-V3) attend at decode in the absorbed form, over the latent cache; `0` decompresses every cached key and value at every step (the plain form)"),
	KVPaged: flagSwitch("XRUN_KV_PAGED", true, true,
		"the paged KV cache where the backend has one (the CPU's, and the CUDA backend's as XRUN_CUDA_KV_PAGED says; MLA and GPT-OSS models keep fixed slots): requests hold blocks of XRUN_KV_BLOCK positions as their lengths need and are admitted while the blocks are free; `0` gives every request a slot of the longest request's length"),
	CUDAKVPaged: choiceSwitch("XRUN_CUDA_KV_PAGED", "auto", func(v string) bool { return v == "0" || v == "1" },
		"`1`, `0`",
		"the CUDA backend's paged KV cache (with XRUN_KV_PAGED; paged attention kernels, over an FP8 cache too, tokens identical to the fixed slots'): `auto` pages a run where paging admits at least 5 % more requests at once than fixed slots of its longest request (lengths that vary), and keeps fixed slots where those hold every request the run can take or paging would not admit more, since reading through block tables costs (on an H100, Llama-3.1-8B FP8 with an FP8 cache, batch 2048: +4.0 % output tok/s paged at 512 +- 256 in and out, -1.1 % at 128/128); `1` pages every run, `0` none"),
	KVBlock: pow2Switch("XRUN_KV_BLOCK", 32, 16, 256,
		"positions per block of the paged KV cache (TensorRT-LLM's tokens_per_block, whose default is 32 too)"),
	WarmShapes: flagSwitch("XRUN_WARM_SHAPES", true, true,
		"before a run's warm-up requests (and before xrun serve takes requests), a few untimed decode iterations at every batch size the backend builds something for (CUDA: each graph bucket, its cuBLASLt plans), as TensorRT-LLM and vLLM capture their graphs at start-up; `0` leaves the building to the timed iterations that first reach each size"),
}

// All lists the switches in the table's order.
func (t *SwitchTable) All() []*Switch {
	v := reflect.ValueOf(t).Elem()
	out := make([]*Switch, 0, v.NumField())
	for i := range v.NumField() {
		out = append(out, v.Field(i).FieldByName("Switch").Addr().Interface().(*Switch))
	}
	return out
}

// Lookup returns the switch named name, or nil.
func (t *SwitchTable) Lookup(name string) *Switch {
	for _, s := range t.All() {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// NonDefaultSwitches returns the recorded switches whose values in effect
// in getenv's environment are not their defaults, name -> value; nil when
// there are none.
func NonDefaultSwitches(getenv func(string) string) map[string]string {
	var m map[string]string
	for _, s := range Switches.All() {
		if v := s.Value(getenv); s.Recorded && v != s.Default {
			if m == nil {
				m = map[string]string{}
			}
			m[s.Name] = v
		}
	}
	return m
}

// FormatSwitches writes switches as NAME=VALUE, sorted by name, joined
// by sep.
func FormatSwitches(switches map[string]string, sep string) string {
	names := make([]string, 0, len(switches))
	for k := range switches {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		names[i] = k + "=" + switches[k]
	}
	return strings.Join(names, sep)
}

// SwitchesMarkdown is the README's table of the switches.
func SwitchesMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | default | set to | what it does | recorded |\n|---|---|---|---|---|\n")
	for _, s := range Switches.All() {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", s.Name, s.Default, s.Values, s.Meaning, map[bool]string{true: "yes", false: "no"}[s.Recorded])
	}
	return b.String()
}

// ParseSwitches reads every switch's value in effect from the environment
// getenv reads (os.Getenv for the process's): the one place their values
// are read. Each field of model.Switches is the table's entry of the same
// name (TestParseSwitches).
func ParseSwitches(getenv func(string) string) model.Switches {
	t := &Switches
	return model.Switches{
		Overlap:           t.Overlap.On(getenv),
		CUDAGraphs:        t.CUDAGraphs.On(getenv),
		CUDAPDL:           t.CUDAPDL.On(getenv),
		CUDAFuse:          t.CUDAFuse.On(getenv),
		CUDAFuseNorm:      t.CUDAFuseNorm.On(getenv),
		CUDAFP8Fuse:       t.CUDAFP8Fuse.On(getenv),
		CUDAGemmEpi:       t.CUDAGemmEpi.On(getenv),
		CUDAGemmEarlyW:    t.CUDAGemmEarlyW.On(getenv),
		CUDAGemmPersist:   t.CUDAGemmPersist.On(getenv),
		CUDAGemmMulticast: t.CUDAGemmMulticast.On(getenv),
		CUDAGemv:          t.CUDAGemv.On(getenv),
		CUDAGemvMaxM:      t.CUDAGemvMaxM.Int(getenv),
		CUDAGemvPlan:      t.CUDAGemvPlan.On(getenv),
		CUDAL2Prefetch:    t.CUDAL2Prefetch.Int(getenv),
		CUDAWgmma:         t.CUDAWgmma.On(getenv),
		CUDAWgmmaFP8:      t.CUDAWgmmaFP8.On(getenv),
		CUDAWgmmaTile:     t.CUDAWgmmaTile.Get(getenv),
		CUDAGemmWaves:     t.CUDAGemmWaves.Int(getenv),
		CUDAGemmSplit:     t.CUDAGemmSplit.Int(getenv),
		CUDAGemmTMA:       t.CUDAGemmTMA.Get(getenv),
		CUDAAttnTC:        t.CUDAAttnTC.Get(getenv),
		CUDAAttnSplit:     t.CUDAAttnSplit.On(getenv),
		CUDAAttnRope:      t.CUDAAttnRope.Get(getenv),
		CUDAAttnShort:     t.CUDAAttnShort.Int(getenv),
		CUDAAttnXL:        t.CUDAAttnXL.Get(getenv),
		CUDAAttnWG:        t.CUDAAttnWG.On(getenv),
		CUDAAttnWGE4M3:    t.CUDAAttnWGE4M3.On(getenv),
		CUDAAttnWS:        t.CUDAAttnWS.On(getenv),
		CUDAAttnF8Regs:    t.CUDAAttnF8Regs.On(getenv),
		CUDAAttnF8MMA:     t.CUDAAttnF8MMA.Get(getenv),
		CUDAAttnF8Swap:    t.CUDAAttnF8Swap.Get(getenv),
		CUDAAttnSwap:      t.CUDAAttnSwap.On(getenv),
		CUDAMoETile:       t.CUDAMoETile.Get(getenv),
		CUDAMoEHints:      t.CUDAMoEHints.Int(getenv),
		CUDAMoELibrary:    t.CUDAMoELibrary.On(getenv),
		CUDALtTune:        t.CUDALtTune.On(getenv),
		CUDALtReuse:       t.CUDALtReuse.On(getenv),
		CUDASync:          t.CUDASync.On(getenv),
		CUDALtLog:         t.CUDALtLog.On(getenv),
		MeasureCeilings:   t.MeasureCeilings.On(getenv),
		MLAAbsorb:         t.MLAAbsorb.On(getenv),
		KVPaged:           t.KVPaged.On(getenv),
		CUDAKVPaged:       t.CUDAKVPaged.Get(getenv),
		KVBlock:           t.KVBlock.Int(getenv),
		WarmShapes:        t.WarmShapes.On(getenv),
	}
}

// DefaultSwitches are the switches' values with none of them set.
func DefaultSwitches() model.Switches { return ParseSwitches(func(string) string { return "" }) }

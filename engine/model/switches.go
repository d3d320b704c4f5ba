package model

// Switches are the values in effect of the engine's switches, the
// environment variables that engine.Switches lists with their defaults and
// meanings (and which field of this type each one sets: the one of the
// same name). engine.ParseSwitches reads them from an environment once,
// when an engine opens, and from there they are passed down, never read
// again: engine.Config.Switches to the scheduler, BackendOptions.Switches
// to the backend, and on to engine/cuda's device. The model itself reads
// none of them; it lives here because BackendOptions does.
type Switches struct {
	Overlap           bool   // XRUN_OVERLAP
	CUDAGraphs        bool   // XRUN_CUDA_GRAPHS
	CUDAPDL           bool   // XRUN_CUDA_PDL
	CUDAFuse          bool   // XRUN_CUDA_FUSE
	CUDAFuseNorm      bool   // XRUN_CUDA_FUSE_NORM
	CUDAFP8Fuse       bool   // XRUN_CUDA_FP8_FUSE
	CUDAGemmEpi       bool   // XRUN_CUDA_GEMM_EPILOGUE
	CUDAGemmEarlyW    bool   // XRUN_CUDA_GEMM_EARLY_W
	CUDAGemmPersist   bool   // XRUN_CUDA_GEMM_PERSIST: persistent TMA GEMM blocks where tiles make more than a wave
	CUDAGemmMulticast bool   // XRUN_CUDA_GEMM_MULTICAST: W's TMA loads multicast to clusters of two row tiles
	CUDAGemv          bool   // XRUN_CUDA_GEMV
	CUDAGemvMaxM      int    // XRUN_CUDA_GEMV_MAXM
	CUDAGemvPlan      bool   // XRUN_CUDA_GEMV_PLAN
	CUDAL2Prefetch    int    // XRUN_CUDA_L2_PREFETCH: percent of a dense layer's gate_up rows read into L2 early
	CUDAWgmma         bool   // XRUN_CUDA_WGMMA: the own GEMM on Hopper's warpgroup MMA (default on)
	CUDAWgmmaFP8      bool   // XRUN_CUDA_WGMMA_FP8: its E4M3 form for the own FP8 GEMM
	CUDAWgmmaTile     string // XRUN_CUDA_WGMMA_TILE: "auto", "wg1", "wg2", "wg2m" or "wg2w"
	CUDAGemmWaves     int    // XRUN_CUDA_GEMM_WAVES: the own GEMM's split-K target (0: by M)
	CUDAGemmSplit     int    // XRUN_CUDA_GEMM_SPLIT: the TMA GEMMs' split of K forced (0: the planner's)
	CUDAGemmTMA       string // XRUN_CUDA_GEMM_TMA: "auto", "1" or "0": its warpgroup-MMA tiles fed by TMA
	CUDAAttnTC        string // XRUN_CUDA_ATTN_TC: "auto", "0" or a configuration's name
	CUDAAttnSplit     bool   // XRUN_CUDA_ATTN_SPLIT
	CUDAAttnRope      string // XRUN_CUDA_ATTN_ROPE: "auto", "1" or "0": RoPE and the cache write folded into decode attention
	CUDAAttnShort     int    // XRUN_CUDA_ATTN_SHORT
	CUDAAttnXL        string // XRUN_CUDA_ATTN_PREFILL_ROWS: "auto", "64" or "128": query rows a prefill attention block takes
	CUDAAttnWG        bool   // XRUN_CUDA_ATTN_WGMMA: prefill attention on Hopper's warpgroup MMA (default on)
	CUDAAttnWGE4M3    bool   // XRUN_CUDA_ATTN_WG_E4M3: its products over an FP8 cache on the E4M3 tensor cores
	CUDAAttnWS        bool   // XRUN_CUDA_ATTN_WS: long prefill chunks on its warp-specialised form
	CUDAAttnF8Regs    bool   // XRUN_CUDA_ATTN_F8_REGS: FP8-cache decode attention converts in registers
	CUDAAttnF8MMA     string // XRUN_CUDA_ATTN_F8_MMA: "0", "qk" or "qkpv": its products on the E4M3 tensor cores (D 128, sm_89+)
	CUDAAttnF8Swap    string // XRUN_CUDA_ATTN_F8_SWAP: "auto", "1" or "0": its products with K and V as the A operands (_f8t)
	CUDAAttnSwap      bool   // XRUN_CUDA_ATTN_SWAP: the same over a 16-bit cache (_sw)
	CUDAMoETile       string // XRUN_CUDA_MOE_TILE: "auto", "s", "m" or "l"
	CUDAMoEHints      int    // XRUN_CUDA_MOE_HINTS
	CUDAMoELibrary    bool   // XRUN_CUDA_MOE_LT
	CUDALtTune        bool   // XRUN_CUDA_LT_TUNE
	CUDALtReuse       bool   // XRUN_CUDA_LT_REUSE: one heuristic choice per power-of-two bucket of M
	CUDASync          bool   // XRUN_CUDA_SYNC
	CUDALtLog         bool   // XRUN_CUDA_LT_LOG
	MeasureCeilings   bool   // XRUN_MEASURE_CEILINGS
	MLAAbsorb         bool   // XRUN_MLA_ABSORB (engine.New passes it as Options.MLAPlain)
	KVPaged           bool   // XRUN_KV_PAGED (the engine pages the cache where the backend is a Pager)
	CUDAKVPaged       string // XRUN_CUDA_KV_PAGED: "auto", "1" or "0": whether the CUDA backend pages, and when
	KVBlock           int    // XRUN_KV_BLOCK: positions per KV block
	WarmShapes        bool   // XRUN_WARM_SHAPES: decode batch sizes warmed before a run (model.ShapeWarmer)
}

// Package cuda is the GPU layer of the engine: a small cgo shim that loads
// libcuda (entry points through cuGetProcAddress at the CUDA 13 API),
// cuBLASLt and NVRTC at run time, so building needs no CUDA header or
// library; one locked OS thread per GPU (Device.Do) with its primary
// context, streams, memory, graphs and events; the engine's kernels in CUDA
// C (kernels/*.cu, one family per file, each with its Go launcher and its
// check against engine/cpu's reference ops), compiled by NVRTC for the
// device's architecture and cached on disk by content hash; cuBLASLt
// matmul plans (gemm_plugin auto) beside the own tensor-core GEMM
// (gemm_plugin disable: mma.sync tiles, and on Hopper the warpgroup MMA fed
// by cp.async (gemm_wgmma.cu) or by TMA from a producer warpgroup, K split
// inside a thread-block cluster (gemm_tma.cuh's template, instantiated by
// gemm_tma.cu, the swapped tiles by gemm_tma_swap.cu, their persistent
// form by gemm_tma_swap_p.cu, those of alternating consumers by
// gemm_tma_swap_kp.cu, those in clusters that multicast both operands by
// gemm_tma_swap_cl.cu, the unswapped narrow ones in clusters by
// gemm_tma_cl.cu, those whose two consumers each take half of W's tile by
// gemm_tma_half.cu and, with each
// block's timeline recorded for BenchmarkGemmPhases, by
// gemm_tma_trace.cu; tensor maps encoded by
// gemm_tma.go), XRUN_CUDA_GEMM_TMA choosing per launch; GemmEpilogue adds
// SwiGLU or the residual add behind the TMA kernels' product), and for
// dtype fp8 cuBLASLt's FP8 GEMMs beside the
// own FP8 kernels, with the activation quantizers bit for bit engine/fp8's
// (fp8.go), for static scales also fused into the RMSNorm and SwiGLU that
// produce a GEMM's input (fp8_fused.go); attention over the KV cache
// (attention.go: the CUDA-core kernel, the mma.sync kernels of
// attention_tc.cuh for decode and prefill, over 16-bit or E4M3 caches,
// fixed slots or paged, and on Hopper the prefill on the warpgroup MMA,
// attention_wg.cu, long chunks on its warp-specialised form,
// attention_ws.cu); the roofline's ceilings (the table measured on the
// H100 and H200, and MeasureCeilings for any other GPU, kept beside the
// kernel cache); and the device probe behind `xrun devices`, run in a
// re-executed child so that a hung driver cannot hang xrun.
//
// NCCL, for the collectives of a cell split over GPUs (tp, ep), is loaded
// at run time like the other libraries: nccl_search.go lists where to
// look (XRUN_LIBNCCL, the loader's search, the CUDA folders, a PyTorch
// installation's nvidia-nccl wheel), nccl.go and shim_nccl.c load it
// (NCCL_NVLS_ENABLE=0 unless set) and wrap communicators, all-reduce and
// all-gather queued on a stream (NCCLInfo: version and file, for `xrun
// devices`), and nccl_kernels.go launches the two kernels around them
// (kernels/collective.cu: the all-gather's blocks laid side by side, and
// a rank's expert ids renumbered for expert parallelism).
//
// It knows tensors only as Buffers and shapes: the model, batching and
// scheduling live in engine and engine/model, which this package imports
// only for the engine switches (engine.ParseSwitches, model.Switches: the
// launchers' choices, fixed per Device by Open's WithSwitches, else parsed
// from the process's environment when it opens; tests may use engine/cpu
// and engine/model as references). Without cgo on Linux only a stub is
// built: Probe says why, Compiled is false.
//
// NVTX ranges (RangePush / RangePop, nvtx.c) need no NVTX header or library
// either: the shim speaks NVTX v3's attachment protocol itself. When a
// profiler sets NVTX_INJECTION64_PATH, the first NVTX call loads that tool
// once and lets it fill the core module's callback slots; with the variable
// unset nothing is loaded and a range costs one atomic load. A tool that
// fails to load or attach leaves NVTX off, NVTXError says why. The CUDA
// backend names one range per engine iteration of a profiled pass the way
// TensorRT-LLM does ("iteration 120: 2 ctx reqs, 64 ctx tokens, 62 gen
// reqs"), pushed on the GPU's thread so that nsys lays it over that
// iteration's launches and kernels.
package cuda

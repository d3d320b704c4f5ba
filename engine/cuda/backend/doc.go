// Package backend is the engine's GPU backend: engine/model's Backend over
// engine/cuda's kernels, cuBLASLt and graphs, registered with the engine as
// "cuda" by importing it (cmd/xrun does, for its side effect).
//
// Set-up (weights, activations, the KV cache, workspaces) allocates; the
// iterations do not. Ops are posted to the GPU's locked thread without
// waiting, and the iteration's one synchronisation is Argmax (ids copied
// back). Decode iterations are padded to a batch-size bucket (powers of two
// up to 16, then multiples of 16) and, from a bucket's second iteration
// on, replayed as one CUDA graph; prefill and mixed iterations run eagerly.
// The KV cache is [layer][slot][kv head][position][head dim] for K and for
// V, with one scratch slot that padded decode rows write to; or, paged
// (XRUN_KV_PAGED on, XRUN_CUDA_KV_PAGED at 1, or at auto where paging
// admits more requests: paged.go, paged_cuda.go),
// [layer][block][kv head][position in block][head dim] with a device block
// table per slot and a scratch block.
//
// Without cgo on Linux the constructor reports that no CUDA backend was
// compiled in. MoE layers (moe.go) route, group tokens by expert and run
// the expert GEMMs on the device; captured graphs include them.
//
// The files, by concern: backend.go (the Backend, its tensors and
// New / Close), memory.go (set-up, uploads and reads), pack.go (the batch
// layout packed on the host: packBatch, pure, tested without a GPU),
// layout.go (SetBatch: its upload and the graph bucket), graphs.go (eager,
// captured and replayed iterations), fusion.go (the op held back so that the
// next one can do its work too: why a dense layer at decode is five
// kernels), ops.go (the model's ops), pipeline.go (Argmax and the pipelined
// picks), profiling.go (CUPTI, the profiler window, NVTX), fp8.go (dtype
// fp8: E4M3 weights, the FP8 GEMMs, static input scales calibrated at load
// and the quantization fused into the norms and SwiGLU), kv_fp8.go
// (kv_cache_dtype fp8: an E4M3 KV cache), moe_fp8.go
// (dtype fp8's MoE experts), gptoss.go (GPT-OSS: bias adds, attention with
// sinks over a window on a ring KV cache, experts with biases and the
// clamped SwiGLU), mla.go
// (DeepSeek-V3's multi-head latent attention and grouped routing),
// moe_mxfp4.go (moe_weights mxfp4: experts kept as MXFP4 codes and scales,
// dequantized in the expert kernels; slower than bf16 experts on an H200,
// so auto stays bf16 here),
// collective.go (tensor and expert parallelism: model.Collective over
// NCCL, one communicator per rank on its GPU's thread, the operations
// queued like ops and captured in the iteration's graph; registered with
// the engine as "cuda"'s collectives) and collective_moe.go (a rank's
// share of a MoE layer's experts, model.ExpertShard).
//
// The engine switches (XRUN_CUDA_GRAPHS=0 runs decode eagerly too;
// XRUN_CUDA_SYNC=1 synchronises after every launch outside graphs, so that
// a fault names its kernel; the rest in engine.Switches) come in
// model.BackendOptions.Switches, parsed by engine.New; a backend opened
// on its own parses the process's environment once, in New.
package backend

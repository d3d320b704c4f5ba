// Package model is the transformer, written once against the Backend
// interface that engine/cpu and engine/cuda implement.
//
// # The model
//
// A decoder-only transformer covering the Llama, Mixtral, GPT-OSS,
// Qwen3-MoE and DeepSeek-V3 families: embedding; per layer RMSNorm, fused QKV GEMM,
// optional Qwen3 qk-norm, RoPE (default, llama3 or yarn frequencies, baked
// into a cos/sin table), grouped-query attention over a KV cache, output
// GEMM, fused residual-add + RMSNorm, then either a SwiGLU MLP (fused
// gate/up GEMM) or a MoE block (router GEMM, routing by the model's method,
// experts, weighted combine); a final norm and the LM head on the sampled
// rows only; greedy argmax. Weights are random and seeded (RandomValue: a
// counter-based generator every backend computes identically where the
// weight lives) or read from a WeightSource (engine/safetensors).
//
// Routing modes (routing_mode): Learned, or Perfect / Uniform / Zipf, which
// still run the router GEMM and then route by a forced table of expert ids
// (weight 1/k each, what TensorRT-LLM's ±10 replacement logits give).
//
// The DeepSeek-V3 architecture (mla.go) replaces attention by multi-head
// latent attention over a cache of compressed latents, routes by sigmoid
// scores within groups (routing_grouped.go: every routing mode keeps the
// group limit; perfect is TensorRT-LLM's planner for this method), adds
// shared experts to the MoE layers and keeps its first layers dense. Its
// ops are the optional MLABackend interface's; New refuses these models
// on a backend without it (ErrNoMLA).
//
// GPT-OSS (gptoss.go) adds attention sinks, sliding-window layers over a
// ring KV cache that keeps only their window (KVConfig.Ring), biases on
// the attention projections, the router and the experts, and the experts'
// clamped SwiGLU; its ops are the optional OSSBackend interface's, and New
// refuses these features on a backend without it (ErrNoOSS).
//
// MXFP4 experts (mxfp4.go, Options.MXFP4, moe_weights mxfp4): any MoE
// model's routed experts kept as OCP MXFP4 (GPT-OSS's checkpoint layout,
// 4.25 bits a weight) and dequantized inside the expert GEMMs, through the
// optional MXFP4Experts interface (ErrNoMXFP4 without it). Random experts
// and unquantized checkpoints are quantized by one rule
// (QuantizeMXFP4Block), identically on every backend; an MXFP4
// checkpoint's values come through unchanged.
//
// FP8 (fp8.go, Options.FP8 and KVFP8, dtype and kv_cache_dtype fp8): the
// linear layers of attention and the MLP or experts as E4M3 GEMMs in
// TensorRT-LLM's FP8 recipe (the optional FP8GEMMs interface), and an
// E4M3 KV cache (FP8KV); ErrNoFP8 without them. How the GEMMs scale their
// inputs is Options.FP8Activations (fp8_activations): a checkpoint's own
// scheme, dynamic, or static per-tensor scales, which weights quantized at
// load get from one pass over a fixed calibration batch at the end of New
// (fp8calib.go, the optional FP8Calibrator interface; expert stacks stay
// dynamic).
//
// # The backend contract
//
// Tensors are opaque handles the backend owns (device memory on CUDA).
// Weights and buffers are created in a set-up phase (Upload, Random, Alloc,
// NewKVCache, Write*); buffers are sized once for the largest iteration
// (Capacity) and ops take the number of valid rows, so no address changes
// between iterations.
//
// An iteration is one Batch: a flat run of tokens mixing prefill chunks and
// decode tokens, with per-token positions, per-sequence KV slot / first row
// / length / past length, and the rows whose logits are wanted. SetBatch
// uploads it once; then every op works on the whole batch (Embed, RMSNorm,
// AddRMSNorm, Add, MatMul, HeadNorm, RoPE, Attention, SwiGLU, Route, MoE,
// GatherRows); Argmax returns one token id per sampled row to the host:
// the iteration's only synchronisation and device-to-host copy (plus one
// small ReadInt32 of the expert counts on MoE models). Ops return no
// errors; a backend reports the first failure at the next synchronising
// call, as CUDA does. With no per-token host round trips and fixed
// addresses, a CUDA backend can implement each op as a kernel and capture
// a decode iteration as a CUDA graph per batch shape.
//
// The KV cache is fixed slots: each request in flight holds one slot of
// Capacity positions from admission to completion, and Attention writes the
// batch's keys/values at (slot, position) before attending over positions
// 0..pos of the slot. The CPU layout is [layer][slot][kv head][pos][dim].
//
// Three optional interfaces besides MLABackend: KVBudget (MaxKVSlots: the engine admits no
// more requests at once than the KV-cache budget holds, as TensorRT-LLM's
// capacity scheduler), Releaser (Free / FreeKVCache: buffers replaced when
// a later run needs them larger are freed before Close) and Pipeliner
// (ArgmaxStart / ArgmaxWait: the engine queues the next iteration, fed
// this one's picks on the device (Batch.Fed), before it waits for this
// one's tokens, as TensorRT-LLM's overlap scheduler does).
//
// Fused QKV rows are [q heads | k heads | v heads] × HeadDim; gate/up rows
// are [gate | up]; MoE expert weights are stacked [E, 2F, H] and [E, H, F].
//
// Profiling hooks (Profiler) are called by the engine at iteration
// boundaries: StartProfile, WindowStart/WindowStop (cuProfilerStart/Stop and
// CUPTI on CUDA), IterationStart/IterationEnd (one NVTX range per
// iteration), and Ops to drain per-operation timings.
//
// # Tensor and expert parallelism
//
// Options.Parallel makes a Model one rank of a split model (shard.go):
// Megatron-style tensor parallelism over a TP group (column-parallel QKV
// and gate/up, row-parallel o and down followed by an all-reduce, a
// vocabulary-parallel LM head whose logits are all-gathered), and MoE
// layers split over an EP group (whole experts per expert group, each
// expert's width over the group's ranks), combined by an all-reduce.
// Ranks exchange through the Collective interface (collective.go); each
// rank holds exact slices of the full weights, so a split model computes
// the unsplit model's tokens.
//
// This package knows nothing of scheduling, requests, files or metrics.
package model

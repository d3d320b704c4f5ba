// Package engine is the inference engine every cell runs on: the Engine
// interface the runner calls, the model zoo, the in-flight batching
// scheduler and the trtllm-bench metrics. The model itself lives in
// engine/model, written once against a backend interface implemented by
// engine/cpu (float32, the correctness oracle) and engine/cuda (fp16/bf16 on
// NVIDIA GPUs). Nothing in engine knows about files, YAML or results.
package engine

// Package trtllm is the engine driver for NVIDIA TensorRT-LLM (engine:
// trtllm): it runs TensorRT-LLM as a user would by hand and reads what
// its tools write.
//
//   - trtllm_backend tensorrt: the Hugging Face checkpoint is converted
//     (xrun's conversion script through TensorRT-LLM's own model classes,
//     or the spec's convert command) and built with trtllm-build
//     --gemm_plugin auto|disable --max_batch_size --max_num_tokens; built
//     engines are cached by every parameter of the build (TensorRT-LLM's
//     version included) and shared by cells, repeats and concurrent
//     workers (a lock file).
//   - every pass runs trtllm-bench --model ... throughput --dataset F
//     (xrun's own dataset file) with the cell's batch size, token budget,
//     KV-cache fraction, warm-up, parallel sizes and LLM API options, and
//     writes --report_json, --iteration_log and, from TensorRT-LLM 1.0,
//     --request_json; the per-request records become the cell's records
//     (xrun computes the metrics, as for its own engine), the iteration
//     log its iterations.csv.
//   - the profiled pass runs under nsys profile -c cudaProfilerApi with
//     TLLM_PROFILE_START_STOP set to the profile window (and, on the
//     PyTorch backend, TLLM_TORCH_PROFILE_TRACE for a Perfetto trace);
//     nsys stats' kernel summary becomes kernels.csv.
//   - routing_mode perfect sets ENABLE_PERFECT_ROUTER=1 on the models
//     TensorRT-LLM has a perfect router for.
//
// Differences between releases are read from the installed version
// (importlib.metadata, as trtllm-bench reports it): the --backend flag
// (0.17 to 0.21 select the TensorRT engine by leaving it out), per-request
// records (1.0 on), the TensorRT backend's removal (1.3).
package trtllm

// Package engine is the inference engine every cell runs on: the Engine
// the runner calls (New, Run, Close), the model zoo and Hugging Face
// model directories, the in-flight batching scheduler, and the
// trtllm-bench metrics.
//
// New resolves Config.Model (a zoo name or a directory with config.json
// and *.safetensors, read by engine/safetensors), creates the backend
// ("cpu" built in; others such as engine/cuda are added with
// RegisterBackend) and loads or generates the weights once. Run serves a
// dataset the way `trtllm-bench throughput` does offline: Config.Warmup
// requests (chosen with replacement, seeded) run first and untimed; then
// all requests are submitted at once; at most BatchSize are in flight (fewer
// when the backend's KV-cache budget cannot hold that many whole requests,
// as TensorRT-LLM's capacity scheduler; Result.MaxInFlight), and
// each iteration gives one token to every decoding request and fills the
// rest of MaxNumTokens with prefill chunks (chunked prefill); every request
// generates exactly its OutputTokens greedily (EOS ignored). Iterations are
// numbered from the first warm-up iteration, as TensorRT-LLM counts them,
// which is what ProfileWindow spans refer to. Before the warm-up requests,
// once per capacity, a backend that builds something per decode batch size
// (model.ShapeWarmer: CUDA graphs and cuBLASLt plans) has every such size
// run in iterations of their own, recorded nowhere (warm.go;
// XRUN_WARM_SHAPES), as TensorRT-LLM and vLLM capture graphs at start-up.
//
// Config.TP and Config.EP split the model over WorldSize(TP, EP) ranks
// as trtllm-bench's --tp and --ep do (parallel.go): a backend and a model
// slice per rank, each on its own locked OS thread, every scheduler call
// run on all ranks in lockstep. A backend splits only with collectives
// (RegisterCollectives): the CPU's are built in (in-process, cpu.Group),
// and the split is checked there against the unsplit model, token for
// token; the CUDA backend registers NCCL's (engine/cuda/backend, in builds
// with cgo on Linux). Share is a rank's slice of the model, what the plan
// and the rooflines count per GPU.
//
// A backend may report the roofline ceilings it measured on its device
// (CeilingsReporter: the CUDA backend does for a GPU without known ones);
// the runner keeps them in the cell's record.
//
// Result holds per-request records (the runner's requests.jsonl),
// per-iteration records (iterations.csv), Metrics (MetricKeys,
// ComputeMetrics: a pure function of the request records, and the pass's
// max_in_flight and GEMM plans built), the expert load
// of MoE models, and per-op timings of profiled passes (on the CPU these
// are the profile's "kernels").
//
// Switches is the one table of the environment variables that change how
// the engine runs (XRUN_OVERLAP, XRUN_CUDA_GRAPHS, ...: ablations and
// debugging aids), their defaults and meanings; code reads them only
// through it, so that the runner can record those not at their defaults
// (NonDefaultSwitches) and --resume never mixes two settings. New parses
// their values once (ParseSwitches, or Config.Switches) into a
// model.Switches that it passes to the scheduler and the backend;
// `xrun devices` lists them.
//
// Profiling: with RunOptions.Profile the backend's Profiler hooks are
// called at the top of every iteration as TLLM_PROFILE_START_STOP does
// (stop if the previous iteration ended a span, then start if this one
// begins one), with one named range per iteration; Hooks let other code
// (telemetry) follow the same boundaries.
//
// The model itself is engine/model, written once against the backend
// interface implemented by engine/cpu (float32, the correctness oracle)
// and engine/cuda (fp16/bf16 on NVIDIA GPUs). Nothing in engine knows about
// YAML, results files or the runner; the only files it reads are a model
// directory's config.json and checkpoints.
//
// Engines that are programs of their own implement Engine too, one pass
// per Run: engine/driver holds their contract with the runner and what
// they share (running a tool in its process group, records checked against
// the dataset, Nsight Systems), engine/trtllm drives TensorRT-LLM and
// engine/command any benchmark program. They are the engine packages that
// run processes and read the files those write; their profiled passes
// hand over a kernel summary (Result.KernelSummary) instead of Ops.
package engine

// Package driver is the contract between the runner and the engines that
// are programs of their own (TensorRT-LLM's trtllm-bench, any benchmark
// command), and what those drivers share: running a tool in its own
// process group with its output logged and its failure turned into the
// tool's own message, the commands a cell runs, per-request records in
// xrun's requests.jsonl format, JSON reports read by path, and Nsight
// Systems (the profiled pass's wrapper, and its kernel summary read back
// into kernels.csv).
//
// A driver answers the plan (Planner: which parameters a cell ignores and
// why, which values it cannot run, the commands it will run) and, in the
// cell's worker, opens an engine.Engine whose Run runs one pass of the
// cell as the tool runs it and returns the same records and metrics the
// built-in engine does. Everything around a pass — repeats, warm-up
// accounting, resume, time limits, GPU assignment, telemetry, Slurm — is
// the runner's and the same for every driver.
//
// It knows nothing of YAML, of results directories beyond the cell's own
// directory it is handed, or of how cells are scheduled.
package driver

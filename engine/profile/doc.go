// Package profile turns the op records of a profiled engine pass into what
// a performance engineer reads: the kernel summary (kernels.csv, with
// the columns of Nsight Systems' "CUDA GPU Kernel Summary" and, last,
// each kernel's exclusive time on its stream), a
// timeline in the Chrome trace event format (trace.json, for Perfetto and
// chrome://tracing) and a diagnosis computed from the numbers against a
// roofline. It computes a GPU cell's roofline from its records
// (CellRoofline), against the ceilings engine/cuda knows for the GPU or
// those the CUDA backend measured (MeasuredDevice). It also samples GPU
// telemetry through NVML on its own goroutine (telemetry.csv and the
// per-cell summary, with the throttle rule: a cell is throttled when its
// SM clock ran below a fraction of the GPU's maximum, as nvbench's
// --throttle-threshold judges, not when NVML merely reports a reason).
//
// It owns the formats of kernels.csv, trace.json and telemetry.csv, and
// the thresholds of the diagnosis and of the throttle rule. It does not
// run the engine, decide which cells are profiled or where a cell's
// directory is: the runner's worker calls WriteArtifacts after the
// profiled pass and brackets the whole cell with StartTelemetry /
// Telemetry.Stop. Per-kernel records on the GPU come from the sibling
// package cupti, which the CUDA backend drives; on the CPU backend every
// op of the window is timed on the host, so every format here is
// exercised in CI.
//
// It sits below results.json and the cell's record (cell.json): it
// returns its own types (PassSummary, TelemetrySummary, Roofline), which
// the runner converts and records, and takes what it needs of a cell's
// record as arguments (RooflineCell). The runner decides which cells get
// a roofline (runner.AttachRooflines); xrun kernels and results.md diff
// the kernel summaries with the results package. Kernel names are
// classified by results/kernelname, which the results package shares;
// TestProfileImports keeps it that way.
package profile

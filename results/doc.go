// Package results owns what a study leaves behind and how it is read:
//
//   - the versioned results.json schema (Results, Cell, Environment, ...),
//     its deterministic writer (Marshal, WriteFile, WriteDir: sorted keys
//     and cells, every measured number rounded to 6 significant digits,
//     summaries recomputed from the repeats, atomic temp-file-and-rename)
//     and its strict reader (Parse, ReadFile, Load), whose errors are
//     *FileError values naming file:line:col and the JSON path;
//   - the metric registry: trtllm-bench display names, units, and which
//     direction is better (RegisteredMetrics, MetricFor);
//   - statistics through golang.org/x/perf/benchmath with no distributional
//     assumption: median and 95 % confidence interval (Summarize) and the
//     Mann-Whitney U test at alpha 0.05 with a direction-aware verdict
//     (CompareSamples);
//   - tables drawn by sibling renderers behind one Output interface: text,
//     Markdown (results.md), CSV, JSON and the Go benchmark format that
//     benchstat reads; pivot tables for the spec's comparisons;
//   - Diff, the engine of `xrun diff`, with environment differences found
//     by go-cmp and each cell's share of its roofline, old and new
//     (RooflineDiff: context, never a regression);
//   - Trend, the engine of `xrun trend`: a study's cells over many runs,
//     each metric's steps that held (an L1 piecewise-constant fit, kept
//     where a step passes the threshold, the noise band and the
//     Mann-Whitney U test corrected over the trend);
//   - the kernel diff between two profiled cells (DiffKernels: kernels
//     side by side per iteration, those that ran in only one paired by
//     kind), which `xrun kernels`, results.md's comparisons and `xrun
//     diff` share, with the kernel names' kinds and short forms.
//
// It never runs anything and knows nothing of YAML or engines: the runner
// fills Results and calls WriteDir; the commands read them back.
package results

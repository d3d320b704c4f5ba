// Package command is the engine driver for any benchmark program
// (engine: command): the spec's command block gives an argv template with
// {placeholder}s (any parameter by its path, {dataset}, {cell_dir},
// {out_dir}, {records}, {report}, ...), its environment, and how to read
// what the program produced — per-request records in xrun's
// requests.jsonl format, from which xrun computes every metric itself, or
// a JSON report with a mapping from xrun's metric names to JSON paths.
//
// Each timed pass runs the program once with a fresh output directory;
// the profiled pass runs it with XRUN_PROFILE_WINDOW=A-B set and, when the
// block names a profiler, under it (nsys: Nsight Systems capturing the
// cudaProfilerStart/Stop range the program opens for the window, its
// kernel summary read back into kernels.csv).
//
// A parameter the templates do not use cannot change what the program
// does, so the plan leaves it out of the cell's identity and collapses
// cells that differ only in it, saying why (Planner.Ignored).
package command

// Package cenv reads the C environment, the one libcuda and the NVTX
// loader read. A profiler's launcher (ncu, nsys) may set its injection
// variables there after the process started, from a preloaded library,
// where Go's os.Getenv, a copy taken at exec, never sees them; xrun
// checks those variables to step aside for the profiler (CUPTI) or to
// attach its tool (NVTX). It also owns what else xrun needs to know of,
// or do through, the C side of the process for such a tool: whether the
// Nsight launcher's libraries are mapped (ToolLibs, UnderLauncher), and
// starting a child through libc (Spawn), the only way the launcher
// follows it.
package cenv

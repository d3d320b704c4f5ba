//go:build !(cgo && linux)

package cuda

// Compiled reports whether this binary carries the CUDA backend. Without cgo
// on Linux it does not: xrun still plans, reports and diffs, and runs cells
// on the CPU backend.
const Compiled = false

//go:build cgo && linux

package cuda

// Compiled reports whether this binary carries the CUDA backend (the cgo
// shim that loads libcuda, cuBLASLt and NVRTC at run time).
const Compiled = true

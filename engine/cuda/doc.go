// Package cuda is the GPU backend: a small cgo shim that loads libcuda,
// cuBLASLt, NVRTC and CUPTI at run time (no CUDA headers or libraries at
// build time), the engine's kernels in CUDA C compiled with NVRTC, and the
// device memory plan. Without cgo on Linux only a stub that reports "no
// CUDA" is built.
package cuda

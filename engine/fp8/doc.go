// Package fp8 is the FP8 E4M3 number format of the OCP 8-bit floating
// point specification (OFP8, v1.0), the format of Hopper's FP8 tensor
// cores (CUDA's __nv_fp8_e4m3, torch.float8_e4m3fn) and of FP8 checkpoints
// (safetensors F8_E4M3): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa
// bits, subnormals, no infinities, NaN only as S.1111.111, the largest
// finite magnitude 448.
//
// Encode rounds to nearest, ties to even, and saturates: a magnitude above
// 448, infinities included, becomes ±448 (the OCP "saturation mode",
// CUDA's __NV_SATFINITE, what quantizers do after clamping to ±448); NaN
// stays NaN. Decode is exact: every E4M3 value is a float32.
//
// Quantizing a tensor with a scale s stores Encode(x · (1/s)), the
// reciprocal taken once in float32, and reads back Decode(code) · s. The
// CPU backend's reference and the GPU kernels must quantize exactly this
// way, so that their codes agree bit for bit; Scale is the per-tensor
// (or per-row) scale amax/448 that dynamic quantization uses.
package fp8

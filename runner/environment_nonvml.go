//go:build !(cgo && linux)

package runner

// Without cgo on Linux there is no NVML: the fingerprint keeps what the
// CUDA probe reported.
func nvmlGPUs([]string) nvmlInfo { return nvmlInfo{} }

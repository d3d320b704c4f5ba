//go:build !(cgo && linux)

package runner

// Without cgo on Linux there is no NVML: no GPU is ever seen busy.
func nvmlBusy([]string) []gpuProcess { return nil }

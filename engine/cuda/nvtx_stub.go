//go:build !(cgo && linux)

package cuda

// NVTXInjectionEnv names the variable through which a profiler hands NVTX
// its tool library; without cgo on Linux nothing reads it.
const NVTXInjectionEnv = "NVTX_INJECTION64_PATH"

// NVTXEnabled is false: without the CUDA backend there is nothing on a GPU
// timeline to annotate.
func NVTXEnabled() bool { return false }

// NVTXError is nil: no tool was attempted.
func NVTXError() error { return nil }

// RangePush does nothing in this build.
func RangePush(string) {}

// RangePop does nothing in this build.
func RangePop() {}

package cuda

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotCompiled is returned by every entry point of a binary built without
// cgo on Linux: it plans, reports and diffs, and runs on the CPU backend.
var ErrNotCompiled = errors.New("no CUDA backend compiled in (this xrun was built without cgo on linux; rebuild with CGO_ENABLED=1 and gcc)")

// Error is a failed call into the CUDA driver, cuBLASLt or NVRTC: the call's
// name, the library's status code, its symbolic name and its text, so a
// report says what failed and why without a lookup table.
type Error struct {
	Call   string // e.g. "cuMemAlloc"
	Code   int    // CUresult, cublasStatus_t or nvrtcResult
	Name   string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text   string // e.g. "out of memory"
	Detail string // what the call was asked (sizes, shapes) or a compile log
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Call)
	if e.Detail != "" && !strings.Contains(e.Detail, "\n") {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	fmt.Fprintf(&b, ": %s (%d)", e.Name, e.Code)
	if e.Text != "" && e.Text != e.Name {
		fmt.Fprintf(&b, ": %s", e.Text)
	}
	if strings.Contains(e.Detail, "\n") {
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(e.Detail, "\n"))
	}
	return b.String()
}

// Attempt is one place a library was looked for and what the loader said.
type Attempt struct {
	Path string `json:"path"`
	Err  string `json:"error"`
}

// LoadError says that a library could not be loaded, listing every path
// tried with the dynamic loader's message for each.
type LoadError struct {
	Library string    `json:"library"` // e.g. "libcuda.so.1"
	Role    string    `json:"role"`    // e.g. "the NVIDIA driver's CUDA library"
	Tried   []Attempt `json:"tried"`
	// Reason is set when the library was found but is unusable (too old, a
	// symbol missing); Tried then holds the path that was found.
	Reason string `json:"reason,omitempty"`
}

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.Reason != "" {
		fmt.Fprintf(&b, "%s (%s) is unusable: %s", e.Library, e.Role, e.Reason)
	} else {
		fmt.Fprintf(&b, "%s (%s) was not found", e.Library, e.Role)
	}
	for _, a := range e.Tried {
		fmt.Fprintf(&b, "\n  tried %s: %s", a.Path, a.Err)
	}
	return b.String()
}

// cublasStatusNames backs cuBLASLt builds older than 11.4, which lack
// cublasLtGetStatusName; values from cublas_api.h.
var cublasStatusNames = map[int]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

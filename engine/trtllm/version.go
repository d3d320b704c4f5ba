package trtllm

import (
	"fmt"
	"regexp"
	"strconv"
)

// Version is a TensorRT-LLM release as its package metadata spells it
// ("0.21.0", "1.0.0rc4").
type Version struct {
	Raw          string
	Major, Minor int
	Known        bool // false: unparsable, taken to be the newest
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// ParseVersion reads a version; an unparsable one is kept as written and
// treated as the newest release.
func ParseVersion(s string) Version {
	v := Version{Raw: s}
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return v
	}
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Known = true
	return v
}

// atLeast reports whether v is release major.minor or later.
func (v Version) atLeast(major, minor int) bool {
	if !v.Known {
		return true
	}
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Features are what a release's trtllm-bench and trtllm-build offer.
type Features struct {
	// PyTorch: trtllm-bench --backend pytorch (0.17 on).
	PyTorch bool
	// BackendFlagForEngine: the TensorRT engine is chosen with --backend
	// tensorrt (1.0 on); before, by leaving --backend out.
	BackendFlagForEngine bool
	// TensorRT: the TensorRT engine backend and trtllm-build exist (until
	// 1.3, which removed them).
	TensorRT bool
	// RequestJSON: trtllm-bench --request_json writes per-request records
	// (1.0 on).
	RequestJSON bool
}

// FeaturesOf says what release v offers.
func FeaturesOf(v Version) Features {
	return Features{
		PyTorch:              v.atLeast(0, 17),
		BackendFlagForEngine: v.atLeast(1, 0),
		TensorRT:             !v.atLeast(1, 3),
		RequestJSON:          v.atLeast(1, 0),
	}
}

func (v Version) String() string {
	if v.Raw == "" {
		return "unknown"
	}
	return v.Raw
}

// unsupported says why release v cannot run a cell on backend, or "".
func unsupported(v Version, backend string) string {
	f := FeaturesOf(v)
	switch {
	case !v.atLeast(0, 17):
		return fmt.Sprintf("TensorRT-LLM %s is older than 0.17, the first release whose trtllm-bench xrun drives (--report_json, --warmup, --extra_llm_api_options)", v)
	case backend == BackendPyTorch && !f.PyTorch:
		return fmt.Sprintf("TensorRT-LLM %s has no PyTorch backend (trtllm-bench --backend pytorch came with 0.17); use trtllm_backend: tensorrt", v)
	case backend == BackendTensorRT && !f.TensorRT:
		return fmt.Sprintf("TensorRT-LLM %s removed the TensorRT engine backend and trtllm-build (PyTorch is its only backend); use trtllm_backend: pytorch", v)
	}
	return ""
}

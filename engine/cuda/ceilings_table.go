package cuda

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Ceilings are a GPU's roofline ceilings as the best kernels reach them:
// the rate of a device-to-device copy far larger than L2 (bytes read plus
// written per second) and of a large cuBLASLt GEMM in the compute dtype
// (FLOP/s). Datasheet peaks overstate both, so a roofline against them
// would call good kernels poor.
type Ceilings struct {
	BytesPerSec float64 `json:"bytes_per_s"`
	FLOPs       float64 `json:"flop_per_s"`
	// FP8FLOPs is the FP8 tensor cores' rate (dtype fp8's GEMMs); 0 where
	// unknown.
	FP8FLOPs float64 `json:"fp8_flop_per_s,omitempty"`
}

// knownCeilings were measured on the project's machines (bench/GPU.md, "Measured
// ceilings": device-to-device copy, bf16 GEMM). Other GPUs have theirs
// measured by the CUDA backend when it opens them (MeasureCeilings).
var knownCeilings = []struct {
	match string
	c     Ceilings
}{
	// FP8: Hopper's dense FP8 rate is twice its bf16 rate (H100 SXM
	// datasheet: 1979 against 989 TFLOP/s); not measured yet, so twice the
	// measured bf16 GEMM, as far below the datasheet as it is.
	{"H200", Ceilings{BytesPerSec: 4.3e12, FLOPs: 790e12, FP8FLOPs: 2 * 790e12}},
	{"H100", Ceilings{BytesPerSec: 3.0e12, FLOPs: 798e12, FP8FLOPs: 2 * 798e12}},
}

// KnownCeilings returns the ceilings measured for a GPU named like name
// ("NVIDIA H100 80GB HBM3"), and the kind they were measured on ("H100");
// ok is false for a GPU without them.
func KnownCeilings(name string) (c Ceilings, kind string, ok bool) {
	for _, k := range knownCeilings {
		if strings.Contains(name, k.match) {
			return k.c, k.match, true
		}
	}
	return Ceilings{}, "", false
}

// Measured are ceilings MeasureCeilings took, as CachedCeilings keeps
// them: for which GPU and dtype, and when.
type Measured struct {
	Ceilings
	Device   string    `json:"device"`
	UUID     string    `json:"uuid"`
	DType    string    `json:"dtype"`
	Measured time.Time `json:"measured"`
}

// ceilingsPath is where CachedCeilings keeps a GPU's measurement at a
// dtype, in the kernel cache directory dir.
func ceilingsPath(dir, uuid, dtype string) string {
	return filepath.Join(dir, fmt.Sprintf("ceilings-%s-%s.json", unsafeFileChars.ReplaceAllString(uuid, "_"), dtype))
}

// KeptCeilings are the measurements kept for the GPU uuid in the kernel
// cache directory dir (DefaultKernelCacheDir), one per dtype measured, for
// xrun devices to show.
func KeptCeilings(dir, uuid string) []Measured {
	var out []Measured
	for _, dt := range []string{"float16", "bfloat16"} {
		if m, err := readMeasured(ceilingsPath(dir, uuid, dt)); err == nil {
			out = append(out, m)
		}
	}
	return out
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func readMeasured(path string) (Measured, error) {
	var m Measured
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	if !(m.BytesPerSec > 0 && m.FLOPs > 0) {
		return m, fmt.Errorf("%s: ceilings of %g B/s and %g FLOP/s", path, m.BytesPerSec, m.FLOPs)
	}
	return m, nil
}

// DefaultKernelCacheDir is os.UserCacheDir()/xrun/kernels, or "" (no disk
// cache) when the user has no cache directory. It is here, on the
// cgo-free side, because xrun devices names it in every build.
func DefaultKernelCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "xrun", "kernels")
}

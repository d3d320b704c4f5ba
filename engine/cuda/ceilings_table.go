package cuda

import "strings"

// Ceilings are a GPU's roofline ceilings as the best kernels reach them:
// the rate of a device-to-device copy far larger than L2 (bytes read plus
// written per second) and of a large cuBLASLt GEMM in the compute dtype
// (FLOP/s). Datasheet peaks overstate both, so a roofline against them
// would call good kernels poor.
type Ceilings struct {
	BytesPerSec float64 `json:"bytes_per_s"`
	FLOPs       float64 `json:"flop_per_s"`
}

// knownCeilings were measured on the project's machines (gpu.md, "Measured
// ceilings": device-to-device copy, bf16 GEMM). Other GPUs have theirs
// measured by the CUDA backend when it opens them (MeasureCeilings).
var knownCeilings = []struct {
	match string
	c     Ceilings
}{
	{"H200", Ceilings{BytesPerSec: 4.3e12, FLOPs: 790e12}},
	{"H100", Ceilings{BytesPerSec: 3.0e12, FLOPs: 798e12}},
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

package profile

import (
	"strings"

	"github.com/xrun-dev/xrun/engine/cuda"
)

// nvtxError says why the NVTX tool a profiler handed the process (nsys,
// ncu: NVTX_INJECTION64_PATH) did not attach, nil when it did or none was
// handed; a variable so that tests can stand in for the CUDA package.
var nvtxError = cuda.NVTXError

// nvtxNotes is the diagnosis's note when the iterations' NVTX ranges went
// unrecorded: the outside profiler's timeline then has no iteration
// ranges, though CUPTI's own records (kernels.csv, trace.json) are whole.
func nvtxNotes() []string {
	err := nvtxError()
	if err == nil {
		return nil
	}
	return []string{"NVTX ranges not recorded: " + strings.TrimPrefix(err.Error(), "NVTX off: ") +
		"; the outside profiler's timeline has no iteration ranges (kernels.csv and trace.json are unaffected)"}
}

//go:build cgo && linux

package runner

import (
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlBusy lists the compute and graphics processes on the GPUs given,
// other than this process, through NVML loaded at run time. Without
// libnvidia-ml (no driver, as on CI machines), or when NVML cannot list a
// GPU's processes, it lists nothing: the check must never stop a run.
func nvmlBusy(uuids []string) (procs []gpuProcess) {
	nvmlMu.Lock()
	defer nvmlMu.Unlock()
	defer func() {
		// A library that loads but misbehaves must not take the run with it.
		if recover() != nil {
			procs = nil
		}
	}()
	if nvml.Init() != nvml.SUCCESS {
		return nil
	}
	defer nvml.Shutdown()
	self := os.Getpid()
	for _, uuid := range uuids {
		dev, ret := nvml.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			continue
		}
		seen := map[uint32]bool{}
		for _, list := range []func() ([]nvml.ProcessInfo, nvml.Return){dev.GetComputeRunningProcesses, dev.GetGraphicsRunningProcesses} {
			infos, ret := list()
			if ret != nvml.SUCCESS {
				continue
			}
			for _, p := range infos {
				if int(p.Pid) == self || seen[p.Pid] {
					continue
				}
				seen[p.Pid] = true
				mem := p.UsedGpuMemory
				if mem == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE (no permission to see it)
					mem = 0
				}
				procs = append(procs, gpuProcess{GPU: uuid, Pid: int(p.Pid), Name: procName(int(p.Pid)), MemBytes: mem})
			}
		}
	}
	return procs
}

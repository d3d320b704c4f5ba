//go:build cgo && linux

package runner

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlGPUs reads the driver version, the clocks at this moment, the max
// clocks and the power limit of each GPU through NVML, loaded at run time. Without
// libnvidia-ml (no driver, as on CI machines) it returns nothing.
func nvmlGPUs(uuids []string) (info nvmlInfo) {
	defer func() {
		// A library that loads but misbehaves must not take the run with it.
		if recover() != nil {
			info = nvmlInfo{}
		}
	}()
	if nvml.Init() != nvml.SUCCESS {
		return nvmlInfo{}
	}
	defer nvml.Shutdown()
	info.gpus = map[string]nvmlGPU{}
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		info.driver = v
	}
	for _, uuid := range uuids {
		dev, ret := nvml.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			continue
		}
		var g nvmlGPU
		if c, ret := dev.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			g.smClock = int(c)
		}
		if c, ret := dev.GetClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			g.memClock = int(c)
		}
		if c, ret := dev.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			g.maxSMClock = int(c)
		}
		if c, ret := dev.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			g.maxMemClock = int(c)
		}
		if mw, ret := dev.GetPowerManagementLimit(); ret == nvml.SUCCESS {
			g.powerLimitW = float64(mw) / 1000
		}
		info.gpus[uuid] = g
	}
	return info
}

//go:build cgo && linux

package profile

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlSource reads GPUs through NVML (libnvidia-ml.so.1, loaded at run
// time by go-nvml).
type nvmlSource struct {
	idx  []int
	devs []nvml.Device
	// maxSM is each GPU's max SM clock, read once: it does not change
	// while the GPU runs (NaN where NVML does not say).
	maxSM []float64
}

// OpenNVML opens NVML for the GPUs named by uuids, or when uuids is nil
// for those CUDA_VISIBLE_DEVICES lists (UUIDs or indexes; every GPU when
// unset). Without libnvidia-ml or a GPU it returns an error wrapping
// ErrNoTelemetry.
func OpenNVML(uuids []string) (src Source, err error) {
	defer func() {
		// A library that loads but misbehaves must not take the cell with it.
		if r := recover(); r != nil {
			src, err = nil, fmt.Errorf("%w: NVML failed: %v", ErrNoTelemetry, r)
		}
	}()
	if ret := nvml.Init(); ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found (no NVIDIA driver here)", ErrNoTelemetry)
	} else if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: NVML: %s", ErrNoTelemetry, nvml.ErrorString(ret))
	}
	s := &nvmlSource{}
	fail := func(format string, args ...any) (Source, error) {
		nvml.Shutdown()
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrNoTelemetry}, args...)...)
	}
	add := func(d nvml.Device) {
		i, ret := d.GetIndex()
		if ret != nvml.SUCCESS {
			i = len(s.devs)
		}
		s.devs, s.idx = append(s.devs, d), append(s.idx, i)
		s.maxSM = append(s.maxSM, maxClock(d, nvml.CLOCK_SM))
	}
	byUUID := func(u string) bool {
		d, ret := nvml.DeviceGetHandleByUUID(u)
		if ret == nvml.SUCCESS {
			add(d)
		}
		return ret == nvml.SUCCESS
	}
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	switch {
	case uuids != nil:
		for _, u := range uuids {
			if !byUUID(u) {
				return fail("NVML has no GPU %s", u)
			}
		}
	case set:
		for _, v := range strings.Split(visible, ",") {
			v = strings.TrimSpace(v)
			if n, err := strconv.Atoi(v); err == nil {
				if n < 0 {
					break // CUDA stops at the first invalid entry
				}
				d, ret := nvml.DeviceGetHandleByIndex(n)
				if ret != nvml.SUCCESS {
					break
				}
				add(d)
			} else if strings.HasPrefix(v, "GPU-") {
				byUUID(v)
			}
		}
	default:
		n, ret := nvml.DeviceGetCount()
		if ret != nvml.SUCCESS {
			return fail("NVML: %s", nvml.ErrorString(ret))
		}
		for i := range n {
			if d, ret := nvml.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
				add(d)
			}
		}
	}
	if len(s.devs) == 0 {
		return fail("no GPU visible to NVML")
	}
	return s, nil
}

// maxClock is the most clock c of d can run at, in MHz; NaN when NVML
// does not say.
func maxClock(d nvml.Device, c nvml.ClockType) float64 {
	if v, ret := d.GetMaxClockInfo(c); ret == nvml.SUCCESS && v > 0 {
		return float64(v)
	}
	return math.NaN()
}

func (s *nvmlSource) GPUs() []int { return s.idx }

func (s *nvmlSource) Read(dst []Sample) error {
	for i, d := range s.devs {
		x := &dst[i]
		x.MaxSMClockMHz = s.maxSM[i]
		if v, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			x.SMClockMHz = float64(v)
		}
		if v, ret := d.GetClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			x.MemClockMHz = float64(v)
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			x.GPUUtilPct, x.MemUtilPct = float64(u.Gpu), float64(u.Memory)
		}
		if v, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			x.PowerW = float64(v) / 1000
		}
		if v, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
			x.EnergyJ = float64(v) / 1000
		}
		if v, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			x.TempC = float64(v)
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			x.MemUsedBytes = float64(m.Used)
		}
		if v, ret := d.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
			x.Throttle = v
		} else if v, ret := d.GetCurrentClocksThrottleReasons(); ret == nvml.SUCCESS {
			x.Throttle = v
		}
	}
	return nil
}

func (s *nvmlSource) Close() error {
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}

// VisibleGPUName is the name of the first GPU this process may use, as
// NVML reports it ("NVIDIA H100 80GB HBM3"), or "" without NVML.
func VisibleGPUName() string {
	src, err := OpenNVML(nil)
	if err != nil {
		return ""
	}
	defer src.Close()
	name, ret := src.(*nvmlSource).devs[0].GetName()
	if ret != nvml.SUCCESS {
		return ""
	}
	return name
}

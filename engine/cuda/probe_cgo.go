//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"unsafe"
)

// The probe worker: any binary linking this package answers Probe when
// re-executed with probeWorkerEnv set. Doing it here rather than in a CLI
// subcommand lets test binaries and the runner probe without any wiring.
func init() {
	if os.Getenv(probeWorkerEnv) != "" {
		serveProbe()
	}
}

// CUdevice_attribute values (cuda.h).
const (
	attrMultiprocessorCount = 16
	attrL2CacheSize         = 38
	attrUnifiedAddressing   = 41
	attrComputeMajor        = 75
	attrComputeMinor        = 76
	attrSharedPerBlockOptin = 97
)

// ProbeHere probes in this process: it loads the libraries, initializes the
// driver and lists the GPUs. Prefer Probe, which survives a hung driver.
func ProbeHere() (Devices, error) {
	var d Devices
	if err := loadDriver(); err != nil {
		return d, noGPU("no usable GPU", err)
	}
	d.Libraries = append(d.Libraries, Library{Name: "libcuda", Path: libPath(libDriver)})
	var v C.int
	if C.xr_cuDriverGetVersion(&v) == 0 {
		d.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}
	api := int(C.xr_cuda_api_version())
	d.APIVersion = fmt.Sprintf("%d.%d", api/1000, (api%1000)/10)
	d.DriverVersion = driverVersion(d.Libraries[0].Path)
	if err := cuErr("cuInit", C.xr_cuInit(0)); err != nil {
		return d, noGPU("no usable GPU", err)
	}
	gpus, err := listGPUs()
	d.GPUs = gpus
	if err != nil {
		return d, noGPU("no usable GPU", err)
	}
	if len(gpus) == 0 {
		return d, &NoGPUError{Reason: "no usable GPU: the driver loaded but reports no CUDA device"}
	}
	if err := loadBlasLt(); err != nil {
		return d, noGPU("no usable GPU", err)
	}
	lv := uint64(C.xr_cublasLtGetVersion())
	d.Libraries = append(d.Libraries, Library{Name: "cuBLASLt", Path: libPath(libBlasLt),
		Version: fmt.Sprintf("%d.%d.%d", lv/10000, lv/100%100, lv%100)})
	if err := loadNVRTC(); err != nil {
		return d, noGPU("no usable GPU", err)
	}
	d.Libraries = append(d.Libraries, Library{Name: "NVRTC", Path: libPath(libNVRTC), Version: nvrtcVersion()})
	usable := 0
	for _, g := range gpus {
		if g.Unusable == "" {
			usable++
		}
	}
	if usable == 0 {
		return d, &NoGPUError{Reason: fmt.Sprintf("no usable GPU: none of the %d GPUs has compute capability %d.0 or newer (bf16 tensor cores)", len(gpus), minComputeMajor)}
	}
	return d, nil
}

func listGPUs() ([]DeviceInfo, error) {
	var n C.int
	if err := cuErr("cuDeviceGetCount", C.xr_cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	gpus := make([]DeviceInfo, 0, int(n))
	for i := 0; i < int(n); i++ {
		g, err := deviceInfo(i)
		if err != nil {
			return gpus, err
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

func deviceInfo(i int) (DeviceInfo, error) {
	g := DeviceInfo{Index: i}
	var dev C.CUdevice
	if err := cuErrf("cuDeviceGet", C.xr_cuDeviceGet(&dev, C.int(i)), "ordinal %d", i); err != nil {
		return g, err
	}
	var name [256]C.char
	if err := cuErr("cuDeviceGetName", C.xr_cuDeviceGetName(&name[0], C.int(len(name)), dev)); err != nil {
		return g, err
	}
	g.Name = C.GoString(&name[0])
	var u C.CUuuid
	if err := cuErr("cuDeviceGetUuid", C.xr_cuDeviceGetUuid(&u, dev)); err != nil {
		return g, err
	}
	b := C.GoBytes(unsafe.Pointer(&u.bytes[0]), 16)
	g.UUID = fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	var bus [64]C.char
	if C.xr_cuDeviceGetPCIBusId(&bus[0], C.int(len(bus)), dev) == 0 {
		g.PCIBusID = C.GoString(&bus[0])
	}
	var mem C.size_t
	if err := cuErr("cuDeviceTotalMem", C.xr_cuDeviceTotalMem(&mem, dev)); err != nil {
		return g, err
	}
	g.MemoryBytes = uint64(mem)
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrComputeMajor, &g.Major}, {attrComputeMinor, &g.Minor}, {attrMultiprocessorCount, &g.SMs},
		{attrL2CacheSize, &g.L2Bytes}, {attrSharedPerBlockOptin, &g.SharedPerBlock},
	} {
		var v C.int
		if err := cuErrf("cuDeviceGetAttribute", C.xr_cuDeviceGetAttribute(&v, C.int(a.attr), dev), "attribute %d", a.attr); err != nil {
			return g, err
		}
		*a.dst = int(v)
	}
	if g.Major < minComputeMajor {
		g.Unusable = fmt.Sprintf("compute capability %d.%d; xrun's kernels need %d.0 or newer", g.Major, g.Minor, minComputeMajor)
	}
	return g, nil
}

var nvrmVersion = regexp.MustCompile(`Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)`)
var libcudaVersion = regexp.MustCompile(`libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$`)

// driverVersion reads the kernel module's version, falling back to the
// version libcuda's file name carries (libcuda.so.580.159.04).
func driverVersion(libcudaPath string) string {
	if b, err := os.ReadFile("/proc/driver/nvidia/version"); err == nil {
		if m := nvrmVersion.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	if m := libcudaVersion.FindStringSubmatch(filepath.Base(libcudaPath)); m != nil {
		return m[1]
	}
	return "unknown"
}

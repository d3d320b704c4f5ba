//go:build cgo && linux

package cuda

import (
	"strings"
	"testing"
)

// TestKernelsCompile compiles every kernel family with NVRTC, which needs no
// GPU: where NVRTC is installed (or XRUN_LIBNVRTC names one) a kernel that
// does not compile fails here rather than on a lent GPU machine. The ptxas
// report (registers, spills) is logged with -v.
//
// NVRTC 11.x has no sm_90a (it arrived with CUDA 12.0, and 11.8 crashed on
// sm_90's cubin). There the Hopper paths (warpgroup MMA, TMA, clusters:
// XR_WGMMA) are compiled to PTX for compute_90 with the feature macro
// defined by hand, which checks their C++ though not what ptxas makes of
// it.
func TestKernelsCompile(t *testing.T) {
	if err := loadNVRTC(); err != nil {
		t.Skipf("NVRTC not available, kernels not compiled: %v", err)
	}
	ver := nvrtcVersion()
	archs := []string{"sm_80", "sm_90a"}
	if strings.HasPrefix(ver, "11.") {
		archs = []string{"sm_80", "compute_90"}
	}
	for _, arch := range archs {
		for _, fam := range kernelFamilies() {
			t.Run(arch+"/"+fam, func(t *testing.T) {
				// NVRTC compiles distinct programs from several threads
				// (LoadKernels does too): one family a core.
				t.Parallel()
				src, err := kernelSource(fam)
				if err != nil {
					t.Fatal(err)
				}
				opts := append(archOptions(arch), "--ptxas-options=-v")
				ptxOnly := strings.HasPrefix(arch, "compute_")
				if ptxOnly {
					src = "#define __CUDA_ARCH_FEAT_SM90_ALL 1\n" + src
					opts = archOptions(arch)
				}
				cubin, log, err := nvrtcCompileLog(fam+".cu", src, kernelHeaders(), opts)
				if err != nil {
					t.Fatalf("NVRTC %s: %v", ver, err)
				}
				if ptxOnly {
					t.Logf("NVRTC %s, PTX only\n%s", ver, log)
					return
				}
				if len(cubin) == 0 {
					t.Fatal("empty cubin")
				}
				if strings.Contains(log, "spill stores") && !strings.Contains(log, " 0 bytes spill stores") {
					t.Logf("spills:\n%s", log)
				}
				t.Logf("NVRTC %s, %d bytes of cubin\n%s", ver, len(cubin), log)
			})
		}
	}
}

//go:build cgo && linux

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
//
// Each family compiles in a child process of the test binary, as many at
// once as the test runs in parallel: NVRTC 11.8 compiles one program at a
// time in a process (two families from two threads took 51 s on two cores,
// from two processes 38 s), and this test is most of `make test`'s time.
func TestKernelsCompile(t *testing.T) {
	if err := loadNVRTC(); err != nil {
		t.Skipf("NVRTC not available, kernels not compiled: %v", err)
	}
	archs := []string{"sm_80", "sm_90a"}
	if strings.HasPrefix(nvrtcVersion(), "11.") {
		archs = []string{"sm_80", "compute_90"}
	}
	for _, arch := range archs {
		for _, fam := range kernelFamilies() {
			t.Run(arch+"/"+fam, func(t *testing.T) {
				t.Parallel()
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), compileChildEnv+"="+arch+"/"+fam)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%v\n%s%s", err, stderr.String(), stdout.String())
				}
				t.Log(stdout.String())
			})
		}
	}
}

// compileChildEnv, set to arch/family, makes the test binary a
// TestKernelsCompile child: it compiles that family and exits (TestMain).
const compileChildEnv = "XRUN_TEST_COMPILE_ONE"

// compileChild is a TestKernelsCompile child's work: it writes the report
// to stdout and returns the exit status, 1 with the error on stderr when
// the family does not compile.
func compileChild(job string) int {
	report, err := compileReport(job)
	fmt.Print(report)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// compileReport compiles job's family (arch/family) and says what ptxas
// made of it; a family that does not compile, or compiles to nothing, is an
// error.
func compileReport(job string) (string, error) {
	arch, fam, ok := strings.Cut(job, "/")
	if !ok {
		return "", fmt.Errorf("%s=%q: want arch/family", compileChildEnv, job)
	}
	if err := loadNVRTC(); err != nil {
		return "", err
	}
	ver := nvrtcVersion()
	src, err := kernelSource(fam)
	if err != nil {
		return "", err
	}
	opts := append(archOptions(arch), "--ptxas-options=-v")
	ptxOnly := strings.HasPrefix(arch, "compute_")
	if ptxOnly {
		src = "#define __CUDA_ARCH_FEAT_SM90_ALL 1\n" + src
		opts = archOptions(arch)
	}
	cubin, log, err := nvrtcCompileLog(fam+".cu", src, kernelHeaders(), opts)
	if err != nil {
		return "", fmt.Errorf("NVRTC %s: %w", ver, err)
	}
	if ptxOnly {
		return fmt.Sprintf("NVRTC %s, PTX only\n%s", ver, log), nil
	}
	if len(cubin) == 0 {
		return "", errors.New("empty cubin")
	}
	var spills string
	if strings.Contains(log, "spill stores") && !strings.Contains(log, " 0 bytes spill stores") {
		spills = "spills:\n" + log
	}
	return fmt.Sprintf("%sNVRTC %s, %d bytes of cubin\n%s", spills, ver, len(cubin), log), nil
}

package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Devices is what a probe found: the driver, the libraries and the GPUs.
type Devices struct {
	// DriverVersion is the NVIDIA driver's own version ("580.159.04").
	DriverVersion string `json:"driver_version,omitempty"`
	// CUDAVersion is the newest CUDA API the driver supports ("13.0").
	CUDAVersion string `json:"cuda_version,omitempty"`
	// APIVersion is the CUDA API version entry points were resolved at.
	APIVersion string       `json:"api_version,omitempty"`
	Libraries  []Library    `json:"libraries,omitempty"`
	GPUs       []DeviceInfo `json:"gpus,omitempty"`
}

// Library is one loaded library and the file it came from.
type Library struct {
	Name    string `json:"name"` // "libcuda", "cuBLASLt", "NVRTC"
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
}

// DeviceInfo describes one GPU as the driver reports it.
type DeviceInfo struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	PCIBusID    string `json:"pci_bus_id,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Major       int    `json:"compute_major"`
	Minor       int    `json:"compute_minor"`
	SMs         int    `json:"multiprocessors"`
	L2Bytes     int    `json:"l2_bytes"`
	// SharedPerBlock is the most shared memory one block may opt in to.
	SharedPerBlock int `json:"shared_per_block_optin"`
	// Unusable says why xrun cannot run on this GPU; empty when it can.
	Unusable string `json:"unusable,omitempty"`
}

// Arch is the NVRTC target for the device: the architecture-specific "a"
// variant on Hopper (sm_90a enables wgmma and setmaxnreg), the plain one
// elsewhere.
func (d DeviceInfo) Arch() string {
	cc := d.Major*10 + d.Minor
	if cc == 90 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d", cc)
}

// minComputeMajor is the oldest architecture the kernels support: bf16
// tensor-core mma and cp.async arrived with Ampere (8.0).
const minComputeMajor = 8

// NoGPUError explains why no GPU is usable. It is plain data so that it
// survives the trip from the probe's worker process.
type NoGPUError struct {
	Reason  string   `json:"reason"`
	Details []string `json:"details,omitempty"`
}

func (e *NoGPUError) Error() string {
	if len(e.Details) == 0 {
		return e.Reason
	}
	return e.Reason + "\n  " + strings.Join(e.Details, "\n  ")
}

// ProbeOptions tune Probe; the zero value re-executes this binary and waits
// up to DefaultProbeTimeout.
type ProbeOptions struct {
	// Executable is the binary to re-execute as the probe worker; any binary
	// that links this package serves. Empty means os.Executable().
	Executable string
	// Env is the worker's environment; nil means os.Environ().
	Env []string
	// Timeout bounds the whole probe; zero means DefaultProbeTimeout.
	Timeout time.Duration
}

// DefaultProbeTimeout is generous: the first cuInit on a cold machine loads
// the kernel module and can take a few seconds; a hung driver never answers.
const DefaultProbeTimeout = 30 * time.Second

// probeWorkerEnv makes a binary that links this package act as the probe
// worker (see the package's init): it probes, prints JSON and exits.
const probeWorkerEnv = "XRUN_CUDA_PROBE_WORKER"

type probeReply struct {
	Devices Devices     `json:"devices"`
	Error   *NoGPUError `json:"error,omitempty"`
}

// Probe lists the GPUs. A broken driver can hang in cuInit forever and
// cannot be interrupted from inside the process, so the probe runs in a
// child process (this binary re-executed) that is killed at the timeout.
// The error is a *NoGPUError when the probe ran and found nothing usable.
func Probe(ctx context.Context) (Devices, error) { return ProbeWith(ctx, ProbeOptions{}) }

// ProbeWith is Probe with options.
func ProbeWith(ctx context.Context, o ProbeOptions) (Devices, error) {
	if !Compiled {
		return ProbeHere()
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return Devices{}, fmt.Errorf("device probe: cannot find this program to re-execute: %w", err)
		}
		o.Executable = exe
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Executable)
	cmd.Env = append(append([]string{}, o.Env...), probeWorkerEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Devices{}, &NoGPUError{
				Reason: fmt.Sprintf("the device probe did not answer within %s: the NVIDIA driver may be hung (see nvidia-smi and dmesg)", o.Timeout),
			}
		}
		return Devices{}, ctx.Err()
	}
	var reply probeReply
	if jerr := json.Unmarshal(stdout.Bytes(), &reply); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		return Devices{}, fmt.Errorf("device probe worker %s failed (%v, reply %v): %s", o.Executable, err, jerr, msg)
	}
	if reply.Error != nil {
		return reply.Devices, reply.Error
	}
	return reply.Devices, nil
}

// serveProbe is the worker's side of Probe.
func serveProbe() {
	d, err := ProbeHere()
	reply := probeReply{Devices: d}
	if err != nil {
		var ng *NoGPUError
		if !errors.As(err, &ng) {
			ng = &NoGPUError{Reason: err.Error()}
		}
		reply.Error = ng
	}
	if err := json.NewEncoder(os.Stdout).Encode(reply); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// noGPU converts a load or call failure into the explanation a user reads.
func noGPU(summary string, err error) *NoGPUError {
	ng := &NoGPUError{Reason: summary}
	var le *LoadError
	var ce *Error
	switch {
	case errors.As(err, &le):
		if le.Reason != "" {
			ng.Reason = fmt.Sprintf("%s: %s is unusable: %s", summary, le.Library, le.Reason)
		} else {
			ng.Reason = fmt.Sprintf("%s: %s (%s) was not found", summary, le.Library, le.Role)
		}
		for _, a := range le.Tried {
			ng.Details = append(ng.Details, fmt.Sprintf("tried %s: %s", a.Path, a.Err))
		}
	case errors.As(err, &ce):
		ng.Reason = fmt.Sprintf("%s: %s failed with %s (%s)", summary, ce.Call, ce.Name, ce.Text)
		if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
			ng.Details = append(ng.Details, "CUDA_VISIBLE_DEVICES="+v+" restricts which GPUs are visible")
		}
	default:
		ng.Reason = fmt.Sprintf("%s: %v", summary, err)
	}
	return ng
}

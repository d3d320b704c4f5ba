package runner

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
)

// Environment is the fingerprint of this machine and this xrun as
// results.json records it: the build, host, OS, kernel, CPU and memory; for
// each GPU the run uses its name, UUID, driver, CUDA version, memory and,
// where NVML can be loaded, the clocks at start, the max clocks and the
// power limit; and
// the git state of the repository holding the study file (specDir).
// Nothing in it fails: a fact that cannot be had is left empty.
func Environment(ctx context.Context, specDir string, devs cuda.Devices, gpus []cuda.DeviceInfo) results.Environment {
	b := Build()
	env := results.Environment{
		Xrun:        results.Build{Version: b.Version, Commit: b.Commit, Modified: b.Modified, GoVersion: b.GoVersion},
		OS:          runtime.GOOS + "/" + runtime.GOARCH,
		Kernel:      kernelRelease(),
		CPUModel:    cpuModel(),
		CPUCount:    runtime.NumCPU(),
		MemoryBytes: memoryBytes(),
		GPUs:        []results.GPU{},
		Repo:        gitRepo(ctx, specDir),
	}
	env.Host, _ = os.Hostname()
	var uuids []string
	for _, g := range gpus {
		env.GPUs = append(env.GPUs, results.GPU{
			Index: g.Index, Name: g.Name, UUID: g.UUID,
			Driver: devs.DriverVersion, CUDAVersion: devs.CUDAVersion,
			MemoryBytes:       g.MemoryBytes,
			ComputeCapability: strconv.Itoa(g.Major) + "." + strconv.Itoa(g.Minor),
		})
		uuids = append(uuids, g.UUID)
	}
	if len(uuids) > 0 {
		nvmlQuery(uuids).apply(env.GPUs)
	}
	return env
}

// apply adds what NVML said to the probe's GPUs.
func (info nvmlInfo) apply(gpus []results.GPU) {
	for i := range gpus {
		g := &gpus[i]
		if n, ok := info.gpus[g.UUID]; ok {
			g.SMClockMHz, g.MemClockMHz, g.PowerLimitW = n.smClock, n.memClock, n.powerLimitW
			g.MaxSMClockMHz, g.MaxMemClockMHz = n.maxSMClock, n.maxMemClock
		}
		if g.Driver == "" {
			g.Driver = info.driver
		}
	}
}

// nvmlInfo is what NVML adds to the probe's view of the GPUs.
type nvmlInfo struct {
	driver string
	gpus   map[string]nvmlGPU // by UUID
}

type nvmlGPU struct {
	smClock, memClock       int
	maxSMClock, maxMemClock int
	powerLimitW             float64
}

// nvmlQuery asks NVML about the GPUs, giving up after a while: a broken
// driver can hang NVML as it hangs cuInit, and the fingerprint is not
// worth a stuck study.
func nvmlQuery(uuids []string) nvmlInfo {
	ch := make(chan nvmlInfo, 1)
	go func() { ch <- nvmlGPUs(uuids) }()
	select {
	case info := <-ch:
		return info
	case <-time.After(15 * time.Second):
		return nvmlInfo{}
	}
}

// hostDevice names what a CPU cell's numbers depend on, for the cell
// fingerprint: the CPU model and how many CPUs the run may use.
func hostDevice() string {
	return "cpu " + cpuModel() + " x" + strconv.Itoa(runtime.NumCPU())
}

// cpuModel reads the first "model name" of /proc/cpuinfo (Linux).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// memoryBytes reads MemTotal from /proc/meminfo (Linux).
func memoryBytes() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseUint(f[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// gitRepo reports the commit and dirty flag of the git repository holding
// dir, or nil when dir is in none (or git is not installed).
func gitRepo(ctx context.Context, dir string) *results.Repo {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	git := func(args ...string) (string, bool) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		var out bytes.Buffer
		cmd.Stdout = &out
		if cmd.Run() != nil {
			return "", false
		}
		return strings.TrimSpace(out.String()), true
	}
	commit, ok := git("rev-parse", "HEAD")
	if !ok || commit == "" {
		return nil
	}
	// Untracked files (results directories among them) do not make the
	// experiment's code dirty; changes to tracked files do.
	status, ok := git("status", "--porcelain", "--untracked-files=no")
	return &results.Repo{Commit: commit, Dirty: !ok || status != ""}
}

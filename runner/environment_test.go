package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
)

func TestEnvironment(t *testing.T) {
	env := Environment(context.Background(), t.TempDir(), cuda.Devices{DriverVersion: "580.1", CUDAVersion: "13.0"},
		[]cuda.DeviceInfo{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-00000000-0000-0000-0000-000000000000", MemoryBytes: 141 << 30, Major: 9}})
	if env.Xrun.GoVersion != runtime.Version() || env.OS != runtime.GOOS+"/"+runtime.GOARCH || env.CPUCount != runtime.NumCPU() || env.Host == "" {
		t.Errorf("environment %+v", env)
	}
	if runtime.GOOS == "linux" && (env.Kernel == "" || env.MemoryBytes == 0) {
		t.Errorf("kernel %q, memory %d: /proc not read", env.Kernel, env.MemoryBytes)
	}
	// The GPU's facts come from the probe; NVML (absent on CI machines, and
	// unaware of this made-up UUID) adds nothing and breaks nothing.
	if len(env.GPUs) != 1 || env.GPUs[0].Name != "NVIDIA H200" || env.GPUs[0].Driver != "580.1" ||
		env.GPUs[0].CUDAVersion != "13.0" || env.GPUs[0].ComputeCapability != "9.0" {
		t.Errorf("GPUs %+v", env.GPUs)
	}
	if env.Repo != nil {
		t.Errorf("a temporary directory is in a git repository? %+v", env.Repo)
	}
}

// TestNVMLFacts: what NVML says of a GPU goes into its entry, the max
// clocks among it; a GPU NVML does not know keeps the probe's facts.
func TestNVMLFacts(t *testing.T) {
	gpus := []results.GPU{{Index: 0, UUID: "GPU-a", Driver: "580.1"}, {Index: 1, UUID: "GPU-b"}}
	nvmlInfo{driver: "580.2", gpus: map[string]nvmlGPU{"GPU-a": {smClock: 345, memClock: 2619, maxSMClock: 1980, maxMemClock: 2619, powerLimitW: 700}}}.apply(gpus)
	want := []results.GPU{
		{Index: 0, UUID: "GPU-a", Driver: "580.1", SMClockMHz: 345, MemClockMHz: 2619, MaxSMClockMHz: 1980, MaxMemClockMHz: 2619, PowerLimitW: 700},
		{Index: 1, UUID: "GPU-b", Driver: "580.2"},
	}
	if !reflect.DeepEqual(gpus, want) {
		t.Errorf("GPUs %+v\nwant %+v", gpus, want)
	}
}

func TestGitRepo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "study.yaml"), []byte("name: x\n"), 0o644)
	git("add", "study.yaml")
	git("commit", "-q", "-m", "study")
	r := gitRepo(context.Background(), dir)
	if r == nil || len(r.Commit) != 40 || r.Dirty {
		t.Fatalf("clean repository: %+v", r)
	}
	// Untracked files (a results directory) leave it clean; an edit does not.
	os.WriteFile(filepath.Join(dir, "results.json"), []byte("{}"), 0o644)
	if r := gitRepo(context.Background(), dir); r == nil || r.Dirty {
		t.Errorf("untracked file: %+v", r)
	}
	os.WriteFile(filepath.Join(dir, "study.yaml"), []byte("name: y\n"), 0o644)
	if r := gitRepo(context.Background(), dir); r == nil || !r.Dirty {
		t.Errorf("edited file: %+v", r)
	}
}

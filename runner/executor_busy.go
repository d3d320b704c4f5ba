package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// BusyGPUPolicy says what a local run does when, just before a cell starts,
// NVML shows another process on one of the cell's GPUs: its numbers would
// be those of a shared GPU.
type BusyGPUPolicy string

const (
	// BusyWait reports the processes and waits until they are gone (the
	// default): a nightly run queued behind someone's job measures alone.
	BusyWait BusyGPUPolicy = "wait"
	// BusyIgnore reports the processes and runs the cell anyway.
	BusyIgnore BusyGPUPolicy = "ignore"
	// BusyFail records the cell as failed, naming the processes; the
	// study goes on.
	BusyFail BusyGPUPolicy = "fail"
)

// ParseBusyGPUPolicy reads --gpu-busy.
func ParseBusyGPUPolicy(s string) (BusyGPUPolicy, error) {
	switch p := BusyGPUPolicy(s); p {
	case BusyWait, BusyIgnore, BusyFail:
		return p, nil
	}
	return "", &OptionError{"--gpu-busy", fmt.Sprintf("%q: expected wait, ignore or fail", s)}
}

// gpuProcess is a process NVML lists on a GPU.
type gpuProcess struct {
	GPU      string // UUID
	Pid      int
	Name     string // from /proc, when it can be read
	MemBytes uint64 // 0 when NVML does not say
}

func (p gpuProcess) String() string {
	s := fmt.Sprintf("pid %d", p.Pid)
	if p.Name != "" {
		s += " (" + p.Name + ")"
	}
	if p.MemBytes > 0 {
		s += fmt.Sprintf(" using %d MiB", p.MemBytes>>20)
	}
	return s + " on " + p.GPU
}

// busyProbe lists the processes other than this one on the GPUs given (by
// UUID). It returns nothing where NVML cannot be loaded: the check is then
// skipped, never failed.
type busyProbe func(uuids []string) []gpuProcess

// DefaultBusyPoll is how often a cell waiting for a busy GPU looks again.
const DefaultBusyPoll = 5 * time.Second

// busyWaiter checks a cell's GPUs before the cell starts, and reports,
// waits or fails as the policy says.
type busyWaiter struct {
	inner  cellExecutor
	probe  busyProbe
	policy BusyGPUPolicy
	poll   time.Duration
	log    zerolog.Logger
}

// busyCheck wraps the local cell executor in the GPU busy check.
func (s *study) busyCheck(x cellExecutor) cellExecutor {
	if len(s.gpus) == 0 {
		return x
	}
	p := s.o.BusyGPUs
	if p == "" {
		p = BusyWait
	}
	return &busyWaiter{inner: x, probe: nvmlBusy, policy: p, poll: DefaultBusyPoll, log: s.log}
}

func (b *busyWaiter) run(ctx context.Context, c *workerCell, gpus []string) outcome {
	if len(gpus) == 0 {
		return b.inner.run(ctx, c, gpus)
	}
	procs := b.probe(gpus)
	if len(procs) == 0 {
		return b.inner.run(ctx, c, gpus)
	}
	desc := describeProcs(procs)
	switch b.policy {
	case BusyIgnore:
		b.log.Warn().Str("cell", c.ID).Str("busy", desc).Msg("GPU in use by another process; running the cell anyway (--gpu-busy ignore): its numbers are those of a shared GPU")
		return b.inner.run(ctx, c, gpus)
	case BusyFail:
		return outcome{id: c.ID, failure: "GPU in use by another process: " + desc + " (--gpu-busy fail; --gpu-busy wait waits for it)"}
	}
	b.log.Warn().Str("cell", c.ID).Str("busy", desc).Msg("GPU in use by another process; the cell waits until it is free (--gpu-busy ignore runs it anyway)")
	t0 := time.Now()
	tick := time.NewTicker(b.poll)
	defer tick.Stop()
	for len(procs) > 0 {
		select {
		case <-ctx.Done():
			return outcome{id: c.ID, interrupted: true}
		case <-tick.C:
		}
		procs = b.probe(gpus)
	}
	b.log.Info().Str("cell", c.ID).Str("waited", fmtDur(time.Since(t0))).Msg("GPU free; the cell starts")
	return b.inner.run(ctx, c, gpus)
}

func describeProcs(procs []gpuProcess) string {
	var parts []string
	for _, p := range procs {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

// procName is a process's command name, or "" where it cannot be read (no
// /proc, or a process of another PID namespace).
func procName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// nvmlMu serialises the busy probes of cells starting at the same moment:
// each loads and unloads NVML.
var nvmlMu sync.Mutex

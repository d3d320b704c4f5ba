package runner

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
)

// okCells is a cellExecutor whose cells all succeed at once.
type okCells struct{ ran atomic.Int32 }

func (o *okCells) run(_ context.Context, c *workerCell, _ []string) outcome {
	o.ran.Add(1)
	return outcome{id: c.ID, rec: &cellRecord{Cell: results.Cell{ID: c.ID, Status: results.StatusOK}}}
}

func TestBusyGPU(t *testing.T) {
	other := gpuProcess{GPU: "GPU-1", Pid: 4242, Name: "python3", MemBytes: 3 << 30}
	if got := other.String(); got != "pid 4242 (python3) using 3072 MiB on GPU-1" {
		t.Errorf("process: %q", got)
	}
	cell := &workerCell{ID: "c1"}
	for _, c := range []struct {
		policy   BusyGPUPolicy
		busyFor  int // probes that see the process
		gpus     []string
		cancel   bool
		ran      int32
		status   string // ok, failed or interrupted
		msg, log string
	}{
		{BusyWait, 0, []string{"GPU-1"}, false, 1, "ok", "", ""},
		{BusyWait, 3, []string{"GPU-1"}, false, 1, "ok", "", "the cell waits until it is free"},
		{BusyWait, 1 << 30, []string{"GPU-1"}, true, 0, "interrupted", "", "waits"},
		{BusyIgnore, 1 << 30, []string{"GPU-1"}, false, 1, "ok", "", "running the cell anyway"},
		{BusyFail, 1 << 30, []string{"GPU-1"}, false, 0, "failed", "GPU in use by another process: pid 4242 (python3)", ""},
		{BusyFail, 1 << 30, nil, false, 1, "ok", "", ""}, // a cpu cell is never checked
	} {
		var logBuf bytes.Buffer
		inner := &okCells{}
		probes := 0
		ctx, cancel := context.WithCancel(context.Background())
		b := &busyWaiter{inner: inner, policy: c.policy, poll: time.Millisecond, log: zerolog.New(&logBuf),
			probe: func(uuids []string) []gpuProcess {
				probes++
				if c.cancel && probes > 2 {
					cancel()
				}
				if probes <= c.busyFor {
					return []gpuProcess{other}
				}
				return nil
			}}
		o := b.run(ctx, cell, c.gpus)
		cancel()
		status := "failed"
		switch {
		case o.interrupted:
			status = "interrupted"
		case o.rec != nil:
			status = "ok"
		}
		if inner.ran.Load() != c.ran || status != c.status || !strings.Contains(o.failure, c.msg) || !strings.Contains(logBuf.String(), c.log) {
			t.Errorf("%s, busy for %d probes: ran %d, %s %q, log %s", c.policy, c.busyFor, inner.ran.Load(), status, o.failure, logBuf.String())
		}
	}
	if _, err := ParseBusyGPUPolicy("sometimes"); err == nil || !strings.Contains(err.Error(), "--gpu-busy") {
		t.Errorf("bad policy: %v", err)
	}
	// Without libnvidia-ml (CI) the probe finds nothing and never fails.
	_ = nvmlBusy([]string{"GPU-00000000-0000-0000-0000-000000000000"})
}

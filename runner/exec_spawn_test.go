//go:build linux

package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/cenv"
)

// TestLocalExecutorSpawn runs a stand-in worker both ways a worker is
// started (os/exec, and libc's posix_spawn as under the Nsight launcher)
// and expects the same: its arguments and environment (the GPUs in
// CUDA_VISIBLE_DEVICES), its stderr.log, its exit status in the failure;
// and a worker past its timeout stopped through its process group.
func TestLocalExecutorSpawn(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-xrun")
	script := "#!/bin/sh\necho \"args: $*\" >&2\necho \"gpus: $CUDA_VISIBLE_DEVICES\" >&2\n[ \"$XR_SLEEP\" ] && sleep 30\nexit 7\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, spawn := range []bool{false, true} {
		name := map[bool]string{false: "os/exec", true: "posix_spawn"}[spawn]
		t.Run(name, func(t *testing.T) {
			if spawn {
				p, err := cenv.Spawn("/bin/true", []string{"true"}, nil, nil, false)
				if err != nil {
					t.Skipf("no libc spawn in this build: %v", err)
				}
				p.Wait()
			}
			out := filepath.Join(dir, name)
			x := &localExecutor{exe: fake, env: []string{"PATH=/usr/bin:/bin"}, dir: out, grace: time.Second, libcSpawn: spawn}
			c := &workerCell{ID: "cell-1", Timeout: time.Minute}
			o := x.run(context.Background(), c, []string{"GPU-abc"})
			if !strings.Contains(o.failure, "exited with status 7") {
				t.Errorf("failure %q, want the exit status", o.failure)
			}
			b, _ := os.ReadFile(filepath.Join(out, "cells", "cell-1", "stderr.log"))
			if want := "args: worker --dir " + out + " --cell cell-1\ngpus: GPU-abc\n"; string(b) != want {
				t.Errorf("stderr.log %q, want %q", b, want)
			}

			x.env = append(x.env, "XR_SLEEP=1")
			start := time.Now()
			o = x.run(context.Background(), &workerCell{ID: "cell-2", Timeout: 200 * time.Millisecond}, nil)
			if !strings.Contains(o.failure, "timed out") || time.Since(start) > 10*time.Second {
				t.Errorf("a worker past its timeout: %q after %s", o.failure, time.Since(start))
			}
		})
	}
}

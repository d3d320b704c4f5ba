package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine/cenv"
	"github.com/xrun-dev/xrun/results/layout"
)

// outcome is what running one cell produced.
type outcome struct {
	id string
	// rec is the worker's record (ok or failed); nil when it left none.
	rec *cellRecord
	// failure says why there is no record: a crash, a signal, a timeout.
	failure string
	// interrupted is set when the run was stopped (SIGINT/SIGTERM) before
	// the cell was recorded; it runs again on --resume.
	interrupted bool
	// timeLimit is set, with interrupted, when the worker stopped because
	// its next step would not have finished before the time limit.
	timeLimit *timeLimitNote
	// writeErr is set, with failure, when the cell's directory could not
	// be prepared (a full disk): the study stops.
	writeErr error
	elapsed  time.Duration
}

// cellExecutor runs one cell on the GPUs given (their UUIDs; none for a
// cell on the cpu backend) and says what came of it.
type cellExecutor interface {
	run(ctx context.Context, c *workerCell, gpus []string) outcome
}

// localExecutor runs each cell as a child process of this one: xrun
// re-executed as `xrun worker --dir DIR --cell ID`, its own process group,
// killed with this process (on Linux), with its GPUs in CUDA_VISIBLE_DEVICES.
type localExecutor struct {
	exe   string
	env   []string
	dir   string // absolute, so the worker does not depend on our working directory
	grace time.Duration
	// deadline is the run's time limit, passed on to each worker
	// (deadlineEnv); zero for none.
	deadline time.Time
	// libcSpawn starts workers through libc (cenv.Spawn), as this process
	// runs under the Nsight tools' launcher (ncu --target-processes all),
	// which follows only the children libc makes: without it the workers
	// ran outside ncu and it recorded no kernel. Such a worker is not
	// killed by the kernel when xrun dies (no Pdeathsig through
	// posix_spawn); the profiler ends with it anyway.
	libcSpawn bool
}

func (x *localExecutor) run(ctx context.Context, c *workerCell, gpus []string) outcome {
	start := time.Now()
	o := x.runProcess(ctx, c, gpus)
	o.id, o.elapsed = c.ID, time.Since(start)
	return o
}

func (x *localExecutor) runProcess(ctx context.Context, c *workerCell, gpus []string) outcome {
	cdir := layout.CellDir(x.dir, c.ID)
	// What an earlier attempt left (cell.json above all) must not be
	// mistaken for this attempt's; the repeats it recorded stay for the
	// worker to keep.
	if err := clearCellDir(cdir); err != nil {
		return outcome{failure: "cannot clear the cell's directory: " + err.Error(), writeErr: err}
	}
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return outcome{failure: "cannot create the cell's directory: " + err.Error(), writeErr: err}
	}
	stderrPath := filepath.Join(cdir, layout.StderrFile)
	errf, err := os.Create(stderrPath)
	if err != nil {
		return outcome{failure: "cannot create " + layout.StderrFile + ": " + err.Error(), writeErr: err}
	}
	defer errf.Close()

	args := []string{"worker", "--dir", x.dir, "--cell", c.ID}
	env := slices.DeleteFunc(slices.Clone(x.env), func(kv string) bool { return strings.HasPrefix(kv, deadlineEnv+"=") })
	if !x.deadline.IsZero() {
		env = append(env, deadlineEnv+"="+x.deadline.Format(time.RFC3339Nano))
	}
	if len(gpus) > 0 {
		// UUIDs, not indices: they name the same GPUs whatever
		// CUDA_VISIBLE_DEVICES this process itself was given.
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","))
	}

	var proc *os.Process
	var state *os.ProcessState
	started, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		// The child is killed when the thread that started it ends
		// (Pdeathsig): keep that thread for as long as the child lives.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if x.libcSpawn {
			p, err := cenv.Spawn(x.exe, append([]string{x.exe}, args...), env, errf, true)
			if err != nil {
				started <- err
				return
			}
			proc = p
			started <- nil
			ps, err := p.Wait()
			state = ps
			waited <- err
			return
		}
		cmd := exec.Command(x.exe, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, errf, errf
		setProcAttrs(cmd)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		proc = cmd.Process
		started <- nil
		err := cmd.Wait()
		state = cmd.ProcessState
		waited <- err
	}()
	if err := <-started; err != nil {
		return outcome{failure: fmt.Sprintf("cannot start the worker %s: %v", x.exe, err)}
	}
	timer := time.NewTimer(c.Timeout)
	defer timer.Stop()
	var stopped, timedOut bool
	select {
	case <-waited:
	case <-ctx.Done():
		stopped = true
		x.terminate(proc, waited)
	case <-timer.C:
		timedOut = true
		x.terminate(proc, waited)
	}

	if o, ok := finishedCell(x.dir, c); ok {
		return o
	}
	if n := readTimeLimitNote(x.dir, c.ID); n != nil {
		return outcome{interrupted: true, timeLimit: n}
	}
	if stopped {
		return outcome{interrupted: true}
	}
	detail, see := stderrNote(x.dir, c.ID)
	if timedOut {
		return outcome{failure: fmt.Sprintf("timed out after %s, the cell's timeout (set timeout: in the spec to change it); the worker was stopped%s", c.Timeout, see)}
	}
	msg := "worker " + exitText(state)
	if detail != "" {
		msg += ": " + detail
	}
	return outcome{failure: msg + see}
}

// finishedCell reads what the worker of cell c left in dir once it has
// ended, however it ran (a child process, a Slurm task): its record, with
// stderr.log as an artifact when the worker printed anything, or a failure
// when there is a record that cannot be trusted. ok is false when there is
// no record at all; the caller knows why and says so.
func finishedCell(dir string, c *workerCell) (o outcome, ok bool) {
	stderrPath := filepath.Join(layout.CellDir(dir, c.ID), layout.StderrFile)
	// An empty stderr.log says nothing; do not leave it lying around.
	if st, err := os.Stat(stderrPath); err == nil && st.Size() == 0 {
		os.Remove(stderrPath)
	}
	rec, rerr := readCellRecord(dir, c.ID)
	switch {
	case rec != nil && rec.Fingerprint == c.Fingerprint:
		if _, err := os.Stat(stderrPath); err == nil {
			rec.Artifacts = append(rec.Artifacts, layout.CellArtifact(c.ID, layout.StderrFile))
		}
		return outcome{rec: rec}, true
	case rec != nil:
		return outcome{failure: fmt.Sprintf("the worker recorded fingerprint %s, expected %s (was the plan rewritten under it?)", rec.Fingerprint, c.Fingerprint)}, true
	case rerr != nil:
		return outcome{failure: "the worker's record is unreadable: " + rerr.Error()}, true
	}
	return outcome{}, false
}

// stderrNote is what a failed cell's error borrows from the worker's
// stderr.log: the line that says what went wrong, and where to read the
// rest (" (see cells/<id>/stderr.log)"); both empty when it printed nothing.
func stderrNote(dir, id string) (detail, see string) {
	path := filepath.Join(layout.CellDir(dir, id), layout.StderrFile)
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		see = " (see " + layout.CellArtifact(id, layout.StderrFile) + ")"
	}
	return stderrSummary(path), see
}

// terminate asks the worker's process group to stop (SIGTERM: the worker
// stops its engine at the next iteration), and kills it after the grace
// period if it has not (a hung driver does not listen).
func (x *localExecutor) terminate(p *os.Process, waited <-chan error) {
	signalGroup(p, false)
	select {
	case <-waited:
	case <-time.After(x.grace):
		signalGroup(p, true)
		<-waited
	}
}

// exitText describes how a worker process ended.
func exitText(ps *os.ProcessState) string {
	if ps == nil {
		return "ended"
	}
	if killedOutright(ps) {
		// Nothing in xrun sends SIGKILL but after a timeout or an
		// interrupt, which are reported as such.
		return "was killed (SIGKILL; by the out-of-memory killer? see dmesg)"
	}
	if ps.Exited() {
		return fmt.Sprintf("exited with status %d", ps.ExitCode())
	}
	return "ended: " + ps.String()
}

// stderrSummary picks the line of a worker's stderr that says what went
// wrong: a Go panic or fatal error, else xrun's own final error, else the
// last line.
func stderrSummary(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		f.Seek(st.Size()-tail, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(string(bytes.TrimSpace(b)), "\n")
	pick := ""
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			pick = l
			break
		}
	}
	if pick == "" {
		for i := len(lines) - 1; i >= 0; i-- {
			l := strings.TrimSpace(lines[i])
			if rest, ok := strings.CutPrefix(l, "xrun: "); ok {
				pick = rest
				break
			}
			if pick == "" && l != "" {
				pick = l
			}
		}
	}
	if r := []rune(pick); len(r) > 400 {
		pick = string(r[:400]) + "…"
	}
	return pick
}

package runner

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/results/layout"
)

// follow polls the job until every task has ended, reporting each cell as
// its task starts and ends. When ctx is cancelled it cancels the job
// (scancel) and waits for the tasks to end: cells recorded by then are
// kept, the others are interrupted.
func (x *slurmExecutor) follow(ctx context.Context, jobID string, queue []*runCell, r reporter) error {
	bg := context.WithoutCancel(ctx)
	type taskState struct {
		started, done bool
		restarts      int
		missing       int       // consecutive polls the task was not listed
		awaiting      time.Time // since when a task that ended well has shown no record
	}
	st := make([]taskState, len(queue))
	left := len(queue)
	// finish reports task i's cell; it returns false, and reports
	// nothing, while a task that ended well has left no record yet but
	// may still show one (see SlurmOptions.RecordGrace).
	finish := func(i int, t slurmTask, gone, cancelled bool) bool {
		rc := queue[i]
		// Listing the directory makes an NFS client look again for files
		// another node created (it may cache their absence).
		os.ReadDir(layout.CellDir(x.dir, rc.cell.ID))
		os.ReadDir(repeatsDir(x.dir, rc.cell.ID))
		o, ok := finishedCell(x.dir, rc.wc)
		var stopped *timeLimitNote
		if !ok {
			// The worker stopped before a step that would not have
			// finished within the task's time limit.
			stopped = readTimeLimitNote(x.dir, rc.cell.ID)
		}
		if !ok && t.State == "COMPLETED" && !cancelled {
			if st[i].awaiting.IsZero() {
				st[i].awaiting = time.Now()
			}
			if time.Since(st[i].awaiting) < x.o.RecordGrace {
				return false
			}
		}
		if !st[i].started {
			r.cellStarted(rc, fmt.Sprintf("job %s_%d on %s", jobID, i, t.Node))
		}
		st[i].done = true
		left--
		switch {
		case ok:
		case stopped != nil:
			o = outcome{interrupted: true, timeLimit: stopped}
		case cancelled && (t.State == "CANCELLED" || gone):
			o = outcome{interrupted: true}
		default:
			o = outcome{failure: x.failure(jobID, i, rc, t, gone)}
		}
		x.tidyTaskLogs(jobID, i)
		o.id, o.elapsed = rc.cell.ID, t.RunTime
		if o.rec != nil && o.rec.Finished.After(o.rec.Started) {
			// The worker's own clock is finer than Slurm's seconds.
			o.elapsed = o.rec.Finished.Sub(o.rec.Started)
		}
		r.cellFinished(rc, o)
		return true
	}

	interval := x.o.Poll
	var cancelled bool
	var cancelledAt, failingSince time.Time
	lastPending := ""
	for left > 0 {
		if ctx.Err() != nil && !cancelled {
			cancelled, cancelledAt = true, time.Now()
			x.log.Warn().Str("job", jobID).Msg("interrupted: cancelling the job array (scancel); the cells recorded so far are kept")
			if _, err := x.cmd.Run(bg, nil, "scancel", jobID); err != nil {
				x.log.Error().Err(err).Str("job", jobID).Msg("scancel failed; cancel the job yourself")
			}
		}
		out, err := x.cmd.Run(bg, nil, "scontrol", "-o", "show", "job", jobID)
		gone := err != nil && invalidJobID(err)
		var tasks []slurmTask
		if err == nil {
			tasks, err = parseScontrolJobs(out, len(queue))
		}
		if err != nil && !gone {
			if failingSince.IsZero() {
				failingSince = time.Now()
				x.log.Warn().Err(err).Str("job", jobID).Msg("cannot read the job's state; trying again")
			}
			if time.Since(failingSince) > x.lostAfter {
				return fmt.Errorf("lost track of Slurm job %s: scontrol has failed for %s (%w); its tasks may still run (squeue -j %s); once they have ended, xrun run --resume keeps what they recorded",
					jobID, fmtDur(time.Since(failingSince)), err, jobID)
			}
			x.sleep(ctx, cancelled, x.o.PollMax)
			continue
		}
		failingSince = time.Time{}

		byTask := make(map[int]slurmTask, len(tasks))
		for _, t := range tasks {
			byTask[t.Task] = t
		}
		changed := false
		pending := map[string]int{}
		for i, rc := range queue {
			if st[i].done {
				continue
			}
			t, listed := byTask[i]
			switch {
			case gone:
				finish(i, slurmTask{Task: i}, true, cancelled)
				changed = true
			case !listed:
				// A record purged while xrun was not looking (stopped for
				// minutes): three polls in a row make sure.
				if st[i].missing++; st[i].missing >= 3 {
					finish(i, slurmTask{Task: i}, true, cancelled)
					changed = true
				}
			case t.done():
				changed = finish(i, t, false, cancelled) || changed
			case t.running():
				st[i].missing = 0
				if !st[i].started {
					st[i].started, changed = true, true
					r.cellStarted(rc, fmt.Sprintf("job %s_%d on %s", jobID, i, t.Node))
				}
			default:
				st[i].missing = 0
				if t.Restarts > st[i].restarts {
					st[i].restarts = t.Restarts
					x.log.Warn().Str("cell", rc.cell.ID).Str("task", fmt.Sprintf("%s_%d", jobID, i)).Str("state", t.State).Str("reason", t.Reason).
						Msg("Slurm requeued the task; the cell runs again")
				}
				if t.State == "PENDING" && t.Reason != "None" {
					pending[t.Reason]++
				}
			}
		}
		if p := pendingSummary(pending); p != lastPending {
			lastPending = p
			if p != "" {
				x.log.Info().Str("job", jobID).Str("pending", p).Msg("tasks waiting in the Slurm queue")
			}
		}
		if cancelled && left > 0 && time.Since(cancelledAt) > x.cancelWait {
			x.log.Error().Str("job", jobID).Int("tasks", left).Msg("tasks did not end after scancel; leaving them as interrupted")
			for i := range queue {
				if !st[i].done {
					finish(i, slurmTask{Task: i, State: "CANCELLED"}, false, true)
				}
			}
		}
		if left == 0 {
			break
		}
		if changed {
			interval = x.o.Poll
		} else {
			interval = min(interval*5/4, x.o.PollMax)
		}
		x.sleep(ctx, cancelled, interval)
	}
	return nil
}

// sleep waits d, or until ctx is cancelled when the job has not been
// cancelled yet (so that Ctrl-C cancels at once).
func (x *slurmExecutor) sleep(ctx context.Context, cancelled bool, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	if cancelled {
		<-t.C
		return
	}
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pendingSummary is "3 (Resources), 1 (Priority)", in a stable order.
func pendingSummary(p map[string]int) string {
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, fmt.Sprintf("%d (%s)", p[reason], reason))
	}
	return strings.Join(parts, ", ")
}

// failure says why a task left no record: Slurm's state, exit code and
// reason, what the worker printed last, and slurmstepd's own line.
func (x *slurmExecutor) failure(jobID string, i int, rc *runCell, t slurmTask, gone bool) string {
	var msg string
	switch {
	case gone || t.State == "":
		msg = "slurm: the task's record is gone (scontrol keeps it only MinJobAge after its end) and it left no " + layout.CellFile
	case t.State == "COMPLETED":
		msg = "slurm: COMPLETED, but the worker left no " + layout.CellFile
	default:
		msg = t.describe()
	}
	detail, see := stderrNote(x.dir, rc.cell.ID)
	switch status := t.exitStatus(); {
	case status == 124, status == 137 && t.RunTime >= rc.wc.Timeout:
		msg += fmt.Sprintf(": timed out after %s, the cell's timeout (set timeout: in the spec to change it); the worker was stopped", rc.wc.Timeout)
	case status == 137:
		msg += ": the worker was killed (SIGKILL; by the out-of-memory killer? see dmesg on " + orUnknown(t.Node) + ")"
	case detail != "":
		msg += ": " + detail
	}
	taskErr := x.taskLog(jobID, i, ".err")
	if line := slurmstepdLine(taskErr); line != "" {
		msg += "; " + line
	}
	if see == "" {
		if st, err := os.Stat(taskErr); err == nil && st.Size() > 0 {
			see = " (see " + layout.StateDir + "/" + SlurmLogDir + "/" + filepath.Base(taskErr) + ")"
		}
	}
	return msg + see
}

func orUnknown(s string) string {
	if s == "" {
		return "its node"
	}
	return s
}

func (x *slurmExecutor) taskLog(jobID string, i int, ext string) string {
	return filepath.Join(x.dir, layout.StateDir, SlurmLogDir, fmt.Sprintf("%s_%d%s", jobID, i, ext))
}

// tidyTaskLogs removes a task's empty .out and .err: Slurm creates both
// for every task, and most say nothing.
func (x *slurmExecutor) tidyTaskLogs(jobID string, i int) {
	for _, ext := range []string{".out", ".err"} {
		p := x.taskLog(jobID, i, ext)
		if st, err := os.Stat(p); err == nil && st.Size() == 0 {
			os.Remove(p)
		}
	}
}

// slurmstepdLine finds slurmstepd's "*** JOB 42 ON n1 CANCELLED AT ...
// DUE TO TIME LIMIT ***" in a task's error file: Slurm's own account of
// why it ended the task.
func slurmstepdLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, "*** "); i >= 0 && strings.Contains(l, "slurmstepd") {
			return strings.TrimSpace(l[i:])
		}
	}
	return ""
}

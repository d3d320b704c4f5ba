package runner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// slurmTask is one array task as `scontrol -o show job JOBID` reports it.
type slurmTask struct {
	Task      int    // ArrayTaskId
	JobID     string // the task's own job id (JobId)
	State     string // JobState: PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...
	Reason    string // Reason: None, NonZeroExitCode, TimeLimit, NodeDown, ...
	ExitCode  string // ExitCode: "status:signal", e.g. 1:0 or 0:9
	TimeLimit string // TimeLimit, as Slurm prints it (00:01:00, UNLIMITED)
	RunTime   time.Duration
	Node      string // BatchHost, else NodeList; "" before it starts
	Restarts  int    // how often Slurm requeued it
}

// slurmTerminal are the job states a task does not leave: Slurm is done
// with it. A requeued task goes back to PENDING and is not done.
var slurmTerminal = map[string]bool{
	"COMPLETED": true, "FAILED": true, "TIMEOUT": true, "CANCELLED": true, "PREEMPTED": true,
	"NODE_FAIL": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true,
}

func (t slurmTask) done() bool    { return slurmTerminal[t.State] }
func (t slurmTask) running() bool { return t.State == "RUNNING" || t.State == "COMPLETING" }

// scontrolKey finds the start of each KEY= field in a line of scontrol -o:
// keys are letters, digits and _ / : (AllocNode:Sid, CPUs/Task), preceded by
// a space. A value may itself hold spaces (a path, a job name); it runs up
// to the next key.
var scontrolKey = regexp.MustCompile(`(?:^| )([A-Za-z][A-Za-z0-9_/:]*)=`)

// parseScontrolFields splits one line of `scontrol -o show job` into its
// fields. A key given twice keeps its first value.
func parseScontrolFields(line string) map[string]string {
	idx := scontrolKey.FindAllStringSubmatchIndex(line, -1)
	out := make(map[string]string, len(idx))
	for i, m := range idx {
		end := len(line)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		key := line[m[2]:m[3]]
		if _, dup := out[key]; !dup {
			out[key] = strings.TrimSpace(line[m[1]:end])
		}
	}
	return out
}

// parseScontrolJobs reads `scontrol -o show job JOBID` for a job array of
// n tasks: one line per task that has started, and one per group of tasks
// still pending together (ArrayTaskId=2-9%2, or 1,3,5-7), expanded here
// into one slurmTask per task below n. Lines of jobs that are no array
// tasks, and blank lines, are skipped.
func parseScontrolJobs(out []byte, n int) ([]slurmTask, error) {
	var tasks []slurmTask
	for ln, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := parseScontrolFields(line)
		state, ok := f["JobState"]
		if !ok || f["JobId"] == "" {
			return nil, fmt.Errorf("scontrol line %d: no JobId or JobState in %q", ln+1, truncate(line, 120))
		}
		ids, ok := f["ArrayTaskId"]
		if !ok {
			continue // not an array task
		}
		t := slurmTask{
			JobID: f["JobId"], State: state, Reason: f["Reason"], ExitCode: f["ExitCode"],
			TimeLimit: f["TimeLimit"], Node: f["BatchHost"],
		}
		if t.Node == "" || t.Node == "(null)" {
			t.Node = f["NodeList"]
		}
		if t.Node == "(null)" {
			t.Node = ""
		}
		t.Restarts, _ = strconv.Atoi(f["Restarts"])
		if d, err := parseSlurmDuration(f["RunTime"]); err == nil {
			t.RunTime = d
		}
		list, err := parseArrayTaskIDs(ids, n)
		if err != nil {
			return nil, fmt.Errorf("scontrol line %d: ArrayTaskId=%s: %w", ln+1, ids, err)
		}
		for _, id := range list {
			tt := t
			tt.Task = id
			tasks = append(tasks, tt)
		}
	}
	return tasks, nil
}

// parseArrayTaskIDs reads an ArrayTaskId: "3", "2-9", "2-9%2" (a throttle),
// "1,3,5-7", "0-15:4" (a step), and returns the ids below n: a range is
// never expanded further than the tasks xrun submitted.
func parseArrayTaskIDs(s string, n int) ([]int, error) {
	s, _, _ = strings.Cut(s, "%")
	var out []int
	for _, part := range strings.Split(s, ",") {
		step := 1
		if r, st, ok := strings.Cut(part, ":"); ok {
			n, err := strconv.Atoi(st)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("bad step %q", st)
			}
			part, step = r, n
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad task id %q", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad task range %q", part)
			}
		}
		for i := a; i <= b && i < n; i += step {
			out = append(out, i)
		}
	}
	return out, nil
}

// parseSlurmDuration reads Slurm's [days-]hours:minutes:seconds (also
// minutes:seconds).
func parseSlurmDuration(s string) (time.Duration, error) {
	var days int
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	var secs int
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		secs = secs*60 + n
	}
	return time.Duration(days*86400+secs) * time.Second, nil
}

// describe is a finished task's failure as Slurm gives it, e.g.
// "slurm: FAILED ExitCode=1:0", "slurm: TIMEOUT (time limit 00:01:00)",
// "slurm: NODE_FAIL Reason=NodeDown on node n12".
func (t slurmTask) describe() string {
	var b strings.Builder
	b.WriteString("slurm: " + t.State)
	if t.ExitCode != "" && t.ExitCode != "0:0" && t.State != "TIMEOUT" && t.State != "CANCELLED" {
		b.WriteString(" ExitCode=" + t.ExitCode)
	}
	switch t.Reason {
	case "", "None", "NonZeroExitCode", "TimeLimit":
	default:
		b.WriteString(" Reason=" + t.Reason)
	}
	switch t.State {
	case "TIMEOUT":
		b.WriteString(" (time limit " + t.TimeLimit + ")")
	case "NODE_FAIL", "BOOT_FAIL":
		if t.Node != "" {
			b.WriteString(" on node " + t.Node)
		}
	}
	return b.String()
}

// exitStatus is the task's exit status (the part of ExitCode before the
// colon), or -1.
func (t slurmTask) exitStatus() int {
	s, _, _ := strings.Cut(t.ExitCode, ":")
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

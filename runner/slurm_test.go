package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

func TestParseScontrolJobs(t *testing.T) {
	type want struct {
		state, describe string
		node            string
		runTime         time.Duration
	}
	for _, c := range []struct {
		file  string
		tasks map[int]want
	}{
		{"scontrol-finished.txt", map[int]want{
			0: {"COMPLETED", "slurm: COMPLETED", "vm", 0},
			1: {"FAILED", "slurm: FAILED ExitCode=3:0", "vm", 0},
			2: {"TIMEOUT", "slurm: TIMEOUT (time limit 00:01:00)", "vm", 86 * time.Second},
			3: {"CANCELLED", "slurm: CANCELLED", "vm", 4 * time.Second},
			4: {"FAILED", "slurm: FAILED ExitCode=0:9 Reason=JobLaunchFailure", "vm", 0},
		}},
		{"scontrol-pending.txt", map[int]want{
			0: {"RUNNING", "slurm: RUNNING", "vm", time.Second},
			1: {"RUNNING", "slurm: RUNNING", "vm", time.Second},
			2: {"PENDING", "slurm: PENDING Reason=JobArrayTaskLimit", "", 0},
			9: {"PENDING", "slurm: PENDING Reason=JobArrayTaskLimit", "", 0},
		}},
		{"scontrol-nodefail.txt", map[int]want{
			0: {"NODE_FAIL", "slurm: NODE_FAIL ExitCode=0:15 Reason=NodeDown on node vm", "vm", 2 * time.Second},
			1: {"NODE_FAIL", "slurm: NODE_FAIL ExitCode=0:15 Reason=NodeDown on node vm", "vm", 2 * time.Second},
		}},
		{"scontrol-synthetic.txt", map[int]want{
			5: {"PREEMPTED", "slurm: PREEMPTED ExitCode=0:15", "vm", 26*time.Hour + 3*time.Minute + 4*time.Second},
			6: {"OUT_OF_MEMORY", "slurm: OUT_OF_MEMORY ExitCode=0:125 Reason=OutOfMemory", "vm", 2*time.Minute + 13*time.Second},
		}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "slurm", c.file))
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := parseScontrolJobs(b, 10)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		got := map[int]slurmTask{}
		for _, tk := range tasks {
			got[tk.Task] = tk
		}
		for id, w := range c.tasks {
			tk, ok := got[id]
			if !ok {
				t.Errorf("%s: no task %d in %v", c.file, id, tasks)
				continue
			}
			if tk.State != w.state || tk.describe() != w.describe || tk.Node != w.node || tk.RunTime != w.runTime {
				t.Errorf("%s task %d: state %s, %q, node %q, run time %s; want %s, %q, %q, %s",
					c.file, id, tk.State, tk.describe(), tk.Node, tk.RunTime, w.state, w.describe, w.node, w.runTime)
			}
			if tk.done() != slurmTerminal[w.state] {
				t.Errorf("%s task %d: done() = %t", c.file, id, tk.done())
			}
		}
	}
}

func TestParseArrayTaskIDs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"3", []int{3}, false},
		{"2-5", []int{2, 3, 4, 5}, false},
		{"2-9%2", []int{2, 3, 4, 5, 6, 7, 8, 9}, false},
		{"1,3,5-6", []int{1, 3, 5, 6}, false},
		{"0-8:4", []int{0, 4, 8}, false},
		{"8-99999999999", []int{8, 9}, false}, // only the ids below 10
		{"", nil, true},
		{"5-2", nil, true},
		{"x", nil, true},
		{"0-9:0", nil, true},
	} {
		got, err := parseArrayTaskIDs(c.in, 10)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("parseArrayTaskIDs(%q) = %v, %v", c.in, got, err)
		}
	}
}

func FuzzParseScontrolJobs(f *testing.F) {
	for _, name := range []string{"scontrol-finished.txt", "scontrol-pending.txt", "scontrol-nodefail.txt", "scontrol-synthetic.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "slurm", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("JobId=1 ArrayTaskId=0-3%1 JobState=PENDING Reason=Priority"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		tasks, err := parseScontrolJobs(b, 1000)
		if err != nil {
			return
		}
		for _, tk := range tasks {
			if tk.Task < 0 || tk.Task >= 1000 || tk.State == "" && !strings.Contains(string(b), "JobState=") {
				t.Fatalf("task %+v from %q", tk, b)
			}
			_ = tk.describe()
		}
	})
}

func TestSlurmOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    SlurmOptions
		want string // "" = valid
	}{
		{SlurmOptions{Partition: "gpu", Gres: "gpu:a100:2", Time: "2:00:00", Account: "perf", SbatchArgs: []string{"--exclusive", "--qos=high"}}, ""},
		{SlurmOptions{Partition: "gpu,debug", Gres: "gpu", Time: "1-12"}, ""},
		{SlurmOptions{Time: "UNLIMITED"}, ""},
		{SlurmOptions{Partition: "gpu debug"}, "--partition"},
		{SlurmOptions{Partition: "gpu;rm"}, "--partition"},
		{SlurmOptions{Gres: "gpu:"}, "--gres"},
		{SlurmOptions{Time: "2h"}, "--time"},
		{SlurmOptions{Account: "a b"}, "--account"},
		{SlurmOptions{SbatchArgs: []string{"exclusive"}}, "expected one sbatch option"},
		{SlurmOptions{SbatchArgs: []string{"--array=0-3"}}, "one task per cell"},
		{SlurmOptions{SbatchArgs: []string{"-pdebug"}}, "use --partition"},
		{SlurmOptions{SbatchArgs: []string{"--gpus-per-task=2"}}, "use --gres"},
		{SlurmOptions{SbatchArgs: []string{"--wait"}}, "follows the job itself"},
		{SlurmOptions{SbatchArgs: []string{"--comment=a\nb"}}, "expected one sbatch option"},
	} {
		err := c.o.validate()
		var oe *OptionError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (!errors.As(err, &oe) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want an OptionError with %q", c.o, err, c.want)
		}
	}
	for gres, want := range map[string]int{"": 0, "gpu": 1, "gpu:4": 4, "gpu:a100:2": 2, "gpu:a100": 1, "tmpdisk:10,gpu:3": 3, "tmpdisk:10": 0} {
		if got := gresGPUs(gres); got != want {
			t.Errorf("gresGPUs(%q) = %d, want %d", gres, got, want)
		}
	}
}

const slurmSpecYAML = `schema_version: 1
name: slurmy
params:
  engine: cpu
  model: tiny-llama
  dataset: {num_requests: 2, input_mean: 4, input_stdev: 0, output_mean: 2, output_stdev: 0}
matrix:
  batch_size: [1, 2, 4]
  gemm_plugin: [auto, disable]
%s
repeats: 1
`

// withCudaCell adds a cell that needs two GPUs.
const withCudaCell = "  include:\n    - {engine: cuda, batch_size: 8, gemm_plugin: auto, gpus_per_cell: 2}"

func slurmSpec(t *testing.T, yaml string) *Spec {
	t.Helper()
	spec, err := ParseSpec("slurmy.yaml", []byte(yaml), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestSlurmScriptGolden(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, withCudaCell))
	var out bytes.Buffer
	res, err := Run(context.Background(), spec, Options{
		Out: "/nonexistent/results/slurmy", CacheDir: "/nonexistent/cache", Executable: "/opt/xrun/bin/xrun",
		Only: []string{"gemm_plugin=auto"}, Log: zerolog.Nop(),
		Slurm: &SlurmOptions{Partition: "gpu", Time: "45", Account: "perf", SbatchArgs: []string{"--exclusive", "--qos=high", "--comment=nightly run"},
			DryRun: true, ScriptOut: &out, Commander: &fakeSlurm{t: t}},
	})
	if err != nil || res != nil {
		t.Fatalf("dry run: %v, %v", res, err)
	}
	if _, err := os.Stat("/nonexistent"); err == nil {
		t.Fatal("the dry run wrote into /nonexistent")
	}
	golden.Check(t, "slurm/script.golden", out.Bytes())
}

// fakeTask is how a fake Slurm ends a cell's task.
type fakeTask struct {
	state, reason, exit string
	record              bool   // the worker writes cell.json
	stderr              string // what the worker printed
	hang                bool   // runs until scancel
	late                int    // the record shows this many looks after the end
	// real runs the cell's worker for real; with stopAt, it is
	// interrupted at that fault point (rN, profile), as a time limit
	// would stop it.
	real   bool
	stopAt string
	// getenv is the real worker's environment; nil means none. A worker
	// that stops at a time limit it finds there is no error.
	getenv func(string) string
}

// fakeSlurm plays sbatch, squeue, scontrol and scancel: each submitted
// task is pending at the first look, running at the second and ends as
// its cell's fakeTask says at the third, its worker's files written then.
type fakeSlurm struct {
	t           *testing.T
	mu          sync.Mutex
	testOnlyErr string
	sbatchErr   string
	squeue      string
	ends        map[string]fakeTask // by cell id prefix; absent: ok
	onRunning   func()              // called when the tasks first run
	purged      bool                // scontrol forgets the job once its tasks end

	jobs      int
	calls     []string
	submitted [][]string // the cells of each submission
	script    string
	dir       string // the results directory of the last submission
	polls     int
	cancelled bool
	written   map[string]bool
}

func (e fakeTask) env() func(string) string {
	if e.getenv == nil {
		return noEnv
	}
	return e.getenv
}

func (f *fakeSlurm) end(id string) fakeTask {
	for prefix, e := range f.ends {
		if strings.HasPrefix(id, prefix) {
			return e
		}
	}
	return fakeTask{state: "COMPLETED", reason: "None", exit: "0:0", record: true}
}

func (f *fakeSlurm) Run(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := name + " " + strings.Join(args, " ")
	f.calls = append(f.calls, line)
	fail := func(stderr string) ([]byte, error) {
		return nil, &CommandError{Command: line, Stderr: stderr, Err: errors.New("exit status 1")}
	}
	switch {
	case name == "sbatch" && slices.Contains(args, "--test-only"):
		if !strings.Contains(string(stdin), "#SBATCH --array=") {
			f.t.Errorf("sbatch --test-only got no array script: %q", stdin)
		}
		if f.testOnlyErr != "" {
			return fail(f.testOnlyErr)
		}
		return nil, nil
	case name == "sbatch":
		if f.sbatchErr != "" {
			return fail(f.sbatchErr)
		}
		if len(args) != 2 || args[0] != "--parsable" {
			f.t.Errorf("sbatch %v", args)
		}
		b, err := os.ReadFile(args[1])
		if err != nil {
			f.t.Fatal(err)
		}
		f.script = string(b)
		f.dir = filepath.Dir(filepath.Dir(args[1]))
		list, err := os.ReadFile(filepath.Join(filepath.Dir(args[1]), SlurmCellsFile))
		if err != nil {
			f.t.Fatal(err)
		}
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(string(list)), "\n") {
			ids = append(ids, strings.Fields(l)[0])
		}
		f.submitted = append(f.submitted, ids)
		f.jobs++
		f.polls, f.cancelled, f.written = 0, false, map[string]bool{}
		return fmt.Appendf(nil, "%d;cluster\n", 100+f.jobs), nil
	case name == "scancel":
		f.cancelled = true
		return nil, nil
	case name == "squeue":
		return []byte(f.squeue), nil
	case name == "scontrol":
		return f.show(args[len(args)-1])
	}
	f.t.Errorf("unexpected command %s", line)
	return nil, nil
}

func (f *fakeSlurm) show(job string) ([]byte, error) {
	f.polls++
	ids := f.submitted[len(f.submitted)-1]
	var b strings.Builder
	if f.polls == 1 && !f.cancelled {
		fmt.Fprintf(&b, "JobId=%s ArrayJobId=%s ArrayTaskId=0-%d JobState=PENDING Reason=Priority ExitCode=0:0 RunTime=00:00:00 TimeLimit=01:00:00 NodeList=(null)\n", job, job, len(ids)-1)
		return []byte(b.String()), nil
	}
	if f.polls == 2 && f.onRunning != nil {
		f.onRunning()
	}
	dir := f.dir
	plan, err := readWorkerPlan(dir)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, id := range ids {
		state, reason, exit, run := "RUNNING", "None", "0:0", "00:00:01"
		e := f.end(id)
		switch {
		case f.polls >= 3 && !e.hang, f.cancelled:
			state, reason, exit, run = e.state, e.reason, e.exit, "00:00:02"
			if e.hang {
				state, reason, exit = "CANCELLED", "None", "0:15"
			}
			if !f.written[id] && f.polls >= 3+e.late {
				f.written[id] = true
				f.work(dir, plan, id, e, state == "CANCELLED")
			}
		}
		if f.purged && f.written[id] {
			continue
		}
		fmt.Fprintf(&b, "JobId=%d ArrayJobId=%s ArrayTaskId=%d JobName=xrun-slurmy JobState=%s Reason=%s Dependency=(null) ExitCode=%s RunTime=%s TimeLimit=01:00:00 NodeList=n%d BatchHost=n%d\n",
			1000+i, job, i, state, reason, exit, run, i, i)
	}
	if b.Len() == 0 {
		return nil, &CommandError{Command: "scontrol -o show job " + job, Stderr: "slurm_load_jobs error: Invalid job id specified\n", Err: errors.New("exit status 1")}
	}
	return []byte(b.String()), nil
}

// work does what the cell's worker would have done.
func (f *fakeSlurm) work(dir string, plan *workerPlan, id string, e fakeTask, cancelled bool) {
	cdir := layout.CellDir(dir, id)
	os.MkdirAll(cdir, 0o755)
	os.WriteFile(filepath.Join(cdir, layout.StderrFile), []byte(e.stderr), 0o644)
	if e.real {
		if n, ok := strings.CutPrefix(e.stopAt, "r"); ok {
			k, _ := strconv.Atoi(n)
			interruptWorker(f.t, dir, id, e.stopAt, repeatPath(dir, id, k, repeatRecordName))
		} else if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: e.env()}); err != nil && !errors.Is(err, ErrTimeLimit) {
			f.t.Error(err)
		}
		return
	}
	if !e.record || cancelled {
		return
	}
	for _, c := range plan.Cells {
		if c.ID == id {
			rec := &cellRecord{Cell: results.Cell{ID: id, Status: results.StatusOK, Repeats: []results.Metrics{{"request_throughput_req_s": 2}}},
				Fingerprint: c.Fingerprint, Host: "n1"}
			if err := writeJSONAtomic(filepath.Join(cdir, layout.CellFile), rec); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

func (f *fakeSlurm) ran(cmd string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, cmd) })
}

// slurmOptions polls fast but gives a COMPLETED task's record a whole
// second to show: with 50 ms the "seen two looks later" cell failed about
// one run in three on a loaded 2-core machine, where two polls can be 50 ms
// apart.
func slurmOptions(dir string, f *fakeSlurm) Options {
	return Options{Out: dir, CacheDir: filepath.Join(filepath.Dir(dir), "cache"), Executable: "/opt/xrun/bin/xrun", Log: zerolog.Nop(),
		Slurm: &SlurmOptions{Commander: f, Poll: time.Millisecond, PollMax: 5 * time.Millisecond, RecordGrace: time.Second}}
}

// TestSlurmRunFailuresThenResume runs a study through a fake Slurm whose
// tasks end in every way Slurm ends them, then resumes it: only the
// failed cells are submitted again.
func TestSlurmRunFailuresThenResume(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, ""))
	dir := filepath.Join(t.TempDir(), "out")
	f := &fakeSlurm{t: t, ends: map[string]fakeTask{
		"bs1_gemm-disable": {state: "FAILED", reason: "NonZeroExitCode", exit: "2:0", stderr: "goroutine 1\npanic: boom\n"},
		"bs2_gemm-auto":    {state: "TIMEOUT", reason: "TimeLimit", exit: "0:15"},
		"bs2_gemm-disable": {state: "COMPLETED", reason: "None", exit: "0:0"}, // but no cell.json
		"bs4_gemm-auto":    {state: "OUT_OF_MEMORY", reason: "OutOfMemory", exit: "0:125"},
		"bs4_gemm-disable": {state: "FAILED", reason: "NonZeroExitCode", exit: "124:0"}, // timeout(1): the cell's own timeout
		// COMPLETED, its cell.json seen only two looks later (a shared
		// filesystem's cache): ok.
		"bs1_gemm-auto": {state: "COMPLETED", reason: "None", exit: "0:0", record: true, late: 2},
	}}
	res, err := Run(context.Background(), spec, slurmOptions(dir, f))
	if !errors.Is(err, ErrCellsFailed) || !strings.Contains(err.Error(), "5 of 6 cells failed") {
		t.Fatalf("err %v, want 5 of 6 cells failed", err)
	}
	want := map[string]string{
		"bs1_gemm-auto":    "",
		"bs1_gemm-disable": "slurm: FAILED ExitCode=2:0: panic: boom (see cells/bs1_gemm-disable-",
		"bs2_gemm-auto":    "slurm: TIMEOUT (time limit 01:00:00)",
		"bs2_gemm-disable": "slurm: COMPLETED, but the worker left no cell.json",
		"bs4_gemm-auto":    "slurm: OUT_OF_MEMORY ExitCode=0:125 Reason=OutOfMemory",
		"bs4_gemm-disable": "slurm: FAILED ExitCode=124:0: timed out after 2h0m0s, the cell's timeout",
	}
	check := func(res *results.Results, want map[string]string) {
		t.Helper()
		if len(res.Cells) != 6 {
			t.Fatalf("%d cells, want 6", len(res.Cells))
		}
		for _, c := range res.Cells {
			prefix := c.ID[:strings.LastIndex(c.ID, "-")]
			msg := want[prefix]
			if msg == "" {
				if c.Status != results.StatusOK || len(c.Repeats) != 1 {
					t.Errorf("cell %s: %s %q, want ok", c.ID, c.Status, c.Error)
				}
				continue
			}
			if c.Status != results.StatusFailed || !strings.HasPrefix(c.Error, msg) {
				t.Errorf("cell %s: %s %q, want failed with %q", c.ID, c.Status, c.Error, msg)
			}
		}
	}
	check(res, want)
	// results.json on disk is the merged study, as a local run leaves it.
	onDisk, err := results.ReadFile(filepath.Join(dir, layout.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	check(onDisk, want)
	if !strings.Contains(f.script, "#SBATCH --array=0-5") {
		t.Errorf("script:\n%s", f.script)
	}
	if _, err := os.Stat(filepath.Join(dir, layout.StateDir, SlurmJobFile)); err != nil {
		t.Error(err)
	}

	// --resume resubmits the five failed cells, and only them.
	f.ends, f.squeue = nil, ""
	res, err = Run(context.Background(), spec, func() Options { o := slurmOptions(dir, f); o.Resume = true; return o }())
	if err != nil {
		t.Fatalf("--resume: %v", err)
	}
	check(res, nil)
	var again []string
	for _, id := range f.submitted[1] {
		again = append(again, id[:strings.LastIndex(id, "-")])
	}
	if !slices.Equal(again, []string{"bs1_gemm-disable", "bs2_gemm-auto", "bs2_gemm-disable", "bs4_gemm-auto", "bs4_gemm-disable"}) {
		t.Errorf("--resume submitted %v", again)
	}
	if !strings.Contains(f.script, "#SBATCH --array=0-4") || !f.ran("squeue -h -j 101") {
		t.Errorf("resubmission: squeue checked: %t; script:\n%s", f.ran("squeue -h -j 101"), f.script)
	}

	// Nothing left to run: nothing is submitted.
	n := len(f.submitted)
	if _, err := Run(context.Background(), spec, func() Options { o := slurmOptions(dir, f); o.Resume = true; return o }()); err != nil || len(f.submitted) != n {
		t.Errorf("complete study resumed: %v, %d submissions, want none", err, len(f.submitted)-n)
	}
}

// TestSlurmResumesRepeats: a task Slurm stops after its worker recorded a
// repeat is a failed cell that says so; --resume resubmits it, keeping the
// repeat, and its worker runs only the rest.
func TestSlurmResumesRepeats(t *testing.T) {
	spec := slurmSpec(t, strings.Replace(fmt.Sprintf(slurmSpecYAML, ""), "repeats: 1", "repeats: 3", 1))
	dir := filepath.Join(t.TempDir(), "out")
	f := &fakeSlurm{t: t, ends: map[string]fakeTask{
		"bs1_gemm-auto": {state: "TIMEOUT", reason: "TimeLimit", exit: "0:15", real: true, stopAt: "r1"},
	}}
	res, err := Run(context.Background(), spec, slurmOptions(dir, f))
	if !errors.Is(err, ErrCellsFailed) {
		t.Fatalf("err %v, want a failed cell", err)
	}
	id := res.Cells[0].ID
	if c := res.Cells[0]; c.Status != results.StatusFailed || len(c.Repeats) != 1 ||
		c.Error != "slurm: TIMEOUT (time limit 01:00:00); 1 of 3 repeats kept (xrun run --resume runs the rest)" {
		t.Errorf("cell %s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
	}

	f.ends = map[string]fakeTask{"bs1_gemm-auto": {state: "COMPLETED", reason: "None", exit: "0:0", real: true}}
	res, err = Run(context.Background(), spec, func() Options { o := slurmOptions(dir, f); o.Resume = true; return o }())
	if err != nil {
		t.Fatalf("--resume: %v", err)
	}
	if !slices.Equal(f.submitted[1], []string{id}) {
		t.Errorf("--resume submitted %v", f.submitted[1])
	}
	if c := res.Cells[0]; c.Status != results.StatusOK || len(c.Repeats) != 3 {
		t.Errorf("cell %s after --resume: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
	}
	rec, _ := readCellRecord(dir, id)
	if rec == nil {
		t.Fatal("no record")
	}
	checkOrigins(t, rec, 1, false)
}

func TestSlurmRefusals(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, ""))
	tmp := t.TempDir()

	// sbatch refuses the job: its words, verbatim, exit 2, nothing written.
	dir := filepath.Join(tmp, "out")
	f := &fakeSlurm{t: t, testOnlyErr: "sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition name specified\n"}
	o := slurmOptions(dir, f)
	o.Slurm.Partition = "nope"
	_, err := Run(context.Background(), spec, o)
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() || err.Error() != strings.TrimSpace(f.testOnlyErr) {
		t.Errorf("rejected partition: %v, want sbatch's message as bad input", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a rejected job left the results directory behind")
	}

	// A controller that cannot be reached is no bad input.
	f = &fakeSlurm{t: t, testOnlyErr: "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"}
	_, err = Run(context.Background(), spec, slurmOptions(dir, f))
	if err == nil || errors.As(err, &bi) && bi.BadInput() || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Errorf("unreachable controller: %v", err)
	}

	// sbatch fails at submission after all: the error is sbatch's, the
	// cells are listed as not run.
	f = &fakeSlurm{t: t, sbatchErr: "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"}
	res, err := Run(context.Background(), spec, slurmOptions(dir, f))
	if err == nil || !strings.HasSuffix(err.Error(), f.sbatchErr) || errors.Is(err, ErrCellsFailed) {
		t.Errorf("sbatch failure: %v", err)
	}
	if res == nil || res.Cells[0].Status != results.StatusSkipped || !strings.Contains(res.Cells[0].Error, "QOS policy") {
		t.Errorf("cells after a failed submission: %+v", res)
	}

	// A job of an earlier run still writes into the directory.
	f = &fakeSlurm{t: t, squeue: "101_2 RUNNING\n"}
	o = slurmOptions(dir, f)
	o.Fresh = true
	os.WriteFile(filepath.Join(dir, layout.StateDir, SlurmJobFile), []byte(`{"job_id":"101"}`), 0o644)
	_, err = Run(context.Background(), spec, o)
	if !errors.As(err, &bi) || !strings.Contains(err.Error(), "scancel 101") || f.ran("sbatch") {
		t.Errorf("earlier job still running: %v (sbatch run: %t)", err, f.ran("sbatch"))
	}

	// Flags that cannot work.
	o = slurmOptions(filepath.Join(tmp, "other"), &fakeSlurm{t: t})
	o.GPUs = []int{0}
	if _, err := Run(context.Background(), spec, o); !errors.As(err, &bi) || !strings.Contains(err.Error(), "--gres") {
		t.Errorf("--gpus with slurm: %v", err)
	}
	cuda := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, withCudaCell))
	o = slurmOptions(filepath.Join(tmp, "other"), &fakeSlurm{t: t})
	o.Slurm.Gres = "gpu:1"
	if _, err := Run(context.Background(), cuda, o); !errors.As(err, &bi) || !strings.Contains(err.Error(), "a cell needs 2") {
		t.Errorf("--gres gpu:1 for a 2-GPU cell: %v", err)
	}
}

// TestSlurmInterrupted cancels the run while tasks run: the array is
// cancelled, finished cells are kept, the others are interrupted.
func TestSlurmInterrupted(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, ""))
	dir := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeSlurm{t: t, onRunning: cancel, ends: map[string]fakeTask{"bs4": {hang: true}}}
	res, err := Run(ctx, spec, slurmOptions(dir, f))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v, want interrupted", err)
	}
	if !f.ran("scancel 101") {
		t.Error("the job was not cancelled")
	}
	for _, c := range res.Cells {
		hang := strings.HasPrefix(c.ID, "bs4")
		if hang && (c.Status != results.StatusSkipped || !strings.Contains(c.Error, "interrupted")) || !hang && c.Status != results.StatusOK {
			t.Errorf("cell %s: %s %q", c.ID, c.Status, c.Error)
		}
	}
}

// TestSlurmJobPurged follows a job whose records scontrol has forgotten
// (xrun was stopped for longer than MinJobAge): cells with a record are
// complete, the others failed, saying so.
func TestSlurmJobPurged(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, ""))
	dir := filepath.Join(t.TempDir(), "out")
	f := &fakeSlurm{t: t, purged: true, ends: map[string]fakeTask{"bs2": {state: "FAILED", exit: "1:0"}}}
	res, err := Run(context.Background(), spec, slurmOptions(dir, f))
	if !errors.Is(err, ErrCellsFailed) {
		t.Fatalf("err %v", err)
	}
	for _, c := range res.Cells {
		lost := strings.HasPrefix(c.ID, "bs2")
		if lost && (c.Status != results.StatusFailed || !strings.HasPrefix(c.Error, "slurm: the task's record is gone")) || !lost && c.Status != results.StatusOK {
			t.Errorf("cell %s: %s %q", c.ID, c.Status, c.Error)
		}
	}
}

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/results/layout"
)

// What the Slurm executor keeps in a results directory, under .xrun/:
//
//	DIR/.xrun/slurm.sh                the job-array script last submitted
//	DIR/.xrun/slurm-cells.txt         its tasks: line N+1 is task N's cell id and timeout
//	DIR/.xrun/slurm-job.json          the job id, when, and the cells of each task
//	DIR/.xrun/slurm/<job>_<task>.out  each task's stdout and stderr as Slurm
//	DIR/.xrun/slurm/<job>_<task>.err  writes them (the worker's own go to cells/<id>/stderr.log)
const (
	SlurmScriptFile = "slurm.sh"
	SlurmCellsFile  = "slurm-cells.txt"
	SlurmJobFile    = "slurm-job.json"
	SlurmLogDir     = "slurm"
)

// Defaults of the Slurm executor's polling: it looks at the job every
// DefaultSlurmPoll, more rarely (up to DefaultSlurmPollMax) while nothing
// changes, so a long study does not keep slurmctld busy.
const (
	DefaultSlurmPoll    = time.Second
	DefaultSlurmPollMax = 15 * time.Second
)

// SlurmOptions configure xrun run --executor slurm: the study's cells run
// as the tasks of one Slurm job array, each task `xrun worker` for one cell
// in the shared results directory.
type SlurmOptions struct {
	// Partition, Gres, Time and Account become the job's --partition,
	// --gres, --time and --account; "" leaves them to Slurm's defaults.
	// Without Gres, a study with cuda cells asks gpu:N, N the most GPUs a
	// cell needs (gpus_per_cell).
	Partition, Gres, Time, Account string
	// SbatchArgs are further sbatch options, each one #SBATCH line.
	SbatchArgs []string
	// DryRun prints the script to ScriptOut and submits nothing; nothing
	// is written into the results directory.
	DryRun    bool
	ScriptOut io.Writer
	// Commander runs sbatch, squeue, scontrol and scancel; nil means the
	// real ones (ExecCommander with Options.Env).
	Commander Commander
	// Poll and PollMax bound the interval between two looks at the job;
	// zero means DefaultSlurmPoll and DefaultSlurmPollMax.
	Poll, PollMax time.Duration
	// RecordGrace is how long a task Slurm says COMPLETED may take to show
	// its cell.json on this host (a shared filesystem's caches may hide a
	// file another node wrote for a while); zero means a minute.
	RecordGrace time.Duration
}

var (
	slurmNameRe      = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	slurmPartitionRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$`)
	// name[:type][:count], comma separated (gpu:1, gpu:a100:2, gpu,tmpdisk:10).
	slurmGresRe = regexp.MustCompile(`^[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)*(,[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)*)*$`)
	// Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit.
	slurmTimeRe = regexp.MustCompile(`^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+|UNLIMITED|INFINITE|unlimited|infinite)$`)
)

// sbatchOwned are sbatch options xrun sets itself or has its own flag for;
// --sbatch-arg refuses them, saying what to use instead.
var sbatchOwned = []struct {
	names []string
	why   string
}{
	{[]string{"--array", "-a"}, "xrun makes one task per cell to run"},
	{[]string{"--output", "-o", "--error", "-e"}, "xrun keeps each task's output in DIR/.xrun/slurm/"},
	{[]string{"--parsable", "--wait", "-W", "--test-only"}, "xrun submits and follows the job itself"},
	{[]string{"--partition", "-p"}, "use --partition"},
	{[]string{"--gres"}, "use --gres"},
	{[]string{"--time", "-t"}, "use --time"},
	{[]string{"--account", "-A"}, "use --account"},
	{[]string{"--gpus", "-G", "--gpus-per-task", "--gpus-per-node", "--gpus-per-socket"}, "use --gres gpu:N, so that xrun knows how many GPUs each task gets"},
}

// validate checks the options as flags, before anything is run.
func (o *SlurmOptions) validate() error {
	check := func(flag, v string, re *regexp.Regexp, want string) error {
		if v != "" && !re.MatchString(v) {
			return &OptionError{flag, fmt.Sprintf("%q: expected %s", v, want)}
		}
		return nil
	}
	for _, c := range []struct {
		flag, v string
		re      *regexp.Regexp
		want    string
	}{
		{"--partition", o.Partition, slurmPartitionRe, "a partition name, or several separated by commas (sinfo lists them)"},
		{"--account", o.Account, slurmNameRe, "an account name (letters, digits, _ . -)"},
		{"--gres", o.Gres, slurmGresRe, "NAME[:TYPE][:COUNT], comma separated, e.g. gpu:1 or gpu:a100:2"},
		{"--time", o.Time, slurmTimeRe, "a Slurm time limit: MINUTES, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED, e.g. 30 or 2:00:00"},
	} {
		if err := check(c.flag, c.v, c.re, c.want); err != nil {
			return err
		}
	}
	for _, a := range o.SbatchArgs {
		if !strings.HasPrefix(a, "-") || strings.ContainsAny(a, "\n\r") {
			return &OptionError{"--sbatch-arg", fmt.Sprintf("%q: expected one sbatch option, e.g. --sbatch-arg=--exclusive or --sbatch-arg=--qos=high", a)}
		}
		name, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			name = name[:2] // -pdebug
		}
		for _, own := range sbatchOwned {
			if slices.Contains(own.names, name) {
				return &OptionError{"--sbatch-arg", fmt.Sprintf("%q: %s", a, own.why)}
			}
		}
	}
	return nil
}

// gresGPUs is how many GPUs a --gres value asks for each task: the count
// of its gpu entry (1 when it names none), 0 without one.
func gresGPUs(gres string) int {
	for _, e := range strings.Split(gres, ",") {
		f := strings.Split(e, ":")
		if f[0] != "gpu" {
			continue
		}
		if len(f) > 1 {
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				return n
			}
		}
		return 1
	}
	return 0
}

// slurmExecutor runs a study's cells as one Slurm job array.
type slurmExecutor struct {
	o     SlurmOptions
	cmd   Commander
	dir   string // absolute: tasks may start anywhere
	exe   string // absolute path of the xrun the tasks run
	study string // the study's name
	name  string // the job's name
	grace time.Duration
	log   zerolog.Logger
	// gres is what each task asks for (the user's --gres, or the one
	// worked out for cuda cells); gpus is how many GPUs that is.
	gres string
	gpus int
	// fresh discards the task output of earlier jobs (--fresh).
	fresh bool
	// lostAfter is how long scontrol may fail before xrun gives up on
	// following the job; cancelWait how long cancelled tasks may take to
	// end.
	lostAfter, cancelWait time.Duration
}

func newSlurmExecutor(o Options, dir, name string, log zerolog.Logger) (*slurmExecutor, error) {
	so := *o.Slurm
	if err := so.validate(); err != nil {
		return nil, err
	}
	if o.GPUs != nil {
		return nil, &OptionError{"--gpus", "chooses GPUs of this host; with --executor slurm, Slurm gives each task its GPUs (--gres gpu:N)"}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	exe := o.Executable
	if exe == "" {
		return nil, errors.New("runner: Options.Executable is empty: Slurm tasks run xrun worker through it")
	}
	if !filepath.IsAbs(exe) {
		if exe, err = filepath.Abs(exe); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(abs+exe, "\"\n\r") {
		return nil, &OptionError{"--out", fmt.Sprintf("%q: a results directory for Slurm must not contain double quotes or line breaks (sbatch's #SBATCH lines cannot carry them)", abs)}
	}
	x := &slurmExecutor{o: so, cmd: so.Commander, dir: abs, exe: exe, study: name, name: "xrun-" + jobName(name), grace: o.KillGrace, log: log,
		gres: so.Gres, gpus: gresGPUs(so.Gres), fresh: o.Fresh, lostAfter: 5 * time.Minute, cancelWait: 2 * time.Minute}
	if x.cmd == nil {
		x.cmd = ExecCommander{Env: o.Env}
	}
	if x.o.Poll <= 0 {
		x.o.Poll = DefaultSlurmPoll
	}
	if x.o.PollMax < x.o.Poll {
		x.o.PollMax = max(DefaultSlurmPollMax, x.o.Poll)
	}
	if x.grace <= 0 {
		x.grace = DefaultKillGrace
	}
	if x.o.RecordGrace <= 0 {
		x.o.RecordGrace = time.Minute
	}
	return x, nil
}

// jobName keeps the characters of a study's name that are safe in a job
// name everywhere (squeue columns, file names).
func jobName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
}

// device is what a cell's fingerprint records as its device under Slurm:
// the submitting host cannot see the nodes' GPUs or CPUs, so it is where
// the tasks were sent. --resume keeps cells measured through the same
// partition and resources.
func (x *slurmExecutor) device() string {
	p := x.o.Partition
	if p == "" {
		p = "(default)"
	}
	return "slurm partition=" + p + " gres=" + x.gres
}

// planGPUs settles how many GPUs each task asks for, once the plan knows
// which cells run on cuda or an external engine (TensorRT-LLM, a command:
// GPU programs) and how many GPUs each needs (gpus_per_cell).
func (x *slurmExecutor) planGPUs(cells []*runCell) error {
	most, cuda := 0, false
	for _, rc := range cells {
		if rc.selected && (rc.wc.Engine.Backend == "cuda" || !builtinEngine(rc.wc.Engine.Backend)) {
			cuda = true
			most = max(most, rc.wc.Engine.NumGPUs)
		}
	}
	switch {
	case !cuda && x.gpus > 0:
		x.log.Warn().Str("gres", x.gres).Msg("every cell runs on the cpu engine: the GPUs each task asks for (--gres) stay unused")
	case cuda && x.o.Gres == "":
		x.gres, x.gpus = fmt.Sprintf("gpu:%d", most), most
	case cuda && x.gpus < most:
		return &OptionError{"--gres", fmt.Sprintf("%q gives each task %d GPUs; a cell needs %d (gpus_per_cell)", x.o.Gres, x.gpus, most)}
	}
	return nil
}

// sbatchValue writes an #SBATCH option value, double-quoted when it holds
// spaces (sbatch's directive parser reads double quotes).
func sbatchValue(s string) string {
	if strings.ContainsAny(s, " \t'") {
		return `"` + s + `"`
	}
	return s
}

// shQuote quotes s for bash.
func shQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// script is the job-array script for the queue: task i runs the cell on
// line i+1 of slurm-cells.txt (see cellList).
func (x *slurmExecutor) script(queue []*runCell) string {
	var b strings.Builder
	state := filepath.Join(x.dir, layout.StateDir)
	fmt.Fprintf(&b, `#!/bin/bash
# xrun study %q: %d cells, one per task of this Slurm job array.
# Written by xrun run --executor slurm, which submits it, follows its tasks
# and merges their cells into results.json. To run cells again, use
# xrun run --resume rather than sbatch: it resubmits only the cells missing
# or failed. Task N runs the cell on line N+1 of .xrun/%s.
`, x.study, len(queue), SlurmCellsFile)
	opt := func(name, v string) {
		if v != "" {
			fmt.Fprintf(&b, "#SBATCH %s=%s\n", name, sbatchValue(v))
		}
	}
	opt("--job-name", x.name)
	opt("--array", fmt.Sprintf("0-%d", len(queue)-1))
	opt("--output", filepath.Join(state, SlurmLogDir, "%A_%a.out"))
	opt("--error", filepath.Join(state, SlurmLogDir, "%A_%a.err"))
	opt("--partition", x.o.Partition)
	opt("--gres", x.gres)
	opt("--time", x.o.Time)
	opt("--account", x.o.Account)
	for _, a := range x.o.SbatchArgs {
		name, v, ok := strings.Cut(a, "=")
		if ok {
			opt(name, v)
		} else {
			fmt.Fprintf(&b, "#SBATCH %s\n", a)
		}
	}
	b.WriteString("#\n")
	for i, rc := range queue {
		fmt.Fprintf(&b, "# task %d: %s\n", i, rc.cell.ID)
	}
	fmt.Fprintf(&b, `
set -u
dir=%s
xrun=%s
mapfile -t tasks <"$dir/%s/%s"
task=${tasks[$SLURM_ARRAY_TASK_ID]:-}
if [ -z "$task" ]; then
	echo "xrun: array task $SLURM_ARRAY_TASK_ID has no cell in $dir/%s/%s" >&2
	exit 2
fi
id=${task%%%% *}
limit=${task#* }
mkdir -p "$dir/%s/$id"
# The cell's timeout (the spec's timeout:) holds here as in a local run:
# SIGTERM, then SIGKILL %s later; timeout(1) then exits 124 (or 137).
timeout --kill-after=%s "$limit" "$xrun" worker --dir "$dir" --cell "$id" >"$dir/%s/$id/%s" 2>&1
`, shQuote(x.dir), shQuote(x.exe), layout.StateDir, SlurmCellsFile, layout.StateDir, SlurmCellsFile, layout.CellsDir,
		fmtDur(x.grace), slurmSeconds(x.grace), layout.CellsDir, layout.StderrFile)
	return b.String()
}

// cellList is slurm-cells.txt: for task i, line i+1 holds the cell id and
// the cell's timeout, as timeout(1) reads it.
func cellList(queue []*runCell) []byte {
	var b strings.Builder
	for _, rc := range queue {
		fmt.Fprintf(&b, "%s %s\n", rc.cell.ID, slurmSeconds(rc.wc.Timeout))
	}
	return []byte(b.String())
}

// slurmSeconds writes d for timeout(1): seconds with an "s".
func slurmSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// slurmJob is .xrun/slurm-job.json: the job last submitted for the
// directory, so a later run can tell whether its tasks still run.
type slurmJob struct {
	JobID     string    `json:"job_id"`
	Submitted time.Time `json:"submitted"`
	Script    string    `json:"script"`
	Cells     []string  `json:"cells"` // cell of task i
}

func (x *slurmExecutor) statePath(name string) string {
	return filepath.Join(x.dir, layout.StateDir, name)
}

// dryRun prints the script the queue would be submitted with.
func (x *slurmExecutor) dryRun(queue []*runCell) error {
	out := x.o.ScriptOut
	if out == nil {
		out = io.Discard
	}
	if len(queue) == 0 {
		x.log.Info().Msg("every selected cell is complete: nothing would be submitted")
		return nil
	}
	_, err := io.WriteString(out, x.script(queue))
	return err
}

// precheck runs before the results directory is touched: it refuses to
// submit while a job of an earlier run still writes into the directory,
// and asks sbatch to validate the job (--test-only: partition, time limit,
// resources) so that a flag Slurm rejects is bad input (exit 2) with
// nothing written.
func (x *slurmExecutor) precheck(ctx context.Context, queue []*runCell) error {
	if err := x.checkEarlierJob(ctx); err != nil {
		return err
	}
	if len(queue) == 0 {
		return nil
	}
	if _, err := x.cmd.Run(ctx, []byte(x.script(queue)), "sbatch", "--test-only"); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sbatch --test-only: %w", ErrInterrupted)
		}
		var ce *CommandError
		if errors.As(err, &ce) && ce.Stderr != "" && !slurmUnreachable(ce.Stderr) {
			return &SlurmRejectedError{err}
		}
		return fmt.Errorf("sbatch --test-only: %w", err)
	}
	return nil
}

// SlurmRejectedError is a job sbatch refuses for its options (an unknown
// partition, a time limit over the partition's): bad input, exit 2. Its
// message is sbatch's.
type SlurmRejectedError struct{ Err error }

func (e *SlurmRejectedError) Error() string  { return e.Err.Error() }
func (e *SlurmRejectedError) Unwrap() error  { return e.Err }
func (e *SlurmRejectedError) BadInput() bool { return true }

// slurmUnreachable tells a controller that cannot be reached (a run-time
// failure) from a job it rejects (the user's input).
func slurmUnreachable(stderr string) bool {
	for _, s := range []string{"Unable to contact slurm controller", "Socket timed out", "Connection refused", "Zero Bytes were transmitted", "Unable to establish"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// checkEarlierJob refuses to submit while the job an earlier run submitted
// for this directory still has tasks queued or running: they would write
// cells into it beside (or over) the new job's.
func (x *slurmExecutor) checkEarlierJob(ctx context.Context) error {
	b, err := os.ReadFile(x.statePath(SlurmJobFile))
	if err != nil {
		return nil
	}
	var j slurmJob
	if json.Unmarshal(b, &j) != nil || j.JobID == "" {
		return nil
	}
	out, err := x.cmd.Run(ctx, nil, "squeue", "-h", "-j", j.JobID, "-o", "%i %T")
	if err != nil {
		if !invalidJobID(err) {
			x.log.Warn().Err(err).Str("job", j.JobID).Msg("cannot tell whether the Slurm job of an earlier run still runs; going on")
		}
		return nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !slurmTerminal[f[1]] {
			return &OptionError{"--executor slurm", fmt.Sprintf("Slurm job %s, submitted by an earlier xrun run into %s, still has tasks queued or running (squeue -j %s): wait for it to end (xrun run --resume then keeps what it recorded) or cancel it (scancel %s)",
				j.JobID, x.dir, j.JobID, j.JobID)}
		}
	}
	return nil
}

// invalidJobID reports whether a Slurm command failed because the job is
// unknown: never submitted, or its record purged (MinJobAge after its end).
func invalidJobID(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id")
}

func (x *slurmExecutor) parallel(queue []*runCell) int { return max(len(queue), 1) }

func (x *slurmExecutor) runCells(ctx context.Context, queue []*runCell, r reporter) error {
	if len(queue) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	jobID, err := x.submit(ctx, queue)
	if err != nil {
		return err
	}
	return x.follow(ctx, jobID, queue, r)
}

// submit writes the task list and the script, clears what earlier
// attempts left in the queued cells' directories, and submits the array.
func (x *slurmExecutor) submit(ctx context.Context, queue []*runCell) (string, error) {
	if x.fresh {
		// The tasks' output of jobs whose cells --fresh discarded.
		if err := os.RemoveAll(x.statePath(SlurmLogDir)); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(x.statePath(SlurmLogDir), 0o755); err != nil {
		return "", err
	}
	for _, rc := range queue {
		// What an earlier attempt left (cell.json above all) must not be
		// mistaken for this attempt's. The repeats it recorded stay: the
		// task's worker keeps those of the cell's fingerprint, as a
		// requeued task's worker keeps its own.
		if err := clearCellDir(layout.CellDir(x.dir, rc.cell.ID)); err != nil {
			return "", fmt.Errorf("cannot clear the directory of cell %s: %w", rc.cell.ID, err)
		}
	}
	list := cellList(queue)
	if err := dsets.WriteFileAtomic(x.statePath(SlurmCellsFile), func(w io.Writer) error { _, err := w.Write(list); return err }); err != nil {
		return "", err
	}
	scriptPath := x.statePath(SlurmScriptFile)
	script := x.script(queue)
	if err := dsets.WriteFileAtomic(scriptPath, func(w io.Writer) error { _, err := io.WriteString(w, script); return err }); err != nil {
		return "", err
	}
	// Not cancelled half-way: a job sbatch submitted must be known, so
	// that an interrupt cancels it.
	out, err := x.cmd.Run(context.WithoutCancel(ctx), nil, "sbatch", "--parsable", scriptPath)
	if err != nil {
		return "", fmt.Errorf("submitting %s: %w", scriptPath, err)
	}
	// --parsable prints "jobid" or "jobid;cluster".
	jobID, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.Atoi(jobID); err != nil {
		return "", fmt.Errorf("submitting %s: sbatch --parsable printed %q, expected a job id", scriptPath, truncate(string(out), 200))
	}
	j := slurmJob{JobID: jobID, Submitted: time.Now().UTC(), Script: scriptPath}
	for _, rc := range queue {
		j.Cells = append(j.Cells, rc.cell.ID)
	}
	if err := writeJSONAtomic(x.statePath(SlurmJobFile), j); err != nil {
		x.log.Warn().Err(err).Msg("cannot record the job id; a later run will not see whether this job still runs")
	}
	x.log.Info().Str("job", jobID).Int("tasks", len(queue)).Str("script", scriptPath).Msg("submitted to Slurm")
	return jobID, nil
}

package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results"
)

// GPU time often comes in slices that end on their own: a batch job's time
// limit, a CI job's timeout, a remote command that may run ten minutes. A
// repeat of a long cell takes minutes, and the one in flight when the slice
// ends is lost. With a time limit (xrun run --time-limit, or a worker inside
// a Slurm job that has an end time) the runner does not start a step — a
// worker's first pass with the engine's creation, a timed repeat, the
// profiled pass — that it predicts would end past the limit. It stops
// instead, as an interrupted run does: what is finished is kept, and
// xrun run --resume runs the rest.
//
// A step is predicted from the cell's own recorded repeats (those of this
// worker and of earlier ones, read back on --resume): a timed repeat takes
// what the last one took (the engine's warm-up requests run at the start of
// every pass, so they are part of it); the profiled pass that times
// profileOverhead, or, on xrun's own engine, which stops it after its
// window, the share of it the window ends at; a worker's first step adds the time the last worker took
// to get its engine ready. A cell with nothing recorded is estimated from
// the cells most like it that have a repeat recorded (estimateFirst): their
// time scaled by the work of a repeat (the roofline's, else the tokens').
// With nothing at all to go by, a step
// starts while at least timeLimitFloor is left: there is no better guess,
// and the time would otherwise go unused.

const (
	// timeLimitMargin is the share of a prediction kept in hand: repeats
	// of one cell vary by a few percent.
	timeLimitMargin = 0.05
	// timeLimitSlack is kept in hand on top of every prediction, for
	// writing the step's records and results.json.
	timeLimitSlack = 5 * time.Second
	// timeLimitFloor is the least time left in which a step with nothing
	// recorded to predict it from still starts.
	timeLimitFloor = 30 * time.Second
	// profileOverhead is how much longer the profiled pass is taken to run
	// than a timed repeat: the profiler's own cost.
	profileOverhead = 1.2
)

// ErrTimeLimit is returned (wrapped) when a run or a worker stopped because
// its next step would not have finished before the time limit. It is an
// interruption (errors.Is(err, ErrInterrupted) holds, exit status 130):
// everything finished is kept, and xrun run --resume continues.
var ErrTimeLimit error = timeLimitError{}

type timeLimitError struct{}

func (timeLimitError) Error() string        { return "stopped at the time limit" }
func (timeLimitError) Is(target error) bool { return target == ErrInterrupted }

// deadlineEnv carries a run's time limit to its workers: the deadline, as
// RFC 3339 with nanoseconds. The local executor sets it for each worker it
// starts, and removes one inherited from elsewhere.
const deadlineEnv = "XRUN_DEADLINE"

// slurmEndEnv is the end of the Slurm job a process runs in, in seconds
// since the Unix epoch. Recent Slurm releases set it (22.05, on this
// project's test cluster, does not: there nothing changes). A worker, or a
// local run inside a batch job, stops before a step that would end past it:
// Slurm kills the job then.
const slurmEndEnv = "SLURM_JOB_END_TIME"

// budget is a time limit: when the run (or worker) must be done, and what
// set it, for the log.
type budget struct {
	deadline time.Time
	limit    string // "--time-limit 9m0s", "the Slurm job's end (SLURM_JOB_END_TIME)"
	now      func() time.Time
	// span is the whole limit, from the run's start (0: unknown).
	span time.Duration
}

// tighter returns the budget of the earlier deadline; either may be nil.
func tighter(a, b *budget) *budget {
	switch {
	case a == nil:
		return b
	case b == nil || a.deadline.Before(b.deadline):
		return a
	}
	return b
}

// slurmBudget is the end of the Slurm job the environment says this process
// runs in, or nil.
func slurmBudget(getenv func(string) string, now func() time.Time) *budget {
	v := strings.TrimSpace(getenv(slurmEndEnv))
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sec <= 0 {
		return nil
	}
	end := time.Unix(sec, 0)
	return &budget{deadline: end, limit: "the Slurm job's end (" + slurmEndEnv + ")", now: now, span: end.Sub(now())}
}

// workerBudget is a worker's time limit: the run's (deadlineEnv) or the
// Slurm job's end, whichever comes first; nil when there is neither.
func workerBudget(getenv func(string) string, now func() time.Time) (*budget, error) {
	var b *budget
	if v := getenv(deadlineEnv); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: expected an RFC 3339 time: %w", deadlineEnv, v, err)
		}
		b = &budget{deadline: t, limit: "--time-limit", now: now}
	}
	return tighter(b, slurmBudget(getenv, now)), nil
}

// step is what a cell's worker runs next: a timed repeat or the profiled
// pass, preceded by the engine's creation when it is the worker's first.
type step struct {
	// name is "repeat 2 of 3" or "the profiled pass"; "" when nothing is
	// left but writing the cell's record.
	name string
	// predicted is how long the step is expected to take; 0 when nothing
	// recorded predicts it.
	predicted time.Duration
	// basis is empty when the cell's own repeats predict the step, else
	// how it was estimated from other cells (estimateFirst).
	basis string
}

// need is the time a step must have left to start.
func (s step) need() time.Duration {
	return s.predicted + time.Duration(float64(s.predicted)*timeLimitMargin) + timeLimitSlack
}

// allows reports whether step s may start now, and how much time is left.
// A nil budget allows everything.
func (b *budget) allows(s step) (ok bool, left time.Duration) {
	if b == nil || s.name == "" {
		return true, 0
	}
	left = b.deadline.Sub(b.now())
	// An estimate longer than the whole limit would hold its cell back in
	// every run under it: such a cell is tried, as one with nothing to go
	// by is (it may be quicker than its neighbours).
	if s.predicted <= 0 || s.basis != "" && b.span > 0 && s.need() > b.span {
		return left >= timeLimitFloor, left
	}
	return s.need() <= left, left
}

// repeatDuration is how long a recorded repeat's pass took (warm-up
// included); 0 when its record does not say.
func repeatDuration(r *repeatRecord) time.Duration {
	return max(r.Finished.Sub(r.Started), 0)
}

// lastRepeat is the duration of the last recorded repeat that has one, and
// the time its worker took to get ready.
func lastRepeat(done []repeatRecord) (pass, setup time.Duration) {
	for i := len(done) - 1; i >= 0; i-- {
		if d := repeatDuration(&done[i]); d > 0 {
			return d, done[i].Setup
		}
	}
	return 0, 0
}

// profiledTime predicts the profiled pass: the share of a pass its window
// ends at where the last repeat recorded one (xrun's own engine stops
// there), else a whole pass, either at profileOverhead.
func profiledTime(done []repeatRecord, pass time.Duration) time.Duration {
	share := 1.0
	if n := len(done); n > 0 && done[n-1].WindowShare > 0 {
		share = min(done[n-1].WindowShare, 1)
	}
	return time.Duration(float64(pass) * share * profileOverhead)
}

// nextStep is the step a worker of a cell of repeats timed repeats, done of
// them recorded, runs next; first adds the engine's creation to it.
func nextStep(done []repeatRecord, repeats int, profiled, first bool) step {
	pass, setup := lastRepeat(done)
	var s step
	switch {
	case len(done) < repeats:
		s = step{name: fmt.Sprintf("repeat %d of %d", len(done)+1, repeats), predicted: pass}
	case profiled:
		s = step{name: "the profiled pass", predicted: profiledTime(done, pass)}
	default:
		return step{}
	}
	if first && s.predicted > 0 {
		s.predicted += setup
	}
	return s
}

// remainingTime is how long the rest of a cell is predicted to take: the
// engine's creation, the repeats not recorded and the profiled pass; 0 when
// nothing recorded predicts it.
func remainingTime(done []repeatRecord, repeats int, profiled bool) time.Duration {
	pass, setup := lastRepeat(done)
	if pass <= 0 {
		return 0
	}
	d := setup + time.Duration(max(repeats-len(done), 0))*pass
	if profiled {
		d += profiledTime(done, pass)
	}
	return d
}

// profiledCell reports whether a cell runs a profiled pass.
func profiledCell(c *workerCell) bool {
	spans, _ := engine.ParseProfileWindow(c.Engine.ProfileWindow)
	return len(spans) > 0
}

// timeLimitNote is cells/<id>/repeats/time-limit.json: written by a worker
// that stopped because its next step would not have finished in time, so
// that the executor (local, or Slurm on another host) tells that stop from
// a failure. The executors remove it before they start the cell's next
// worker (clearCellDir), which would also remove it with the repeats' other
// leftovers (pruneRepeats).
type timeLimitNote struct {
	Step      string        `json:"step"`
	Predicted time.Duration `json:"predicted_ns"`    // 0: nothing recorded predicted it
	Basis     string        `json:"basis,omitempty"` // an estimate's, from other cells
	Left      time.Duration `json:"left_ns"`
	Limit     string        `json:"limit"`
	Deadline  time.Time     `json:"deadline"`
}

const timeLimitFile = "time-limit.json"

func timeLimitPath(dir, id string) string {
	return filepath.Join(repeatsDir(dir, id), timeLimitFile)
}

// readTimeLimitNote returns the note a cell's worker left when it stopped
// at the time limit, or nil.
func readTimeLimitNote(dir, id string) *timeLimitNote {
	b, err := os.ReadFile(timeLimitPath(dir, id))
	if err != nil {
		return nil
	}
	var n timeLimitNote
	if json.Unmarshal(b, &n) != nil {
		return nil
	}
	return &n
}

// fields say, for the log, which step of a cell is not started and why.
func (n *timeLimitNote) fields() map[string]any {
	m := map[string]any{"step": n.Step, "left": fmtDur(n.Left), "limit": n.Limit}
	if n.Predicted > 0 {
		m["predicted"] = fmtDur(n.Predicted)
		if n.Basis != "" {
			m["predicted_by"] = n.Basis
		}
	} else {
		m["predicted"] = "unknown (nothing recorded)"
	}
	return m
}

// stoppedNote is the error of a cell whose worker stopped at the time limit
// after recording kept of its repeats.
func stoppedNote(kept, repeats int, c *workerCell) string {
	switch {
	case kept == 0:
		return "not run: stopped at the time limit (xrun run --resume runs it)"
	case kept == repeats && profiledCell(c):
		return fmt.Sprintf("stopped at the time limit after %d of %d repeats, before the profiled pass; xrun run --resume runs the profiled pass", kept, repeats)
	}
	return fmt.Sprintf("stopped at the time limit after %d of %d repeats; xrun run --resume runs the rest", kept, repeats)
}

// lptOrder orders the cells that run on GPUs longest first (the longest
// processing time rule, which keeps GPUs from idling at the end while one of
// them finishes a long cell), where the repeats recorded by earlier runs
// predict them. Cells with nothing recorded come before those: they have all
// of their repeats ahead of them, and under a time limit work that cannot be
// predicted is best started early, while work that can fills the end.
// Among themselves they go longest first by the roofline's estimate of a
// repeat (roofPass; a study's rows can differ a hundredfold, and one left
// to the end keeps a GPU busy alone), cells without one after, in the
// plan's order; cells on the cpu backend keep their places. results.json
// keeps the plan's order whatever the order of running.
func lptOrder(queue []*runCell) []*runCell {
	var at []int
	var gpu []*runCell
	for i, rc := range queue {
		if rc.gpus > 0 {
			at = append(at, i)
			gpu = append(gpu, rc)
		}
	}
	slices.SortStableFunc(gpu, func(a, b *runCell) int {
		if (a.rest == 0) != (b.rest == 0) {
			if a.rest == 0 {
				return -1
			}
			return 1
		}
		if a.rest == 0 {
			return cmp.Compare(b.roof, a.roof)
		}
		return cmp.Compare(b.rest, a.rest)
	})
	out := slices.Clone(queue)
	for k, i := range at {
		out[i] = gpu[k]
	}
	return out
}

// timeLimit sets the run's time limit from the options: --time-limit from
// Options.Started, and for a local run inside a Slurm job the job's end,
// whichever comes first.
func (s *study) timeLimit() error {
	o := s.o
	switch {
	case o.TimeLimit < 0:
		return &OptionError{"--time-limit", fmt.Sprintf("%s: expected a duration greater than 0, e.g. 9m or 540s", o.TimeLimit)}
	case o.TimeLimit > 0 && o.Slurm != nil:
		return &OptionError{"--time-limit", "has no effect with --executor slurm: each task's worker stops by itself before a step that would not finish within the task's time limit (--time)"}
	}
	if o.TimeLimit > 0 {
		start := o.Started
		if start.IsZero() {
			start = time.Now()
		}
		s.limit = &budget{deadline: start.Add(o.TimeLimit), limit: "--time-limit " + o.TimeLimit.String(), now: time.Now, span: o.TimeLimit}
	}
	if o.Slurm == nil {
		s.limit = tighter(s.limit, slurmBudget(envLookup(o.Env), time.Now))
	}
	return nil
}

// envLookup reads a variable from an environment list (KEY=VALUE, the last
// one counting, as for a process).
func envLookup(env []string) func(string) string {
	return func(key string) string {
		v := ""
		for _, kv := range env {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v = val
			}
		}
		return v
	}
}

// limitContext predicts the queued cells from the repeats kept (their first
// step, for the time limit; their rest, for the order of running) and, under
// a time limit, returns a context that ends at it: steps still in flight
// then are stopped as on an interrupt.
func (s *study) limitContext(ctx context.Context, queue []*runCell) (context.Context, context.CancelFunc) {
	for _, rc := range queue {
		profiled := profiledCell(rc.wc)
		rc.first = nextStep(rc.kept, s.plan.Repeats, profiled, true)
		rc.rest = remainingTime(rc.kept, s.plan.Repeats, profiled)
	}
	if s.limit == nil {
		return ctx, func() {}
	}
	s.log.Info().Str("limit", s.limit.limit).Time("deadline", s.limit.deadline).Str("left", fmtDur(s.limit.deadline.Sub(s.limit.now()))).
		Msg("time limit: a step predicted to end past it is not started")
	return context.WithDeadlineCause(ctx, s.limit.deadline, ErrTimeLimit)
}

// cellHeld implements reporter.
func (s *study) cellHeld(rc *runCell, left time.Duration) {
	n := &timeLimitNote{Step: rc.first.name, Predicted: rc.first.predicted, Basis: rc.first.basis, Left: left, Limit: s.limit.limit, Deadline: s.limit.deadline}
	s.limitStopped(n)
	s.log.Warn().Str("cell", rc.cell.ID).Fields(n.fields()).Int("repeats_kept", len(rc.kept)).
		Msg("not started: it would not finish before the time limit (xrun run --resume runs it)")
}

// limitStopped counts a cell with a step not started because of the time
// limit n names; a worker that stopped at the run's own limit names it as
// the run does.
func (s *study) limitStopped(n *timeLimitNote) {
	if s.limit != nil && n.Deadline.Equal(s.limit.deadline) {
		n.Limit = s.limit.limit
	}
	s.limitStops++
	s.limitBy = n.Limit
}

// limitError is what a run that stopped at its time limit returns.
func (s *study) limitError(queue []*runCell) error {
	unfinished := 0
	for _, rc := range queue {
		if s.res.Cells[s.byID[rc.cell.ID]].Status == results.StatusSkipped {
			unfinished++
		}
	}
	by := s.limitBy
	if by == "" && s.limit != nil {
		by = s.limit.limit
	}
	s.log.Warn().Str("limit", by).Int("cells_unfinished", unfinished).Msg("stopped at the time limit: xrun run --resume continues")
	return fmt.Errorf("%w (%s): %d of the %d cells to run did not finish; the cells measured so far are in %s, and xrun run --resume continues",
		ErrTimeLimit, by, unfinished, len(queue), s.dir)
}

// mayStart returns ErrTimeLimit, noting the step, when s would not finish
// before the worker's time limit.
func (w *cellWorker) mayStart(s step) error {
	ok, left := w.limit.allows(s)
	if ok {
		return nil
	}
	w.stopped = &timeLimitNote{Step: s.name, Predicted: s.predicted, Left: left, Limit: w.limit.limit, Deadline: w.limit.deadline}
	return ErrTimeLimit
}

// stopAtLimit ends a worker whose next step would not finish in time as an
// interrupted one ends — the cell not recorded, its recorded repeats kept —
// and leaves the note that tells its executor why.
func (w *cellWorker) stopAtLimit() error {
	if w.tel != nil {
		w.tel.Stop()
	}
	if err := os.MkdirAll(repeatsDir(w.dir, w.cell.ID), 0o755); err != nil {
		return err
	}
	if err := writeJSONAtomic(timeLimitPath(w.dir, w.cell.ID), w.stopped); err != nil {
		return fmt.Errorf("cell %s: noting the stop at the time limit: %w", w.cell.ID, err)
	}
	w.log.Warn().Fields(w.stopped.fields()).Int("repeats_recorded", len(w.done)).Int("repeats", w.repeats).
		Msg("not started: it would not finish before the time limit; the cell is not recorded, its recorded repeats are kept, and --resume runs the rest")
	return fmt.Errorf("cell %s: %w", w.cell.ID, ErrTimeLimit)
}

// passTimeFault reads the test fault took=DUR (see FaultEnv) from a cell's
// fault: every pass then takes DUR longer on the worker's clock, so that a
// test sees minutes-long repeats without waiting for them. It returns DUR
// and the fault with it taken out.
func passTimeFault(fault string) (time.Duration, string) {
	v, ok := strings.CutPrefix(fault, "took=")
	if !ok {
		return 0, fault
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fault // injectFault says it is unknown
	}
	return d, ""
}

// pace is a cell's recorded speed: how long its last timed repeat took,
// how long its worker took to get ready, and the work of one repeat: the
// roofline's seconds (roofPass) and the tokens (repeatWork), each 0 when
// unknown.
type pace struct {
	id     string
	params results.Params
	pass   time.Duration
	setup  time.Duration
	roof   float64
	work   float64
}

// paceOf is a cell's pace from its record when it is complete, else from
// the repeats kept for it; ok is false when neither says.
func paceOf(rc *runCell, rec *cellRecord) (p pace, ok bool) {
	p = pace{id: rc.cell.ID, params: rc.wc.Params, roof: rc.roof, work: repeatWork(rc.wc.Params)}
	if rec != nil {
		for i := len(rec.Passes) - 1; i >= 0; i-- {
			if q := rec.Passes[i]; !q.Profiled && q.Finished.After(q.Started) {
				p.pass = q.Finished.Sub(q.Started)
				break
			}
		}
		if len(rec.Passes) > 0 && rec.Passes[0].Session < len(rec.Sessions) {
			p.setup = max(rec.Passes[0].Started.Sub(rec.Sessions[rec.Passes[0].Session].Started), 0)
		}
	} else {
		p.pass, p.setup = lastRepeat(rc.kept)
	}
	return p, p.pass > 0
}

// repeatWork is the tokens a repeat of a cell with these parameters
// processes, prompts and outputs (0 when the dataset's size is not a
// parameter, e.g. a dataset file).
func repeatWork(p results.Params) float64 {
	num := func(k string) float64 {
		switch v := p[k].(type) {
		case int:
			return float64(v)
		case int64:
			return float64(v)
		case float64:
			return v
		}
		return 0
	}
	n, in, out := num(workParams[0]), num(workParams[1]), num(workParams[2])
	if n <= 0 || in+out <= 0 {
		return 0
	}
	return n * (in + out)
}

// estimateFirst predicts the first step of a cell with nothing recorded
// (its own prediction otherwise stands) from paces: of the recorded cells
// whose parameters differ from its in the fewest places, the slowest, its
// repeat scaled by the work of one: by the roofline's estimates of the two
// (roofPass) where both have one, which weigh prompts against outputs and
// count the requests the KV cache holds at once, else by their tokens.
// Cells of one study mostly differ in one axis, and the slowest neighbour
// errs towards holding a cell back rather than starting one that is then
// cut off and lost.
func estimateFirst(rc *runCell, paces []pace) step {
	s := rc.first
	if s.name == "" || s.predicted > 0 {
		return s
	}
	roof, work := rc.roof, repeatWork(rc.wc.Params)
	best, from := -1, ""
	var pred time.Duration
	for _, p := range paces {
		if p.id == rc.cell.ID {
			continue
		}
		d := paramDistance(rc.wc.Params, p.params)
		t := p.pass
		switch {
		case roof > 0 && p.roof > 0:
			r := roof / p.roof
			if math.Abs(r-1) > 0.01 {
				r *= roofMargin
			}
			t = time.Duration(float64(t) * r)
		case work > 0 && p.work > 0:
			t = time.Duration(float64(t) * work / p.work)
		}
		t += p.setup
		if best < 0 || d < best || d == best && t > pred {
			best, pred, from = d, t, p.id
		}
	}
	if best < 0 {
		return s
	}
	s.predicted = pred
	s.basis = fmt.Sprintf("estimated from cell %s (%d parameters differ)", from, best)
	return s
}

// roofMargin multiplies a prediction scaled by the roofline from a cell of
// other work: the engine's share of the roofline differs between workloads
// (on an H100, Llama-3.1-8B FP8's perf-overview rows ran at 48 % of it at
// 128/128 and 80-83 % where outputs are long, bench/results/
// trtllm-perf-overview-rows-h100), and the estimate errs towards holding a
// cell back.
const roofMargin = 1.5

// roofPass is the plan's roofline estimate of one repeat of c (its warm-up
// and timed pass) on a GPU of that name (DefaultEstimateGPU's ceilings
// where xrun knows none for it), in seconds; 0 where the plan has none (a
// cell on the cpu engine, a dataset file). Its efficiency and the GPU's
// speed cancel in the ratio of two cells' estimates.
func roofPass(c *Cell, gpu string) float64 {
	dev, _, mem, ok := estimateDevice(gpu)
	if !ok {
		dev, _, mem, _ = estimateDevice(DefaultEstimateGPU)
	}
	est := &Estimate{Device: dev, Memory: mem, Efficiency: DefaultEfficiency, OwnGEMMEfficiency: DefaultEfficiency * ownGEMMDerate}
	ce := est.cell(c, 1, nil)
	if ce.Basis != BasisRoofline && ce.Basis != BasisRooflineExternal {
		return 0
	}
	return (ce.Pass + ce.Warmup).Seconds()
}

// workParams are the parameters repeatWork scales by: a difference in
// them is accounted for, not a distance.
var workParams = []string{"dataset.num_requests", "dataset.input_mean", "dataset.output_mean"}

// paramDistance is in how many parameters a and b differ, those of
// workParams left out.
func paramDistance(a, b results.Params) int {
	d := 0
	for k, v := range a {
		if w, ok := b[k]; (!ok || formatValue(v) != formatValue(w)) && !slices.Contains(workParams, k) {
			d++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !slices.Contains(workParams, k) {
			d++
		}
	}
	return d
}

// paces are the recorded paces of the study's cells, for estimateFirst.
func (s *study) paces() []pace {
	var out []pace
	for _, rc := range s.cells {
		if p, ok := paceOf(rc, rc.record); ok {
			out = append(out, p)
		}
	}
	return out
}

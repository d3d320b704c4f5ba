package runner

import (
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

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// reps makes recorded repeats that took the durations given, the last one's
// worker having taken setup to get ready.
func reps(setup time.Duration, passes ...time.Duration) []repeatRecord {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out []repeatRecord
	for i, d := range passes {
		out = append(out, repeatRecord{Repeat: i + 1, Started: t0, Finished: t0.Add(d), Setup: setup})
		t0 = t0.Add(d)
	}
	return out
}

func TestNextStep(t *testing.T) {
	for _, tc := range []struct {
		name            string
		done            []repeatRecord
		profiled, first bool
		want            step
		rest            time.Duration
	}{
		{"nothing recorded", nil, true, true, step{name: "repeat 1 of 3", predicted: 0}, 0},
		{"the last repeat predicts the next", reps(0, 2*time.Minute, 3*time.Minute), false, false, step{name: "repeat 3 of 3", predicted: 3 * time.Minute}, 3 * time.Minute},
		{"a worker's first step adds the engine's creation", reps(20*time.Second, time.Minute), false, true, step{name: "repeat 2 of 3", predicted: 80 * time.Second}, 20*time.Second + 2*time.Minute},
		{"the profiled pass costs 1.2 repeats", reps(0, time.Minute, time.Minute, time.Minute), true, false, step{name: "the profiled pass", predicted: 72 * time.Second}, 72 * time.Second},
		{"nothing left but the record", reps(0, time.Minute, time.Minute, time.Minute), false, true, step{}, 0},
		// A record without its times (never written so, but read back).
		{"a record with no duration", []repeatRecord{{Repeat: 1}}, false, false, step{name: "repeat 2 of 3", predicted: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextStep(tc.done, 3, tc.profiled, tc.first); got != tc.want {
				t.Errorf("nextStep = %+v, want %+v", got, tc.want)
			}
			if got := remainingTime(tc.done, 3, tc.profiled); got != tc.rest {
				t.Errorf("remainingTime = %s, want %s", got, tc.rest)
			}
		})
	}
}

func TestBudgetAllows(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := &budget{deadline: now.Add(10 * time.Minute), now: func() time.Time { return now }}
	for _, tc := range []struct {
		name string
		b    *budget
		s    step
		left time.Duration
		ok   bool
	}{
		{"no limit", nil, step{name: "repeat 1 of 3", predicted: time.Hour}, 0, true},
		{"nothing left to run", b, step{}, 0, true},
		// 9m + 5 % + 5s = 9m32s.
		{"fits with its margin", b, step{name: "repeat 2 of 3", predicted: 9 * time.Minute}, 10 * time.Minute, true},
		{"the margin does not fit", b, step{name: "repeat 2 of 3", predicted: 9*time.Minute + 30*time.Second}, 10 * time.Minute, false},
		{"unknown, time left", b, step{name: "repeat 1 of 3", predicted: 0}, 10 * time.Minute, true},
		{"unknown, under the floor", &budget{deadline: now.Add(29 * time.Second), now: b.now}, step{name: "repeat 1 of 3", predicted: 0}, 29 * time.Second, false},
		{"past the deadline", &budget{deadline: now.Add(-time.Second), now: b.now}, step{name: "repeat 1 of 3", predicted: time.Millisecond}, -time.Second, false},
	} {
		ok, left := tc.b.allows(tc.s)
		if ok != tc.ok || left != tc.left {
			t.Errorf("%s: allows = %t, %s; want %t, %s", tc.name, ok, left, tc.ok, tc.left)
		}
	}
}

func TestErrTimeLimit(t *testing.T) {
	err := fmt.Errorf("cell x: %w", ErrTimeLimit)
	if !errors.Is(err, ErrTimeLimit) || !errors.Is(err, ErrInterrupted) || errors.Is(fmt.Errorf("x: %w", ErrInterrupted), ErrTimeLimit) {
		t.Error("ErrTimeLimit is not an interruption of its own kind")
	}
	if err.Error() != "cell x: stopped at the time limit" {
		t.Errorf("message %q", err)
	}
}

// limitEnv is a worker's environment with a deadline and a fault.
func limitEnv(deadline time.Time, fault string) func(string) string {
	return func(k string) string {
		switch k {
		case deadlineEnv:
			return deadline.Format(time.RFC3339Nano)
		case FaultEnv:
			return fault
		}
		return ""
	}
}

// TestWorkerTimeLimit runs workers whose passes take minutes on a frozen
// clock (the fault took=DUR): a worker stops before a pass that would end
// past its deadline, leaving its repeats and a note; a later worker
// predicts from the repeats an earlier one recorded.
func TestWorkerTimeLimit(t *testing.T) {
	s, dir := plannedStudyOf(t, resumeStudy)
	recordedStudy(t, s)
	plain, profiled := s.spec.Plan.Cells[0].ID, s.spec.Plan.Cells[1].ID
	base := time.Now()
	frozen := func() time.Time { return base }
	run := func(id string, limit time.Duration, fault string) error {
		return RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: limitEnv(base.Add(limit), fault), Now: frozen})
	}
	stoppedAt := func(id, step string, predicted time.Duration, kept int) {
		t.Helper()
		if rec, _ := readCellRecord(dir, id); rec != nil {
			t.Fatalf("a worker stopped at the time limit recorded the cell: %+v", rec)
		}
		n := readTimeLimitNote(dir, id)
		if n == nil || n.Step != step || n.Predicted != predicted {
			t.Fatalf("note %+v, want step %q predicted %s", n, step, predicted)
		}
		if k, why := loadKeptRepeats(dir, cellNamed(t, s, id).wc, 3); len(k) != kept || why != "" {
			t.Fatalf("%d repeats kept (%s), want %d", len(k), why, kept)
		}
	}

	// 9 minutes, passes of 6: repeat 1 runs (nothing predicts it), repeat
	// 2 would end at 12m (+5 % +5s).
	err := run(plain, 9*time.Minute, plain+":took=6m")
	if !errors.Is(err, ErrTimeLimit) || !errors.Is(err, ErrInterrupted) {
		t.Fatalf("worker: %v, want ErrTimeLimit", err)
	}
	stoppedAt(plain, "repeat 2 of 3", 6*time.Minute, 1)
	kept, _ := loadKeptRepeats(dir, cellNamed(t, s, plain).wc, 3)
	if d := repeatDuration(&kept[0]); d != 6*time.Minute || kept[0].Setup != 0 {
		t.Errorf("repeat 1 recorded as %s, setup %s; want 6m0s, 0s", d, kept[0].Setup)
	}
	if logCount(t, dir, plain, "not started: it would not finish before the time limit; the cell is not recorded, its recorded repeats are kept, and --resume runs the rest") != 1 {
		t.Error("the worker's log does not say which step it did not start")
	}
	// What results.json says of it.
	rc := cellNamed(t, s, plain)
	s.record(rc, outcome{id: plain, interrupted: true, timeLimit: readTimeLimitNote(dir, plain)})
	if c := s.res.Cells[s.byID[plain]]; c.Status != results.StatusSkipped || len(c.Repeats) != 1 ||
		c.Error != "stopped at the time limit after 1 of 3 repeats; xrun run --resume runs the rest" {
		t.Errorf("results.json: %s %q, %d repeats", c.Status, c.Error, len(c.Repeats))
	}

	// The next worker, with 5 minutes, predicts repeat 2 from repeat 1 of
	// the earlier worker: it does not even create the engine.
	engines := logCount(t, dir, plain, "engine ready")
	if err := run(plain, 5*time.Minute, ""); !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("second worker: %v, want ErrTimeLimit", err)
	}
	stoppedAt(plain, "repeat 2 of 3", 6*time.Minute, 1)
	if n := logCount(t, dir, plain, "engine ready"); n != engines {
		t.Errorf("the engine was created for a pass that did not fit (%d, was %d)", n, engines)
	}
	// With 7 it runs repeat 2 (6m23s needed), which predicts repeat 3.
	if err := run(plain, 7*time.Minute, ""); err != nil {
		t.Fatalf("third worker: %v", err)
	}
	if rec, _ := readCellRecord(dir, plain); rec == nil || rec.Status != results.StatusOK || len(rec.Repeats) != 3 {
		t.Fatalf("record after the third worker: %+v", rec)
	}
	checkOrigins(t, mustRecord(t, dir, plain), 1, false)

	// Passes of 2 minutes in 6m15s: three repeats end at 6m (the third
	// needs until 6m11s); the profiled pass, which stops after its window
	// (iterations 2-3 of about 6), would take 1.2 times the share of a
	// pass its window ended at in repeat 3 (+5 % +5s), and 15s are left.
	if err := run(profiled, 6*time.Minute+15*time.Second, profiled+":took=2m"); !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("profiled cell: %v, want ErrTimeLimit", err)
	}
	kept, _ = loadKeptRepeats(dir, cellNamed(t, s, profiled).wc, 3)
	if len(kept) != 3 || !(kept[2].WindowShare > 0 && kept[2].WindowShare < 1) {
		t.Fatalf("repeats %+v: want 3, the last with the share of its pass its window ended at", kept)
	}
	stoppedAt(profiled, "the profiled pass", time.Duration(float64(2*time.Minute)*kept[2].WindowShare*profileOverhead), 3)
	s.record(cellNamed(t, s, profiled), outcome{id: profiled, interrupted: true, timeLimit: readTimeLimitNote(dir, profiled)})
	if c := s.res.Cells[s.byID[profiled]]; c.Error != "stopped at the time limit after 3 of 3 repeats, before the profiled pass; xrun run --resume runs the profiled pass" {
		t.Errorf("results.json: %q", c.Error)
	}
	if err := run(profiled, time.Hour, ""); err != nil {
		t.Fatal(err)
	}
	checkOrigins(t, mustRecord(t, dir, profiled), 3, true)
}

func mustRecord(t *testing.T, dir, id string) *cellRecord {
	t.Helper()
	rec, err := readCellRecord(dir, id)
	if err != nil || rec == nil {
		t.Fatalf("cell %s: no record (%v)", id, err)
	}
	return rec
}

// TestWorkerSlurmEnd: a worker inside a Slurm job takes the job's end as
// its time limit when it comes before the run's.
func TestWorkerSlurmEnd(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return base }
	env := map[string]string{slurmEndEnv: strconv.FormatInt(base.Add(time.Hour).Unix(), 10)}
	getenv := func(k string) string { return env[k] }
	b, err := workerBudget(getenv, now)
	if err != nil || b == nil || !b.deadline.Equal(base.Add(time.Hour)) || !strings.Contains(b.limit, slurmEndEnv) {
		t.Fatalf("budget %+v, %v; want the job's end", b, err)
	}
	env[deadlineEnv] = base.Add(time.Minute).Format(time.RFC3339Nano)
	if b, _ := workerBudget(getenv, now); b == nil || !b.deadline.Equal(base.Add(time.Minute)) {
		t.Errorf("budget %+v; want the run's earlier deadline", b)
	}
	env[slurmEndEnv], env[deadlineEnv] = "unlimited", "soon"
	if _, err := workerBudget(getenv, now); err == nil || !strings.Contains(err.Error(), deadlineEnv) {
		t.Errorf("a bad %s: %v", deadlineEnv, err)
	}
	delete(env, deadlineEnv)
	if b, err := workerBudget(getenv, now); b != nil || err != nil {
		t.Errorf("no limit: %+v, %v", b, err)
	}
}

// fakeClock is a run's clock that the cells' fake workers move on.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// timedCells stands in for worker processes: running cell i takes took[i]
// on the clock, and every cell finishes ok.
type timedCells struct {
	clock *fakeClock
	took  map[string]time.Duration
	mu    sync.Mutex
	ran   []string
}

func (f *timedCells) run(_ context.Context, c *workerCell, _ []string) outcome {
	f.mu.Lock()
	f.ran = append(f.ran, c.ID)
	f.mu.Unlock()
	f.clock.advance(f.took[c.ID])
	rec := &cellRecord{Cell: results.Cell{ID: c.ID, Status: results.StatusOK, Repeats: []results.Metrics{{"request_throughput_req_s": 1}}}}
	return outcome{id: c.ID, rec: rec}
}

// startOrder is a Progress that lists the cells in the order they start.
type startOrder struct {
	noProgress
	mu  sync.Mutex
	ids []string
}

func (p *startOrder) CellStarted(id string) {
	p.mu.Lock()
	p.ids = append(p.ids, id)
	p.mu.Unlock()
}

// gpuStudy plans a study of cuda cells (batch sizes 1..n) on made-up GPUs
// and records, for the cells of passes, one repeat of that duration, as an
// earlier run would have left it; the study is resumed (--resume).
func gpuStudy(t *testing.T, gpus, n int, passes map[int]time.Duration) (*study, *startOrder) {
	t.Helper()
	var sizes []string
	for i := range n {
		sizes = append(sizes, strconv.Itoa(1<<i))
	}
	spec, err := ParseSpec("lpt.yaml", []byte(`schema_version: 1
name: lpt
params:
  engine: cuda
  model: tiny-llama
  dataset: {num_requests: 2, input_mean: 4, output_mean: 2}
matrix:
  batch_size: [`+strings.Join(sizes, ", ")+`]
repeats: 2
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &startOrder{}
	s := &study{spec: spec, dir: dir, log: zerolog.Nop(), progress: p, o: Options{CacheDir: dir, Resume: true}}
	for i := range gpus {
		s.gpus = append(s.gpus, cuda.DeviceInfo{Index: i, Name: "G", UUID: fmt.Sprintf("GPU-%d", i)})
	}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	for i, d := range passes {
		wc := s.cells[i].wc
		r := reps(0, d)[0]
		r.Cell, r.Fingerprint, r.Files = wc.ID, wc.Fingerprint, map[string]int64{}
		os.MkdirAll(repeatsDir(dir, wc.ID), 0o755)
		if err := writeJSONAtomic(repeatPath(dir, wc.ID, 1, repeatRecordName), &r); err != nil {
			t.Fatal(err)
		}
	}
	s.loadRecords()
	s.initResults(context.Background())
	return s, p
}

func ids(s *study, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, s.cells[i].cell.ID)
	}
	return out
}

// TestScheduleLongestFirst: on several GPUs, cells with nothing recorded
// start first in plan order, then the others longest first; on one GPU the
// plan's order stays. results.json keeps the plan's order either way.
func TestScheduleLongestFirst(t *testing.T) {
	passes := map[int]time.Duration{1: time.Minute, 3: 8 * time.Minute, 4: 3 * time.Minute}
	for _, tc := range []struct {
		gpus int
		want []int
	}{
		{2, []int{0, 2, 3, 4, 1}},
		{1, []int{0, 1, 2, 3, 4}},
	} {
		t.Run(strconv.Itoa(tc.gpus)+" GPUs", func(t *testing.T) {
			s, order := gpuStudy(t, tc.gpus, 5, passes)
			s.exec = &timedCells{clock: &fakeClock{t: time.Now()}}
			res, err := s.execute(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Cells start in dispatch order on one goroutine.
			if want := ids(s, tc.want...); !slices.Equal(order.ids, want) {
				t.Errorf("started %v, want %v", order.ids, want)
			}
			if got, want := cellIDs(res), ids(s, 0, 1, 2, 3, 4); !slices.Equal(got, want) {
				t.Errorf("results.json lists %v, want the plan's order %v", got, want)
			}
		})
	}
}

func cellIDs(res *results.Results) []string {
	var out []string
	for _, c := range res.Cells {
		out = append(out, c.ID)
	}
	return out
}

func TestLPTOrderKeepsCPUCells(t *testing.T) {
	c := func(id string, gpus int, rest time.Duration) *runCell {
		return &runCell{cell: &Cell{ID: id}, gpus: gpus, rest: rest}
	}
	q := []*runCell{c("a", 1, time.Minute), c("cpu", 0, time.Hour), c("b", 1, 0), c("c", 1, 5*time.Minute)}
	var got []string
	for _, rc := range lptOrder(q) {
		got = append(got, rc.cell.ID)
	}
	if want := []string{"b", "cpu", "c", "a"}; !slices.Equal(got, want) {
		t.Errorf("lptOrder = %v, want %v", got, want)
	}
	// Cells with nothing recorded: longest first by the roofline, those
	// without an estimate after them in their order.
	r := func(id string, roof float64) *runCell {
		rc := c(id, 1, 0)
		rc.roof = roof
		return rc
	}
	q = []*runCell{r("short", 10), r("none1", 0), r("long", 500), c("recorded", 1, time.Hour), r("none2", 0), r("mid", 80)}
	got = got[:0]
	for _, rc := range lptOrder(q) {
		got = append(got, rc.cell.ID)
	}
	if want := []string{"long", "mid", "short", "none1", "none2", "recorded"}; !slices.Equal(got, want) {
		t.Errorf("lptOrder of unrecorded cells = %v, want %v", got, want)
	}
}

// TestScheduleTimeLimit: a GPU whose next cell would not finish in the time
// left takes the next cell that would; the run stops as interrupted, at the
// time limit, the cell not started kept as it was.
func TestScheduleTimeLimit(t *testing.T) {
	// One GPU, 6 minutes: cell 0 (nothing recorded; batch 1, predicted
	// at about twice its slowest neighbour's 1m40s by the roofline, times
	// roofMargin: 5m) takes 4m30s; cell 1 (1m40s recorded) then does not
	// fit in 1m30s, cell 2 (1m) does.
	s, order := gpuStudy(t, 1, 3, map[int]time.Duration{1: 100 * time.Second, 2: time.Minute})
	clock := &fakeClock{t: time.Now()}
	s.limit = &budget{deadline: clock.now().Add(6 * time.Minute), limit: "--time-limit 6m0s", now: clock.now}
	fake := &timedCells{clock: clock, took: map[string]time.Duration{s.cells[0].cell.ID: 270 * time.Second}}
	s.exec = fake
	res, err := s.execute(context.Background())
	if !errors.Is(err, ErrTimeLimit) || !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "xrun run --resume continues") {
		t.Fatalf("err %v, want the time limit's", err)
	}
	if want := ids(s, 0, 2); !slices.Equal(fake.ran, want) || !slices.Equal(order.ids, want) {
		t.Errorf("ran %v (started %v), want %v", fake.ran, order.ids, want)
	}
	held := res.Cells[1]
	if held.Status != results.StatusSkipped || len(held.Repeats) != 1 ||
		held.Error != "not run: the study stopped at its time limit (xrun run --resume runs it); 1 of 2 repeats kept" {
		t.Errorf("held cell: %s %q, %d repeats", held.Status, held.Error, len(held.Repeats))
	}
	for _, i := range []int{0, 2} {
		if c := res.Cells[i]; c.Status != results.StatusOK {
			t.Errorf("cell %s: %s %q", c.ID, c.Status, c.Error)
		}
	}
	// results.json on disk says the same.
	disk, err := results.ReadFile(filepath.Join(s.dir, layout.JSONFile))
	if err != nil || disk.Cells[1].Error != held.Error {
		t.Errorf("results.json: %v", err)
	}
}

// TestRunTimeLimitOptions: the options a time limit cannot go with are bad
// input.
func TestRunTimeLimitOptions(t *testing.T) {
	spec := slurmSpec(t, fmt.Sprintf(slurmSpecYAML, ""))
	var bi interface{ BadInput() bool }
	o := slurmOptions(filepath.Join(t.TempDir(), "out"), &fakeSlurm{t: t})
	o.TimeLimit = time.Minute
	if _, err := Run(context.Background(), spec, o); !errors.As(err, &bi) || !strings.HasPrefix(err.Error(), "--time-limit: ") {
		t.Errorf("--time-limit with slurm: %v", err)
	}
	o = Options{Out: filepath.Join(t.TempDir(), "out"), CacheDir: t.TempDir(), TimeLimit: -time.Second, Log: zerolog.Nop()}
	if _, err := Run(context.Background(), spec, o); !errors.As(err, &bi) || !strings.HasPrefix(err.Error(), "--time-limit: ") {
		t.Errorf("a negative --time-limit: %v", err)
	}
}

// TestSlurmTaskStopsAtJobEnd: a Slurm task's worker stops before a repeat
// that would outlast the job (SLURM_JOB_END_TIME); the cell is unfinished,
// not failed, and --resume completes it.
func TestSlurmTaskStopsAtJobEnd(t *testing.T) {
	spec := slurmSpec(t, strings.Replace(fmt.Sprintf(slurmSpecYAML, ""), "repeats: 1", "repeats: 3", 1))
	dir := filepath.Join(t.TempDir(), "out")
	end := strconv.FormatInt(time.Now().Add(9*time.Minute).Unix(), 10)
	env := func(k string) string {
		switch k {
		case slurmEndEnv:
			return end
		case FaultEnv:
			return "bs1_gemm-auto:took=6m"
		}
		return ""
	}
	f := &fakeSlurm{t: t, ends: map[string]fakeTask{
		"bs1_gemm-auto": {state: "FAILED", reason: "NonZeroExitCode", exit: "130:0", real: true, getenv: env},
	}}
	res, err := Run(context.Background(), spec, slurmOptions(dir, f))
	if !errors.Is(err, ErrTimeLimit) || !strings.Contains(err.Error(), slurmEndEnv) {
		t.Fatalf("err %v, want the time limit's", err)
	}
	id := res.Cells[0].ID
	if c := res.Cells[0]; c.Status != results.StatusSkipped || len(c.Repeats) != 1 ||
		c.Error != "stopped at the time limit after 1 of 3 repeats; xrun run --resume runs the rest" {
		t.Errorf("cell %s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
	}
	for _, c := range res.Cells[1:] {
		if c.Status != results.StatusOK {
			t.Errorf("cell %s: %s %q", c.ID, c.Status, c.Error)
		}
	}

	f.ends = map[string]fakeTask{"bs1_gemm-auto": {state: "COMPLETED", reason: "None", exit: "0:0", real: true}}
	res, err = Run(context.Background(), spec, func() Options { o := slurmOptions(dir, f); o.Resume = true; return o }())
	if err != nil {
		t.Fatalf("--resume: %v", err)
	}
	if c := res.Cells[0]; c.Status != results.StatusOK || len(c.Repeats) != 3 {
		t.Errorf("cell %s after --resume: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
	}
	checkOrigins(t, mustRecord(t, dir, id), 1, false)
}

// blockingCells stand in for workers that run until stopped.
type blockingCells struct{}

func (blockingCells) run(ctx context.Context, c *workerCell, _ []string) outcome {
	<-ctx.Done()
	return outcome{id: c.ID, interrupted: true}
}

// TestTimeLimitRunsOut: a step still running at the time limit (one that
// nothing predicted, or that ran longer than predicted) is stopped there,
// and the run ends as stopped at the time limit.
func TestTimeLimitRunsOut(t *testing.T) {
	s, _ := gpuStudy(t, 1, 2, nil)
	// The scheduler's clock says an hour is left, so the first cell
	// starts; the limit itself is 50ms away.
	deadline := time.Now().Add(50 * time.Millisecond)
	s.limit = &budget{deadline: deadline, limit: "--time-limit 50ms", now: func() time.Time { return deadline.Add(-time.Hour) }}
	s.exec = blockingCells{}
	res, err := s.execute(context.Background())
	if !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("err %v, want the time limit's", err)
	}
	want := []string{"not run: interrupted while running (xrun run --resume runs it)", "not run: the study stopped at its time limit (xrun run --resume runs it)"}
	for i, c := range res.Cells {
		if c.Status != results.StatusSkipped || c.Error != want[i] {
			t.Errorf("cell %s: %s %q; want %q", c.ID, c.Status, c.Error, want[i])
		}
	}
}

// TestEstimateFirst: a cell with nothing recorded is predicted from the
// recorded cells that differ from it in the fewest parameters, the slowest
// of them, scaled by the tokens of a repeat; a cell's own prediction, or no
// recorded cell at all, leaves the step as it was.
func TestEstimateFirst(t *testing.T) {
	params := func(bs, n int, gemm string) results.Params {
		return results.Params{"batch_size": bs, "gemm_plugin": gemm, "dataset.num_requests": n, "dataset.input_mean": 128, "dataset.output_mean": 128}
	}
	cell := func(id string, p results.Params) *runCell {
		return &runCell{cell: &Cell{ID: id}, wc: &workerCell{ID: id, Params: p}, first: step{name: "repeat 1 of 3"}}
	}
	paces := []pace{
		{id: "b1-disable", params: params(1, 3000, "disable"), pass: 315 * time.Second, setup: 5 * time.Second, work: 3000 * 256},
		{id: "b2-auto", params: params(2, 3000, "auto"), pass: 200 * time.Second, setup: 5 * time.Second, work: 3000 * 256},
		{id: "b64-auto", params: params(64, 1000, "auto"), pass: 3 * time.Second, work: 1000 * 256},
	}
	for _, tc := range []struct {
		name  string
		rc    *runCell
		want  time.Duration
		basis string
	}{
		// b1-disable and b2-auto both differ in one parameter: the slower.
		{"the slowest nearest", cell("b1-auto", params(1, 3000, "auto")), 320 * time.Second, "estimated from cell b1-disable (1 parameters differ)"},
		// b64-auto differs in the dataset's size only, which the work
		// scales for (3x) rather than counts.
		{"scaled by the work", cell("b64-auto-3000", params(64, 3000, "auto")), 9 * time.Second, "estimated from cell b64-auto (0 parameters differ)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := estimateFirst(tc.rc, paces)
			if got.predicted != tc.want || got.basis != tc.basis || got.name != "repeat 1 of 3" {
				t.Errorf("estimateFirst = %+v, want %s %q", got, tc.want, tc.basis)
			}
		})
	}
	// Cells the roofline estimates scale by its estimates, not by tokens:
	// 128/128 x 30,000 requests is 16x the tokens of 1000/2000 x 161, but
	// runs at 1,960 requests at once against 161.
	long := results.Params{"batch_size": 2048, "dataset.num_requests": 161, "dataset.input_mean": 1000, "dataset.output_mean": 2000}
	short := results.Params{"batch_size": 2048, "dataset.num_requests": 30000, "dataset.input_mean": 128, "dataset.output_mean": 128}
	rc := cell("short", short)
	rc.roof = 50
	got := estimateFirst(rc, []pace{{id: "long", params: long, pass: 42 * time.Second, roof: 20, work: 161 * 3000}})
	if got.predicted != 157500*time.Millisecond {
		t.Errorf("by the roofline: %+v, want 2m37.5s (42s x 50 / 20 x roofMargin)", got)
	}
	rc.roof = 0
	tokens := float64(42*time.Second) * 30000 * 256 / (161 * 3000)
	if got := estimateFirst(rc, []pace{{id: "long", params: long, pass: 42 * time.Second, roof: 20, work: 161 * 3000}}); got.predicted != time.Duration(tokens) {
		t.Errorf("without the target's roofline, by tokens: %+v", got)
	}
	own := cell("b1-auto", params(1, 3000, "auto"))
	own.first.predicted = time.Minute
	if got := estimateFirst(own, paces); got != own.first {
		t.Errorf("a cell's own prediction: %+v, want it kept (%+v)", got, own.first)
	}
	if got := estimateFirst(cell("x", params(1, 1, "auto")), nil); got.predicted != 0 || got.basis != "" {
		t.Errorf("nothing recorded anywhere: %+v, want no prediction", got)
	}
}

// TestScheduleEstimatesUnrecorded: under a time limit, a cell with nothing
// recorded is held when a recorded neighbour says it would not finish
// (before, it started whenever 30 s were left, and was cut off), but an
// estimate longer than the whole limit does not hold it back forever.
func TestScheduleEstimatesUnrecorded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit time.Duration
		ran   []int
	}{
		// Cell 0 (4m recorded) takes 4 of 6 minutes; cells 1 and 2 are
		// estimated at 4m from it and held.
		{"held", 6 * time.Minute, []int{0}},
		// Under a 3-minute limit the 4-minute estimate could never fit:
		// cells 1 and 2 are tried as with nothing to go by (cell 0 itself
		// is held by its own recorded repeat).
		{"estimate past the whole limit", 3 * time.Minute, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, order := gpuStudy(t, 1, 3, map[int]time.Duration{0: 4 * time.Minute})
			clock := &fakeClock{t: time.Now()}
			s.limit = &budget{deadline: clock.now().Add(tc.limit), limit: "--time-limit", now: clock.now, span: tc.limit}
			fake := &timedCells{clock: clock, took: map[string]time.Duration{s.cells[0].cell.ID: 4 * time.Minute,
				s.cells[1].cell.ID: 30 * time.Second, s.cells[2].cell.ID: 30 * time.Second}}
			s.exec = fake
			res, err := s.execute(context.Background())
			if !errors.Is(err, ErrTimeLimit) {
				t.Fatalf("err %v, want the time limit's", err)
			}
			if want := ids(s, tc.ran...); !slices.Equal(fake.ran, want) || !slices.Equal(order.ids, want) {
				t.Errorf("ran %v (started %v), want %v", fake.ran, order.ids, want)
			}
			if tc.name == "held" {
				for _, i := range []int{1, 2} {
					if c := res.Cells[i]; c.Status != results.StatusSkipped || !strings.Contains(c.Error, "stopped at its time limit") {
						t.Errorf("cell %s: %s %q, want held at the time limit", c.ID, c.Status, c.Error)
					}
					if b := s.cells[i].first.basis; !strings.Contains(b, "estimated from cell "+s.cells[0].cell.ID) {
						t.Errorf("cell %d held on %q, want the estimate from cell 0", i, b)
					}
				}
			}
		})
	}
}

// TestPaceOfRecord: a complete cell's pace is its last timed pass (not the
// profiled one) and the time its first pass's worker took to get ready.
func TestPaceOfRecord(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	rec := &cellRecord{
		Sessions: []workerSession{{Host: "h", PID: 1, Started: t0}},
		Passes: []passOrigin{
			{Repeat: 1, Started: t0.Add(10 * time.Second), Finished: t0.Add(70 * time.Second)},
			{Repeat: 2, Started: t0.Add(70 * time.Second), Finished: t0.Add(125 * time.Second)},
			{Profiled: true, Started: t0.Add(125 * time.Second), Finished: t0.Add(200 * time.Second)},
		},
	}
	rc := &runCell{cell: &Cell{ID: "c"}, wc: &workerCell{ID: "c", Params: results.Params{"dataset.num_requests": 10, "dataset.input_mean": 3, "dataset.output_mean": 1}}}
	p, ok := paceOf(rc, rec)
	if !ok || p.pass != 55*time.Second || p.setup != 10*time.Second || p.work != 40 {
		t.Errorf("paceOf = %+v, %v; want a 55s pass, 10s setup, 40 tokens", p, ok)
	}
	if _, ok := paceOf(rc, &cellRecord{}); ok {
		t.Error("a record without passes has a pace")
	}
}

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// resumeStudy has one plain cell and one profiled cell of three repeats.
const resumeStudy = `schema_version: 1
name: resume
params:
  engine: cpu
  model: tiny-llama
  warmup: 1
  batch_size: 2
  dataset: {generator: token-norm-dist, num_requests: 3, input_mean: 6, input_stdev: 0, output_mean: 3, output_stdev: 0}
matrix:
  profile_window: [none, "2-3"]
repeats: 3
`

func noEnv(string) string { return "" }

func faultEnv(fault string) func(string) string {
	return func(k string) string {
		if k == FaultEnv {
			return fault
		}
		return ""
	}
}

// interruptWorker runs a cell's worker with a fault of kind slow at point
// (it waits there for the interrupt), cancels it once path exists, and
// expects it to stop as interrupted without recording the cell.
func interruptWorker(t *testing.T, dir, id, point, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- RunWorker(ctx, dir, id, WorkerOptions{Getenv: faultEnv(id + ":slow@" + point)}) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("the worker ended before %s appeared: %v", path, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within a minute", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted worker: %v, want ErrInterrupted", err)
	}
	if rec, _ := readCellRecord(dir, id); rec != nil {
		t.Fatalf("an interrupted worker recorded the cell: %+v", rec)
	}
}

// logCount counts the worker log's lines with message msg.
func logCount(t *testing.T, dir, id, msg string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout.CellDir(dir, id), layout.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
			n++
		}
	}
	return n
}

// recordedStudy is a study ready for record (results laid out, output
// discarded).
func recordedStudy(t *testing.T, s *study) {
	t.Helper()
	s.progress = noProgress{}
	s.initResults(context.Background())
}

func cellNamed(t *testing.T, s *study, id string) *runCell {
	t.Helper()
	for _, rc := range s.cells {
		if rc.cell.ID == id {
			return rc
		}
	}
	t.Fatalf("no cell %s", id)
	return nil
}

// TestResumeRepeats interrupts each cell of resumeStudy at a point of its
// worker, checks what results.json says of it, resumes it, and compares
// the record with the same cell run in one go.
func TestResumeRepeats(t *testing.T) {
	ref, refDir := plannedStudyOf(t, resumeStudy)
	for _, c := range ref.spec.Plan.Cells {
		if err := RunWorker(context.Background(), refDir, c.ID, WorkerOptions{Getenv: noEnv}); err != nil {
			t.Fatal(err)
		}
	}
	plain, profiled := ref.spec.Plan.Cells[0].ID, ref.spec.Plan.Cells[1].ID
	for _, tc := range []struct {
		name, id, point string
		kept            int
		note            string
		// What the resumed worker runs.
		repeats, engines, profiledPasses int
	}{
		{"after repeat 1", plain, "r1", 1, "interrupted after 1 of 3 repeats; xrun run --resume runs the rest", 2, 1, 0},
		{"after repeat 2, profiled", profiled, "r2", 2, "interrupted after 2 of 3 repeats; xrun run --resume runs the rest", 1, 1, 1},
		{"in the profiled pass", profiled, "profile", 3, "interrupted after 3 of 3 repeats, in the profiled pass; xrun run --resume runs the profiled pass", 0, 1, 1},
		// Every repeat recorded, the cell not: no engine is needed.
		{"before the record", plain, "r3", 3, "interrupted after 3 of 3 repeats; xrun run --resume runs the rest", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := plannedStudyOf(t, resumeStudy)
			recordedStudy(t, s)
			interruptWorker(t, dir, tc.id, tc.point, repeatPath(dir, tc.id, tc.kept, repeatRecordName))
			kept, why := loadKeptRepeats(dir, cellNamed(t, s, tc.id).wc, 3)
			if len(kept) != tc.kept || why != "" {
				t.Fatalf("%d repeats kept (%s), want %d", len(kept), why, tc.kept)
			}

			// results.json says how many repeats were kept, and shows them.
			rc := cellNamed(t, s, tc.id)
			s.record(rc, outcome{id: tc.id, interrupted: true})
			r, err := results.ReadFile(filepath.Join(dir, layout.JSONFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cells {
				if c.ID == tc.id && (c.Status != results.StatusSkipped || c.Error != tc.note || len(c.Repeats) != tc.kept) {
					t.Errorf("interrupted cell in results.json: %s %q, %d repeats; want skipped %q, %d", c.Status, c.Error, len(c.Repeats), tc.note, tc.kept)
				}
			}
			md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
			if !strings.Contains(string(md), tc.note) {
				t.Errorf("results.md does not say %q:\n%s", tc.note, md)
			}

			before := [3]int{logCount(t, dir, tc.id, "repeat done"), logCount(t, dir, tc.id, "engine ready"), logCount(t, dir, tc.id, "profiled pass done")}
			if err := RunWorker(context.Background(), dir, tc.id, WorkerOptions{Getenv: noEnv}); err != nil {
				t.Fatal(err)
			}
			after := [3]int{logCount(t, dir, tc.id, "repeat done"), logCount(t, dir, tc.id, "engine ready"), logCount(t, dir, tc.id, "profiled pass done")}
			if got, want := [3]int{after[0] - before[0], after[1] - before[1], after[2] - before[2]}, [3]int{tc.repeats, tc.engines, tc.profiledPasses}; got != want {
				t.Errorf("the resumed worker ran %d repeats, %d engines, %d profiled passes; want %v", got[0], got[1], got[2], want)
			}
			rec, err := readCellRecord(dir, tc.id)
			if err != nil || rec == nil || rec.Status != results.StatusOK {
				t.Fatalf("record after resume: %+v (%v)", rec, err)
			}
			for i, k := range kept {
				if !maps.Equal(rec.Repeats[i], k.Metrics) {
					t.Errorf("repeat %d is not the one recorded before the interrupt", i+1)
				}
			}
			checkOrigins(t, rec, tc.kept, tc.profiledPasses > 0)
			if _, err := os.Stat(repeatsDir(dir, tc.id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the repeats directory outlived the cell's record: %v", err)
			}

			want, _ := readCellRecord(refDir, tc.id)
			sameShape(t, dir, refDir, tc.id, rec, want)
		})
	}
}

// checkOrigins checks that cell.json says which worker ran each pass: the
// first kept by an earlier one, the rest by the last.
func checkOrigins(t *testing.T, rec *cellRecord, kept int, profiled bool) {
	t.Helper()
	wantSessions := 2
	if kept == 0 {
		wantSessions = 1
	}
	wantPasses := 3
	if profiled {
		wantPasses++
	}
	if len(rec.Sessions) != wantSessions || len(rec.Passes) != wantPasses {
		t.Fatalf("%d sessions, %d passes; want %d, %d", len(rec.Sessions), len(rec.Passes), wantSessions, wantPasses)
	}
	for i, p := range rec.Passes {
		earlier := i < kept
		if p.EarlierSession != earlier || (p.Session == 0) != (earlier || wantSessions == 1) || p.Profiled != (i == 3) || (!p.Profiled && p.Repeat != i+1) {
			t.Errorf("pass %d: %+v; want earlier_session %t", i, p, earlier)
		}
	}
	if last := rec.Sessions[len(rec.Sessions)-1]; last.PID != os.Getpid() || !last.Started.Equal(rec.Started) {
		t.Errorf("last session %+v is not the recording worker's", last)
	}
}

// sameShape compares a resumed cell's record and artifacts with the same
// cell's run in one go: the same fields, repeats and metrics, artifacts,
// request lines and iteration rows per pass.
func sameShape(t *testing.T, dir, refDir, id string, got, want *cellRecord) {
	t.Helper()
	shape := func(r *cellRecord) string {
		b, _ := json.Marshal(r)
		var v map[string]any
		json.Unmarshal(b, &v)
		delete(v, "sessions")
		delete(v, "passes")
		return jsonShape(v)
	}
	if len(got.Repeats) != len(want.Repeats) {
		t.Errorf("%d repeats, want %d", len(got.Repeats), len(want.Repeats))
	}
	if g, w := shape(got), shape(want); g != w {
		t.Errorf("record shape\n got %s\nwant %s", g, w)
	}
	if !slices.Equal(got.Artifacts, want.Artifacts) {
		t.Errorf("artifacts %v, want %v", got.Artifacts, want.Artifacts)
	}
	for _, name := range []string{layout.RequestsFile, layout.IterationsFile} {
		g, w := passColumn(t, filepath.Join(layout.CellDir(dir, id), name)), passColumn(t, filepath.Join(layout.CellDir(refDir, id), name))
		if !slices.Equal(g, w) {
			t.Errorf("%s: passes %v, want %v", name, g, w)
		}
	}
}

// jsonShape describes a decoded JSON value without its scalars' values.
func jsonShape(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s:%s,", k, jsonShape(v[k]))
		}
		return b.String() + "}"
	case []any:
		// The shapes of the elements, not how many there are: a profile's
		// findings and kernels vary from run to run.
		var shapes []string
		for _, e := range v {
			if s := jsonShape(e); !slices.Contains(shapes, s) {
				shapes = append(shapes, s)
			}
		}
		sort.Strings(shapes)
		return "[" + strings.Join(shapes, "|") + "]"
	}
	return fmt.Sprintf("%T", v)
}

// passColumn returns each line's pass and profiled flag, from
// requests.jsonl or iterations.csv.
func passColumn(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "{") {
			var l requestLine
			json.Unmarshal([]byte(line), &l)
			out = append(out, fmt.Sprintf("%d/%t", l.Pass, l.Profiled))
			continue
		}
		f := strings.SplitN(line, ",", 3)
		out = append(out, f[0]+"/"+f[1])
	}
	return out
}

// TestResumeDiscards: repeats recorded under another fingerprint, by
// another backend, or whose files are not whole are measured again;
// leftovers of a worker killed while writing are cleared.
func TestResumeDiscards(t *testing.T) {
	for _, tc := range []struct {
		name string
		// spoil changes what the interrupted worker left.
		spoil func(t *testing.T, s *study, dir, id string)
		kept  int
		// freshLog: the worker finds nothing to keep and starts the log
		// anew.
		freshLog bool
	}{
		{"nothing", func(*testing.T, *study, string, string) {}, 2, false},
		{"fingerprint", func(t *testing.T, s *study, dir, id string) {
			s.plan.Cells[0].Fingerprint = "0123456789abcdef"
			if err := writeJSONAtomic(filepath.Join(dir, layout.StateDir, layout.PlanFile), s.plan); err != nil {
				t.Fatal(err)
			}
		}, 0, true},
		{"backend", func(t *testing.T, _ *study, dir, id string) {
			editRepeat(t, dir, id, 1, func(r *repeatRecord) { r.Backend = "cpu/another_gemm" })
			editRepeat(t, dir, id, 2, func(r *repeatRecord) { r.Backend = "cpu/another_gemm" })
		}, 0, false},
		{"torn data file", func(t *testing.T, _ *study, dir, id string) {
			os.WriteFile(repeatPath(dir, id, 2, layout.RequestsFile), []byte(`{"pass":1`), 0o644)
		}, 1, false},
		{"unreadable record", func(t *testing.T, _ *study, dir, id string) {
			os.WriteFile(repeatPath(dir, id, 1, repeatRecordName), []byte(`{"cell":`), 0o644)
		}, 0, true},
		{"killed while writing", func(t *testing.T, _ *study, dir, id string) {
			// What kill -9 in the middle of recording repeat 3 leaves: its
			// data files, half a temporary record; and a record past a gap.
			rdir := repeatsDir(dir, id)
			os.WriteFile(repeatPath(dir, id, 3, layout.RequestsFile), []byte("{}\n"), 0o644)
			os.WriteFile(filepath.Join(rdir, ".3.json.tmp-123"), []byte(`{"cell": "x", "rep`), 0o644)
			b, _ := os.ReadFile(repeatPath(dir, id, 2, repeatRecordName))
			os.WriteFile(repeatPath(dir, id, 5, repeatRecordName), b, 0o644)
		}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := plannedStudyOf(t, resumeStudy)
			id := s.spec.Plan.Cells[0].ID
			interruptWorker(t, dir, id, "r2", repeatPath(dir, id, 2, repeatRecordName))
			tc.spoil(t, s, dir, id)
			if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: noEnv}); err != nil {
				t.Fatal(err)
			}
			rec, err := readCellRecord(dir, id)
			if err != nil || rec == nil || rec.Status != results.StatusOK || len(rec.Repeats) != 3 {
				t.Fatalf("record: %+v (%v)", rec, err)
			}
			checkOrigins(t, rec, tc.kept, false)
			if n := logCount(t, dir, id, "repeat done"); tc.freshLog && n != 3 {
				t.Errorf("the log has %d repeats; the discarded run's lines are kept", n)
			}
			if _, err := os.Stat(repeatsDir(dir, id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the repeats directory outlived the cell's record: %v", err)
			}
		})
	}
}

func editRepeat(t *testing.T, dir, id string, n int, edit func(*repeatRecord)) {
	t.Helper()
	path := repeatPath(dir, id, n, repeatRecordName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r repeatRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(&r)
	if err := writeJSONAtomic(path, &r); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCellKeepsRepeats: a cell that fails after a repeat is recorded
// as failed with it, keeps it, and says so; the next worker runs the rest.
func TestFailedCellKeepsRepeats(t *testing.T) {
	s, dir := plannedStudyOf(t, resumeStudy)
	recordedStudy(t, s)
	id := s.spec.Plan.Cells[0].ID
	if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: faultEnv(id + ":error@r1")}); err != nil {
		t.Fatal(err)
	}
	rec, _ := readCellRecord(dir, id)
	if rec == nil || rec.Status != results.StatusFailed || len(rec.Repeats) != 1 {
		t.Fatalf("record %+v, want failed with 1 repeat", rec)
	}
	s.record(cellNamed(t, s, id), outcome{id: id, rec: rec})
	if c := s.res.Cells[s.byID[id]]; !strings.Contains(c.Error, "injected error (XRUN_TEST_FAULT); 1 of 3 repeats kept (xrun run --resume runs the rest)") {
		t.Errorf("failed cell's error: %q", c.Error)
	}
	// As the executor does before the next attempt.
	if err := clearCellDir(layout.CellDir(dir, id)); err != nil {
		t.Fatal(err)
	}
	if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: noEnv}); err != nil {
		t.Fatal(err)
	}
	rec, _ = readCellRecord(dir, id)
	if rec == nil || rec.Status != results.StatusOK {
		t.Fatalf("record after the retry: %+v", rec)
	}
	checkOrigins(t, rec, 1, false)
}

// TestWriteFaultLeavesNoRecord: a worker failing half-way through writing
// a repeat's record leaves no record of it, and no temporary file.
func TestWriteFaultLeavesNoRecord(t *testing.T) {
	s, dir := plannedStudyOf(t, resumeStudy)
	id := s.spec.Plan.Cells[0].ID
	if err := RunWorker(context.Background(), dir, id, WorkerOptions{Getenv: faultEnv(id + ":error@write-r2")}); err != nil {
		t.Fatal(err)
	}
	kept, why := loadKeptRepeats(dir, &s.plan.Cells[0], 3)
	if len(kept) != 1 || why != "" {
		t.Errorf("%d repeats kept (%s), want 1", len(kept), why)
	}
	entries, _ := os.ReadDir(repeatsDir(dir, id))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "2.json" {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

// TestClearCellDir: what an executor clears before a cell's next attempt.
func TestClearCellDir(t *testing.T) {
	cdir := filepath.Join(t.TempDir(), "cell")
	if err := clearCellDir(cdir); err != nil {
		t.Errorf("missing directory: %v", err)
	}
	os.MkdirAll(filepath.Join(cdir, layout.RepeatsDir), 0o755)
	for _, f := range []string{layout.CellFile, layout.LogFile, layout.RequestsFile, layout.StderrFile, filepath.Join(layout.RepeatsDir, "1.json")} {
		os.WriteFile(filepath.Join(cdir, f), []byte("x"), 0o644)
	}
	if err := clearCellDir(cdir); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(cdir, func(p string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(cdir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := []string{layout.LogFile, layout.RepeatsDir + "/1.json"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// searchSpec is TestRunSLOSearch's study (4 users meet the SLO, 5 do not)
// searched from 3 to 8 users, so that it takes two rounds (5, then 4),
// with the matrix's other axes and the repeats given (two, for a point to
// stop half-way).
func searchSpec(t *testing.T, matrix string, repeats int) string {
	t.Helper()
	return writeSpec(t, "search", `name: slo-search
params:
  engine: openai
  model: tiny-llama
  warmup: 0
  dataset: {num_requests: 12, input_mean: 4}
matrix:
  concurrency: [3, 8]
`+matrix+fakeServer(`, --ttft, 60ms, --tpot, 1ms`)+`  request_timeout: 30s
slo: {ttft_ms: 270, percentile: 50}
search: {axis: concurrency, low: 3, high: 8, tolerance: 0}
repeats: `+strconv.Itoa(repeats)+`
`)
}

// searchCell is the id of the cell at users users (and the other
// parameters' id part rest, "" when none vary).
func searchCell(t *testing.T, res *results.Results, users int, rest string) string {
	t.Helper()
	for _, c := range res.Cells {
		if strings.HasPrefix(c.ID, "users-"+strconv.Itoa(users)+rest+"-") {
			return c.ID
		}
	}
	t.Fatalf("no cell at %d users%s among %d", users, rest, len(res.Cells))
	return ""
}

// checkFound checks a finished search: 4 users meet the SLO, 5 do not, and
// every point was measured once (one cell each, one worker each unless it
// was resumed).
func checkFound(t *testing.T, dir string, resumed ...string) *results.Results {
	t.Helper()
	res, _ := loadResults(t, dir)
	if res.Search == nil || len(res.Search.Frontier) != 1 {
		t.Fatalf("search %+v", res.Search)
	}
	f := res.Search.Frontier[0]
	if f.Status != results.FrontierFound || f.Best == nil || *f.Best != 4 || f.FailAbove == nil || *f.FailAbove != 5 {
		t.Fatalf("frontier %+v; want 4 users meeting the SLO and 5 not (points %+v)", f, f.Points)
	}
	var values []float64
	for _, p := range f.Points {
		if slices.Contains(values, p.Value) {
			t.Errorf("point %v measured twice: %+v", p.Value, f.Points)
		}
		values = append(values, p.Value)
		if slices.Contains(resumed, p.Cell) {
			continue
		}
		if o := readOrigins(t, dir, p.Cell); len(o.Sessions) != 1 {
			t.Errorf("point %s measured by %d workers, want 1 (a resumed search re-measured it)", p.Cell, len(o.Sessions))
		}
	}
	return res
}

// TestRunSLOSearchOnly: --only holds in every round. With two groups and
// --only picking one, that group's search runs to its end and the other's
// is not searched: no point of it measured or added, and the frontier
// says so rather than anything found.
func TestRunSLOSearchOnly(t *testing.T) {
	spec := searchSpec(t, "  dataset.output_mean: [3, 4]\n", 1)
	dir := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "--log-format", "json", "run", "--out", dir, "--only", "dataset.output_mean=3", spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, _ := loadResults(t, dir)
	if res.Search == nil || len(res.Search.Frontier) != 2 {
		t.Fatalf("search %+v", res.Search)
	}
	for _, f := range res.Search.Frontier {
		switch f.Label {
		case "dataset.output_mean=3":
			if f.Status != results.FrontierFound || *f.Best != 4 || *f.FailAbove != 5 {
				t.Errorf("the selected group: %+v", f)
			}
		case "dataset.output_mean=4":
			if f.Status != results.FrontierNotSearched || len(f.Points) != 0 || f.Best != nil || !strings.Contains(f.Why, "--only") {
				t.Errorf("the group --only leaves out: %+v; want not searched, no point, saying --only", f)
			}
		default:
			t.Errorf("frontier row %q", f.Label)
		}
	}
	out4 := 0
	for _, c := range res.Cells {
		if c.Params["dataset.output_mean"] == int64(4) {
			out4++
			if c.Status != results.StatusSkipped || c.Error != results.NotSelected || len(c.Repeats) > 0 {
				t.Errorf("%s: %s %q, %d repeats; want left out by --only", c.ID, c.Status, c.Error, len(c.Repeats))
			}
		}
	}
	if out4 != 2 {
		t.Errorf("%d cells of the group left out, want its 2 matrix cells (no search points added)", out4)
	}
	md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if !strings.Contains(string(md), "| not searched (next 3) |") {
		t.Errorf("results.md does not say the group was not searched:\n%s", md)
	}
	if l := logLines(r.stderr, "SLO search: not every group's search ended (xrun run --resume goes on with them); results.md's SLO frontier says why"); len(l) != 1 ||
		!strings.Contains(strings.Join(strs(l[0]["groups"]), "\n"), "dataset.output_mean=4: not searched") {
		t.Errorf("the log does not name the group not searched: %v", l)
	}
}

// strs reads a JSON log field that is a list of strings.
func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestRunSLOSearchTimeLimit: --time-limit bounds every round. The first
// round measures 3 and 8 users; in the second, the point at 5 users takes
// 6 minutes a repeat on its worker's clock (no real waiting), so its
// second repeat would end past the 9-minute limit: the run stops as a
// time-limited run does (exit 130), the frontier says the search is
// unfinished with its bracket so far, and --resume goes on from the
// points measured, re-measuring none.
func TestRunSLOSearchTimeLimit(t *testing.T) {
	spec := searchSpec(t, "", 2)
	dir := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t, runner.FaultEnv+"=users-5-:took=6m"), "--log-format", "json", "run", "--out", dir, "--time-limit", "9m", spec)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want 130\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "stopped at the time limit (--time-limit 9m0s)") {
		t.Errorf("the final error does not say the time limit stopped the run:\n%s", r.stderr)
	}
	res, _ := loadResults(t, dir)
	f := res.Search.Frontier[0]
	if f.Status != results.FrontierUnfinished || f.Next == nil || *f.Next != 5 || f.Best == nil || *f.Best != 3 ||
		f.FailAbove == nil || *f.FailAbove != 8 || !strings.Contains(f.Why, "time limit") {
		t.Fatalf("frontier %+v; want unfinished at 5 users, bracket 3 to 8, saying the time limit stopped it", f)
	}
	id5 := searchCell(t, res, 5, "")
	md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if !strings.Contains(string(md), "| unfinished (next 5) |") || !strings.Contains(string(md), "Searches that did not end") {
		t.Errorf("results.md does not say the search is unfinished:\n%s", md)
	}
	if l := logLines(r.stderr, "SLO search: not every group's search ended (xrun run --resume goes on with them); results.md's SLO frontier says why"); len(l) != 1 ||
		!strings.Contains(strings.Join(strs(l[0]["groups"]), "\n"), "unfinished (highest meeting the SLO so far 3, lowest failing 8)") {
		t.Errorf("the log does not give the unfinished search's bracket: %v", l)
	}

	r = runStudy(t, studyEnv(t), "--log-format", "json", "run", "--out", dir, "--resume", spec)
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	checkFound(t, dir, id5)
	checkResumed(t, dir, id5, 1, 2)
	if l := logLines(r.stderr, "SLO search: resuming with the points earlier rounds added"); len(l) != 1 || !slices.Equal(strs(l[0]["cells"]), []string{id5}) {
		t.Errorf("the resumed run does not start from the points added: %v", l)
	}
}

// TestRunSLOSearchInterrupted: Ctrl-C in the second round keeps what was
// measured (the first round's points, the first repeat of the point in
// flight), and the frontier says the search is unfinished.
func TestRunSLOSearchInterrupted(t *testing.T) {
	spec := searchSpec(t, "", 2)
	dir := filepath.Join(t.TempDir(), "out")
	cmd, stderr := startStudy(t, studyEnv(t, runner.FaultEnv+"=users-5-:slow@r1"),
		"--log-format", "json", "run", "--out", dir, "--kill-grace", "200ms", spec)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(dir, "cells", "users-5-*", layout.RepeatsDir, "1.json")); len(m) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the point at 5 users recorded no repeat within a minute\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	interruptStudy(t, cmd, stderr)
	res, cells := loadResults(t, dir)
	id5 := searchCell(t, res, 5, "")
	for _, users := range []int{3, 8} {
		if c := cells[searchCell(t, res, users, "")]; c.Status != results.StatusOK || len(c.Repeats) != 2 {
			t.Errorf("the first round's point at %d users was not kept: %s %q", users, c.Status, c.Error)
		}
	}
	if c := cells[id5]; c.Status != results.StatusSkipped || len(c.Repeats) != 1 || !strings.Contains(c.Error, "interrupted") {
		t.Errorf("the point in flight: %s %q, %d repeats; want skipped as interrupted with its first repeat kept", c.Status, c.Error, len(c.Repeats))
	}
	if f := res.Search.Frontier[0]; f.Status != results.FrontierUnfinished || !strings.Contains(f.Why, "interrupted") || *f.Best != 3 || *f.FailAbove != 8 {
		t.Errorf("frontier %+v; want unfinished, interrupted, bracket 3 to 8", f)
	}
	// --resume from here is TestRunSLOSearchTimeLimit's: a run stopped at
	// its time limit is an interrupted one.
}

// TestRoundOptions: every round of a search runs under the command's
// --only and its --time-limit counted from the command's start; the later
// rounds resume the first's directory, even after --fresh.
func TestRoundOptions(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := runner.Options{Fresh: true, Only: []string{"batch_size=8"}, TimeLimit: 9 * time.Minute, Started: start}
	for round := range 3 {
		o := roundOptions(first, round, "results/s")
		if !slices.Equal(o.Only, first.Only) || o.TimeLimit != first.TimeLimit || !o.Started.Equal(start) {
			t.Errorf("round %d: --only %v, limit %v from %v; want the command's", round, o.Only, o.TimeLimit, o.Started)
		}
		if later := round > 0; o.Resume != later || o.Fresh == later || later && o.Out != "results/s" {
			t.Errorf("round %d: resume %v fresh %v out %q", round, o.Resume, o.Fresh, o.Out)
		}
	}
}

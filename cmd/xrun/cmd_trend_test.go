package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// trendDir moves the test into an empty directory, as a cron job runs in
// its repository, so that the runs are named nightly/<date> there. It
// returns the committed nightly fixtures, read before moving: two draws
// of one study.
func trendDir(t *testing.T) []*results.Results {
	t.Helper()
	draws := []*results.Results{loadFixture(t, "nightly-base"), loadFixture(t, "nightly-same")}
	t.Chdir(t.TempDir())
	return draws
}

// nightlies writes n nightly results directories, nightly/<date>, one a
// day from the fixtures' start: the repeats of the two draws in turn, each
// run moved by a small wobble of its own, and slow(run, bs) multiplying
// the latencies (and dividing the throughputs) of batch size bs in that
// run. It returns the directories in time order.
func nightlies(t *testing.T, draws []*results.Results, n int, slow func(run, bs int) float64) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		r, err := results.Normalized(draws[i%2]) // a deep copy
		if err != nil {
			t.Fatal(err)
		}
		r.Started = draws[0].Started.AddDate(0, 0, i)
		r.Finished = r.Started.Add(17 * time.Minute)
		wobble := 1 + 0.002*float64((i*7)%5-2)
		for j := range r.Cells {
			c := &r.Cells[j]
			f := wobble * slow(i, int(c.Params["batch_size"].(int64)))
			for _, rep := range c.Repeats {
				for k, v := range rep {
					switch results.MetricFor(k).Better {
					case results.HigherIsBetter:
						rep[k] = v / f
					case results.LowerIsBetter:
						rep[k] = v * f
					}
				}
			}
			c.Summary = nil
		}
		dir := filepath.Join("nightly", r.Started.Format(time.DateOnly))
		if err := results.WriteDir(dir, r); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

func trendCLI(t *testing.T, dirs []string, flags ...string) cliResult {
	t.Helper()
	return runCLI(t, nil, append(append([]string{"trend"}, dirs...), flags...)...)
}

// TestTrendRegressionExits3: batch 64 is 10 % slower in the newest of
// eight nights: a regression step starting at the newest run, exit 3, in
// every format, the HTML page's included.
func TestTrendRegressionExits3(t *testing.T) {
	draws := trendDir(t)
	dirs := nightlies(t, draws, 8, func(run, bs int) float64 { return pick(bs == 64 && run == 7, 1.10, 1) })
	for _, format := range trendFormats() {
		r := trendCLI(t, dirs, "--format", format)
		if r.code != exitRegression {
			t.Fatalf("%s: exit %d, want 3; stderr %q", format, r.code, r.stderr)
		}
		want := "xrun: significant regression: the newest run, 2026-03-08 (nightly/2026-03-08), starts 5 regression steps beyond 3% (1 cell: bs64-3195f03b)\n"
		if r.stderr != want {
			t.Errorf("%s: stderr %q\nwant %q", format, r.stderr, want)
		}
		switch format {
		case "text":
			golden.Check(t, "cmd_trend/regression.text", r.stdout)
		case "html":
			// The page is package htmlreport's (and tested there): here,
			// that the command writes it whole, the regression's chart first.
			first := strings.Index(r.stdout, `data-chart="trend-`)
			if !strings.HasPrefix(r.stdout, "<!DOCTYPE html>") || !strings.HasSuffix(r.stdout, "</html>\n") ||
				first < 0 || !strings.HasPrefix(r.stdout[first:], `data-chart="trend-bs64-3195f03b-`) || !strings.Contains(r.stdout, "REGRESSION") {
				t.Errorf("html: not the trend page with the regression first:\n%.2000s", r.stdout)
			}
		}
	}
}

// TestTrendFormats: an improvement four nights ago and nothing since is
// reported as an earlier step and exits 0; the table, the pull-request
// Markdown and the JSON (one metric: every point with its repeats) are
// golden.
func TestTrendFormats(t *testing.T) {
	draws := trendDir(t)
	dirs := nightlies(t, draws, 8, func(run, bs int) float64 { return pick(bs == 16 && run >= 4, 1/1.08, 1) })
	for _, c := range []struct {
		format string
		flags  []string
	}{
		{"text", nil},
		{"markdown", nil},
		{"json", []string{"--metric", "request_throughput_req_s"}},
	} {
		r := trendCLI(t, dirs, append([]string{"--format", c.format}, c.flags...)...)
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("%s: exit %d, want 0; stderr %q", c.format, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "bs16-2af751de") || !strings.Contains(r.stdout, "2026-03-05") {
			t.Errorf("%s: the step of batch 16 on 2026-03-05 is not reported:\n%s", c.format, r.stdout)
		}
		golden.Check(t, "cmd_trend/improvement."+c.format, r.stdout)
	}
}

// TestTrendUnsortedInput: the directories in any order, under names that
// do not sort, give the same report but for the names: runs are ordered
// by their start.
func TestTrendUnsortedInput(t *testing.T) {
	draws := trendDir(t)
	dirs := nightlies(t, draws, 6, func(run, bs int) float64 { return pick(bs == 256 && run >= 3, 1.12, 1) })
	want := trendCLI(t, dirs, "--format", "json")
	// Renamed so that no name sorts them: the start times must.
	order := []int{3, 0, 5, 1, 4, 2}
	var shuffled []string
	names := map[string]string{}
	for i, j := range order {
		to := filepath.Join("nightly", "run-"+string(rune('f'-i)))
		if err := os.Rename(dirs[j], to); err != nil {
			t.Fatal(err)
		}
		shuffled = append(shuffled, to)
		names[filepath.Base(to)] = filepath.Base(dirs[j])
	}
	got := trendCLI(t, shuffled, "--format", "json")
	if got.code != want.code || want.code != exitOK {
		t.Fatalf("exit %d and %d, want 0", want.code, got.code)
	}
	renamed := got.stdout
	for from, to := range names {
		renamed = strings.ReplaceAll(renamed, from, to)
	}
	if renamed != want.stdout {
		t.Errorf("the order of the arguments changed the report:\n%s\nwant\n%s", renamed, want.stdout)
	}
	if !strings.Contains(want.stdout, "2026-03-04") || !strings.Contains(want.stdout, "bs256-fbe9d714") {
		t.Errorf("the step of batch 256 on 2026-03-04 is not reported:\n%s", want.stdout)
	}
}

// TestTrendNotComparedExits4: runs of different studies, a single run, or
// a newest run that shares no cell with the others cannot be followed:
// exit 4, why on stderr, never OK.
func TestTrendNotComparedExits4(t *testing.T) {
	gemm := loadFixture(t, "gemm")
	draws := trendDir(t)
	dirs := nightlies(t, draws, 3, func(int, int) float64 { return 1 })
	if err := results.WriteDir("gemm", gemm); err != nil {
		t.Fatal(err)
	}
	renamed, _ := results.Normalized(draws[0])
	renamed.Started = renamed.Started.AddDate(0, 0, 10)
	for i := range renamed.Cells {
		renamed.Cells[i].ID += "-x" // another matrix: other cell ids
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"other study", []string{dirs[0], "gemm", dirs[2]}, `xrun: not comparable: nightly/2026-03-01 is study "nightly", gemm is study "gemm-plugin": a trend follows one study`},
		{"one run", dirs[:1], "xrun: not compared: a trend needs at least 2 runs of a study; got 1"},
		{"no common cell", append(slices.Clone(dirs), writeResults(t, renamed)), "xrun: nothing compared: no cell ok in the newest run has the metrics followed in an earlier run"},
	} {
		r := trendCLI(t, c.args)
		if r.code != exitNotCompared {
			t.Errorf("%s: exit %d, want 4; stderr %q", c.name, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("%s: stderr %q\nwant %q", c.name, r.stderr, c.want)
		}
		if strings.Contains(r.stdout, "OK") {
			t.Errorf("%s: says OK:\n%s", c.name, r.stdout)
		}
	}
}

// TestTrendBadInputExits2: unreadable runs, the same run twice and bad
// flags are the user's input: exit 2, what is wrong, nothing on stdout.
func TestTrendBadInputExits2(t *testing.T) {
	draws := trendDir(t)
	dirs := nightlies(t, draws, 3, func(int, int) float64 { return 1 })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dirs[0], "missing"}, "xrun: missing: cannot read: no such file or directory"},
		{[]string{dirs[0], "nightly"}, "xrun: nightly: is a directory without results.json"},
		{[]string{dirs[0], dirs[1], dirs[1]}, "nightly/2026-03-02: started: 2026-03-02T02:00:00Z, the same start as nightly/2026-03-02: the same run given twice?"},
		{[]string{dirs[0], dirs[1], "--threshold", "5"}, `--threshold: "5" is ambiguous; write 5% or 0.05`},
		{[]string{dirs[0], dirs[1], "--noise-factor", "-1"}, `--noise-factor: -1; expected a number from 0 (rule off) up, e.g. 3`},
		{[]string{dirs[0], dirs[1], "--format", "csv"}, `--format: "csv" is not a trend format; expected text, markdown, json, html`},
		{[]string{dirs[0], dirs[1], "--metric", "request_throughput"}, `--metric: unknown metric "request_throughput"; did you mean "request_throughput_req_s"?`},
		{nil, "requires at least 1 arg(s), only received 0"},
	} {
		r := trendCLI(t, c.args)
		if r.code != exitBadInput {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: stderr\n  %s\nlacks\n  %s", c.args, r.stderr, c.want)
		}
		if r.stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, r.stdout)
		}
	}
}

// TestTrendNewlyFailedExits3: a cell ok the night before that failed in
// the newest run is a regression, as in xrun diff.
func TestTrendNewlyFailedExits3(t *testing.T) {
	draws := trendDir(t)
	dirs := nightlies(t, draws, 3, func(int, int) float64 { return 1 })
	last, _, err := results.Load(dirs[2])
	if err != nil {
		t.Fatal(err)
	}
	last.Cells[3].Status, last.Cells[3].Error, last.Cells[3].Repeats = results.StatusFailed, "engine: CUDA_ERROR_OUT_OF_MEMORY", nil
	if err := results.WriteDir(dirs[2], last); err != nil {
		t.Fatal(err)
	}
	r := trendCLI(t, dirs)
	if r.code != exitRegression || !strings.Contains(r.stdout, "Newly failed in the newest run (counted as regressions):\n  bs64-3195f03b: engine: CUDA_ERROR_OUT_OF_MEMORY\n") {
		t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

package results

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// replaceFirst replaces the first match of re in s by repl ($1 expands).
func replaceFirst(t *testing.T, s, re, repl string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	loc := r.FindStringSubmatchIndex(s)
	if loc == nil {
		t.Fatalf("no %q in the fixture", re)
	}
	return s[:loc[0]] + string(r.ExpandString(nil, repl, s, loc)) + s[loc[1]:]
}

// TestParseImpossibleValues: values no run can measure are bad input at
// their own line and column, as NaN is.
func TestParseImpossibleValues(t *testing.T) {
	valid := string(readFile(t, "testdata/moe/results.json"))
	for _, c := range []struct {
		name, re, repl string
		want           string
	}{
		{"negative throughput", `("request_throughput_req_s": )([0-9.]+)`, "${1}-${2}",
			`cells[0].repeats[0].request_throughput_req_s: -39.5911: a metric (a throughput, latency or count) cannot be negative`},
		{"negative latency", `("total_latency_ms": )([0-9.]+)`, "${1}-${2}", `cells[0].repeats[0].total_latency_ms: -`},
		{"absurd count", `("num_requests": )3000`, "${1}1.7e308", `cells[0].repeats[0].num_requests: 1.7e+308 is beyond any physical sense for a metric (at most 1e+15)`},
		{"ok without repeats", `(?s)"repeats": \[\s*\{.*?\}\s*\],(\s*"summary")`, `"repeats": [],$1`,
			`cells[0].repeats: a cell with status ok has at least one timed repeat; this one has none`},
		{"edited median", `("summary": \{\s*"avg_concurrent_requests": \{\s*"median": )([0-9.]+)`, "${1}1${2}",
			`but the repeats' median is`},
		{"edited n", `("summary": \{\s*"avg_concurrent_requests": \{(?:\s*"[a-z_]+": [0-9.a-z]+,)*\s*"n": )3`, "${1}4",
			`cells[0].summary.avg_concurrent_requests.n: 4, but 3 repeats have the metric; the summary is computed from the repeats (was the file edited?)`},
		{"summary of nothing", `("summary": \{)`, `$1 "foo_ms": {"ci_high": null, "ci_low": null, "median": 1, "n": 1},`,
			`cells[0].summary.foo_ms: no repeat has this metric`},
		{"no summary", `(?s)("summary": \{.*?\n      \},)`, ``, `cells[0].summary: lacks avg_concurrent_requests, which the repeats have`},
		{"negative clock", `("sm_clock_mhz_mean": )([0-9.]+)`, "${1}-${2}", `.telemetry.sm_clock_mhz_mean: -`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := replaceFirst(t, valid, c.re, c.repl)
			_, err := Parse([]byte(data), "bad.json")
			var fe *FileError
			if !errors.As(err, &fe) || !fe.BadInput() {
				t.Fatalf("err = %v (%T), want a *FileError", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nlacks\n  %s", err, c.want)
			}
			if fe.Line == 0 {
				t.Errorf("no position in %v", err)
			}
			// The position is the offending value's.
			key := fe.Field[strings.LastIndex(fe.Field, ".")+1:]
			if c.name == "no summary" {
				key = "id" // no summary to point at: its cell's start
			}
			if at := strings.Split(data, "\n")[fe.Line-1]; !strings.Contains(at, `"`+key+`"`) && !(key == "id" && strings.TrimSpace(at) == "{") {
				t.Errorf("line %d (%q) is not where %s is", fe.Line, at, fe.Field)
			}
		})
	}
	if _, err := Parse([]byte(valid), "moe.json"); err != nil {
		t.Fatalf("the fixture itself: %v", err)
	}
}

// TestWriteRejectsImpossible: the writer refuses what the reader would,
// and leaves nothing behind.
func TestWriteRejectsImpossible(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Results)
		want string
	}{
		{"negative", func(r *Results) { r.Cells[0].Repeats[0]["request_throughput_req_s"] = -1 }, "repeats[0].request_throughput_req_s: cannot be stored: -1: a metric"},
		{"huge", func(r *Results) { r.Cells[0].Repeats[1]["total_latency_ms"] = 1.7e308 }, "beyond any physical sense"},
		{"inf", func(r *Results) { r.Cells[0].Repeats[1]["total_latency_ms"] = math.Inf(1) }, "must be finite"},
		{"ok without repeats", func(r *Results) { r.Cells[0].Repeats = nil }, "status ok with no repeats"},
		{"negative power", func(r *Results) { r.Cells[0].Telemetry.PowerWMean = -3 }, "telemetry.power_w_mean: cannot be stored: -3"},
		{"pass metrics", func(r *Results) {
			r.Cells[0].Profile = &Profile{Window: "1-2", PassMetrics: Metrics{"request_throughput_req_s": -2}}
		}, "profile.pass_metrics.request_throughput_req_s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := nightly(1, 0).build()
			c.edit(r)
			dir := t.TempDir()
			err := WriteDir(dir, r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("rejected results left files: %v", entries)
			}
		})
	}
	// Failed and skipped cells may have no repeats.
	r := nightly(1, 0).build()
	r.Cells[0].Status, r.Cells[0].Repeats = StatusFailed, nil
	r.Cells[1] = Cell{ID: r.Cells[1].ID, Status: StatusSkipped}
	if err := WriteDir(t.TempDir(), r); err != nil {
		t.Errorf("failed and skipped cells without repeats: %v", err)
	}
}

// TestReadBounded: results files have a size limit, and files that never
// end are refused before they are read.
func TestReadBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("devices and /dev/fd as on Linux")
	}
	for _, path := range []string{"/dev/zero", "/dev/null"} {
		_, _, err := Load(path)
		var fe *FileError
		if !errors.As(err, &fe) || !fe.BadInput() || err.Error() != path+": is a character device, not a file; expected a results.json file or a results directory" {
			t.Errorf("Load(%s) = %v", path, err)
		}
	}
	// A sparse file past the limit is refused by its size, unread.
	big := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), "is 256 MiB, more than the 256 MiB a results file may have; is this a results.json?") {
		t.Errorf("ReadFile(256 MiB + 1) = %v", err)
	}
	// A pipe is read (xrun diff <(git show main:results.json) new), up
	// to the limit.
	pipePath := func(data string, endless bool) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		go func() {
			defer w.Close()
			for {
				if _, err := w.WriteString(data); err != nil || !endless {
					return
				}
			}
		}()
		return "/dev/fd/" + strconv.Itoa(int(r.Fd()))
	}
	if _, err := readBounded(pipePath(strings.Repeat(" ", 4096), true), 1<<20); err == nil || !strings.Contains(err.Error(), "has more than the 1 MiB a results file may have") {
		t.Errorf("endless pipe: %v", err)
	}
	r, err := ReadFile(pipePath(string(readFile(t, "testdata/moe/results.json")), false))
	if err != nil || len(r.Cells) != 4 {
		t.Errorf("results through a pipe: %v", err)
	}
}

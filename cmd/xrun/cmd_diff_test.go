package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// The synthetic results live with package results, which generates them.
const resultsTestdata = "../../results/testdata"

func fixture(name string) string { return filepath.Join(resultsTestdata, name) }

// TestDiffSlowdownExits3: a 10 % slowdown in one cell is reported as a
// regression and exits 3, in every format.
func TestDiffSlowdownExits3(t *testing.T) {
	for _, format := range []string{"text", "markdown", "json"} {
		r := runCLI(t, nil, "diff", fixture("nightly-base"), fixture("nightly-slow"), "--format", format)
		if r.code != exitRegression {
			t.Fatalf("%s: exit %d, want 3; stderr %q", format, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "significant regression: 5 significant regressions beyond 3%") {
			t.Errorf("%s: stderr %q", format, r.stderr)
		}
		if !strings.Contains(r.stdout, "slower") || !strings.Contains(r.stdout, "bs64-") {
			t.Errorf("%s: the regression is not printed:\n%s", format, r.stdout)
		}
		if format == "markdown" {
			golden.Check(t, "cmd_diff/slow.markdown", r.stdout) // the pull-request comment
		}
	}
}

// TestDiffSameDistributionExits0: two draws of one distribution pass.
func TestDiffSameDistributionExits0(t *testing.T) {
	r := runCLI(t, nil, "diff", fixture("nightly-base"), fixture("nightly-same"), "--format", "markdown")
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "no significant regression beyond 3%") || strings.Contains(r.stdout, "slower") {
		t.Errorf("unexpected verdicts:\n%s", r.stdout)
	}
	golden.Check(t, "cmd_diff/same.markdown", r.stdout)
}

// TestDiffKernelChanges: when both runs profiled a cell, the diff says
// what changed in its kernels (here a new attention kernel everywhere),
// exactly as package results renders it, and still exits 0: kernels are
// never a regression. The throttled cell stays flagged.
func TestDiffKernelChanges(t *testing.T) {
	for _, format := range []string{"text", "markdown"} {
		r := runCLI(t, nil, "diff", fixture("gemm-profiled"), fixture("gemm-profiled-new"), "--format", format)
		if r.code != exitOK {
			t.Fatalf("%s: exit %d, want 0; stderr %q", format, r.code, r.stderr)
		}
		got := goldenSection(t, r.stdout, "diff-kernels."+format+".golden", pick(format == "text", "Kernel changes, old → new", "### Kernel changes"),
			pick(format == "text", "\n", "<details>"))
		if !strings.Contains(r.stdout, "bs16-auto-d68f18e2: new (hw_slowdown)") || !strings.Contains(got, "bs16-auto-d68f18e2 (throttled)") {
			t.Errorf("%s: the throttled cell is not flagged:\n%s", format, r.stdout)
		}
	}
}

// TestDiffRoofline: where the cells have rooflines, the diff shows the
// share of the roofline reached, old and new, exactly as package results
// renders it, and still exits 0: it is never a regression.
func TestDiffRoofline(t *testing.T) {
	for _, format := range []string{"text", "markdown", "json"} {
		r := runCLI(t, nil, "diff", fixture("roofline"), fixture("roofline-new"), "--format", format)
		if r.code != exitOK {
			t.Fatalf("%s: exit %d, want 0; stderr %q", format, r.code, r.stderr)
		}
		if format == "json" {
			if !strings.Contains(r.stdout, `"old_fraction": 0.479884,`) || !strings.Contains(r.stdout, `"delta": 0.030978`) {
				t.Errorf("json: no roofline fractions:\n%s", r.stdout)
			}
			continue
		}
		goldenSection(t, r.stdout, "diff-roofline."+format+".golden", pick(format == "text", "% roofline, old → new", "### % roofline"),
			pick(format == "text", "\n", "<details>"))
	}
}

// goldenSection checks that the command printed the section from start to
// end exactly as package results' golden file has it, and returns it.
func goldenSection(t *testing.T, stdout, golden, start, end string) string {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(resultsTestdata, golden))
	if err != nil {
		t.Fatal(err)
	}
	got, exp := section(stdout, start, end), section(string(want), start, end)
	if got == "" || got != exp {
		t.Errorf("section %q\n%s\nwant (results/testdata/%s)\n%s", start, got, golden, exp)
	}
	return got
}

// TestDiffThreshold: a threshold above the slowdown turns the exit status
// to 0; the results files can be named directly.
func TestDiffThreshold(t *testing.T) {
	r := runCLI(t, nil, "diff", fixture("nightly-base/results.json"), fixture("nightly-slow/results.json"), "--threshold", "15%")
	if r.code != exitOK {
		t.Errorf("--threshold 15%%: exit %d, want 0; stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "diff", fixture("nightly-base"), fixture("nightly-slow"), "--metric", "num_requests,ttft_p50_ms", "--threshold", "0.2")
	if r.code != exitOK || strings.Contains(r.stdout, "Request Throughput") {
		t.Errorf("--metric: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

// TestDiffBadInputExits2: malformed files, unknown schema versions, missing
// paths and bad flags are the user's input: exit 2, an error naming the
// file and position, and nothing on stdout.
func TestDiffBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("malformed.json", "{\n  \"schema_version\": 1,\n  \"cells\": [\n")
	future := write("future.json", "{\n  \"schema_version\": 2\n}\n")
	typo := write("typo.json", strings.Replace(string(readFixture(t, "nightly-base")), `"status"`, `"state"`, 1))
	base := fixture("nightly-base")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", malformed, base}, malformed + ":4:1: malformed JSON: unexpected end of JSON input"},
		{[]string{"diff", base, future}, future + ":2:21: schema_version: version 2 is not supported: this xrun reads version 1"},
		{[]string{"diff", base, typo}, `typo.json:61:7: cells[0].state: unknown field; did you mean "status"?`},
		{[]string{"diff", base, filepath.Join(dir, "missing")}, "missing: cannot read: no such file or directory"},
		{[]string{"diff", base, dir}, "is a directory without results.json"},
		{[]string{"diff", base, base, "--threshold", "5"}, `--threshold: "5" is ambiguous; write 5% or 0.05`},
		{[]string{"diff", base, base, "--threshold", "fast"}, `--threshold: "fast" is not a threshold`},
		{[]string{"diff", base, base, "--format", "xml"}, `--format: "xml" is not a diff format; expected text, markdown, json or html`},
		{[]string{"diff", base, base, "--metric", "request_throughput"}, `--metric: unknown metric "request_throughput"; did you mean "request_throughput_req_s"?`},
		{[]string{"diff", base, base, "--missing", "ignore"}, `--missing: "ignore"; expected fail or warn`},
		{[]string{"diff", base, base, "--noise-factor", "-1"}, `--noise-factor: -1; expected a number from 0 (rule off) up, e.g. 2`},
		{[]string{"diff", base}, "accepts 2 arg(s), received 1"},
	} {
		r := runCLI(t, nil, c.args...)
		if r.code != exitBadInput {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args[1:], r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: stderr\n  %s\nlacks\n  %s", c.args[1:], r.stderr, c.want)
		}
		if r.stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args[1:], r.stdout)
		}
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]float64{"3%": 0.03, "0.03": 0.03, " 10 % ": 0.1, "0": 0, "0%": 0, "1.5%": 0.015} {
		got, err := parseThreshold(in)
		if err != nil || got < want-1e-12 || got > want+1e-12 {
			t.Errorf("parseThreshold(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "-1%", "100%", "x%", "NaN"} {
		if _, err := parseThreshold(in); err == nil {
			t.Errorf("parseThreshold(%q) accepted", in)
		}
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture(name), "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

// loadFixture reads a results fixture for a test to change and write.
func loadFixture(t *testing.T, name string) *results.Results {
	t.Helper()
	r, _, err := results.Load(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeResults writes r as a results directory and returns it.
func writeResults(t *testing.T, r *results.Results) string {
	t.Helper()
	dir := t.TempDir()
	if err := results.WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

// skip marks the cells whose ids start with one of prefixes skipped, as
// an interrupted run leaves them.
func skip(r *results.Results, prefixes ...string) *results.Results {
	for j, c := range r.Cells {
		for _, p := range prefixes {
			if strings.HasPrefix(c.ID, p) {
				r.Cells[j] = results.Cell{ID: c.ID, Params: c.Params, Status: results.StatusSkipped, Error: "not run yet: interrupted"}
			}
		}
	}
	return r
}

// TestDiffNotComparedExits4: a diff that compared nothing, results of
// different studies and (by default) cells missing in NEW exit 4, say
// why, and never print OK.
func TestDiffNotComparedExits4(t *testing.T) {
	base := fixture("nightly-base")
	empty := loadFixture(t, "nightly-same")
	empty.Cells = nil
	other := loadFixture(t, "nightly-same")
	other.Name = "gemm-plugin"
	resized := loadFixture(t, "nightly-same")
	for i := range resized.Cells {
		resized.Cells[i].ID += "-n6000" // another dataset size: other ids
	}
	for _, c := range []struct {
		name   string
		new    string
		flags  []string
		stderr string
	}{
		{"empty", writeResults(t, empty), nil, "xrun: nothing compared: NEW has no cells"},
		{"all skipped", writeResults(t, skip(loadFixture(t, "nightly-same"), "bs")), nil,
			"xrun: nothing compared: every cell ok in OLD is missing or skipped in NEW (4 cells): an interrupted run? xrun run --resume finishes it"},
		{"all skipped, warn", writeResults(t, skip(loadFixture(t, "nightly-same"), "bs")), []string{"--missing", "warn"}, "xrun: nothing compared: every cell ok in OLD"},
		{"other ids", writeResults(t, resized), nil, "xrun: nothing compared: no cell of OLD is in NEW (4 only in OLD, 4 only in NEW)"},
		{"other study", writeResults(t, other), nil,
			`xrun: not comparable: OLD is study "nightly", NEW is study "gemm-plugin": results of different studies are not compared (--any-study compares a renamed study)`},
		{"interrupted", writeResults(t, skip(loadFixture(t, "nightly-same"), "bs64-", "bs256-")), nil,
			"xrun: missing cells: 2 cells ok in OLD are missing or skipped in NEW and not compared (--missing warn accepts that), no significant regression beyond 3% in the 2 cells compared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				r := runCLI(t, nil, append([]string{"diff", base, c.new, "--format", format}, c.flags...)...)
				if r.code != exitNotCompared {
					t.Fatalf("%s: exit %d, want 4; stderr %q", format, r.code, r.stderr)
				}
				if strings.TrimSpace(r.stderr) != c.stderr && !strings.HasPrefix(r.stderr, c.stderr) {
					t.Errorf("%s: stderr\n  %s\nwant\n  %s", format, r.stderr, c.stderr)
				}
				if strings.Contains(r.stdout, "OK:") || strings.Contains(r.stdout, `"outcome": "ok"`) {
					t.Errorf("%s: an all-clear:\n%s", format, r.stdout)
				}
				if format == "text" && c.name == "interrupted" {
					golden.Check(t, "cmd_diff/interrupted.text", strings.ReplaceAll(r.stdout, c.new, "interrupted"))
				}
			}
		})
	}
	// --missing warn judges the cells there are: exit 0, the missing
	// listed. --any-study compares a renamed study.
	r := runCLI(t, nil, "diff", base, writeResults(t, skip(loadFixture(t, "nightly-same"), "bs64-", "bs256-")), "--missing", "warn")
	if r.code != exitOK || !strings.Contains(r.stdout, "OK: no significant regression beyond 3%, 2 cells ok in OLD are missing or skipped in NEW and not compared") ||
		!strings.Contains(r.stdout, "Compared 2 cells, 10 metric comparisons") {
		t.Errorf("--missing warn: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "diff", base, writeResults(t, other), "--any-study")
	if r.code != exitOK || !strings.Contains(r.stdout, `(studies "nightly" and "gemm-plugin")`) {
		t.Errorf("--any-study: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A regression among what was compared is exit 3 even with cells
	// missing.
	slow := skip(loadFixture(t, "nightly-slow"), "bs256-")
	slow.Name = "nightly"
	if r := runCLI(t, nil, "diff", base, writeResults(t, slow)); r.code != exitRegression {
		t.Errorf("regression with a cell missing: exit %d, want 3; %s", r.code, r.stderr)
	}
	// Every command's help documents exit status 4.
	if r := runCLI(t, nil, "report", "--help"); !strings.Contains(r.stdout, "4    diff or trend compared nothing, or the results cannot be compared") {
		t.Errorf("report --help:\n%s", r.stdout)
	}
}

// TestDiffNoiseAndCorrection: the rule's knobs reach the verdict. The
// slowdown fixture's 10 % regression survives the default noise factor,
// but not a factor so large that the band swallows it; the correction's
// accounting is printed.
func TestDiffNoiseAndCorrection(t *testing.T) {
	base, slow := fixture("nightly-base"), fixture("nightly-slow")
	r := runCLI(t, nil, "diff", base, slow)
	if r.code != exitRegression || !strings.Contains(r.stdout, "Benjamini-Hochberg correction over the 20 comparisons. Uncorrected, 1 of them would be significant by chance alone") {
		t.Errorf("default: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, nil, "diff", base, slow, "--noise-factor", "15")
	if r.code != exitOK || !strings.Contains(r.stdout, "INCONCLUSIVE: no significant regression beyond 3%, but 5 metrics significantly worse by more than 3% yet within 15× the spread of their repeats (noise)") {
		t.Errorf("--noise-factor 15: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, nil, "diff", base, slow, "--noise-factor", "0", "--format", "json")
	if r.code != exitRegression || !strings.Contains(r.stdout, `"noise_factor": 0,`) || !strings.Contains(r.stdout, `"noise": 0,`) {
		t.Errorf("--noise-factor 0: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDiffImpossibleValuesExit2: values no run can measure, and files no
// results file is, are bad input: exit 2, file:line:col, nothing on
// stdout, and no reading forever.
func TestDiffImpossibleValuesExit2(t *testing.T) {
	dir := t.TempDir()
	valid := string(readFixture(t, "nightly-base"))
	write := func(name, from, to string) string {
		t.Helper()
		if !strings.Contains(valid, from) {
			t.Fatalf("fixture lacks %q", from)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(valid, from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := fixture("nightly-base")
	at := strings.Index(valid, `"request_throughput_req_s": `)
	firstThroughput := valid[at:]
	firstThroughput = firstThroughput[:strings.Index(firstThroughput, ",")]
	// The error points at the value: its line, and its column counted from 1.
	line := 1 + strings.Count(valid[:at], "\n")
	col := at - strings.LastIndex(valid[:at], "\n") + len(`"request_throughput_req_s": `)
	counts := strings.Index(valid, `"num_requests": 3000`)
	countsLine := 1 + strings.Count(valid[:counts], "\n")
	countsCol := counts - strings.LastIndex(valid[:counts], "\n") + len(`"num_requests": `)
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 300<<20); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", base, write("negative.json", firstThroughput, strings.Replace(firstThroughput, ": ", ": -", 1))},
			fmt.Sprintf("negative.json:%d:%d: cells[0].repeats[0].request_throughput_req_s: -", line, col)},
		{[]string{"diff", write("huge.json", `"num_requests": 3000`, `"num_requests": 1.7e308`), base},
			fmt.Sprintf("huge.json:%d:%d: cells[0].repeats[0].num_requests: 1.7e+308 is beyond any physical sense for a metric (at most 1e+15)", countsLine, countsCol)},
		{[]string{"diff", base, write("median.json", `"median": `, `"median": 1`)}, "the summary is computed from the repeats (was the file edited?)"},
		{[]string{"diff", "/dev/zero", base}, "xrun: /dev/zero: is a character device, not a file; expected a results.json file or a results directory"},
		{[]string{"report", "/dev/zero"}, "xrun: /dev/zero: is a character device, not a file"},
		{[]string{"diff", base, big}, "big.json: is 300 MiB, more than the 256 MiB a results file may have; is this a results.json?"},
	} {
		r := runCLI(t, nil, c.args...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %d bytes; want exit 2 and %q", c.args, r.code, r.stderr, len(r.stdout), c.want)
		}
	}
}

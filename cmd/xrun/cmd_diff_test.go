package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The synthetic results live with package results, which generates them.
const resultsTestdata = "../../results/testdata"

func fixture(name string) string { return filepath.Join(resultsTestdata, name) }

// updateGolden reports whether -update was given. The flag is registered
// here only when no other test file of this package has done so.
func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/")
	}
}

// goldenCLI compares got with cmd/xrun/testdata/<name>; -update rewrites it,
// a mismatch leaves <name>.got beside it.
func goldenCLI(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updateGolden() {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/xrun -update creates it)", err)
	}
	if got != string(want) {
		os.WriteFile(path+".got", []byte(got), 0o644)
		t.Errorf("%s differs; see %s.got", path, path)
	}
}

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
			goldenCLI(t, "cmd_diff/slow.markdown", r.stdout) // the pull-request comment
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
	goldenCLI(t, "cmd_diff/same.markdown", r.stdout)
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
		{[]string{"diff", base, base, "--format", "html"}, `--format: "html" is not a diff format`},
		{[]string{"diff", base, base, "--metric", "request_throughput"}, `--metric: unknown metric "request_throughput"; did you mean "request_throughput_req_s"?`},
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

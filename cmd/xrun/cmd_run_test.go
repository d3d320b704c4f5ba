package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/openai/openaitest"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// asXrunEnv makes the test binary behave as the xrun binary. The runner
// re-executes "xrun worker ..." for every cell; in these tests the test
// binary itself is that executable, so no go build is needed and the
// workers run the code under test.
const asXrunEnv = "XRUN_TEST_AS_XRUN"

func TestMain(m *testing.M) {
	if os.Getenv(asBenchEnv) == "1" {
		os.Exit(fakeBench(os.Args[1:]))
	}
	if os.Getenv(asOpenAIFakeEnv) == "1" {
		os.Exit(openaitest.Main(os.Args[1:]))
	}
	if os.Getenv(asXrunEnv) == "1" {
		// As main does: the first SIGINT/SIGTERM cancels, a second kills.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		go func() {
			<-ctx.Done()
			stop()
		}()
		os.Exit(run(ctx, newOSState(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

const (
	tinySpec       = "testdata/cmd_run/tiny.yaml"
	quickstartSpec = "../../experiments/quickstart.yaml"
)

// Cell ids of tinySpec, in plan order.
var tinyCells = []string{
	"bs1_gemm-auto-6971ba97", "bs1_gemm-disable-9c114581",
	"bs2_gemm-auto-771feccb", "bs2_gemm-disable-059aba92",
	"bs4_gemm-auto-ac06953f", "bs4_gemm-disable-a61da420",
}

// studyEnv is the environment of a run in a test: workers are this test
// binary, datasets are cached in a directory of the test's own.
func studyEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	return append([]string{asXrunEnv + "=1", runner.CacheDirEnv + "=" + cacheDir(t)}, extra...)
}

var sharedCache string

// cacheDir is one dataset cache for the package's tests, so the tiny
// dataset is generated once.
func cacheDir(t *testing.T) string {
	if sharedCache == "" {
		d, err := os.MkdirTemp("", "xrun-test-cache-")
		if err != nil {
			t.Fatal(err)
		}
		sharedCache = d
	}
	return sharedCache
}

// runStudy runs the CLI in-process like runCLI, with this test binary as
// the worker executable.
func runStudy(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runCLIExe(t, os.Args[0], env, args...)
}

// startStudy runs the CLI as a child process (to be killed or interrupted).
func startStudy(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &stderr
}

// interruptStudy sends SIGINT to a study started by startStudy and
// expects it to stop with exit status 130.
func interruptStudy(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("after SIGINT: %v, want exit 130\n%s", err, stderr)
	}
}

// waitFor polls until every path exists.
func waitFor(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range paths {
		for {
			if _, err := os.Stat(p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear within a minute", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func cellFile(dir, id, name string) string { return filepath.Join(dir, "cells", id, name) }

// loadResults reads results.json strictly and returns its cells by id.
func loadResults(t *testing.T, dir string) (*results.Results, map[string]results.Cell) {
	t.Helper()
	r, _, err := results.Load(dir)
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	byID := map[string]results.Cell{}
	for _, c := range r.Cells {
		byID[c.ID] = c
	}
	return r, byID
}

// logLines returns the JSON log lines of a run's stderr with the message msg.
func logLines(stderr, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// cellSnap records the bytes and modification time of a cell's record, to
// prove a later run did not measure the cell again.
type cellSnap struct {
	data []byte
	mod  time.Time
}

func snap(t *testing.T, dir, id string) cellSnap {
	t.Helper()
	p := cellFile(dir, id, layout.CellFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	return cellSnap{b, st.ModTime()}
}

func TestRunQuickstart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	env := studyEnv(t)
	r := runStudy(t, env, quickstartSpec, "--out", dir) // "xrun FILE" is "xrun run FILE"
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	res, cells := loadResults(t, dir)
	if len(cells) != 6 {
		t.Fatalf("%d cells, want 6", len(cells))
	}
	spec, err := runner.LoadSpec(quickstartSpec, runner.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	repeats := spec.Repeats
	for id, c := range cells {
		if c.Status != results.StatusOK || len(c.Repeats) != repeats || c.Summary["request_throughput_req_s"].Median <= 0 {
			t.Errorf("cell %s: status %s, %d repeats, error %q", id, c.Status, len(c.Repeats), c.Error)
		}
		for _, name := range []string{layout.CellFile, layout.RequestsFile, layout.IterationsFile, layout.LogFile} {
			if _, err := os.Stat(cellFile(dir, id, name)); err != nil {
				t.Errorf("cell %s: %v", id, err)
			}
		}
		for _, a := range c.Artifacts {
			if _, err := os.Stat(filepath.Join(dir, a)); err != nil {
				t.Errorf("cell %s: artifact %s: %v", id, a, err)
			}
		}
	}
	if res.Environment.CPUCount == 0 || res.Environment.Xrun.GoVersion == "" || res.Environment.OS == "" {
		t.Errorf("environment not filled in: %+v", res.Environment)
	}
	if len(res.Axes) != 2 || res.Axes[0].Name != "batch_size" {
		t.Errorf("axes %+v, want batch_size and gemm_plugin", res.Axes)
	}
	if _, err := os.Stat(filepath.Join(dir, layout.MarkdownFile)); err != nil {
		t.Error(err)
	}
	// Every timed request of every repeat, with its generated tokens.
	b, err := os.ReadFile(cellFile(dir, "bs8_gemm-auto-1a895b33", layout.RequestsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var first struct {
		Pass      int     `json:"pass"`
		OutputIDs []int32 `json:"output_ids"`
		Output    int     `json:"output_tokens"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || len(lines) != repeats*32 || len(first.OutputIDs) != first.Output || first.Output == 0 {
		t.Errorf("requests.jsonl: %d lines (want %d), first %+v (%v)", len(lines), repeats*32, first, err)
	}
	if !strings.Contains(r.stdout, "Throughput") || !strings.Contains(r.stdout, "gemm_plugin") {
		t.Errorf("no throughput table on stdout:\n%s", r.stdout)
	}
	if len(logLines(r.stderr, "cell ok")) != 6 || len(logLines(r.stderr, "results written")) != 1 {
		t.Errorf("want one log line per cell and one for the results:\n%s", r.stderr)
	}

	// Running into the same directory again needs a decision.
	again := runStudy(t, env, "run", quickstartSpec, "--out", dir)
	if again.code != exitBadInput || !strings.Contains(again.stderr, "--resume") || !strings.Contains(again.stderr, "--fresh") {
		t.Errorf("second run: exit %d, want 2 with a hint at --resume and --fresh:\n%s", again.code, again.stderr)
	}

	// --resume finds every cell complete and runs nothing.
	before := map[string]cellSnap{}
	for id := range cells {
		before[id] = snap(t, dir, id)
	}
	resumed := runStudy(t, env, "run", quickstartSpec, "--out", dir, "--resume")
	if resumed.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", resumed.code, resumed.stderr)
	}
	if n := len(logLines(resumed.stderr, "cell ok")); n != 0 {
		t.Errorf("--resume ran %d cells, want none", n)
	}
	for id, s := range before {
		if now := snap(t, dir, id); !bytes.Equal(now.data, s.data) || !now.mod.Equal(s.mod) {
			t.Errorf("--resume touched cell %s", id)
		}
	}
	if _, cells2 := loadResults(t, dir); len(cells2) != 6 || cells2["bs1_gemm-auto-36000ddd"].Status != results.StatusOK {
		t.Errorf("results after --resume: %v", cells2)
	}
}

func TestRunFailingCellsAreIsolated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	faults := runner.FaultEnv + "=bs1_gemm-disable:crash,bs2_gemm-auto:error,bs2_gemm-disable:hang,bs4_gemm-auto:kill"
	r := runStudy(t, studyEnv(t, faults), "run", tinySpec, "--out", dir, "--set", "params.timeout=4s", "--kill-grace", "100ms")
	if r.code != exitCellsFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "4 of 6 cells failed") {
		t.Errorf("final error does not count the failures:\n%s", r.stderr)
	}
	_, cells := loadResults(t, dir)
	want := map[string]string{
		"bs1_gemm-disable-9c114581": "panic: xrun test fault: injected crash",
		"bs2_gemm-auto-771feccb":    "injected error",
		"bs2_gemm-disable-059aba92": "timed out after 4s",
		"bs4_gemm-auto-ac06953f":    "SIGKILL",
	}
	for _, id := range tinyCells {
		c := cells[id]
		if msg, bad := want[id]; bad {
			if c.Status != results.StatusFailed || !strings.Contains(c.Error, msg) {
				t.Errorf("cell %s: status %s, error %q; want failed with %q", id, c.Status, c.Error, msg)
			}
			continue
		}
		if c.Status != results.StatusOK || len(c.Repeats) != 2 {
			t.Errorf("cell %s: status %s (%q), %d repeats; want ok", id, c.Status, c.Error, len(c.Repeats))
		}
	}
	if _, err := os.Stat(cellFile(dir, "bs1_gemm-disable-9c114581", layout.StderrFile)); err != nil {
		t.Errorf("the crash's stack is not kept: %v", err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if !strings.Contains(string(md), "injected crash") {
		t.Errorf("results.md does not report the failure:\n%s", md)
	}

	// --resume runs the failed cells again, and only them.
	ok := snap(t, dir, "bs1_gemm-auto-6971ba97")
	resumed := runStudy(t, studyEnv(t), "run", tinySpec, "--out", dir, "--resume")
	if resumed.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", resumed.code, resumed.stderr)
	}
	if n := len(logLines(resumed.stderr, "cell ok")); n != 4 {
		t.Errorf("--resume ran %d cells, want the 4 failed ones", n)
	}
	if now := snap(t, dir, "bs1_gemm-auto-6971ba97"); !bytes.Equal(now.data, ok.data) {
		t.Error("--resume measured a complete cell again")
	}
	if _, cells := loadResults(t, dir); cells["bs2_gemm-disable-059aba92"].Status != results.StatusOK {
		t.Errorf("after --resume: %+v", cells["bs2_gemm-disable-059aba92"])
	}
}

// workersOf lists the processes still running a worker for dir (Linux).
func workersOf(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("worker\x00--dir\x00"+dir)) {
			out = append(out, p)
		}
	}
	return out
}

func TestRunKilledThenResumed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	// The third cell hangs, so the parent is surely killed mid-study.
	cmd, _ := startStudy(t, studyEnv(t, runner.FaultEnv+"=bs2_gemm-auto:hang"), "run", tinySpec, "--out", dir, "--order", "plan")
	waitFor(t, cellFile(dir, tinyCells[0], layout.CellFile), cellFile(dir, tinyCells[1], layout.CellFile),
		cellFile(dir, tinyCells[2], layout.LogFile))
	done := []cellSnap{snap(t, dir, tinyCells[0]), snap(t, dir, tinyCells[1])}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The worker in flight dies with its parent: no orphan goes on to
	// write the cell a resumed run measures.
	if _, err := os.Stat("/proc/self"); err == nil {
		deadline := time.Now().Add(10 * time.Second)
		for len(workersOf(dir)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if w := workersOf(dir); len(w) > 0 {
			t.Errorf("workers outlived their killed parent: %v", w)
			for _, p := range w {
				if pid, err := strconv.Atoi(strings.Split(p, "/")[2]); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	// What was measured before the kill is in a valid results.json.
	_, cells := loadResults(t, dir)
	if cells[tinyCells[1]].Status != results.StatusOK || cells[tinyCells[2]].Status != results.StatusSkipped {
		t.Errorf("after kill -9: %s is %s, %s is %s", tinyCells[1], cells[tinyCells[1]].Status, tinyCells[2], cells[tinyCells[2]].Status)
	}

	r := runStudy(t, studyEnv(t), "run", tinySpec, "--out", dir, "--resume")
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	ran := map[string]int{}
	for _, l := range logLines(r.stderr, "cell ok") {
		ran[l["cell"].(string)]++
	}
	for i, id := range tinyCells {
		if want := map[bool]int{true: 0, false: 1}[i < 2]; ran[id] != want {
			t.Errorf("--resume ran cell %s %d times, want %d", id, ran[id], want)
		}
	}
	for i, s := range done {
		if now := snap(t, dir, tinyCells[i]); !bytes.Equal(now.data, s.data) || !now.mod.Equal(s.mod) {
			t.Errorf("cell %s complete before the kill was measured again", tinyCells[i])
		}
	}
	_, cells = loadResults(t, dir)
	for _, id := range tinyCells {
		if c := cells[id]; c.Status != results.StatusOK || len(c.Repeats) != 2 {
			t.Errorf("cell %s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
		}
	}
}

func TestRunInterruptedAndLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	cmd, stderr := startStudy(t, studyEnv(t, runner.FaultEnv+"=bs1_gemm-disable:hang"),
		"--log-format", "json", "run", tinySpec, "--out", dir, "--kill-grace", "200ms", "--order", "plan")
	waitFor(t, cellFile(dir, tinyCells[0], layout.CellFile), cellFile(dir, tinyCells[1], layout.LogFile))

	// A second run on the same directory is refused, naming the holder.
	second := runStudy(t, studyEnv(t), "run", tinySpec, "--out", dir, "--resume")
	if second.code != exitBadInput || !strings.Contains(second.stderr, "in use by") || !strings.Contains(second.stderr, "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("concurrent run: exit %d, want 2 naming pid %d:\n%s", second.code, cmd.Process.Pid, second.stderr)
	}

	interruptStudy(t, cmd, stderr)
	_, cells := loadResults(t, dir)
	if c := cells[tinyCells[0]]; c.Status != results.StatusOK || len(c.Repeats) != 2 {
		t.Errorf("the cell finished before SIGINT was not kept: %+v", c)
	}
	for _, id := range tinyCells[1:] {
		if c := cells[id]; c.Status != results.StatusSkipped || !strings.Contains(c.Error, "interrupted") {
			t.Errorf("cell %s: %s %q, want skipped as interrupted", id, c.Status, c.Error)
		}
	}
}

func TestRunOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	env := studyEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--only", "batchsize=4"}, `did you mean "batch_size"`},
		{[]string{"--only", "batch_size=3"}, "batch_size takes 1, 2, 4"},
		{[]string{"--only", "batch_size"}, "expected KEY=VALUE"},
		{[]string{"--only", "batch_size=1", "--only", "batch_size=2"}, "match no cell"},
		{[]string{"--resume", "--fresh"}, "cannot be combined"},
		{[]string{"--gpus", "x"}, "expected GPU indices"},
		{[]string{"--set", "repeats=0"}, "repeats"},
		{[]string{"--partition", "gpu"}, "--partition: only with --executor slurm"},
		{[]string{"--dry-run"}, "--dry-run: only with --executor slurm"},
		{[]string{"--executor", "k8s"}, `--executor: "k8s": expected local or slurm`},
		{[]string{"--executor", "slurm", "--partition", "gpu debug"}, "--partition"},
		{[]string{"--executor", "slurm", "--time", "2h"}, "a Slurm time limit"},
		{[]string{"--executor", "slurm", "--gres", "gpu:"}, "--gres"},
		{[]string{"--executor", "slurm", "--sbatch-arg", "--array=1-3"}, "one task per cell"},
		{[]string{"--executor", "slurm", "--gpus", "0"}, "--gres gpu:N"},
		{[]string{"--gpu-busy", "later"}, "expected wait, ignore or fail"},
	} {
		r := runStudy(t, env, append([]string{"run", tinySpec, "--out", dir}, c.args...)...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 with %q:\n%s", c.args, r.code, c.want, r.stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%v: a refused run left %s behind", c.args, dir)
		}
	}

	// --only runs a subset; the other cells are listed as not selected.
	r := runStudy(t, env, "run", tinySpec, "--out", dir, "--only", "batch_size=4", "--only", "gemm_plugin=auto")
	if r.code != 0 {
		t.Fatalf("--only: exit %d\n%s", r.code, r.stderr)
	}
	_, cells := loadResults(t, dir)
	for _, id := range tinyCells {
		want, note := results.StatusSkipped, "not selected by --only"
		if id == "bs4_gemm-auto-ac06953f" {
			want, note = results.StatusOK, ""
		}
		if c := cells[id]; c.Status != want || c.Error != note {
			t.Errorf("--only: cell %s is %s %q, want %s %q", id, c.Status, c.Error, want, note)
		}
	}
	// --fresh starts over.
	r = runStudy(t, env, "run", tinySpec, "--out", dir, "--fresh", "--only", "id=bs1_gemm-auto-6971ba97")
	if r.code != 0 {
		t.Fatalf("--fresh: exit %d\n%s", r.code, r.stderr)
	}
	if _, cells := loadResults(t, dir); cells["bs4_gemm-auto-ac06953f"].Status != results.StatusSkipped || cells["bs1_gemm-auto-6971ba97"].Status != results.StatusOK {
		t.Errorf("--fresh kept earlier results: %+v", cells)
	}
	if _, err := os.Stat(cellFile(dir, "bs4_gemm-auto-ac06953f", layout.CellFile)); err == nil {
		t.Error("--fresh left an earlier cell's record")
	}
}

func TestRunDatasetFile(t *testing.T) {
	tmp := t.TempDir()
	good, bad := filepath.Join(tmp, "good.jsonl"), filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(good, []byte(`{"task_id":0,"input_ids":[5,6,7],"output_tokens":2}
{"task_id":1,"input_ids":[8,9],"output_tokens":3}
{"task_id":2,"input_ids":[10],"output_tokens":1}
`), 0o644)
	// tiny-llama's vocabulary has 512 tokens.
	os.WriteFile(bad, []byte(`{"task_id":0,"input_ids":[5,6,7],"output_tokens":2}
{"task_id":1,"input_ids":[8,512],"output_tokens":3}
`), 0o644)
	env := studyEnv(t)
	dir := filepath.Join(tmp, "out")
	only := []string{"--only", "batch_size=2", "--only", "gemm_plugin=auto"}

	r := runStudy(t, env, append([]string{"run", tinySpec, "--out", dir, "--set", "params.dataset.generator=" + bad}, only...)...)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "bad.jsonl:2") {
		t.Errorf("dataset with a token outside the vocabulary: exit %d, want 2 naming bad.jsonl:2:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a refused run left %s behind", dir)
	}

	r = runStudy(t, env, append([]string{"run", tinySpec, "--out", dir, "--set", "params.dataset.generator=" + good}, only...)...)
	if r.code != 0 {
		t.Fatalf("dataset file: exit %d\n%s", r.code, r.stderr)
	}
	res, _ := loadResults(t, dir)
	ok := 0
	for _, c := range res.Cells {
		if c.Status != results.StatusOK {
			continue
		}
		ok++
		if len(c.Repeats) != 2 || c.Repeats[0]["num_requests"] != 3 || c.Repeats[0]["total_output_tokens"] != 6 {
			t.Errorf("cell %s: %v", c.ID, c.Repeats)
		}
	}
	if ok != 1 {
		t.Errorf("%d cells ran, want 1", ok)
	}
}

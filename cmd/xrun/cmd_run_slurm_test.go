package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// TestRunSlurmDryRun needs no cluster: the script goes to stdout and
// nothing is written.
// cancelledCell is a scancelled task's error: Slurm's state, what the
// worker printed last if it got to (its SIGTERM handler's line), then
// slurmstepd's own.
var cancelledCell = regexp.MustCompile(`^slurm: CANCELLED(: cell \S+: interrupted)?; \*\*\* JOB `)

func TestRunSlurmDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", tinySpec, "--out", dir, "--executor", "slurm", "--dry-run",
		"--partition", "debug", "--time", "10", "--sbatch-arg=--comment=xrun test", "--only", "batch_size=2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"#!/bin/bash", "#SBATCH --array=0-1", "#SBATCH --partition=debug", "#SBATCH --time=10",
		`#SBATCH --comment="xrun test"`, "# task 0: bs2_gemm-auto-771feccb", "# task 1: bs2_gemm-disable-059aba92", " worker --dir "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("script lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("--dry-run wrote %s", dir)
	}
}

// slurmTestEnv is set (to 1) to run TestRunSlurm against the live cluster
// that .ci/slurm-cluster.sh brings up; .ci/run does.
const slurmTestEnv = "XRUN_SLURM_TEST"

// TestRunSlurm runs the quickstart study through a real Slurm cluster and
// checks it against a local run: same cells, all complete; then a task
// that crashes and one cancelled with scancel are failed cells with
// Slurm's reason, --resume resubmits only them, and Ctrl-C cancels the
// array.
func TestRunSlurm(t *testing.T) {
	if os.Getenv(slurmTestEnv) != "1" {
		t.Skipf("skipping the live Slurm test: set %s=1 with a cluster up (.ci/slurm-cluster.sh up prints the SLURM_CONF to export)", slurmTestEnv)
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%P %t").CombinedOutput(); err != nil {
		t.Skipf("skipping the live Slurm test: Slurm is not available here (sinfo: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if !filepath.IsAbs(os.Args[0]) {
		t.Skipf("skipping the live Slurm test: the test binary's path %q is not absolute, so tasks cannot run it", os.Args[0])
	}
	tmp := t.TempDir()
	// The tasks inherit sbatch's environment: this test binary must act
	// as xrun there too, find Slurm and the dataset cache.
	env := studyEnv(t, "PATH="+os.Getenv("PATH"), "SLURM_CONF="+os.Getenv("SLURM_CONF"))
	// --gres exercises GPU assignment on the cluster's fake GPUs; the cells
	// stay on the cpu engine.
	args := func(dir string, extra ...string) []string {
		return append([]string{"--log-format", "json", "run", quickstartSpec, "--out", dir, "--set", "params.engine=cpu"}, extra...)
	}
	slurm := []string{"--executor", "slurm", "--gres", "gpu:1", "--sbatch-arg=--comment=xrun integration test"}

	local := filepath.Join(tmp, "local")
	if r := runStudy(t, env, args(local)...); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	_, localCells := loadResults(t, local)

	// One cell crashes, one hangs until the test cancels its task.
	const crash, hang = "bs1_gemm-disable", "bs8_gemm-auto"
	dir := filepath.Join(tmp, "slurm")
	done := make(chan cliResult, 1)
	go func() {
		done <- runStudy(t, append(env, runner.FaultEnv+"="+crash+":crash,"+hang+":hang"), args(dir, slurm...)...)
	}()
	job := waitForJob(t, dir)
	task := slices.IndexFunc(job.Cells, func(id string) bool { return strings.HasPrefix(id, hang) })
	waitForGlob(t, filepath.Join(dir, "cells", hang+"-*", layout.LogFile))
	if out, err := exec.Command("scancel", job.JobID+"_"+strconv.Itoa(task)).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	r := <-done
	if r.code != exitCellsFailed || !strings.Contains(r.stderr, "2 of 6 cells failed") {
		t.Fatalf("slurm run: exit %d, want 1 with 2 of 6 cells failed\n%s", r.code, r.stderr)
	}
	if n := len(logLines(r.stderr, "submitted to Slurm")); n != 1 {
		t.Errorf("%d submissions, want 1:\n%s", n, r.stderr)
	}
	_, cells := loadResults(t, dir)
	for id, c := range cells {
		switch {
		case strings.HasPrefix(id, crash):
			if c.Status != results.StatusFailed || !strings.HasPrefix(c.Error, "slurm: FAILED ExitCode=2:0: panic: xrun test fault: injected crash") {
				t.Errorf("crashed cell %s: %s %q", id, c.Status, c.Error)
			}
		case strings.HasPrefix(id, hang):
			// The worker may say it was interrupted (scancel's SIGTERM)
			// before Slurm kills it; then its line comes before Slurm's.
			if c.Status != results.StatusFailed || !cancelledCell.MatchString(c.Error) {
				t.Errorf("cancelled cell %s: %s %q", id, c.Status, c.Error)
			}
		default:
			if c.Status != results.StatusOK {
				t.Errorf("cell %s: %s %q", id, c.Status, c.Error)
			}
			// Slurm gave the task a GPU of its own.
			if b, err := os.ReadFile(cellFile(dir, id, layout.LogFile)); err != nil || !strings.Contains(string(b), `"cuda_visible_devices":"`) || strings.Contains(string(b), `"cuda_visible_devices":""`) {
				t.Errorf("cell %s ran without CUDA_VISIBLE_DEVICES from gres: %v\n%s", id, err, b)
			}
		}
	}

	// --resume resubmits the two failed cells; the merged study then has
	// the local run's cells, all complete.
	r = runStudy(t, env, args(dir, append(slurm, "--resume")...)...)
	if r.code != 0 {
		t.Fatalf("--resume: exit %d\n%s", r.code, r.stderr)
	}
	if sub := logLines(r.stderr, "submitted to Slurm"); len(sub) != 1 || sub[0]["tasks"] != float64(2) {
		t.Errorf("--resume submitted %v, want one job of 2 tasks", sub)
	}
	res, cells := loadResults(t, dir)
	ids, localIDs := sortedKeys(cells), sortedKeys(localCells)
	if !slices.Equal(ids, localIDs) {
		t.Errorf("cells %v, the local run's %v", ids, localIDs)
	}
	for _, c := range res.Cells {
		if c.Status != results.StatusOK || len(c.Repeats) != len(localCells[c.ID].Repeats) {
			t.Errorf("cell %s after --resume: %s %q, %d repeats", c.ID, c.Status, c.Error, len(c.Repeats))
		}
	}

	// Ctrl-C cancels the array and keeps what finished: exit 130.
	intr := filepath.Join(tmp, "interrupted")
	cmd, stderr := startStudy(t, append(env, runner.FaultEnv+"="+hang+":hang"), args(intr, slurm...)...)
	job = waitForJob(t, intr)
	for _, id := range job.Cells {
		if !strings.HasPrefix(id, hang) {
			waitFor(t, cellFile(intr, id, layout.CellFile))
		}
	}
	waitForGlob(t, filepath.Join(intr, "cells", hang+"-*", layout.LogFile))
	interruptStudy(t, cmd, stderr)
	if out, _ := exec.Command("squeue", "-h", "-j", job.JobID, "-t", "PD,R").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("tasks still queued or running after Ctrl-C:\n%s", out)
	}
	_, cells = loadResults(t, intr)
	for id, c := range cells {
		if strings.HasPrefix(id, hang) != (c.Status == results.StatusSkipped) {
			t.Errorf("after Ctrl-C, cell %s: %s %q", id, c.Status, c.Error)
		}
	}
}

// waitForJob waits for a Slurm run to record its job.
func waitForJob(t *testing.T, dir string) (job struct {
	JobID string   `json:"job_id"`
	Cells []string `json:"cells"`
}) {
	t.Helper()
	path := filepath.Join(dir, layout.StateDir, runner.SlurmJobFile)
	waitFor(t, path)
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err != nil || job.JobID == "" {
		t.Fatalf("%s: %v %s", path, err, b)
	}
	return job
}

// waitForGlob polls until a file matches pattern.
func waitForGlob(t *testing.T, pattern string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing matched %s within a minute", pattern)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortedKeys(m map[string]results.Cell) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

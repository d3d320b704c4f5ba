package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

// TestRunRefusesAnotherStudy: --resume into a directory holding another
// study's results is refused (exit 2), naming that study and the ways on,
// and changes nothing there; --fresh replaces them.
func TestRunRefusesAnotherStudy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	env := studyEnv(t)
	only := []string{"--only", "id=" + tinyCells[0]}
	if r := runStudy(t, env, append([]string{"run", tinySpec, "--out", dir}, only...)...); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	before, _ := os.ReadFile(filepath.Join(dir, layout.JSONFile))
	for _, args := range [][]string{{"--resume"}, nil} {
		r := runStudy(t, env, append([]string{"run", tinySpec, "--set", "name=other", "--out", dir}, append(args, only...)...)...)
		if r.code != exitBadInput {
			t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
		for _, want := range []string{`holds the results of another study, "tiny"`, `not of "other"`, "--out", "--fresh"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr does not say %q:\n%s", args, want, r.stderr)
			}
		}
		if after, _ := os.ReadFile(filepath.Join(dir, layout.JSONFile)); string(after) != string(before) {
			t.Errorf("%v: the refused run rewrote results.json", args)
		}
	}
	if r := runStudy(t, env, append([]string{"run", tinySpec, "--set", "name=other", "--out", dir, "--fresh"}, only...)...); r.code != 0 {
		t.Fatalf("--fresh: exit %d\n%s", r.code, r.stderr)
	}
	if res, _ := loadResults(t, dir); res.Name != "other" {
		t.Errorf("after --fresh, results.json is study %q's", res.Name)
	}
}

// TestRunOutDirErrors: results directories that cannot be created are bad
// input (exit 2) naming --out or the spec's out: line, and the path, and
// leave nothing behind.
func TestRunOutDirErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	spec, _ := os.ReadFile(tinySpec)
	outSpec := filepath.Join(tmp, "out.yaml")
	os.WriteFile(outSpec, []byte(strings.Replace(string(spec), "name: tiny\n", "name: tiny\nout: /dev/null/x\n", 1)), 0o644)
	env := studyEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{tinySpec, "--out", file}, "--out " + file + ": cannot use it as the results directory (a file is in the way)"},
		{[]string{tinySpec, "--out", filepath.Join(file, "x")}, "--out " + filepath.Join(file, "x") + ": cannot use it as the results directory (a file is in the way)"},
		{[]string{tinySpec, "--out", "/dev/null/x"}, "--out /dev/null/x: cannot use it as the results directory (a file is in the way): mkdir /dev/null: not a directory"},
		{[]string{outSpec}, outSpec + ":5:6: out: /dev/null/x: cannot use it as the results directory"},
		{[]string{tinySpec, "--set", "out=/dev/null/y"}, "--set out=/dev/null/y: cannot use it as the results directory"},
	} {
		r := runStudy(t, env, append([]string{"run"}, tc.args...)...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 2 {
		t.Errorf("refused runs left %d entries in %s, want 2", len(entries), tmp)
	}
}

// TestRunBadDatasetLeavesNothing: a bad dataset file refuses the run
// before anything is generated, and the directories the run created (the
// results directory, its parents, the dataset cache) are gone.
func TestRunBadDatasetLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"task_id":0,"input_ids":[5,512],"output_tokens":2}`+"\n"), 0o644)
	spec := filepath.Join(tmp, "mix.yaml")
	os.WriteFile(spec, []byte(`schema_version: 1
name: mix
params: {engine: cpu, model: tiny-llama, dataset: {num_requests: 4, input_mean: 8, output_mean: 2}}
matrix:
  dataset.generator: [token-norm-dist, `+bad+`]
`), 0o644)
	cache := filepath.Join(tmp, "cache")
	r := runStudy(t, []string{asXrunEnv + "=1", runner.CacheDirEnv + "=" + cache}, "run", spec, "--out", filepath.Join(tmp, "a", "b", "out"))
	if r.code != exitBadInput || !strings.Contains(r.stderr, "bad.jsonl:1") {
		t.Fatalf("exit %d, want 2 naming bad.jsonl:1:\n%s", r.code, r.stderr)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the refused run left %v in %s, want bad.jsonl and mix.yaml", names, tmp)
	}
}

// TestRunInterruptedGenerating: SIGINT while a large dataset is generated
// stops the generation there (the dataset is not completed and cached),
// exits 130, and leaves no part of it and no results directory.
func TestRunInterruptedGenerating(t *testing.T) {
	tmp := t.TempDir()
	spec := filepath.Join(tmp, "huge.yaml")
	// 3M requests: about 230 MB and seconds of work.
	os.WriteFile(spec, []byte(`schema_version: 1
name: huge
params:
  engine: cpu
  model: tiny-llama
  dataset: {num_requests: 3000000, input_mean: 128, input_stdev: 0, output_mean: 4, output_stdev: 0}
`), 0o644)
	cache, out := filepath.Join(tmp, "cache"), filepath.Join(tmp, "out")
	cmd, stderr := startStudy(t, []string{asXrunEnv + "=1", runner.CacheDirEnv + "=" + cache}, "run", spec, "--out", out)
	// The generation's temporary file is there from its start.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(cache, ".*.jsonl.tmp-*")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dataset generation began within a minute:\n%s", stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	interruptStudy(t, cmd, stderr)
	if !strings.Contains(stderr.String(), "generation stopped") {
		t.Errorf("the run did not stop in the generation:\n%s", stderr)
	}
	for _, p := range []string{cache, out} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the interrupted run left %s behind", p)
		}
	}
}

// TestRunDiskFull: when results.json cannot be written (a full disk,
// injected), no further cell starts, the cells not run are marked so, the
// run exits 1 saying the disk is full, and never logs "results written".
func TestRunDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	// Write 1 lays the results out, write 2 follows the first cell, write
	// 3 the second: it and every later one fail.
	r := runStudy(t, studyEnv(t, runner.WriteFaultEnv+"=3"), "--log-format", "json", "run", tinySpec, "--out", dir, "--order", "plan")
	if r.code != exitCellsFailed || !strings.Contains(r.stderr, "the disk is full") || !strings.Contains(r.stderr, "4 of the 6 cells to run were not run") {
		t.Fatalf("exit %d, want 1 saying the disk is full and 4 cells were not run:\n%s", r.code, r.stderr)
	}
	if len(logLines(r.stderr, "results written")) != 0 || len(logLines(r.stderr, "results not written: results.json and results.md are as the last write that succeeded left them")) != 1 {
		t.Errorf("the log does not say the results were not written:\n%s", r.stderr)
	}
	var ran []string
	for i, id := range tinyCells {
		if _, err := os.Stat(cellFile(dir, id, layout.CellFile)); err == nil {
			ran = append(ran, id)
		} else if i < 2 {
			t.Errorf("cell %s did not run", id)
		}
	}
	if !slices.Equal(ran, tinyCells[:2]) {
		t.Errorf("cells %v ran, want the first two alone", ran)
	}
	if n := strings.Count(r.stdout, "not run: the study stopped: the disk is full"); n == 0 {
		t.Errorf("the table does not mark the cells not run:\n%s", r.stdout)
	}
	// results.json is as the second write left it: the first cell ok.
	_, cells := loadResults(t, dir)
	if c := cells[tinyCells[0]]; c.Status != results.StatusOK {
		t.Errorf("cell %s in results.json: %s %q", tinyCells[0], c.Status, c.Error)
	}
}

// TestRunOrder: cells run in random order by default, the seed logged and
// recorded in results.json and results.md; --order-seed repeats an order,
// --order plan keeps the plan's.
func TestRunOrder(t *testing.T) {
	env := studyEnv(t)
	tmp := t.TempDir()
	started := func(stderr string) []string {
		var ids []string
		for _, l := range logLines(stderr, "cell started") {
			ids = append(ids, l["cell"].(string))
		}
		return ids
	}
	run := func(name string, args ...string) (cliResult, []string, *results.Results) {
		t.Helper()
		dir := filepath.Join(tmp, name)
		r := runStudy(t, env, append([]string{"--log-format", "json", "--log-level", "debug", "run", tinySpec, "--out", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
		res, _ := loadResults(t, dir)
		if md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile)); strings.Contains(string(md), "random order") != (res.OrderSeed != 0) {
			t.Errorf("%v: results.md and results.json (order_seed %d) disagree on the order:\n%s", args, res.OrderSeed, md)
		}
		return r, started(r.stderr), res
	}

	_, a, resA := run("a", "--order-seed", "7")
	_, b, resB := run("b", "--order-seed", "7")
	if !slices.Equal(a, b) || len(a) != len(tinyCells) || resA.OrderSeed != 7 || resB.OrderSeed != 7 {
		t.Errorf("--order-seed 7 twice: started %v and %v, order_seed %d and %d", a, b, resA.OrderSeed, resB.OrderSeed)
	}
	if slices.Equal(a, tinyCells) {
		t.Errorf("--order-seed 7 ran the cells in the plan's order")
	}
	r, _, res := run("c")
	logged := logLines(r.stderr, "running the study")
	if res.OrderSeed < 1 || len(logged) != 1 || logged[0]["order"] != "random" || logged[0]["order_seed"] != float64(res.OrderSeed) {
		t.Errorf("default order: order_seed %d, logged %v", res.OrderSeed, logged)
	}
	_, p, res := run("d", "--order", "plan")
	if !slices.Equal(p, tinyCells) || res.OrderSeed != 0 {
		t.Errorf("--order plan: started %v, order_seed %d", p, res.OrderSeed)
	}

	for _, args := range [][]string{{"--order", "shuffle"}, {"--order-seed", "0"}, {"--order-seed", "-2"}, {"--order", "plan", "--order-seed", "3"}} {
		dir := filepath.Join(tmp, "bad")
		r := runStudy(t, env, append([]string{"run", tinySpec, "--out", dir}, args...)...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, args[len(args)-2]) {
			t.Errorf("%v: exit %d, want 2 naming %s:\n%s", args, r.code, args[len(args)-2], r.stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: a refused run left %s", args, dir)
		}
	}
}

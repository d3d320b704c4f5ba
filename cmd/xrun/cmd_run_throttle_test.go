package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/layout"
)

// TestRunThrottleThreshold: --throttle-threshold is a fraction of the
// GPU's maximum SM clock in (0, 1]; other values are refused before
// anything runs, and the one given reaches the workers through the plan
// (runner's TestRepeatTelemetry takes it from there to the summary).
func TestRunThrottleThreshold(t *testing.T) {
	env := studyEnv(t)
	dir := filepath.Join(t.TempDir(), "out")
	for _, v := range []string{"0", "-0.5", "1.5", "75", "NaN", "abc"} {
		r := runStudy(t, env, "run", tinySpec, "--out", dir, "--throttle-threshold", v)
		if r.code != exitBadInput || !strings.Contains(r.stderr, "--throttle-threshold") {
			t.Errorf("--throttle-threshold %s: exit %d, want 2 naming the flag:\n%s", v, r.code, r.stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("--throttle-threshold %s: a refused run left %s behind", v, dir)
		}
	}
	if r := runStudy(t, env, "run", tinySpec, "--out", dir, "--throttle-threshold", "75"); !strings.Contains(r.stderr, "nvbench's --throttle-threshold 75") {
		t.Errorf("a percentage is not explained:\n%s", r.stderr)
	}

	planned := func() float64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, layout.StateDir, layout.PlanFile))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			ThrottleThreshold float64 `json:"throttle_threshold"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		return p.ThrottleThreshold
	}
	one := "id=bs1_gemm-auto-6971ba97"
	if r := runStudy(t, env, "run", tinySpec, "--out", dir, "--only", one, "--throttle-threshold", "0.9"); r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := planned(); got != 0.9 {
		t.Errorf("plan's throttle threshold %v, want 0.9", got)
	}
	if r := runStudy(t, env, "run", tinySpec, "--out", dir, "--only", one, "--fresh"); r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := planned(); got != 0.75 {
		t.Errorf("plan's default throttle threshold %v, want nvbench's 0.75", got)
	}
}

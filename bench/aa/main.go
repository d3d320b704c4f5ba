// Command aa measures how often xrun diff calls noise a regression: it
// runs a study twice back to back (an A/A pair: same binary, spec and
// machine, nothing changed), diffs the two, and repeats that for N pairs.
// Every regression it reports is a false one; the rate is what a nightly
// job or a pull-request check on this machine would cry wolf.
//
//	go build -o bin/xrun ./cmd/xrun
//	go run ./bench/aa -pairs 20 -spec experiments/quickstart.yaml -set repeats=6
//
// It prints one line per pair and a summary: pairs with any false
// regression, false regressions over metric comparisons, and the
// improvements (equally false) for symmetry. -json writes the summary.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// diffJSON is the part of xrun diff --format json the count needs.
type diffJSON struct {
	Regression bool `json:"regression"`
	Counts     struct {
		Regressions  int `json:"regressions"`
		Improvements int `json:"improvements"`
		Compared     int `json:"compared"`
		Inconclusive int `json:"inconclusive"`
	} `json:"counts"`
	Cells []struct {
		ID      string `json:"id"`
		Metrics []struct {
			Metric      string   `json:"metric"`
			Delta       *float64 `json:"delta"`
			P           float64  `json:"p"`
			Regression  bool     `json:"regression"`
			Improvement bool     `json:"improvement"`
		} `json:"metrics"`
	} `json:"cells"`
}

// pair is one A/A pair's outcome.
type pair struct {
	N            int      `json:"pair"`
	Exit         int      `json:"diff_exit"`
	Cells        int      `json:"cells_compared"`
	Comparisons  int      `json:"metric_comparisons"`
	Regressions  int      `json:"false_regressions"`
	Improvements int      `json:"false_improvements"`
	Worst        string   `json:"worst,omitempty"`
	Flagged      []string `json:"flagged,omitempty"`
	Seconds      float64  `json:"seconds"`
}

type summary struct {
	Spec  string   `json:"spec"`
	Sets  []string `json:"sets"`
	Host  string   `json:"host"`
	Pairs []pair   `json:"pairs"`
	// PairsWithRegression is the share of pairs whose diff failed with a
	// (false) regression: how often a nightly job would cry wolf.
	PairsWithRegression float64 `json:"pairs_with_false_regression"`
	// RegressionRate is false regressions over metric comparisons.
	RegressionRate  float64 `json:"false_regression_rate"`
	ImprovementRate float64 `json:"false_improvement_rate"`
}

type sets []string

func (s *sets) String() string     { return strings.Join(*s, ",") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		n     = flag.Int("pairs", 20, "A/A pairs to run")
		spec  = flag.String("spec", "experiments/quickstart.yaml", "the study to run twice per pair")
		xrun  = flag.String("xrun", "bin/xrun", "the xrun binary")
		out   = flag.String("out", "", "where the runs go (default: a temporary directory, removed)")
		js    = flag.String("json", "", "write the summary as JSON here")
		extra sets
		dargs sets
	)
	flag.Var(&extra, "set", "a --set for both runs (repeatable)")
	flag.Var(&dargs, "diff-arg", "an argument for xrun diff (repeatable), e.g. -diff-arg=--threshold=5%")
	flag.Parse()
	if err := run(*n, *spec, *xrun, *out, *js, extra, dargs); err != nil {
		fmt.Fprintln(os.Stderr, "aa:", err)
		os.Exit(1)
	}
}

func run(n int, spec, xrun, out, js string, extra, dargs []string) error {
	if n < 1 {
		return errors.New("-pairs: at least 1")
	}
	if out == "" {
		dir, err := os.MkdirTemp("", "xrun-aa-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		out = dir
	}
	host, _ := os.Hostname()
	s := summary{Spec: spec, Sets: extra, Host: host}
	comparisons, regressions, improvements, failedPairs := 0, 0, 0, 0
	fmt.Printf("%4s  %5s  %5s  %11s  %11s  %12s  %s\n", "pair", "exit", "cells", "comparisons", "regressions", "improvements", "worst")
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		a, b := filepath.Join(out, fmt.Sprintf("a%02d", i)), filepath.Join(out, fmt.Sprintf("b%02d", i))
		for _, dir := range []string{a, b} {
			args := []string{"run", "--fresh", "--log-format", "json", "--out", dir}
			for _, x := range extra {
				args = append(args, "--set", x)
			}
			cmd := exec.Command(xrun, append(args, spec)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("pair %d: xrun run: %v\n%s", i, err, tail(stderr.String()))
			}
		}
		cmd := exec.Command(xrun, append(append([]string{"diff", "--format", "json"}, dargs...), a, b)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		p := pair{N: i}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			p.Exit = ee.ExitCode()
		case err != nil:
			return fmt.Errorf("pair %d: xrun diff: %v", i, err)
		}
		var d diffJSON
		if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
			return fmt.Errorf("pair %d: xrun diff (exit %d) printed no JSON: %v\n%s", i, p.Exit, err, tail(stderr.String()))
		}
		worst := 0.0
		for _, c := range d.Cells {
			for _, m := range c.Metrics {
				p.Comparisons++
				if m.Regression || m.Improvement {
					p.Flagged = append(p.Flagged, fmt.Sprintf("%s %s %+.1f%% p=%.3g", c.ID, m.Metric, 100*deref(m.Delta), m.P))
				}
				if m.Regression {
					p.Regressions++
				}
				if m.Improvement {
					p.Improvements++
				}
				if m.Delta != nil && abs(*m.Delta) > abs(worst) {
					worst = *m.Delta
					p.Worst = fmt.Sprintf("%+.1f%% %s %s", 100*worst, c.ID, m.Metric)
				}
			}
		}
		p.Cells = d.Counts.Compared
		p.Seconds = time.Since(t0).Seconds()
		comparisons += p.Comparisons
		regressions += p.Regressions
		improvements += p.Improvements
		if p.Regressions > 0 {
			failedPairs++
		}
		s.Pairs = append(s.Pairs, p)
		fmt.Printf("%4d  %5d  %5d  %11d  %11d  %12d  %s\n", i, p.Exit, p.Cells, p.Comparisons, p.Regressions, p.Improvements, p.Worst)
		if p.Cells == 0 {
			return fmt.Errorf("pair %d: the diff compared no cell", i)
		}
	}
	s.PairsWithRegression = float64(failedPairs) / float64(n)
	if comparisons > 0 {
		s.RegressionRate = float64(regressions) / float64(comparisons)
		s.ImprovementRate = float64(improvements) / float64(comparisons)
	}
	fmt.Printf("\n%d A/A pairs of %s (%s) on %s\n", n, spec, strings.Join(extra, " "), host)
	fmt.Printf("pairs with a false regression: %d of %d (%.0f%%)\n", failedPairs, n, 100*s.PairsWithRegression)
	fmt.Printf("false regressions: %d of %d metric comparisons (%.2f%%); false improvements: %d (%.2f%%)\n",
		regressions, comparisons, 100*s.RegressionRate, improvements, 100*s.ImprovementRate)
	if js != "" {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(js, append(b, '\n'), 0o644)
	}
	return nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/htmlreport"
)

type diffOptions struct {
	threshold   string
	noiseFactor float64
	missing     string
	anyStudy    bool
	metrics     []string
	format      string
}

func newDiffCommand(a *app) *cobra.Command {
	opts := &diffOptions{}
	c := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Compare two results: what moved, whether it is real, and whether it is a regression",
		Long: `Compare two results (results.json files or results directories) cell by cell,
matched by cell id. Per cell and metric it prints the old and new medians with
their 95% confidence intervals, the change, the noise band, the Mann-Whitney U
test's p-value and its q-value (p adjusted for all the diff's comparisons) and
the verdict: faster, slower or ~ (no significant difference), knowing for each
metric whether higher or lower is better. The verdict line says how many cells
and cell x metric comparisons it rests on. Environment differences (GPU, driver,
power limit, CUDA, xrun commit; not the idle clocks read at start), throttled
cells, cells whose mean SM clock differs, and newly failed, missing, fixed,
added and removed cells come first.

A regression is a metric that got worse by more than --threshold AND by more
than --noise-factor times the spread of its cell's repeats (the median
absolute deviation scaled to a standard deviation, pooled over both sides)
AND significantly so: the U test at alpha 0.05 after the Benjamini-Hochberg
correction over every cell x metric compared, so that judging many metrics
does not find regressions by chance (the diff says how many comparisons it
made and how many false positives alpha alone would give). A cell that failed
in NEW but was ok in OLD is a regression too. Two runs of the same code do
not fail the check. A metric worse by more than --threshold that the repeats
cannot judge makes the verdict INCONCLUSIVE instead of OK (still exit 0): too
few repeats for the test ever to be significant (3+3 cannot reach p < 0.05;
4+4 can), or a significant change within the noise. By default the headline
metrics are judged (request and output throughput, per-user throughput, total
and average latency); --metric chooses others.

A diff never says OK about what it did not compare. It exits 4 when NEW has
no cells, no cell id matches (another model, dataset or matrix value makes
other ids), no cell is ok on both sides, or the results are of studies with
different names (--any-study compares a renamed study). Cells ok in OLD but
missing or skipped in NEW (an interrupted nightly, a time limit) exit 4 too
with --missing fail, the default, unless a regression already exits 3; with
--missing warn they are listed and the rest is judged (a pull request that
removes cells).

Where a cell's mean SM clock during the timed repeats differs by more than 1%
between OLD and NEW, the diff says so and adds a "per clock" column: the
change in throughput per clock cycle, or latency in cycles. A regression that
is none per cycle is marked "explained by the SM clock" (still exit 3).

When both runs profiled a cell, its kernel changes follow: all kernel time
per profiled iteration, old and new, and the largest changes by kernel
(kernels that ran in only one run, paired by kind: "attention: x (new only)
replaced y (old only)"). They come from one profiled pass a side and never
count as a regression. GPU cells then show the share of their roofline
reached, old and new, in points; where the two sides' ceilings differ (another
GPU, other peak figures) the fractions are not compared. Also informational.

--format markdown prints a pull-request comment; --format html a page that
opens from disk: the verdict, a chart of every compared metric's change with
its interval (regressions first) and the kernel changes.`,
		Example: `  xrun diff results/nightly-2026-03-01 results/nightly
  xrun diff old/results.json new/results.json --threshold 5% --metric ttft_p99_ms
  xrun diff main/results.json pr/results.json --missing warn --format markdown > comment.md
  xrun diff results/nightly-2026-03-01 results/nightly --format html > diff.html`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return runDiff(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.StringVar(&opts.threshold, "threshold", "3%", "smallest relative change that counts as a regression, e.g. 3% or 0.03")
	f.Float64Var(&opts.noiseFactor, "noise-factor", results.DefaultNoiseFactor, "a regression must also exceed this many times the spread of its cell's repeats; 0 turns the rule off")
	f.StringVar(&opts.missing, "missing", string(results.MissingFail), "cells ok in OLD but missing or skipped in NEW: fail (exit 4) or warn (list them, judge the rest)")
	f.BoolVar(&opts.anyStudy, "any-study", false, "compare results whose studies have different names (a renamed study); cell ids must still match")
	f.StringSliceVar(&opts.metrics, "metric", nil, "metric key to judge (repeatable or comma-separated; default: the headline metrics)")
	f.StringVar(&opts.format, "format", "text", "output format: text, markdown, json or html (a self-contained page with charts)")
	return c
}

func runDiff(_ context.Context, a *app, opts *diffOptions, args []string) error {
	threshold, err := parseThreshold(opts.threshold)
	if err != nil {
		return usageError{fmt.Errorf("--threshold: %w", err)}
	}
	if k := opts.noiseFactor; k < 0 || math.IsNaN(k) || math.IsInf(k, 0) {
		return usageError{fmt.Errorf("--noise-factor: %v; expected a number from 0 (rule off) up, e.g. %g", k, results.DefaultNoiseFactor)}
	}
	missing := results.MissingPolicy(opts.missing)
	if !slices.Contains(results.MissingPolicies, missing) {
		return usageError{fmt.Errorf("--missing: %q; expected fail or warn", opts.missing)}
	}
	if !slices.Contains(results.DiffFormats, opts.format) && opts.format != htmlFormat {
		return usageError{fmt.Errorf("--format: %q is not a diff format; expected text, markdown, json or html", opts.format)}
	}
	old, oldFile, err := results.Load(args[0])
	if err != nil {
		return err
	}
	new, newFile, err := results.Load(args[1])
	if err != nil {
		return err
	}
	// Results written before xrun computed rooflines get them from their
	// cells' records, as xrun report does, so that a diff against an older
	// run compares fractions instead of listing every cell as "old has none".
	attachRooflines(a, filepath.Dir(oldFile), old)
	attachRooflines(a, filepath.Dir(newFile), new)
	if old, err = results.Normalized(old); err != nil {
		return err
	}
	if new, err = results.Normalized(new); err != nil {
		return err
	}
	if err := results.CheckMetrics(opts.metrics, old, new); err != nil {
		return usageError{fmt.Errorf("--metric: %w", err)}
	}
	d := results.Diff(old, new, results.DiffOptions{Threshold: threshold, NoiseFactor: opts.noiseFactor, Missing: missing, AnyStudy: opts.anyStudy,
		Metrics: opts.metrics, OldName: args[0], NewName: args[1]})
	var buf bytes.Buffer
	if opts.format == htmlFormat {
		err = htmlreport.WriteDiff(&buf, d, old, new, htmlreport.Options{Stage: profile.MoEStage})
	} else {
		err = d.Render(&buf, opts.format)
	}
	if err != nil {
		return err
	}
	if _, err := a.gs.Stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	return d.Err()
}

// parseThreshold reads "3%" or "0.03". A bare number above 1 is refused
// rather than guessed: "5" could mean 5 % or 500 %.
func parseThreshold(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a threshold; expected a percentage such as 3%% or a fraction such as 0.03", s)
	}
	if pct {
		v /= 100
	} else if v > 1 {
		return 0, fmt.Errorf("%q is ambiguous; write %s%% or %g", s, t, v/100)
	}
	if v < 0 || v >= 1 || v != v {
		return 0, fmt.Errorf("%q: expected a threshold from 0%% to below 100%%", s)
	}
	return v, nil
}

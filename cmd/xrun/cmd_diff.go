package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/results"
)

type diffOptions struct {
	threshold string
	metrics   []string
	format    string
}

func newDiffCommand(a *app) *cobra.Command {
	opts := &diffOptions{}
	c := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Compare two results: what moved, whether it is real, and whether it is a regression",
		Long: `Compare two results (results.json files or results directories) cell by cell,
matched by cell id. Per cell and metric it prints the old and new medians with
their 95% confidence intervals, the change, the Mann-Whitney U test's p-value
(alpha 0.05, golang.org/x/perf/benchmath) and the verdict: faster, slower or ~
(no significant difference), knowing for each metric whether higher or lower
is better. Environment differences (GPU, driver, CUDA, xrun commit, clocks),
throttled cells, and added, removed and newly failed cells come first.

A regression is a metric that got significantly worse by more than
--threshold, or a cell that failed in NEW but not in OLD. A change that is
not significant, or smaller than the threshold, never is: two runs of the
same code do not fail the check. A metric worse by more than --threshold
over too few repeats for the test ever to be significant (3+3 cannot reach
p < 0.05; 4+4 can) makes the verdict INCONCLUSIVE instead of OK (still exit
0): more repeats are needed to say. By default the headline metrics are judged
(request and output throughput, per-user throughput, total and average
latency); --metric chooses others.

When both runs profiled a cell, its kernel changes follow: all kernel time
per profiled iteration, old and new, and the largest changes by kernel
(kernels that ran in only one run, paired by kind: "attention: x (new only)
replaced y (old only)"). They come from one profiled pass a side and never
count as a regression. GPU cells then show the share of their roofline
reached, old and new, in points; where the two sides' ceilings differ (another
GPU, other peak figures) the fractions are not compared. Also informational.

--format markdown prints a pull-request comment.`,
		Example: `  xrun diff results/nightly-2026-03-01 results/nightly
  xrun diff old/results.json new/results.json --threshold 5% --metric ttft_p99_ms
  xrun diff main/results.json pr/results.json --format markdown > comment.md`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return runDiff(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.StringVar(&opts.threshold, "threshold", "3%", "smallest relative change that counts as a regression, e.g. 3% or 0.03")
	f.StringSliceVar(&opts.metrics, "metric", nil, "metric key to judge (repeatable or comma-separated; default: the headline metrics)")
	f.StringVar(&opts.format, "format", "text", "output format: text, markdown or json")
	return c
}

func runDiff(_ context.Context, a *app, opts *diffOptions, args []string) error {
	threshold, err := parseThreshold(opts.threshold)
	if err != nil {
		return usageError{fmt.Errorf("--threshold: %w", err)}
	}
	if !slices.Contains(results.DiffFormats, opts.format) {
		return usageError{fmt.Errorf("--format: %q is not a diff format; expected text, markdown or json", opts.format)}
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
	d := results.Diff(old, new, results.DiffOptions{Threshold: threshold, Metrics: opts.metrics, OldName: args[0], NewName: args[1]})
	var buf bytes.Buffer
	if err := d.Render(&buf, opts.format); err != nil {
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

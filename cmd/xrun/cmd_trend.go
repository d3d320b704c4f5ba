package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/htmlreport"
)

type trendOptions struct {
	threshold   string
	noiseFactor float64
	metrics     []string
	format      string
}

func newTrendCommand(a *app) *cobra.Command {
	opts := &trendOptions{}
	c := &cobra.Command{
		Use:   "trend DIR...",
		Short: "Follow a study over many runs (nightly results) and find the steps: when a metric moved and stayed, and by how much",
		Long: `Read a series of results directories (or results.json files) of one study, put
them in time order by when each run started (whatever order they are given
in), and follow every cell and metric over them: per run, the median of the
cell's repeats with its 95% confidence interval, and the steps, the runs where
the level moved and stayed, with the levels before and after, the change and
the date, as asv and Conbench show them.

Steps are found in the run medians by the best piecewise-constant fit (least
absolute deviations, one penalty per step, solved exactly by dynamic
programming; one wild run does not move a level, and a level held by a
single run is an outlier, not a step, but at the newest run). A step counts
when it is larger than --threshold, beyond its noise band (--noise-factor
standard errors of the difference of the two levels, from the noise of one
run: the larger of the repeats' spread within runs and the medians' spread
from run to run, which nightly drift shows and one diff cannot; widened for
steps before the newest run, which the fit picked among many places), and
significant: the Mann-Whitney U test between the repeats of the runs on
either side, after the Benjamini-Hochberg correction over every step found.
With fewer than 6 runs the drift cannot be measured and the repeats' spread
stands in for it, as in xrun diff.

By default the headline metrics are followed (request and output throughput,
per-user throughput, total and average latency, and the energy metrics where
runs measured them); --metric chooses others. Text and Markdown print the
verdict, the steps starting at the newest run, the earlier steps, then one
row per cell and metric: runs, latest median, steps with dates and sizes.
JSON has every point with its repeats, for charts and bots; html is a page
that opens from disk: the verdict, every step, a chart per series (each run's
median with its interval, the levels and the steps; series with steps first)
and the runs.

xrun diff between the last two runs complements a trend: it judges every
cell of the newest run, newly failed and missing cells, clocks and kernels,
against the night before.

EXIT STATUS
  0    no regression step starts at the newest run (steps before it are
       reported, not failed on: they failed the trend the night they began)
  2    bad usage, or a results file that cannot be read; two arguments that
       are the same run (same start time)
  3    the newest run starts a regression step (a metric worse beyond the
       threshold and the noise, significantly), or a cell ok the run before
       failed in it
  4    not compared: fewer than 2 runs, runs of different studies, or no
       cell of the newest run has a metric in an earlier run
`,
		Example: `  xrun trend results/nightly/*
  xrun trend results/nightly/2026-0[3-4]-* --metric ttft_p99_ms,total_latency_ms
  xrun trend results/nightly/* --format markdown > trend.md
  xrun trend results/nightly/* --format html > trend.html
  xrun trend results/nightly/* --format json | jq '.series[] | select(.steps != [])'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runTrend(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.StringVar(&opts.threshold, "threshold", "3%", "smallest relative change of level that counts as a step, e.g. 3% or 0.03")
	f.Float64Var(&opts.noiseFactor, "noise-factor", results.DefaultTrendNoiseFactor, "a step must also exceed this many standard errors of the difference of the two levels; 0 turns the rule off")
	f.StringSliceVar(&opts.metrics, "metric", nil, "metric key to follow (repeatable or comma-separated; default: the headline metrics, and the energy metrics where runs have them)")
	f.StringVar(&opts.format, "format", "text", "output format: "+strings.Join(trendFormats(), ", ")+" (a self-contained page with charts)")
	return c
}

func runTrend(_ context.Context, a *app, opts *trendOptions, args []string) error {
	threshold, err := parseThreshold(opts.threshold)
	if err != nil {
		return usageError{fmt.Errorf("--threshold: %w", err)}
	}
	if k := opts.noiseFactor; k < 0 || math.IsNaN(k) || math.IsInf(k, 0) {
		return usageError{fmt.Errorf("--noise-factor: %v; expected a number from 0 (rule off) up, e.g. %g", k, results.DefaultTrendNoiseFactor)}
	}
	if !slices.Contains(trendFormats(), opts.format) {
		return usageError{fmt.Errorf("--format: %q is not a trend format; expected %s", opts.format, strings.Join(trendFormats(), ", "))}
	}
	runs := make([]*results.Results, len(args))
	for i, arg := range args {
		r, _, err := results.Load(arg)
		if err != nil {
			return err
		}
		if runs[i], err = results.Normalized(r); err != nil {
			return err
		}
	}
	if err := results.CheckMetrics(opts.metrics, runs...); err != nil {
		return usageError{fmt.Errorf("--metric: %w", err)}
	}
	t, err := results.Trend(runs, results.TrendOptions{Threshold: threshold, NoiseFactor: opts.noiseFactor, Metrics: opts.metrics, Names: args})
	if err != nil {
		return err
	}
	// Render fully before writing, so that a failure prints nothing.
	var buf bytes.Buffer
	if opts.format == htmlFormat {
		err = htmlreport.WriteTrend(&buf, t, htmlreport.Options{})
	} else {
		err = t.Render(&buf, opts.format)
	}
	if err != nil {
		return err
	}
	if _, err := a.gs.Stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	return t.Err()
}

// trendFormats are the formats xrun trend prints: package results' tables
// and JSON, and htmlreport's page.
func trendFormats() []string { return append(slices.Clone(results.TrendFormats), htmlFormat) }

package results

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The energy metrics' keys (see the registry).
const (
	// EnergyPerTokenKey is the joules the cell's GPUs used per output
	// token over a timed repeat.
	EnergyPerTokenKey = "energy_j_per_output_token"
	// TokSPerWattKey is output tokens per second per watt over a timed
	// repeat: output tokens per joule, the inverse of EnergyPerTokenKey.
	TokSPerWattKey = "output_tok_s_per_w"
)

// EnergyEstimated labels an energy figure estimated for a cell whose
// repeats have none (EstimateEnergy), wherever one is shown.
const EnergyEstimated = "estimated from the cell's mean power"

// energyOutputMetric is the count the energy metrics divide by.
const energyOutputMetric = "total_output_tokens"

// AddEnergyMetrics adds a timed repeat's energy metrics to m, its
// metrics, from the joules the cell's GPUs used over the repeat's timed
// window and m's output tokens. Without a positive, finite energy or
// output it adds nothing: a metric that is absent says "not measured",
// where 0 would say "free".
func AddEnergyMetrics(m Metrics, joules float64) {
	tokens := m[energyOutputMetric]
	if !(joules > 0) || !(tokens > 0) || math.IsInf(joules, 0) || math.IsInf(tokens, 0) {
		return
	}
	m[EnergyPerTokenKey] = joules / tokens
	m[TokSPerWattKey] = tokens / joules
}

// EstimateEnergy estimates an energy metric (EnergyPerTokenKey or
// TokSPerWattKey) for a cell whose repeats do not measure energy, as
// files written before xrun measured it per repeat: the cell's mean GPU
// power over its median output throughput (Total Output Throughput), the
// mean power times gpus_per_cell (1 without it), since the telemetry's
// mean is over every GPU's samples. It is a figure of the cell, never of
// a repeat: no confidence interval, no test, and nothing written to
// results.json; whatever shows it says EnergyEstimated.
//
// ok is false for an ok cell that measured the metric, one whose GPUs had
// no energy counter (telemetry without energy_j, as the CPU backend's or
// before the NVML sampler) or no power reading, or without a throughput.
func EstimateEnergy(c *Cell, key string) (v float64, ok bool) {
	if key != EnergyPerTokenKey && key != TokSPerWattKey {
		return 0, false
	}
	t := c.Telemetry
	if c.Status != StatusOK || t == nil || !(t.EnergyJ > 0) || !(t.PowerWMean > 0) {
		return 0, false
	}
	if len(column(c.Repeats, EnergyPerTokenKey)) > 0 || len(column(c.Repeats, TokSPerWattKey)) > 0 {
		return 0, false // measured
	}
	tput := Summarize(column(c.Repeats, "system_output_throughput_tok_s"))
	if tput.N == 0 || !(tput.Median > 0) {
		return 0, false
	}
	gpus := 1.0
	if g, ok := c.Params["gpus_per_cell"].(int64); ok && g > 1 {
		gpus = float64(g)
	}
	jPerTok := t.PowerWMean * gpus / tput.Median
	if key == TokSPerWattKey {
		return roundValue(1 / jPerTok), true
	}
	return roundValue(jPerTok), true
}

// estimatedEnergyKeys are the energy metrics some cell of cells has only
// an estimate of (no cell measured them), in display order.
func estimatedEnergyKeys(cells []*Cell) []string {
	var keys []string
	for _, k := range []string{EnergyPerTokenKey, TokSPerWattKey} {
		measured, estimated := false, false
		for _, c := range cells {
			measured = measured || len(column(c.Repeats, k)) > 0
			_, ok := EstimateEnergy(c, k)
			estimated = estimated || ok
		}
		if estimated && !measured {
			keys = append(keys, k)
		}
	}
	return keys
}

// isEnergyMetric reports whether key is one of the energy metrics.
func isEnergyMetric(key string) bool { return MetricFor(key).Energy }

// formatEstimate prints an estimated figure as the tables do a median,
// marked as an estimate.
func formatEstimate(v float64) string { return "≈" + formatNumber(v) }

// energyNotes explain the summary table's energy columns: how the
// measured figures were measured, and which cells' are estimates.
func energyNotes(cells []*Cell, metrics []string) []string {
	var shown []string
	for _, m := range metrics {
		if isEnergyMetric(m) {
			shown = append(shown, m)
		}
	}
	if len(shown) == 0 {
		return nil
	}
	var measured, estimated []string
	for _, c := range cells {
		for _, m := range shown {
			if len(column(c.Repeats, m)) > 0 {
				measured = append(measured, c.ID)
				break
			}
			if _, ok := EstimateEnergy(c, m); ok {
				estimated = append(estimated, c.ID)
				break
			}
		}
	}
	var names []string
	for _, m := range shown {
		names = append(names, MetricFor(m).Name)
	}
	what := strings.Join(names, " and ")
	var notes []string
	if len(measured) > 0 {
		notes = append(notes, fmt.Sprintf("%s: the joules the cell's GPUs used over each timed repeat (NVML's energy counter from the repeat's first request's start to its last one's end, summed over the GPUs) per output token, and output tokens per joule (tokens/sec/W)", what))
	}
	if len(estimated) > 0 {
		slices.Sort(estimated)
		notes = append(notes, fmt.Sprintf("≈: %s %s (mean GPU power × gpus_per_cell / median %s) for %s whose repeats measured no energy, as files written before xrun measured it per repeat: a figure of the cell, with no confidence interval",
			what, EnergyEstimated, MetricFor("system_output_throughput_tok_s").Name, plural(len(estimated), "cell")))
	}
	return notes
}

package results

import (
	"fmt"
	"math"
	"strconv"
)

// rooflineMetric is the measured throughput a roofline is read against:
// the roofline's own throughput counts output tokens.
const rooflineMetric = "system_output_throughput_tok_s"

// rooflineColumn is the summary table's column for Roofline.Fraction.
const rooflineColumn = "% roofline"

// normalizeRoofline rounds a roofline's figures and computes its Fraction
// from the cell's summary, so that it always agrees with the repeats.
func normalizeRoofline(rf Roofline, sum map[string]Summary) (Roofline, error) {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"floor_s", &rf.FloorS}, {"output_tok_s", &rf.OutputTokS}, {"memory_bound_s", &rf.MemoryBoundS}, {"bytes", &rf.Bytes},
		{"flops", &rf.FLOPs}, {"peak_bytes_per_s", &rf.PeakBytesPerS}, {"peak_flop_per_s", &rf.PeakFLOPS}} {
		if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v < 0 {
			return rf, fmt.Errorf("%s: %v cannot be stored; expected a finite number >= 0", f.name, *f.v)
		}
		*f.v = roundValue(*f.v)
	}
	rf.Fraction = 0
	if s, ok := sum[rooflineMetric]; ok && s.N > 0 && rf.OutputTokS > 0 {
		rf.Fraction = roundValue(s.Median / rf.OutputTokS)
	}
	return rf, nil
}

// formatRoofline is a cell's "% roofline" entry: the share of the
// roofline reached and the roofline's output throughput, "47.3% of 2964";
// "-" where the cell has none.
func formatRoofline(c *Cell) string {
	rf := c.Roofline
	if c.Status != StatusOK || rf == nil || rf.OutputTokS <= 0 || rf.Fraction <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*rf.Fraction, 'f', 1, 64) + "% of " + formatNumber(rf.OutputTokS)
}

// hasRoofline reports whether any cell of the table can fill the column.
func hasRoofline(cells []*Cell) bool {
	for _, c := range cells {
		if formatRoofline(c) != "-" {
			return true
		}
	}
	return false
}

// rooflineNotes say, once per set of ceilings, what the column measures
// against.
func rooflineNotes(cells []*Cell) []string {
	var out []string
	for _, c := range cells {
		rf := c.Roofline
		if formatRoofline(c) == "-" {
			continue
		}
		out = append(out, fmt.Sprintf("%s: median %s over the roofline's (output tokens over the sum, across the timed iterations, of max(bytes / %s, FLOPs / %s): weights read once per iteration, on MoE models only the experts its tokens reached, plus the KV cache); %s, %s",
			rooflineColumn, MetricFor(rooflineMetric).Name, FormatRate(rf.PeakBytesPerS, "B/s"), FormatRate(rf.PeakFLOPS, "FLOP/s"), rf.Device, rf.PeakSource))
	}
	return dedupe(out)
}

// FormatRate prints a rate with an SI prefix and three significant
// digits: "4.30 TB/s", "790 TFLOP/s".
func FormatRate(v float64, unit string) string {
	for _, p := range []struct {
		f float64
		s string
	}{{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= p.f {
			return formatSig(v/p.f, 3) + " " + p.s + unit
		}
	}
	return formatSig(v, 3) + " " + unit
}

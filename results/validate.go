package results

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Impossible values: the reader refuses them as it refuses NaN, because a
// diff or a table built on them would compare nonsense, and the writer
// refuses them so that it never writes what the reader refuses.

// maxMetricValue bounds every metric and telemetry figure. Metrics are
// throughputs, latencies in ms and counts: 1e15 is a billion times the
// throughput of the largest inference cluster in tokens per second,
// 31,000 years in milliseconds, and far more tokens than a study can
// send. A value beyond it (1.8e308, say) is a corrupted or forged file.
const maxMetricValue = 1e15

// checkMetricValue says what is impossible about one metric value, or "".
func checkMetricValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprintf("%v: a metric must be finite", v)
	case v < 0:
		return fmt.Sprintf("%s: a metric (a throughput, latency or count) cannot be negative", formatValue(v))
	case v > maxMetricValue:
		return fmt.Sprintf("%s is beyond any physical sense for a metric (at most %g)", formatValue(v), float64(maxMetricValue))
	}
	return ""
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// checkMeasurements checks a cell's measured values as read: an ok cell
// has repeats, every metric and telemetry figure is possible, and the
// summary is the one the repeats give. It returns the path below the cell
// (".repeats[2].total_latency_ms") and the problem.
func checkMeasurements(c *Cell) (path, msg string) {
	if c.Status == StatusOK && len(c.Repeats) == 0 {
		return ".repeats", "a cell with status ok has at least one timed repeat; this one has none"
	}
	for j, rep := range c.Repeats {
		if k, msg := checkMetrics(rep); msg != "" {
			return fmt.Sprintf(".repeats[%d].%s", j, k), msg
		}
	}
	if c.Profile != nil {
		if k, msg := checkMetrics(c.Profile.PassMetrics); msg != "" {
			return ".profile.pass_metrics." + k, msg
		}
	}
	if c.Telemetry != nil {
		if k, msg := checkTelemetry(c.Telemetry); msg != "" {
			return ".telemetry." + k, msg
		}
	}
	return checkSummary(c.Summary, c.Repeats)
}

// checkMetrics checks one repeat's values, keys in order so that the
// first problem reported does not depend on map order.
func checkMetrics(m Metrics) (key, msg string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if msg := checkMetricValue(m[k]); msg != "" {
			return k, msg
		}
	}
	return "", ""
}

// checkTelemetry refuses negative or absurd clocks, powers, shares and
// energies. It walks the struct's numeric fields, so that every figure
// added to Telemetry is checked without being listed here.
func checkTelemetry(t *Telemetry) (field, msg string) {
	v := reflect.ValueOf(t).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				continue
			}
			f = f.Elem()
		}
		var x float64
		switch f.Kind() {
		case reflect.Float32, reflect.Float64:
			x = f.Float()
		case reflect.Int, reflect.Int64, reflect.Int32:
			x = float64(f.Int())
		default:
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		switch {
		case x < 0:
			return name, fmt.Sprintf("%s: telemetry figures (clocks, power, shares, energy, counts) cannot be negative", formatValue(x))
		case (name == "below_threshold_share" || name == "throttle_threshold") && x > 1:
			return name, fmt.Sprintf("%s: expected a share in [0, 1]", formatValue(x))
		case x > maxMetricValue:
			return name, fmt.Sprintf("%s is beyond any physical sense (at most %g)", formatValue(x), float64(maxMetricValue))
		}
	}
	return "", ""
}

// checkSummary compares a summary as read with the one its repeats give:
// the writer computes it, so any other is an edited file, and tables
// (which show summaries) would disagree with diffs (which test repeats).
func checkSummary(got map[string]Summary, reps []Metrics) (path, msg string) {
	want := summarizeRepeats(reps)
	keys := slices.Sorted(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	const why = "; the summary is computed from the repeats (was the file edited?)"
	for _, k := range keys {
		g, inFile := got[k]
		w, inRepeats := want[k]
		switch {
		case !inRepeats:
			return ".summary." + k, "no repeat has this metric" + why
		case !inFile:
			return ".summary", fmt.Sprintf("lacks %s, which the repeats have%s", k, why)
		case g.N != w.N:
			return ".summary." + k + ".n", fmt.Sprintf("%d, but %d repeats have the metric%s", g.N, w.N, why)
		case !closeTo(g.Median, w.Median):
			return ".summary." + k + ".median", fmt.Sprintf("%s, but the repeats' median is %s%s", formatValue(g.Median), formatValue(w.Median), why)
		}
		for _, b := range []struct {
			name      string
			got, want *float64
		}{{"ci_low", g.CILow, w.CILow}, {"ci_high", g.CIHigh, w.CIHigh}} {
			switch {
			case b.want == nil && b.got != nil:
				return ".summary." + k + "." + b.name, fmt.Sprintf("%s, but %d repeats give no finite interval (null)%s", formatValue(*b.got), w.N, why)
			case b.want != nil && b.got == nil:
				return ".summary." + k + "." + b.name, fmt.Sprintf("null, but the repeats give %s%s", formatValue(*b.want), why)
			case b.want != nil && !closeTo(*b.got, *b.want):
				return ".summary." + k + "." + b.name, fmt.Sprintf("%s, but the repeats give %s%s", formatValue(*b.got), formatValue(*b.want), why)
			}
		}
	}
	return "", ""
}

// closeTo compares two stored figures to the 6 significant digits the
// writer keeps, with one unit of the last digit to spare for platforms.
func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-5*max(math.Abs(a), math.Abs(b))
}

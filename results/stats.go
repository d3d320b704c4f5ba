package results

import (
	"fmt"
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Statistical choices, fixed so that every file and diff means the same.
const (
	// Confidence is the level of every summary's interval.
	Confidence = 0.95
	// Alpha is the significance level of every comparison.
	Alpha = 0.05
)

// thresholds is benchmath's configuration; a copy per call is not needed
// because benchmath only reads it.
var thresholds = &benchmath.Thresholds{CompareAlpha: Alpha}

// Summarize returns the median of values and its 95 % confidence interval.
// benchmath's assumption-free summary is used because benchmark timings
// are rarely normal. It does not modify values.
func Summarize(values []float64) Summary {
	s, _ := summarize(values)
	return s
}

// summarize also returns benchmath's caveats (too few samples for a
// finite interval).
func summarize(values []float64) (Summary, []string) {
	if len(values) == 0 {
		return Summary{}, nil
	}
	sample := benchmath.NewSample(slices.Clone(values), thresholds)
	bs := benchmath.AssumeNothing.Summary(sample, Confidence)
	s := Summary{Median: roundValue(bs.Center), N: len(values)}
	if !math.IsInf(bs.Lo, 0) && !math.IsNaN(bs.Lo) {
		lo := roundValue(bs.Lo)
		s.CILow = &lo
	}
	if !math.IsInf(bs.Hi, 0) && !math.IsNaN(bs.Hi) {
		hi := roundValue(bs.Hi)
		s.CIHigh = &hi
	}
	return s, errorStrings(bs.Warnings)
}

// Verdict is the outcome of comparing one metric between two samples.
type Verdict string

const (
	Faster    Verdict = "faster" // significantly better, whatever the metric's direction
	Slower    Verdict = "slower" // significantly worse
	Same      Verdict = "~"      // no significant difference
	Higher    Verdict = "higher" // significant change of a metric with no direction
	Lower     Verdict = "lower"
	NoVerdict Verdict = "n/a" // a side has no values
)

// Comparison is one metric compared between a baseline and a candidate
// sample with the Mann-Whitney U test (benchmath.AssumeNothing).
type Comparison struct {
	Metric string
	Base   Summary
	New    Summary
	// Ratio is New.Median / Base.Median; NaN when the baseline median is 0.
	Ratio float64
	// P is the U test's p-value; Significant is P < Alpha.
	P           float64
	Significant bool
	Verdict     Verdict
	// Warnings are benchmath's caveats, such as too few samples to ever
	// reach significance.
	Warnings []string
}

// Delta is the relative change New/Base - 1.
func (c Comparison) Delta() float64 { return c.Ratio - 1 }

// CompareSamples compares candidate values with baseline values of one
// metric. The verdict is direction-aware: for a latency, lower is faster.
func CompareSamples(metric string, base, cand []float64) Comparison {
	c := Comparison{Metric: metric, Ratio: math.NaN(), P: 1, Verdict: NoVerdict}
	var bw, nw []string
	c.Base, bw = summarize(base)
	c.New, nw = summarize(cand)
	if len(base) == 0 || len(cand) == 0 {
		return c
	}
	if c.Base.Median != 0 {
		c.Ratio = c.New.Median / c.Base.Median
	}
	c.Verdict = Same
	if constant(base) && constant(cand) && base[0] == cand[0] {
		// Identical constants (counts, usually): nothing to test, and
		// benchmath's "all samples are equal" would only be noise.
		c.Ratio = 1
		return c
	}
	s1 := benchmath.NewSample(slices.Clone(base), thresholds)
	s2 := benchmath.NewSample(slices.Clone(cand), thresholds)
	cmp := benchmath.AssumeNothing.Compare(s1, s2)
	c.P = cmp.P
	c.Significant = cmp.P < cmp.Alpha
	c.Warnings = dedupe(append(append(bw, nw...), errorStrings(cmp.Warnings)...))
	if !c.Significant {
		return c
	}
	up := c.New.Median > c.Base.Median
	if c.New.Median == c.Base.Median {
		// Significant by rank but equal medians: no direction to claim.
		c.Significant = false
		return c
	}
	switch MetricFor(metric).Better {
	case HigherIsBetter:
		c.Verdict = pick(up, Faster, Slower)
	case LowerIsBetter:
		c.Verdict = pick(up, Slower, Faster)
	default:
		c.Verdict = pick(up, Higher, Lower)
	}
	return c
}

// MinP is the U test's smallest two-sided p-value for samples of n1 and
// n2 values, reached when every value of one lies beyond every value of
// the other: 2 / C(n1+n2, n1) (0.1 at 3+3, 0.029 at 4+4); 1 when either
// is empty.
func MinP(n1, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 {
		return 1
	}
	c := 1.0 // C(n1+n2, n1), built up factor by factor
	for i := 1; i <= n1; i++ {
		c = c * float64(n2+i) / float64(i)
	}
	return min(2/c, 1)
}

// Testable reports whether the U test can find a difference at Alpha
// between samples of n1 and n2 values at all.
func Testable(n1, n2 int) bool { return MinP(n1, n2) < Alpha }

// TestableRepeats is the fewest repeats a side with which a comparison
// can come out significant at all (4: 3+3 never can).
func TestableRepeats() int {
	n := 1
	for !Testable(n, n) {
		n++
	}
	return n
}

// testString formats the test the way benchstat does: "p=0.002 n=6+6".
func (c Comparison) testString() string {
	if c.Verdict == NoVerdict {
		return ""
	}
	return testString(c.P, c.Base.N, c.New.N)
}

func testString(p float64, n1, n2 int) string {
	return fmt.Sprintf("p=%.3f n=%d+%d", p, n1, n2)
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func constant(v []float64) bool {
	for _, x := range v[1:] {
		if x != v[0] {
			return false
		}
	}
	return true
}

func errorStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// dedupe keeps the first occurrence of each string, in order.
func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

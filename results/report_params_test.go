package results

import (
	"fmt"
	"testing"
)

// request_rate inf and concurrency none are stored as 0 (JSON has no
// infinity, and the fingerprint wants one canonical value); tables show
// the words the spec used, and other parameters' 0 stays 0.
func TestFormatParamZeroWords(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
	}{
		{"request_rate", float64(0), "inf"},
		{"request_rate", int64(0), "inf"},
		{"request_rate", 16.5, "16.5"},
		{"concurrency", int64(0), "none"},
		{"concurrency", int64(4), "4"},
		{"batch_size", int64(0), "0"},
		{"request_rate", "inf", "inf"},
	} {
		if got := formatParam(tc.key, tc.v); got != tc.want {
			t.Errorf("formatParam(%s, %v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
	c := &Cell{Params: map[string]any{"request_rate": float64(0)}}
	if got := ParamString(c, "request_rate"); got != "inf" || !IsZeroWord("request_rate", got) || IsZeroWord("batch_size", "inf") {
		t.Errorf("ParamString = %q", got)
	}
}

// A compare entry on request_rate or concurrency whose baseline is the
// zero word (stored as 0) compares against the column the tables show as
// inf or none, rather than noting that 0 is not among the axis' values.
func TestCompareZeroWordBaseline(t *testing.T) {
	for _, tc := range []struct {
		axis     string
		baseline any
		values   []any
		want     string
	}{
		{"concurrency", 0, []any{0, 8, 16}, "none"},
		{"request_rate", 0.0, []any{0.0, 2.5, 10.0}, "inf"},
	} {
		r := &Results{Name: "load", Axes: []Axis{{Name: tc.axis, Values: tc.values}},
			Compare: []CompareSpec{{Axis: tc.axis, Baseline: tc.baseline}}}
		for i, v := range tc.values {
			r.Cells = append(r.Cells, Cell{ID: fmt.Sprintf("c%d", i), Status: StatusOK, Params: Params{tc.axis: v},
				Repeats: []Metrics{{"system_output_throughput_tok_s": float64(100 + i)}}})
		}
		n, err := Normalized(r)
		if err != nil {
			t.Fatal(err)
		}
		got, notes := Comparisons(n)
		if len(notes) != 0 || len(got) != 1 || got[0].Axis != tc.axis || got[0].Baseline != tc.want {
			t.Errorf("%s baseline %v: comparisons %+v, notes %q; want one against %s", tc.axis, tc.baseline, got, notes, tc.want)
		}
	}
}

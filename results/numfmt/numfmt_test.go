package numfmt

import (
	"math"
	"testing"
)

func TestSig(t *testing.T) {
	for _, tc := range []struct {
		v      float64
		digits int
		want   string
	}{
		{141.3456, 4, "141.3"}, {18086.4, 4, "18086"}, {0.81234, 4, "0.8123"}, {999.96, 3, "1000"},
		{0, 3, "0"}, {-0.0001, 1, "-0.0001"}, {-0.4, 0, "0"}, {1e-12, 3, "0.000000000"},
		{math.NaN(), 3, "n/a"}, {math.Inf(-1), 3, "n/a"},
	} {
		if got := Sig(tc.v, tc.digits); got != tc.want {
			t.Errorf("Sig(%g, %d) = %q, want %q", tc.v, tc.digits, got, tc.want)
		}
	}
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		v      float64
		unit   string
		digits int
		want   string
	}{
		{4.3e12, "B/s", 3, "4.30 TB/s"}, {790e12, "FLOP/s", 3, "790 TFLOP/s"}, {1.2e15, "FLOP/s", 3, "1.20 PFLOP/s"},
		{2.5e3, "B/s", 2, "2.5 kB/s"}, {999, "B/s", 3, "999 B/s"}, {999.96e9, "B/s", 3, "1000 GB/s"}, {-3e9, "B/s", 3, "-3.00 GB/s"},
		{0, "B/s", 3, "0 B/s"},
	} {
		if got := Rate(tc.v, tc.unit, tc.digits); got != tc.want {
			t.Errorf("Rate(%g, %q, %d) = %q, want %q", tc.v, tc.unit, tc.digits, got, tc.want)
		}
	}
}

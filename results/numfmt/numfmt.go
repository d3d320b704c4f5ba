// Package numfmt prints numbers as xrun's tables and sentences show them:
// to a number of significant digits and never with an exponent, and rates
// with an SI prefix. The results package's tables and the profiler's
// diagnosis (engine/profile) print ceilings and rates alike, so the rules
// live here, below both.
//
// It has no dependencies beyond the standard library.
package numfmt

import (
	"math"
	"strconv"
)

// Sig prints v with the given number of significant digits and never an
// exponent (999.96 to 3 digits prints as 1000, not 1e+03); "n/a" for NaN
// and infinities.
func Sig(v float64, digits int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	if v == 0 {
		return "0"
	}
	mag := int(math.Floor(math.Log10(math.Abs(v))))
	dec := min(max(digits-1-mag, 0), 9)
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if s == "-0" {
		s = "0"
	}
	return s
}

// Rate prints a rate with an SI prefix (k to P) and the given number of
// significant digits: "4.30 TB/s", "790 TFLOP/s".
func Rate(v float64, unit string, digits int) string {
	for _, p := range []struct {
		f float64
		s string
	}{{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= p.f {
			return Sig(v/p.f, digits) + " " + p.s + unit
		}
	}
	return Sig(v, digits) + " " + unit
}

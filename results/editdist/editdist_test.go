package editdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	long := strings.Repeat("a", 65)
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"repeats", "repeats", 0},
		{"repeat", "repeats", 1},   // insert
		{"repeatss", "repeats", 1}, // delete
		{"repeaxs", "repeats", 1},  // substitute
		{"rpeeats", "repeats", 1},  // neighbours swapped: one edit
		{"btach_size", "batch_size", 1},
		{"batch_sizes", "batch-size", 2},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // a swap is not reused by a later insert
		{long, long, 0},
		{long, long + "b", 1 << 20}, // beyond 64 bytes: equal or far
	}
	for _, c := range cases {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

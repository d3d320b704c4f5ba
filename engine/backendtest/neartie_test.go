package backendtest

import "testing"

func TestNearTie(t *testing.T) {
	for _, c := range []struct {
		logits []float32
		k      int
		want   bool
	}{
		{[]float32{0.1, 3.0, -1, 2.0}, 2, false},    // clear top 2, clear boundary
		{[]float32{0.1, 3.0, 2.0, 2.0005}, 2, true}, // boundary tie: which experts
		{[]float32{3.0, 0.1, 3.0004, -1}, 2, true},  // tie inside the top 2: their order
		{[]float32{5, 4, 3, 3.0001}, 2, false},      // a tie below the top k+1 cannot matter
	} {
		if got := nearTie(c.logits, c.k, 1e-3); got != c.want {
			t.Errorf("nearTie(%v, k=%d) = %v, want %v", c.logits, c.k, got, c.want)
		}
	}
}

// Package editdist measures how far a word is from another, for the "did
// you mean" hints of bad input (spec keys and values, results fields,
// metric names).
package editdist

// Distance is the Levenshtein distance (insert, delete, substitute),
// counting a swap of two neighbours as one edit, the commonest typo.
// Words longer than 64 bytes are only equal or far apart: hints are for
// names, and the cost grows with the product of the lengths.
func Distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

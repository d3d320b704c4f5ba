package cuda

// GraphBucket is the padded decode batch the CUDA backend captures a graph
// for, for a decode batch of n requests: powers of two up to 16, then
// multiples of 16 (at most 1/16 of padding rows).
func GraphBucket(n int) int {
	if n <= 16 {
		p := 1
		for p < n {
			p *= 2
		}
		return p
	}
	return (n + 15) / 16 * 16
}

// GraphBuckets are the graph buckets of decode batches of 1 to slots
// requests, ascending, none above slots (a bucket past it is slots): what
// the engine warms before a run, and the plan's estimate counts.
func GraphBuckets(slots int) []int {
	var out []int
	for n := 1; n <= slots; n++ {
		if k := min(GraphBucket(n), slots); len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out
}

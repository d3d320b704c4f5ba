package engine

// ExpertLoad is how many tokens each expert of each MoE layer received in
// each iteration (routing_mode's effect), with summaries over the timed
// iterations. Layers counts every layer; a model's dense first layers
// (DeepSeek-V3's first_k_dense_replace) route nothing and stay out of the
// summaries.
type ExpertLoad struct {
	Layers, Experts int
	// DenseLayers are the first layers, which have no experts.
	DenseLayers int
	// Iterations are the engine iterations recorded, Warmup flags the
	// warm-up ones, Counts holds [len(Iterations)][Layers][Experts].
	Iterations []int
	Warmup     []bool
	Counts     []int32
	// MaxOverMean is the mean, over timed iterations and layers, of the
	// busiest expert's tokens over the mean expert's: 1 is perfect balance,
	// Experts is everything on one expert.
	MaxOverMean float64
	// TotalMaxOverMean is the same ratio on each layer's tokens summed over
	// the timed iterations, averaged over layers.
	TotalMaxOverMean float64
}

// At returns the token counts of entry i (an index into Iterations) for a
// layer.
func (l *ExpertLoad) At(i, layer int) []int32 {
	o := (i*l.Layers + layer) * l.Experts
	return l.Counts[o : o+l.Experts]
}

func (l *ExpertLoad) add(iter int, warmup bool, counts []int32) {
	l.Iterations = append(l.Iterations, iter)
	l.Warmup = append(l.Warmup, warmup)
	l.Counts = append(l.Counts, counts...)
}

// maxOverMean of one layer's counts; 0 when no token was routed.
func maxOverMean[T int32 | int64](c []T) float64 {
	var sum, mx T
	for _, v := range c {
		sum += v
		mx = max(mx, v)
	}
	if sum == 0 {
		return 0
	}
	return float64(mx) * float64(len(c)) / float64(sum)
}

func (l *ExpertLoad) summarise() {
	total := make([]int64, l.Layers*l.Experts)
	var sum float64
	n := 0
	for i := range l.Iterations {
		if l.Warmup[i] {
			continue
		}
		for layer := range l.Layers {
			c := l.At(i, layer)
			if l.Dense(layer) {
				continue
			}
			sum += maxOverMean(c)
			n++
			for e, v := range c {
				total[layer*l.Experts+e] += int64(v)
			}
		}
	}
	l.MaxOverMean, l.TotalMaxOverMean = 0, 0
	if n > 0 {
		l.MaxOverMean = sum / float64(n)
	}
	moe := l.Layers - l.DenseLayers
	for layer := l.DenseLayers; layer < l.Layers; layer++ {
		l.TotalMaxOverMean += maxOverMean(total[layer*l.Experts:(layer+1)*l.Experts]) / float64(moe)
	}
}

// Dense reports whether layer has no experts (one of the model's dense
// first layers).
func (l *ExpertLoad) Dense(layer int) bool { return layer < l.DenseLayers }

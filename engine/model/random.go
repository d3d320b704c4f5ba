package model

// Random weights are defined by a counter-based generator so that every
// backend produces the same values in parallel where the weight lives (a
// CUDA kernel computes element i from (seed, i) alone), and a weight's
// values do not depend on how it is split into work.

// splitmix64 is Steele, Lea and Flood's SplittableRandom finaliser: a
// bijective mix with good avalanche, cheap on CPU and GPU alike.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RandomValue is element i of a random weight: uniform in [-scale, scale).
func RandomValue(seed uint64, i int64, scale float32) float32 {
	r := splitmix64(seed ^ splitmix64(uint64(i)))
	// 24 random bits -> [0, 1) exactly representable in float32.
	u := float32(r>>40) * (1.0 / (1 << 24))
	return (2*u - 1) * scale
}

// RandomFill fills dst with elements offset, offset+1, ... of the random
// weight (seed, scale).
func RandomFill(dst []float32, seed uint64, offset int64, scale float32) {
	for i := range dst {
		dst[i] = RandomValue(seed, offset+int64(i), scale)
	}
}

// WeightSeed derives a weight's seed from the model seed and the weight's
// name, so weights are independent of the order they are created in.
func WeightSeed(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return splitmix64(seed ^ h)
}

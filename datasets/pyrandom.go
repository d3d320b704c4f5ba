package datasets

import "math/bits"

// pyRandom reproduces the parts of CPython's random.Random that
// prepare_dataset.py uses to draw token ids and LoRA task ids.
type pyRandom struct {
	mt mt19937
}

// seed is random.seed(n) for an int n: init_by_array over the 32-bit words
// of abs(n), least significant first, one 0 word for 0.
func (r *pyRandom) seed(n uint64) {
	key := []uint32{uint32(n)}
	if hi := uint32(n >> 32); hi != 0 {
		key = append(key, hi)
	}
	r.mt.seedByArray(key)
}

// getrandbits is random.getrandbits(k) for 1 <= k <= 64: whole 32-bit words,
// least significant first, the last one shifted down to the bits still
// needed.
func (r *pyRandom) getrandbits(k int) uint64 {
	if k <= 32 {
		return uint64(r.mt.uint32() >> (32 - k))
	}
	lo := uint64(r.mt.uint32())
	hi := uint64(r.mt.uint32() >> (64 - k))
	return hi<<32 | lo
}

// randbelow is _randbelow_with_getrandbits(n) for n >= 1: draw
// bit_length(n) bits until the value is below n.
func (r *pyRandom) randbelow(n uint64) uint64 {
	k := bits.Len64(n)
	v := r.getrandbits(k)
	for v >= n {
		v = r.getrandbits(k)
	}
	return v
}

// random is random.random(): 53 bits from two words, 27 + 26.
func (r *pyRandom) random() float64 {
	a := r.mt.uint32() >> 5
	b := r.mt.uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// randint is random.randint(a, b) = randrange(a, b+1) = a + _randbelow(b-a+1);
// the caller guarantees a <= b.
func (r *pyRandom) randint(a, b int64) int64 {
	return a + int64(r.randbelow(uint64(b-a)+1))
}

// sampleSetSize is random.sample's threshold between its two strategies: a
// population no larger than this is copied into a pool, a larger one is
// sampled with a set of already chosen indices. CPython computes
// 21 + 4**ceil(log(3k, 4)) for k > 5; 3k is never a power of four, so the
// exponent is the smallest m with 4**m > 3k, found here exactly in integers.
func sampleSetSize(k int) int {
	size := 21
	if k > 5 {
		p := 1
		for p <= 3*k {
			p *= 4
		}
		size += p
	}
	return size
}

// tokenSampler draws one request's token ids from range(vocab) the way
// gen_random_tokens does: random.sample when the length is below the
// vocabulary size, random.choices otherwise. Its scratch memory depends
// only on the vocabulary size, never on how many requests are drawn.
type tokenSampler struct {
	r     *pyRandom
	vocab int
	// Set strategy: a bitset of the ids chosen in this request, cleared
	// through the request's own ids afterwards. At 16 KiB for a 128k
	// vocabulary it stays in the L1 cache.
	seen []uint64
	// seenMap replaces seen for vocabularies too large for a flat bitset.
	seenMap map[uint32]struct{}
	// Pool strategy scratch.
	pool []int32
	// flatLimit is the largest vocabulary the bitset serves (a field so
	// tests can exercise the map).
	flatLimit int
}

// maxFlatVocab bounds the "seen" bitset to 2 MiB.
const maxFlatVocab = 1 << 24

func newTokenSampler(r *pyRandom, vocab int) *tokenSampler {
	return &tokenSampler{r: r, vocab: vocab, flatLimit: maxFlatVocab}
}

// draw fills dst (its length is the request length) with token ids.
func (s *tokenSampler) draw(dst []int32) {
	k, n := len(dst), s.vocab
	switch {
	case k >= n:
		s.choices(dst)
	case n <= sampleSetSize(k):
		s.samplePool(dst)
	default:
		s.sampleSet(dst)
	}
}

// choices is random.choices(range(n), k=len(dst)): floor(random() * n).
func (s *tokenSampler) choices(dst []int32) {
	n := float64(s.vocab)
	for i := range dst {
		dst[i] = int32(s.r.random() * n)
	}
}

// samplePool is random.sample's list strategy: pick from the not yet chosen
// prefix of a pool and move the last candidate into the hole.
func (s *tokenSampler) samplePool(dst []int32) {
	n := s.vocab
	if cap(s.pool) < n {
		s.pool = make([]int32, n)
	}
	pool := s.pool[:n]
	for i := range pool {
		pool[i] = int32(i)
	}
	for i := range dst {
		j := s.r.randbelow(uint64(n - i))
		dst[i] = pool[j]
		pool[j] = pool[n-i-1]
	}
}

// sampleSet is random.sample's set strategy: draw randbelow(n), redraw while
// already chosen. randbelow is inlined here because this loop is where a
// large dataset spends its time.
func (s *tokenSampler) sampleSet(dst []int32) {
	n := uint32(s.vocab)
	shift := 32 - bits.Len32(n)
	mt := &s.r.mt
	if s.vocab > s.flatLimit {
		if s.seenMap == nil {
			s.seenMap = make(map[uint32]struct{}, len(dst))
		}
		clear(s.seenMap)
		for i := range dst {
			for {
				j := mt.uint32() >> shift
				if j >= n {
					continue
				}
				if _, dup := s.seenMap[j]; dup {
					continue
				}
				s.seenMap[j] = struct{}{}
				dst[i] = int32(j)
				break
			}
		}
		return
	}
	if s.seen == nil {
		s.seen = make([]uint64, (n+63)/64)
	}
	seen := s.seen
	for i := range dst {
		for {
			j := mt.uint32() >> shift
			if j >= n {
				continue
			}
			w, bit := &seen[j>>6], uint64(1)<<(j&63)
			if *w&bit != 0 {
				continue
			}
			*w |= bit
			dst[i] = int32(j)
			break
		}
	}
	for _, j := range dst {
		seen[uint32(j)>>6] = 0
	}
}

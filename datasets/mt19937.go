package datasets

// mt19937 is the 32-bit Mersenne Twister shared by numpy's legacy
// RandomState (seeded with init_genrand) and CPython's random module (seeded
// with init_by_array). Both libraries produce the untouched reference
// sequence, so one generator with two seeding methods serves both.
type mt19937 struct {
	state [mtN]uint32
	// out holds the tempered outputs of the last twist, so that uint32 is
	// small enough to inline into the token sampling loop.
	out [mtN]uint32
	pos int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// seed is the reference init_genrand (Knuth's multiplier 1812433253); numpy's
// np.random.seed(int) uses exactly this for integers below 2^32.
func (m *mt19937) seed(s uint32) {
	m.state[0] = s
	for i := 1; i < mtN; i++ {
		prev := m.state[i-1]
		m.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	m.pos = mtN
}

// seedByArray is the reference init_by_array, which CPython's random.seed
// applies to the 32-bit words of abs(seed), least significant word first.
func (m *mt19937) seedByArray(key []uint32) {
	m.seed(19650218)
	s := &m.state
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		s[i] = (s[i] ^ ((s[i-1] ^ (s[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			s[0] = s[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		s[i] = (s[i] ^ ((s[i-1] ^ (s[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			s[0] = s[mtN-1]
			i = 1
		}
	}
	s[0] = 0x80000000 // guarantees a non-zero state
	m.pos = mtN
}

// refill twists the state and tempers all 624 outputs at once.
func (m *mt19937) refill() {
	m.twist()
	for i, y := range &m.state {
		y ^= y >> 11
		y ^= (y << 7) & 0x9d2c5680
		y ^= (y << 15) & 0xefc60000
		y ^= y >> 18
		m.out[i] = y
	}
	m.pos = 0
}

// twist regenerates all 624 state words.
func (m *mt19937) twist() {
	s := &m.state
	mix := func(a, b, c uint32) uint32 {
		y := (a & mtUpperMask) | (b & mtLowerMask)
		return c ^ (y >> 1) ^ (-(y & 1) & mtMatrixA)
	}
	i := 0
	for ; i < mtN-mtM; i++ {
		s[i] = mix(s[i], s[i+1], s[i+mtM])
	}
	for ; i < mtN-1; i++ {
		s[i] = mix(s[i], s[i+1], s[i+mtM-mtN])
	}
	s[mtN-1] = mix(s[mtN-1], s[0], s[mtM-1])
}

func (m *mt19937) uint32() uint32 {
	if uint(m.pos) >= mtN {
		m.refill()
	}
	v := m.out[m.pos]
	m.pos++
	return v
}

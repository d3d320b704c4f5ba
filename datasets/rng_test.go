package datasets

import (
	"math"
	"slices"
	"testing"
)

// Reference values: the MT19937 ones are from the algorithm's reference
// output (mt19937ar.out) and its well-known default-seed sequence; the
// CPython ones were printed by CPython 3.11's random module; the numpy ones
// are printed in numpy's documentation and its own test data
// (numpy/random/tests/data/pcg64-testset-*.csv).

func TestMT19937InitGenrand(t *testing.T) {
	var m mt19937
	m.seed(5489) // the reference implementation's default seed
	want := []uint32{3499211612, 581869302, 3890346734, 3586334585, 545404204}
	for i, w := range want {
		if got := m.uint32(); got != w {
			t.Fatalf("output %d = %d, want %d", i, got, w)
		}
	}
}

func TestMT19937InitByArray(t *testing.T) {
	var m mt19937
	m.seedByArray([]uint32{0x123, 0x234, 0x345, 0x456}) // mt19937ar.c's main()
	want := []uint32{1067595299, 955945823, 477289528, 4107218783, 4228976476}
	for i, w := range want {
		if got := m.uint32(); got != w {
			t.Fatalf("output %d = %d, want %d", i, got, w)
		}
	}
	// Thousands of outputs in: the twist must be right for every index.
	var a, b mt19937
	a.seed(1)
	b.seed(1)
	for range 5000 {
		a.uint32()
	}
	for range 5000 {
		b.uint32()
	}
	if a.uint32() != b.uint32() {
		t.Fatal("identically seeded generators diverged")
	}
}

func TestPyRandom(t *testing.T) {
	seeded := func(s uint64) *pyRandom {
		r := &pyRandom{}
		r.seed(s)
		return r
	}
	words := func(r *pyRandom, n int) []uint64 {
		var out []uint64
		for range n {
			out = append(out, r.getrandbits(32))
		}
		return out
	}
	cases := []struct {
		name string
		got  []uint64
		want []uint64
	}{
		// random.seed(420); [getrandbits(32) for _ in range(5)]
		{"seed 420", words(seeded(420), 5), []uint64{113143961, 2891016030, 3355954552, 1565504994, 1170835515}},
		// random.seed(0) keys init_by_array with one 0 word.
		{"seed 0", words(seeded(0), 3), []uint64{3626764237, 1654615998, 3255389356}},
		// random.seed(2**40 + 5): two key words, low first.
		{"seed 2^40+5", words(seeded(1<<40+5), 3), []uint64{2166296868, 2220160828, 1153647273}},
	}
	r := seeded(420)
	cases = append(cases, struct {
		name      string
		got, want []uint64
	}{"getrandbits(17), (40), (64)", []uint64{r.getrandbits(17), r.getrandbits(40), r.getrandbits(64)},
		[]uint64{3452, 861884475230, 5028700247485822434}})
	r = seeded(420)
	var below []uint64
	for range 5 {
		below = append(below, r.randbelow(1000))
	}
	cases = append(cases, struct {
		name      string
		got, want []uint64
	}{"randbelow(1000)", below, []uint64{26, 689, 800, 373, 279}})
	r = seeded(420)
	below = below[:0:0]
	for range 3 {
		below = append(below, r.randbelow(1<<40))
	}
	cases = append(cases, struct {
		name      string
		got, want []uint64
	}{"randrange(2**40)", below, []uint64{802219871608, 885934098491, 251927233949}})
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	r = seeded(420)
	for i, w := range []float64{0.026343380459525556, 0.7813690555430765, 0.2726063832840899, 0.09559240016295012} {
		if got := r.random(); got != w {
			t.Errorf("random() #%d = %v, want %v", i, got, w)
		}
	}
	r = seeded(420)
	var ints []int64
	for range 8 {
		ints = append(ints, r.randint(0, 2))
	}
	for range 4 {
		ints = append(ints, r.randint(-3, 100))
	}
	if want := []int64{0, 2, 1, 1, 1, 0, 2, 2, 81, 11, 0, 63}; !slices.Equal(ints, want) {
		t.Errorf("randint: got %v, want %v", ints, want)
	}
}

func TestSampleAndChoices(t *testing.T) {
	draw := func(seed uint64, vocab, k int) []int32 {
		r := &pyRandom{}
		r.seed(seed)
		dst := make([]int32, k)
		newTokenSampler(r, vocab).draw(dst)
		return dst
	}
	cases := []struct {
		name string
		got  []int32
		want []int32
	}{
		// random.seed(11); random.sample(range(50), 30): pool strategy (50 <= 277).
		{"pool", draw(11, 50, 30), []int32{28, 35, 29, 49, 32, 37, 12, 11, 45, 30, 39, 42, 6, 46, 19, 9, 5, 2, 25, 40, 14, 20, 23, 48, 36, 33, 26, 0, 16, 41}},
		// random.seed(420); random.sample(range(32000), 10): set strategy.
		{"set", draw(420, 32000, 10), []int32{863, 22056, 25603, 11943, 8932, 13195, 3132, 25032, 21747, 22213}},
		// random.seed(420); random.sample(range(30), 5): k <= 5, setsize 21 < 30.
		{"set small k", draw(420, 30, 5), []int32{0, 21, 25, 11, 8}},
		// random.seed(420); random.choices(range(7), k=12): k >= vocab.
		{"choices", draw(420, 7, 12), []int32{0, 5, 1, 0, 4, 4, 0, 2, 6, 0, 5, 0}},
	}
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestSampleSetMapPath checks that the map used for huge vocabularies
// draws exactly what the bitset draws.
func TestSampleSetMapPath(t *testing.T) {
	var ra, rb pyRandom
	ra.seed(5)
	rb.seed(5)
	a, b := newTokenSampler(&ra, 70000), newTokenSampler(&rb, 70000)
	b.flatLimit = 1000
	for k := range 50 {
		da, db := make([]int32, 10+k*37), make([]int32, 10+k*37)
		a.draw(da)
		b.draw(db)
		if !slices.Equal(da, db) {
			t.Fatalf("request %d: map and bitset strategies differ", k)
		}
	}
}

func TestSampleSetSize(t *testing.T) {
	// CPython: 21 + 4**ceil(log(3k, 4)) for k > 5.
	want := map[int]int{1: 21, 5: 21, 6: 85, 21: 85, 22: 277, 85: 277, 86: 1045, 1000: 4117,
		21845: 65557, 21846: 262165, 100000: 1048597}
	for k, w := range want {
		if got := sampleSetSize(k); got != w {
			t.Errorf("sampleSetSize(%d) = %d, want %d", k, got, w)
		}
	}
}

func TestNumpyLegacyNormal(t *testing.T) {
	// np.random.seed(0); np.random.rand(5) and np.random.randn(10).
	var g legacyGauss
	g.seed(0)
	for i, w := range []float64{0.5488135039273248, 0.7151893663724195, 0.6027633760716439, 0.5448831829968969, 0.4236547993389047} {
		if got := g.double(); got != w {
			t.Errorf("rand #%d = %v, want %v", i, got, w)
		}
	}
	g.seed(0)
	want := []float64{1.764052345967664, 0.4001572083672233, 0.9787379841057392, 2.240893199201458,
		1.8675579901499675, -0.977277879876411, 0.9500884175255894, -0.1513572082976979,
		-0.10321885179355784, 0.41059850193837233}
	for i, w := range want {
		if got := g.gauss(); got != w {
			t.Errorf("randn #%d = %v, want %v", i, got, w)
		}
	}
	// normal(loc, scale) is loc + scale*gauss with the same cached pairs.
	g.seed(0)
	if got := g.normal(100, 30); got != 100+30*1.764052345967664 {
		t.Errorf("normal(100, 30) = %v", got)
	}
}

func TestPCG64(t *testing.T) {
	// numpy/random/tests/data/pcg64-testset-{1,2}.csv: PCG64(seed).random_raw().
	cases := []struct {
		seed uint64
		want []uint64
	}{
		{0xdeadbeaf, []uint64{0x60d24054e17a0698, 0xd5e79d89856e4f12, 0xd254972fe64bd782, 0xf1e3072a53c72571, 0xd7c1d7393d4115c9}},
		{0, []uint64{0xa30febcfd9c2825f, 0x4510bdf882d9d721, 0xa7d3da94ecde8b8, 0x43b27b61342f01d, 0xd0327a782cde513b}},
	}
	for _, c := range cases {
		p := newPCG64(c.seed)
		for i, w := range c.want {
			if got := p.next64(); got != w {
				t.Errorf("seed %#x output %d = %#x, want %#x", c.seed, i, got, w)
			}
		}
	}
}

func TestDefaultRNGIntegers(t *testing.T) {
	// numpy's default_rng docstring: default_rng(12345).random() is
	// 0.22733602246716966; a fresh default_rng(12345).integers(low=0,
	// high=10, size=3) is [6, 2, 7].
	p := newPCG64(12345)
	if got := float64(p.next64()>>11) * (1.0 / 9007199254740992.0); got != 0.22733602246716966 {
		t.Errorf("random() = %v, want 0.22733602246716966", got)
	}
	p = newPCG64(12345)
	var got []int64
	for range 3 {
		got = append(got, p.integer(0, 9))
	}
	if want := []int64{6, 2, 7}; !slices.Equal(got, want) {
		t.Errorf("integers(0, 10, 3) = %v, want %v", got, want)
	}
	// default_rng(42).random(3), printed to 8 digits in the same docstring.
	p = newPCG64(42)
	for i, w := range []float64{0.77395605, 0.43887844, 0.85859792} {
		if got := float64(p.next64()>>11) * (1.0 / 9007199254740992.0); math.Abs(got-w) > 5e-9 {
			t.Errorf("default_rng(42).random() #%d = %v, want %v", i, got, w)
		}
	}
	// An empty range draws nothing; a 2^32-1 range takes raw words.
	p, q := newPCG64(7), newPCG64(7)
	if p.integer(5, 5) != 5 || p.next64() != q.next64() {
		t.Error("integers with lo == hi consumed a draw")
	}
	p, q = newPCG64(7), newPCG64(7)
	if got, want := p.integer(0, math.MaxUint32), int64(q.next32()); got != want {
		t.Errorf("full 32-bit range = %d, want raw word %d", got, want)
	}
}

func TestSeedSequencePool(t *testing.T) {
	// Seeds of one and two 32-bit words take different entropy lengths; both
	// must be deterministic and distinct from each other.
	a, b := newSeedSequence(1), newSeedSequence(1<<32|1)
	if a.pool == b.pool {
		t.Error("seeds 1 and 2^32+1 gave the same pool")
	}
	if *newSeedSequence(1) != *a {
		t.Error("SeedSequence is not deterministic")
	}
}

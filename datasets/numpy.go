package datasets

import (
	"math"
	"math/bits"
)

// This file reproduces the two numpy generators TensorRT-LLM's
// prepare_dataset.py draws request lengths from:
//   - np.random.seed(s); np.random.normal(loc, scale, n): the legacy global
//     RandomState, MT19937 seeded by init_genrand, Marsaglia's polar method;
//   - np.random.default_rng(s).integers(lo, hi+1, n): SeedSequence feeding
//     PCG64, bounded integers by Lemire's method on 32-bit draws.

// legacyGauss is numpy's RandomState normal generator. The polar method
// yields two normals per accepted pair; numpy returns the second and keeps
// the first for the next call, so the cache is part of the sequence.
type legacyGauss struct {
	mt     mt19937
	has    bool
	cached float64
}

// seed matches RandomState.seed(s) for 0 <= s < 2^32: init_genrand and a
// cleared gauss cache.
func (g *legacyGauss) seed(s uint32) {
	g.mt.seed(s)
	g.has = false
	g.cached = 0
}

// double is numpy's mt19937 next_double: 53 random bits from two words.
func (g *legacyGauss) double() float64 {
	a := g.mt.uint32() >> 5
	b := g.mt.uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) / 9007199254740992.0
}

// gauss is numpy's legacy_gauss. The explicit float64 conversions stop the Go
// compiler from fusing multiply-adds (it may on arm64, and on amd64 at
// GOAMD64=v3), which would change the last bit compared to numpy's C build.
//
// math.Log is not bit-identical to every C library's log (glibc's differs
// from it by one ulp for a few per cent of inputs, and glibc itself is not
// correctly rounded). A one-ulp change of the normal can only change a
// request length when mean + stdev*z lies within about 1e-13 of an integer,
// so lengths agree except with negligible probability.
func (g *legacyGauss) gauss() float64 {
	if g.has {
		v := g.cached
		g.has = false
		g.cached = 0
		return v
	}
	var x1, x2, r2 float64
	for {
		x1 = float64(2.0*g.double()) - 1.0
		x2 = float64(2.0*g.double()) - 1.0
		r2 = float64(x1*x1) + float64(x2*x2)
		if r2 < 1.0 && r2 != 0.0 {
			break
		}
	}
	f := math.Sqrt(float64(-2.0*math.Log(r2)) / r2)
	g.cached = float64(f * x1)
	g.has = true
	return float64(f * x2)
}

// normal is numpy's legacy_normal: loc + scale*gauss.
func (g *legacyGauss) normal(loc, scale float64) float64 {
	return loc + float64(scale*g.gauss())
}

// SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssPoolSize = 4
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
)

// seedSequence is numpy's SeedSequence for a non-negative integer entropy
// and no spawn key: the entropy is split into 32-bit words (least
// significant first, a single 0 word for 0), hashed into a 4-word pool.
type seedSequence struct {
	pool [ssPoolSize]uint32
}

func newSeedSequence(entropy uint64) *seedSequence {
	words := []uint32{uint32(entropy)}
	if hi := uint32(entropy >> 32); hi != 0 {
		words = append(words, hi)
	}
	ss := &seedSequence{}
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		return r ^ (r >> ssXShift)
	}
	for i := range ss.pool {
		var w uint32
		if i < len(words) {
			w = words[i]
		}
		ss.pool[i] = hashmix(w)
	}
	for src := range ss.pool {
		for dst := range ss.pool {
			if src != dst {
				ss.pool[dst] = mix(ss.pool[dst], hashmix(ss.pool[src]))
			}
		}
	}
	for src := ssPoolSize; src < len(words); src++ {
		for dst := range ss.pool {
			ss.pool[dst] = mix(ss.pool[dst], hashmix(words[src]))
		}
	}
	return ss
}

// generateState64 is generate_state(n, np.uint64): 2n 32-bit words cycled
// out of the pool, paired little-endian into 64-bit words.
func (ss *seedSequence) generateState64(n int) []uint64 {
	hashConst := uint32(ssInitB)
	out := make([]uint64, n)
	for i := 0; i < 2*n; i++ {
		v := ss.pool[i%ssPoolSize]
		v ^= hashConst
		hashConst *= ssMultB
		v *= hashConst
		v ^= v >> ssXShift
		out[i/2] |= uint64(v) << (32 * (i % 2))
	}
	return out
}

// PCG64's 128-bit LCG multiplier (PCG_DEFAULT_MULTIPLIER_128).
const (
	pcgMultHi = 2549297995355413924
	pcgMultLo = 4865540595714422341
)

// pcg64 is numpy's PCG64: a 128-bit LCG with the XSL-RR output function.
// next32 hands out the low half of a 64-bit draw first and keeps the high
// half for the next call, as numpy's pcg64_next32 does.
type pcg64 struct {
	hi, lo       uint64 // state
	incHi, incLo uint64 // odd increment
	has32        bool
	buf32        uint32
}

// newPCG64 is PCG64(seed): SeedSequence(seed).generate_state(4, uint64) gives
// the initial state (words 0, 1) and the stream (words 2, 3).
func newPCG64(seed uint64) *pcg64 {
	v := newSeedSequence(seed).generateState64(4)
	p := &pcg64{}
	// pcg_setseq_128_srandom_r: inc = (initseq << 1) | 1; state = 0;
	// step; state += initstate; step.
	p.incHi = v[2]<<1 | v[3]>>63
	p.incLo = v[3]<<1 | 1
	p.step()
	var carry uint64
	p.lo, carry = bits.Add64(p.lo, v[1], 0)
	p.hi, _ = bits.Add64(p.hi, v[0], carry)
	p.step()
	return p
}

// step advances the state: state = state*mult + inc (mod 2^128).
func (p *pcg64) step() {
	hi, lo := bits.Mul64(p.lo, pcgMultLo)
	hi += p.hi*pcgMultLo + p.lo*pcgMultHi
	var carry uint64
	p.lo, carry = bits.Add64(lo, p.incLo, 0)
	p.hi, _ = bits.Add64(hi, p.incHi, carry)
}

func (p *pcg64) next64() uint64 {
	p.step()
	return bits.RotateLeft64(p.hi^p.lo, -int(p.hi>>58))
}

func (p *pcg64) next32() uint32 {
	if p.has32 {
		p.has32 = false
		return p.buf32
	}
	v := p.next64()
	p.has32 = true
	p.buf32 = uint32(v >> 32)
	return uint32(v)
}

// integer is one draw of Generator.integers(lo, hi, endpoint=True) with
// numpy's default int64 dtype, i.e. random_bounded_uint64_fill with
// use_masked=false (Generator always uses Lemire's method): no draw at all
// for an empty range, 32-bit Lemire for ranges below 2^32-1, a raw 32-bit
// word for exactly 2^32-1, 64-bit Lemire above.
func (p *pcg64) integer(lo, hi int64) int64 {
	rng := uint64(hi) - uint64(lo)
	switch {
	case rng == 0:
		return lo
	case rng < 0xFFFFFFFF:
		return lo + int64(p.lemire32(uint32(rng)))
	case rng == 0xFFFFFFFF:
		return lo + int64(p.next32())
	case rng == math.MaxUint64:
		return lo + int64(p.next64())
	default:
		return lo + int64(p.lemire64(rng))
	}
}

// lemire32 returns a uniform value in [0, rng] from 32-bit draws, rejecting
// the biased low products (Lemire 2019, numpy's buffered_bounded_lemire_uint32).
func (p *pcg64) lemire32(rng uint32) uint32 {
	excl := rng + 1
	m := uint64(p.next32()) * uint64(excl)
	if leftover := uint32(m); leftover < excl {
		threshold := (math.MaxUint32 - rng) % excl
		for leftover < threshold {
			m = uint64(p.next32()) * uint64(excl)
			leftover = uint32(m)
		}
	}
	return uint32(m >> 32)
}

// lemire64 is the 64-bit counterpart (bounded_lemire_uint64).
func (p *pcg64) lemire64(rng uint64) uint64 {
	excl := rng + 1
	hi, leftover := bits.Mul64(p.next64(), excl)
	if leftover < excl {
		threshold := (math.MaxUint64 - rng) % excl
		for leftover < threshold {
			hi, leftover = bits.Mul64(p.next64(), excl)
		}
	}
	return hi
}

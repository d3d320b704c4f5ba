package model

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// MXFP4 experts (moe_weights mxfp4, Options.MXFP4): a MoE model's expert
// weights stay quantized on the device, as TensorRT-LLM and vLLM run
// GPT-OSS, and the expert GEMMs dequantize them as they read them
// (weights 4-bit, activations in the compute type, float32 accumulation).
//
// The format is OCP Microscaling's MXFP4, GPT-OSS's checkpoint layout: a
// row of K values is K/32 blocks; a block is 16 bytes of E2M1 codes, two a
// byte, the low nibble first (value 2i in the low nibble of byte i), and
// one E8M0 scale byte, 2^(s-127) (255 is NaN). An E2M1 code is a sign bit
// (bit 3) over the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. An Experts
// weight [E, N, K] is Blocks [E][N][K/2] and Scales [E][N][K/32]: 4.25
// bits a weight.
//
// Weights that are not MXFP4 already (the zoo's random weights, an
// unquantized checkpoint, a dequantized one) are quantized by
// QuantizeMXFP4Block, OCP's rule, identically on every backend: the random
// weights are quantized from their float32 values (RandomValue), where
// they are made. An MXFP4 checkpoint's blocks come through unchanged in
// value: requantizing a dequantized MXFP4 block by that rule gives back
// its values exactly (see QuantizeMXFP4Block), so the loader reads them
// through the one dequantizing path (MXFP4Source) and quantizes them again.

// MXFP4Block is how many values share an E8M0 scale.
const MXFP4Block = 32

// MXFP4BitsPerWeight is what an MXFP4 weight takes in memory: 4 bits of
// code and a byte of scale per 32 weights.
const MXFP4BitsPerWeight = 4.25

// fp4Magnitudes are the E2M1 codes' magnitudes (code & 7).
var fp4Magnitudes = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// FP4Value is the value of an E2M1 code (the low 4 bits of c).
func FP4Value(c byte) float32 {
	v := fp4Magnitudes[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// E8M0Scale is the multiplier of an E8M0 scale byte, 2^(s-127); 255 is
// NaN. 2^-127 is a float32 subnormal, exactly.
func E8M0Scale(s byte) float32 {
	if s == 255 {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(1, int(s)-127))
}

// MXFP4 is an Experts weight [E, N, K] in MXFP4 (K a multiple of 32).
type MXFP4 struct {
	Shape  []int
	Blocks []byte // E·N·K/2: codes, two a byte, low nibble first
	Scales []byte // E·N·K/32: E8M0
}

// CheckMXFP4Shape checks that shape is an Experts shape MXFP4 can hold.
func CheckMXFP4Shape(shape []int) error {
	if err := Experts.CheckShape(shape); err != nil {
		return err
	}
	if shape[2]%MXFP4Block != 0 {
		return fmt.Errorf("shape %v: MXFP4 needs rows of a multiple of %d values", shape, MXFP4Block)
	}
	return nil
}

// Check verifies that w's buffers fit its shape.
func (w MXFP4) Check() error {
	if err := CheckMXFP4Shape(w.Shape); err != nil {
		return err
	}
	n := numelOf(w.Shape)
	if len(w.Blocks) != n/2 || len(w.Scales) != n/MXFP4Block {
		return fmt.Errorf("MXFP4 %v: %d bytes of codes and %d scales, want %d and %d", w.Shape, len(w.Blocks), len(w.Scales), n/2, n/MXFP4Block)
	}
	return nil
}

func numelOf(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// fp4Code rounds a magnitude already divided by its block's scale (so at
// most just under 8) to the nearest E2M1 magnitude code, ties to the even
// code, saturating at 6. The thresholds are the midpoints, so the rule is
// a handful of comparisons that CUDA's kernel repeats exactly.
func fp4Code(a float32) byte {
	switch {
	case a <= 0.25:
		return 0
	case a < 0.75:
		return 1
	case a <= 1.25:
		return 2
	case a < 1.75:
		return 3
	case a <= 2.5:
		return 4
	case a < 3.5:
		return 5
	case a <= 5:
		return 6
	}
	return 7
}

// QuantizeMXFP4Block quantizes 32 values into 16 bytes of codes (dst) and
// returns the block's E8M0 scale: OCP's rule, scale 2^(floor(log2 amax) -
// 2) so that amax/scale is in [4, 8), each value/scale rounded to the
// nearest E2M1 value (ties to even, saturating at 6). The exponent is read
// from amax's bits: a block whose largest magnitude is 0 or subnormal gets
// 2^-127; one holding an infinity or NaN gets 255 (NaN).
//
// On a block that is MXFP4 already (c_i · 2^t) this is exact: amax ≤ 6 ·
// 2^t, so the new scale 2^u has u ≤ t, and each c_i · 2^(t-u) is below 8
// and, E2M1 being closed under doubling up to 6, representable.
func QuantizeMXFP4Block(dst []byte, v []float32) byte {
	v = v[:MXFP4Block]
	var amax float32
	nan := false
	for _, x := range v {
		a := float32(math.Abs(float64(x)))
		if a != a || a > math.MaxFloat32 {
			nan = true
		}
		amax = max(amax, a)
	}
	if nan {
		clear(dst[:16])
		return 255
	}
	// Biased exponent field less 2 is the scale's E8M0 byte (floor(log2
	// amax) - 2 + 127), at least 0.
	s := int(math.Float32bits(amax)>>23&0xff) - 2
	s = max(s, 0)
	inv := math.Float32frombits(uint32(254-s) << 23) // 2^(127-s), a normal float
	for i := range 16 {
		var b byte
		for h := range 2 {
			x := v[2*i+h]
			c := fp4Code(float32(math.Abs(float64(x))) * inv)
			if c != 0 && math.Signbit(float64(x)) {
				c |= 8
			}
			b |= c << (4 * h)
		}
		dst[i] = b
	}
	return byte(s)
}

// fp4Pairs are the two values of each code byte, low nibble first: the
// CPU's expert GEMMs dequantize every expert they run, so this is hot.
var fp4Pairs = func() (t [256][2]float32) {
	for b := range 256 {
		t[b] = [2]float32{FP4Value(byte(b) & 15), FP4Value(byte(b) >> 4)}
	}
	return t
}()

// DequantMXFP4Row expands the codes and scales of len(dst) values (a
// multiple of 32) into dst.
func DequantMXFP4Row(dst []float32, blocks, scales []byte) {
	for g := range len(dst) / MXFP4Block {
		mul := E8M0Scale(scales[g])
		out := dst[g*MXFP4Block : (g+1)*MXFP4Block]
		for i, b := range blocks[g*16 : g*16+16] {
			p := &fp4Pairs[b]
			out[2*i] = p[0] * mul
			out[2*i+1] = p[1] * mul
		}
	}
}

// Dequantize returns w's values, [E, N, K] flattened.
func (w MXFP4) Dequantize() []float32 {
	f := make([]float32, numelOf(w.Shape))
	DequantMXFP4Row(f, w.Blocks, w.Scales)
	return f
}

// mxfp4Chunk is how many blocks one goroutine of QuantizeMXFP4 takes.
const mxfp4Chunk = 1 << 14

// QuantizeMXFP4 quantizes an Experts weight's values f (flattened shape)
// block by block, in parallel.
func QuantizeMXFP4(shape []int, f []float32) (MXFP4, error) {
	if err := CheckMXFP4Shape(shape); err != nil {
		return MXFP4{}, err
	}
	if len(f) != numelOf(shape) {
		return MXFP4{}, fmt.Errorf("MXFP4 %v: %d values", shape, len(f))
	}
	w := MXFP4{Shape: append([]int(nil), shape...), Blocks: make([]byte, len(f)/2), Scales: make([]byte, len(f)/MXFP4Block)}
	parallelBlocks(len(w.Scales), func(lo, hi int) {
		for g := lo; g < hi; g++ {
			w.Scales[g] = QuantizeMXFP4Block(w.Blocks[16*g:], f[MXFP4Block*g:])
		}
	})
	return w, nil
}

// RandomMXFP4 is the random Experts weight (seed, scale) quantized:
// RandomValue's float32 values through QuantizeMXFP4Block, the weights
// every backend's MXFP4Experts.RandomMXFP4 makes.
func RandomMXFP4(shape []int, seed uint64, scale float32) (MXFP4, error) {
	if err := CheckMXFP4Shape(shape); err != nil {
		return MXFP4{}, err
	}
	n := numelOf(shape)
	w := MXFP4{Shape: append([]int(nil), shape...), Blocks: make([]byte, n/2), Scales: make([]byte, n/MXFP4Block)}
	parallelBlocks(len(w.Scales), func(lo, hi int) {
		var v [MXFP4Block]float32
		for g := lo; g < hi; g++ {
			RandomFill(v[:], seed, int64(g)*MXFP4Block, scale)
			w.Scales[g] = QuantizeMXFP4Block(w.Blocks[16*g:], v[:])
		}
	})
	return w, nil
}

// parallelBlocks runs f over [0, n) in chunks on all CPUs.
func parallelBlocks(n int, f func(lo, hi int)) {
	if n <= mxfp4Chunk {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += mxfp4Chunk {
		sem <- struct{}{}
		wg.Go(func() {
			f(lo, min(lo+mxfp4Chunk, n))
			<-sem
		})
	}
	wg.Wait()
}

// MXFP4Experts is implemented by backends that keep experts as MXFP4
// (moe_weights mxfp4). MoE and OSSMoE given MXFP4 gateUp and down weights
// dequantize them inside the expert GEMMs.
type MXFP4Experts interface {
	// RandomMXFP4 creates the Experts weight model.RandomMXFP4 makes,
	// where it lives.
	RandomMXFP4(name string, shape []int, seed uint64, scale float32) (Tensor, error)
	// UploadMXFP4 copies an MXFP4 Experts weight to the backend.
	UploadMXFP4(name string, w MXFP4) (Tensor, error)
}

// ErrNoMXFP4 is a model asked to keep MXFP4 experts on a backend without
// MXFP4Experts.
var ErrNoMXFP4 = errors.New("the backend has no MXFP4 expert kernels")

// mxfp4Check refuses what MXFP4 experts do not run with.
func (m *Model) mxfp4Check() error {
	c := m.full
	if !m.opt.MXFP4 {
		return nil
	}
	_, ok := m.be.(MXFP4Experts)
	switch {
	case !c.MoE():
		return fmt.Errorf("model %q: MXFP4 experts on a model without experts", c.Name)
	case !ok:
		return fmt.Errorf("model %q (%s): %w", c.Name, m.be.Name(), ErrNoMXFP4)
	case m.opt.FP8:
		return fmt.Errorf("model %q: MXFP4 experts with FP8 GEMMs (W4A8) are not supported", c.Name)
	case m.shard != nil:
		return fmt.Errorf("model %q: MXFP4 experts on a tensor- or expert-parallel split are not supported yet", c.Name)
	case c.FFN%MXFP4Block != 0 || c.Hidden%MXFP4Block != 0:
		return fmt.Errorf("model %q: MXFP4 experts need hidden (%d) and expert FFN (%d) sizes that are multiples of %d", c.Name, c.Hidden, c.FFN, MXFP4Block)
	}
	return nil
}

// experts creates a stacked Experts weight [E, N, K] (random with variance
// gain²/K, as matrix): MXFP4 with Options.MXFP4, else matrix's (qmatrix's
// when quantized; FP8 applies to the experts of other models only).
func (l *loader) experts(name string, shape []int, gain float64, fp8 bool) Tensor {
	if !l.m.opt.MXFP4 {
		if fp8 {
			return l.qmatrix(name, Experts, shape, gain)
		}
		return l.matrix(name, Experts, shape, gain)
	}
	if l.err != nil {
		return nil
	}
	scale := gain * math.Sqrt(3/float64(shape[2]))
	t, err := l.m.be.(MXFP4Experts).RandomMXFP4(name, shape, WeightSeed(l.m.opt.Seed, name), float32(scale))
	if err != nil {
		l.err = fmt.Errorf("weight %s: %w", name, err)
	}
	return t
}

// uploadExperts uploads a checkpoint's stacked experts h [E, N, K]: as
// MXFP4 with Options.MXFP4 (quantized on the host, a chunk of rows at a
// time), else through up.
func (l *loader) uploadExperts(name string, h HostTensor, up func(string, WeightKind, HostTensor) Tensor) Tensor {
	if !l.m.opt.MXFP4 {
		return up(name, Experts, h)
	}
	if l.err != nil {
		return nil
	}
	w, err := hostMXFP4(h)
	if err != nil {
		l.err = &WeightError{File: l.m.opt.Weights.Where(name), Tensor: name, Msg: err.Error()}
		return nil
	}
	t, err := l.m.be.(MXFP4Experts).UploadMXFP4(name, w)
	if err != nil {
		l.err = fmt.Errorf("weight %s: %w", name, err)
	}
	return t
}

// hostMXFP4 quantizes a host tensor of experts, converting at most
// mxfp4HostRows rows to float32 at once (a whole layer's experts in
// float32 would be gigabytes).
func hostMXFP4(h HostTensor) (MXFP4, error) {
	if err := CheckMXFP4Shape(h.Shape); err != nil {
		return MXFP4{}, err
	}
	if h.DType == "F8_E4M3" {
		// Per-row scales do not slice with the bytes; FP8 experts are
		// rare enough to convert whole.
		f, err := h.Float32()
		if err != nil {
			return MXFP4{}, err
		}
		return QuantizeMXFP4(h.Shape, f)
	}
	es := DTypeSize(h.DType)
	if es == 0 {
		return MXFP4{}, fmt.Errorf("dtype %s cannot be quantized to MXFP4", h.DType)
	}
	E, N, K := h.Shape[0], h.Shape[1], h.Shape[2]
	rows := E * N
	if len(h.Data) != rows*K*es {
		return MXFP4{}, fmt.Errorf("%d bytes for %v %s", len(h.Data), h.Shape, h.DType)
	}
	w := MXFP4{Shape: append([]int(nil), h.Shape...), Blocks: make([]byte, rows*K/2), Scales: make([]byte, rows*K/MXFP4Block)}
	step := max(1, mxfp4HostValues/K)
	for r0 := 0; r0 < rows; r0 += step {
		r1 := min(r0+step, rows)
		part := HostTensor{Shape: []int{r1 - r0, K}, DType: h.DType, Data: h.Data[r0*K*es : r1*K*es]}
		f, err := part.Float32()
		if err != nil {
			return MXFP4{}, err
		}
		q, err := QuantizeMXFP4([]int{1, r1 - r0, K}, f)
		if err != nil {
			return MXFP4{}, err
		}
		copy(w.Blocks[r0*K/2:], q.Blocks)
		copy(w.Scales[r0*K/MXFP4Block:], q.Scales)
	}
	return w, nil
}

// mxfp4HostValues bounds the float32 values hostMXFP4 holds at once (a
// variable for tests).
var mxfp4HostValues = 1 << 24

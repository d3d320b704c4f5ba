//go:build cgo && linux

package cuda

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestGemmFused checks the decode GEMV with its neighbours folded in
// against the CPU, each intermediate rounded to the dtype as the unfused
// kernels store it: SwiGLU behind gate_up (GLU), RMSNorm in front (Norm,
// with and without writing the normalised rows out), both, the residual
// add behind (Residual), and the norm's rows gathered from an embedding
// table, some through fed picks (Gather). Shapes: TinyLlama's MLP and QKV,
// a ragged N (the last warp covers fewer outputs) and the smallest. Each case
// runs the kernel the plan picks (through GemmFused) and then every other
// instantiation for its M (rows per warp, loads in flight), on the same
// inputs, each output poisoned afresh.
func TestGemmFused(t *testing.T) {
	type fusion struct {
		name           string
		glu, norm, res bool
		writeX, gather bool
	}
	fusions := []fusion{
		{name: "plain"},
		{name: "glu", glu: true},
		{name: "norm", norm: true, writeX: true},
		{name: "norm-noout", norm: true},
		{name: "embnorm", norm: true, writeX: true, gather: true},
		{name: "embnorm-noout", norm: true, gather: true},
		{name: "normglu", norm: true, glu: true, writeX: true},
		{name: "res", res: true},
	}
	testGPU(t) // skips without one, before the weights are drawn
	r := newRand(t)
	for _, dt := range dtypes {
		// 32000 x 2048: TinyLlama's LM head, which takes the final norm
		// into its prologue at decode.
		for _, c := range []struct{ n, k int }{{32000, 2048}, {5632, 2048}, {2560, 2048}, {100, 40}, {8, 8}} {
			// One random W a shape (2n rows under SwiGLU) for all its
			// cases: drawing it afresh for each was half the test's time.
			ws := map[bool][]float32{}
			for _, fz := range fusions {
				if c.n == 32000 && (!fz.norm || fz.glu || fz.gather) {
					continue
				}
				if ws[fz.glu] == nil {
					ws[fz.glu] = randVals(r, dt, gemmWRows(c.n, fz.glu)*c.k, 0.5)
				}
				for _, m := range []int{1, 2, 3, 4, 8} {
					t.Run(fmt.Sprintf("%s/%s/M%d_N%d_K%d", dt, fz.name, m, c.n, c.k), func(t *testing.T) {
						do(t, func(t testing.TB, g *GPU) {
							checkGemmFused(t, g, dt, m, c.n, c.k, ws[fz.glu], fusedCase{fz.glu, fz.norm, fz.res, fz.writeX, fz.gather})
						})
					})
				}
			}
		}
	}
}

// gemmWRows is how many rows a GEMM's W has: n, or gate and up under glu.
func gemmWRows(n int, glu bool) int {
	if glu {
		return 2 * n
	}
	return n
}

// rowsOf views w as rows of k values.
func rowsOf(w []float32, k int) [][]float32 {
	rows := make([][]float32, len(w)/k)
	for j := range rows {
		rows[j] = w[j*k : (j+1)*k]
	}
	return rows
}

// gemvKernelsFor lists every gemv instantiation that takes m rows.
func gemvKernelsFor(m int, glu bool) []gemvKernel {
	mt := 1
	for mt < m {
		mt *= 2
	}
	var ks []gemvKernel
	for _, r := range []int{1, 2, 4} {
		for _, l := range []int{8, 16} {
			if c := (gemvKernel{mt, r, l}); gemvHas(c, glu) {
				ks = append(ks, c)
			}
		}
	}
	return ks
}

// randGemmOperands is a random m x k X and W, n rows (2n, gate then up,
// under glu) of k values, with W's rows as slices of it.
func randGemmOperands(r *rand.Rand, dt DType, m, n, k int, glu bool) (xin, wv []float32, wRows [][]float32) {
	xin = randVals(r, dt, m*k, 1)
	wv = randVals(r, dt, gemmWRows(n, glu)*k, 0.5)
	return xin, wv, rowsOf(wv, k)
}

// fusedCase is what checkGemmFused folds in: SwiGLU, the norm, the
// residual add, the normalised rows written out, the embedding gather.
type fusedCase struct{ glu, norm, res, writeX, gather bool }

// checkGemmFused checks fc's fusion at m x n x k on a random X and the W
// values wv (n rows, or 2n under glu, of k).
func checkGemmFused(t testing.TB, g *GPU, dt DType, m, n, k int, wv []float32, fc fusedCase) {
	glu, norm, res, writeX := fc.glu, fc.norm, fc.res, fc.writeX
	r := newRand(t)
	xin, wRows := randVals(r, dt, m*k, 1), rowsOf(wv, k)
	gemmIn := xin // the rows the GEMM multiplies
	fu := GemvFusion{GLU: glu, Residual: res}
	x := devUpload(t, g, dt, xin)
	wb := devUpload(t, g, dt, wv)
	var gather *GemvGather
	var raw []float32 // the gathered rows
	if fc.gather {
		// X's rows become table rows: row m is id vocab - 1 - m, every
		// other row through a fed pick (ids -1 - j read fed[j]).
		const vocab = 11
		table := randVals(r, dt, vocab*k, 1)
		ids, fed := make([]int32, m), make([]int32, m)
		for i := range ids {
			id := int32(vocab - 1 - i%vocab)
			copy(xin[i*k:(i+1)*k], table[int(id)*k:(int(id)+1)*k])
			ids[i] = id
			if i%2 == 1 {
				fed[i], ids[i] = id, int32(-1-i)
			}
		}
		gather = &GemvGather{Table: devUpload(t, g, dt, table), IDs: devUploadT(t, g, ids), Fed: devUploadT(t, g, fed),
			NFed: m, Vocab: vocab}
	}
	if norm {
		nw := randVals(r, dt, k, 2)
		fu.Norm = &GemvNorm{Residual: x, Weight: devUpload(t, g, dt, nw), Eps: 1e-5, Gather: gather}
		if gather != nil {
			fu.Norm.Residual = Buffer{}
		}
		raw = append([]float32(nil), xin...)
		normed := make([]float32, m*k)
		cpu.RefRMSNorm(normed, xin, nw, m, k, 1e-5)
		// The fused kernel multiplies the normalised rows unrounded
		// (gemv.cu, NORM) and writes them to XO rounded. A reference
		// GEMM of the rounded rows failed 2-3.5 % of random bf16 draws at
		// N = K = 8 (relative error up to 0.024; bound 0.01) in a CPU
		// emulation of the kernel; of the unrounded rows, none of 60,000
		// (at most 0.005).
		xin, gemmIn = dt.Decode(dt.Encode(normed)), normed
		x = Buffer{}
	}
	ref := refGemmCols(gemmIn, wRows, m, k)
	if glu {
		gu := dt.Decode(dt.Encode(ref))
		ref = make([]float32, m*n)
		cpu.RefSwiGLU(ref, gu, m, n)
	}
	var y0 []float32
	if res {
		y0 = randVals(r, dt, m*n, 4)
		ref = dt.Decode(dt.Encode(ref))
		for i := range ref {
			ref[i] += y0[i]
		}
	}
	plan := g.gemvPlan(dt, m, n, k, fu)
	t.Logf("plan: %s", gemvName(fu.suffix(), dt, plan))
	kernels := []gemvKernel{{}} // the zero value: the plan's, through GemmFused
	for _, c := range gemvKernelsFor(m, glu) {
		if c != plan {
			kernels = append(kernels, c)
		}
	}
	for _, c := range kernels {
		name := gemvName(fu.suffix(), dt, c)
		if c == (gemvKernel{}) {
			name = "plan " + gemvName(fu.suffix(), dt, plan)
		}
		var y, xo Buffer
		if res {
			y = devUpload(t, g, dt, y0)
		} else {
			y = devPoisoned(t, g, dt, m*n)
		}
		if writeX {
			xo = devPoisoned(t, g, dt, m*k)
			fu.Norm.Out = xo
		}
		if gather != nil {
			gather.Hidden = devPoisoned(t, g, dt, m*k)
		}
		var err error
		if c == (gemvKernel{}) {
			err = g.GemmFused(g.Stream, dt, y, x, wb, m, n, k, fu)
		} else {
			err = g.gemvOn(g.Stream, dt, y, x, wb, m, n, k, fu, c)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkRel(t, name+": fused gemv", download(t, g, dt, y, m*n), ref)
		if writeX {
			checkRel(t, name+": normalised rows", download(t, g, dt, xo, m*k), xin)
		}
		if gather != nil {
			checkRel(t, name+": gathered rows", download(t, g, dt, gather.Hidden, m*k), raw)
		}
	}
}

// TestGemvKernels checks, without a GPU, that gemvHas names exactly the
// kernels gemv.cu instantiates, and that every plan gemvChoose can return
// is one of them: a missing name would only fail on a GPU.
func TestGemvKernels(t *testing.T) {
	src, err := kernelSource("gemv")
	if err != nil {
		t.Fatal(err)
	}
	block := func(name string) string {
		i := strings.Index(src, "#define "+name+"(")
		if i < 0 {
			t.Fatalf("gemv.cu: no %s", name)
		}
		rest := src[i+len("#define "):]
		if j := strings.Index(rest, "#define "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	inst := func(body string) map[gemvKernel]bool {
		ks := map[gemvKernel]bool{}
		for _, m := range regexp.MustCompile(`GEMVK\(T, MODE, SUF, (\d+), (\d+)\)`).FindAllStringSubmatch(body, -1) {
			mt, _ := strconv.Atoi(m[1])
			r, _ := strconv.Atoi(m[2])
			ks[gemvKernel{mt, r, 8}] = true
		}
		for _, m := range regexp.MustCompile(`GEMVK16\(T, MODE, SUF, (\d+)\)`).FindAllStringSubmatch(body, -1) {
			r, _ := strconv.Atoi(m[1])
			ks[gemvKernel{1, r, 16}] = true
		}
		return ks
	}
	for _, glu := range []bool{false, true} {
		name := "GEMV_ROWS"
		if glu {
			name = "GEMV_ROWS_GLU"
		}
		have := inst(block(name))
		if len(have) == 0 {
			t.Fatalf("%s: no instantiations found", name)
		}
		for _, mt := range []int{1, 2, 4, 8, 16} {
			for _, r := range []int{1, 2, 4, 8} {
				for _, l := range []int{4, 8, 16, 32} {
					c := gemvKernel{mt, r, l}
					if gemvHas(c, glu) != have[c] {
						t.Errorf("%s: gemvHas(%+v) = %v, instantiated: %v", name, c, gemvHas(c, glu), have[c])
					}
				}
			}
		}
		for m := 1; m <= GemvMaxM; m++ {
			for _, n := range []int{8, 100, 2048, 2560, 5632, 32000, 128256} {
				for _, regs := range []int{32, 64, 100, 128, 168, 255} {
					c := gemvChoose(m, n, 2048, 132, glu, func(gemvKernel) (int, bool) { return regs, true })
					if !gemvHas(c, glu) {
						t.Errorf("%s M=%d N=%d regs %d: plan %+v is not instantiated", name, m, n, regs, c)
					}
				}
			}
		}
	}
}

// TestGemvChoose pins the plan on TinyLlama-1.1B's decode shapes at M = 1
// with register counts as ptxas reported them (sm_80, NVRTC 11.8): only the
// QKV projection with its norm changes (R = 1 in two waves -> R = 2 with
// 16 loads a lane in one); the others are already one round in one wave
// (o) or cannot be (gate_up, down, LM head: large, bandwidth-bound).
func TestGemvChoose(t *testing.T) {
	regs := map[string]map[gemvKernel]int{
		"":         {{1, 1, 8}: 92, {1, 2, 8}: 62, {1, 4, 8}: 64, {1, 2, 16}: 128, {1, 4, 16}: 96},
		"_norm":    {{1, 1, 8}: 124, {1, 2, 8}: 96, {1, 4, 8}: 72, {1, 2, 16}: 155, {1, 4, 16}: 124},
		"_res":     {{1, 1, 8}: 92, {1, 2, 8}: 62, {1, 4, 8}: 64, {1, 2, 16}: 126, {1, 4, 16}: 96},
		"_normglu": {{1, 1, 8}: 80, {1, 2, 8}: 70, {1, 1, 16}: 160, {1, 2, 16}: 118},
	}
	for _, c := range []struct {
		name    string
		mode    string
		n, k    int
		want    gemvKernel
		wantOld gemvKernel
	}{
		{"qkv+norm", "_norm", 2560, 2048, gemvKernel{1, 2, 16}, gemvKernel{1, 1, 8}},
		{"o+residual", "_res", 2048, 2048, gemvKernel{1, 1, 8}, gemvKernel{1, 1, 8}},
		{"gate_up+norm+swiglu", "_normglu", 5632, 2048, gemvKernel{1, 1, 8}, gemvKernel{1, 1, 8}},
		{"down+residual", "_res", 2048, 5632, gemvKernel{1, 1, 8}, gemvKernel{1, 1, 8}},
		{"lm_head+norm", "_norm", 32000, 2048, gemvKernel{1, 4, 8}, gemvKernel{1, 4, 8}},
		{"llama3.2-1b qkv+norm", "_norm", 3072, 2048, gemvKernel{1, 2, 16}, gemvKernel{1, 1, 8}},
		{"qkv plain", "", 2560, 2048, gemvKernel{1, 1, 8}, gemvKernel{1, 1, 8}},
	} {
		glu := strings.HasSuffix(c.mode, "glu")
		got := gemvChoose(1, c.n, c.k, 132, glu, func(k gemvKernel) (int, bool) {
			v, ok := regs[c.mode][k]
			return v, ok
		})
		if got != c.want {
			t.Errorf("%s: plan %+v, want %+v", c.name, got, c.want)
		}
		mt, r := gemvPlanFixed(1, c.n, 132, glu)
		if old := (gemvKernel{mt, r, 8}); old != c.wantOld {
			t.Errorf("%s: fixed plan %+v, want %+v", c.name, old, c.wantOld)
		}
	}
}

// TestRopeKV checks the fused RoPE + cache write against engine/cpu's
// RefRoPE: the rotated QKV rows (values untouched) and every cache
// position written (rotated keys, values), on a poisoned cache.
func TestRopeKV(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			name string
			cfg  model.Config
		}{
			{"tinyllama", model.Config{Heads: 32, KVHeads: 4, HeadDim: 64, RopeTheta: 10000}},
			{"llama3.1-8b", model.Config{Heads: 32, KVHeads: 8, HeadDim: 128, RopeTheta: 500000}},
			{"tiny", model.Config{Heads: 4, KVHeads: 2, HeadDim: 16, RopeTheta: 10000}},
		} {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					a := AttnShape{Heads: c.cfg.Heads, KVHeads: c.cfg.KVHeads, HeadDim: c.cfg.HeadDim}
					h := model.HeadLayout{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim}
					const tokens, slots, capacity = 23, 5, 64
					W, D, KV := a.Width(), a.HeadDim, a.KVHeads
					table := model.RopeTable(c.cfg, capacity)
					pos, slot := make([]int32, tokens), make([]int32, tokens)
					for i := range pos { // distinct (slot, position) pairs
						slot[i], pos[i] = int32(i%slots), int32(i/slots*3+r.IntN(3))
					}
					qkv := randVals(r, dt, tokens*W, 2)
					buf := devUpload(t, g, dt, qkv)
					kc, vc := devPoisoned(t, g, dt, slots*KV*capacity*D), devPoisoned(t, g, dt, slots*KV*capacity*D)
					if err := g.RopeKV(g.Stream, dt, kc, vc, buf, devUploadT(t, g, pos), devUploadT(t, g, slot), devUploadT(t, g, table),
						tokens, capacity, a); err != nil {
						t.Fatal(err)
					}
					qw := h.Heads * D
					cpu.RefRoPE(qkv, pos, table, tokens, W, h.Heads, D)
					cpu.RefRoPE(qkv[qw:], pos, table, tokens, W, h.KVHeads, D)
					checkRel(t, "qkv", download(t, g, dt, buf, tokens*W), qkv)
					kAll, vAll := download(t, g, dt, kc, slots*KV*capacity*D), download(t, g, dt, vc, slots*KV*capacity*D)
					var kGot, vGot, kRef, vRef []float32
					for i := range tokens {
						for hh := range KV {
							at := ((int(slot[i])*KV+hh)*capacity + int(pos[i])) * D
							kGot = append(kGot, kAll[at:at+D]...)
							vGot = append(vGot, vAll[at:at+D]...)
							kRef = append(kRef, qkv[i*W+qw+hh*D:i*W+qw+(hh+1)*D]...)
							vRef = append(vRef, qkv[i*W+qw+KV*D+hh*D:i*W+qw+KV*D+(hh+1)*D]...)
						}
					}
					checkRel(t, "cached keys", kGot, kRef)
					checkRel(t, "cached values", vGot, vRef)
				})
			})
		}
	}
}

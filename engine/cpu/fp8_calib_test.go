package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestCalibrateFP8: while calibrating, a GEMM whose input is dynamic per
// tensor still quantizes dynamically and keeps its inputs' largest amax;
// ending the calibration gives it fp8.Scale of that amax as its static
// input scale, which its GEMMs then use. A static scale, per-token
// inputs, a weight that saw no input and expert stacks are left as they
// were.
func TestCalibrateFP8(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const rows, n, k = 9, 24, 40
	const E, K, F = 4, 2, 16
	for _, gemm := range []string{GemmAuto, GemmDisable} {
		b := newBackend(t, gemm, 2)
		quantized := func(name string) (model.Tensor, []float32) {
			w := randF(r, n*k)
			wt, err := b.Upload(name, model.Matrix, model.HostF32([]int{n, k}, w))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.QuantizeFP8(wt); err != nil {
				t.Fatal(err)
			}
			return wt, w
		}
		dyn, dynW := quantized("dyn")
		idle, _ := quantized("idle")
		upload := func(name string, kind model.WeightKind, h model.HostTensor) model.Tensor {
			wt, err := b.Upload(name, kind, h)
			if err != nil {
				t.Fatal(err)
			}
			return wt
		}
		hs, _, _ := fp8Host(r, []int{n, k}, 0.01, false)
		static := upload("static", model.Matrix, hs)
		ht, _, _ := fp8Host(r, []int{n, k}, 0, true)
		tok := upload("tok", model.Matrix, ht)
		hgu, _, _ := fp8Host(r, []int{E, 2 * F, k}, 0, false)
		hdn, _, _ := fp8Host(r, []int{E, k, F}, 0, false)
		gu, dn := upload("gu", model.Experts, hgu), upload("dn", model.Experts, hdn)
		// An expert stack quantized on the backend, as random experts are.
		rgu, err := b.Random("rgu", model.Experts, []int{E, 2 * F, k}, 3, 0.2)
		if err != nil {
			t.Fatal(err)
		}
		rdn, _ := b.Random("rdn", model.Experts, []int{E, k, F}, 4, 0.2)
		b.QuantizeFP8(rgu)
		b.QuantizeFP8(rdn)

		xt, _ := b.Alloc("x", model.Float, rows, k)
		ot, _ := b.Alloc("o", model.Float, rows, n)
		lt, _ := b.Alloc("l", model.Float, rows, E)
		it, _ := b.Alloc("i", model.Int32, rows, K)
		wt, _ := b.Alloc("w", model.Float, rows, K)
		mo, _ := b.Alloc("mo", model.Float, rows, k)
		got, want := make([]float32, rows*n), make([]float32, rows*n)
		codes, ws := codesOf(dynW)
		if err := b.CalibrateFP8(true); err != nil {
			t.Fatal(err)
		}
		var amax float32
		for i, gain := range []float32{1, 3, 0.5} {
			x := randF(r, rows*k)
			for j := range x {
				x[j] *= gain
			}
			amax = max(amax, fp8.AbsMax(x))
			b.WriteFloat32(xt, x)
			b.WriteFloat32(lt, randF(r, rows*E))
			for _, w := range []model.Tensor{dyn, static, tok} {
				b.MatMul(ot, xt, w, rows)
			}
			b.Route(it, wt, lt, nil, 0, rows, K, model.RoutingSoftmaxTopKRenorm, nil, 0)
			b.MoE(mo, xt, it, wt, gu, dn, rows, K)
			b.MoE(mo, xt, it, wt, rgu, rdn, rows, K)
			if i == 1 {
				// Still dynamic while calibrating.
				b.MatMul(ot, xt, dyn, rows)
				b.ReadFloat32(got, ot, rows)
				q, sx := RefFP8Input(x, rows, k, 0, false)
				RefFP8GEMM(want, q, sx, codes, []float32{ws}, rows, n, k)
				if e := RelErr(got, want); e > 1e-6 {
					t.Errorf("gemm=%s: while calibrating, rel err %g against the dynamic reference", gemm, e)
				}
			}
		}
		if err := b.CalibrateFP8(false); err != nil {
			t.Fatal(err)
		}
		if s := ft(dyn).q.input; s != fp8.Scale(amax) {
			t.Errorf("gemm=%s: calibrated input scale %v, want fp8.Scale(%v) = %v", gemm, s, amax, fp8.Scale(amax))
		}
		for _, c := range []struct {
			name     string
			w        model.Tensor
			input    float32
			perToken bool
		}{{"idle", idle, 0, false}, {"static", static, 0.01, false}, {"per token", tok, 0, true},
			{"checkpoint gate_up", gu, 0, false}, {"checkpoint down", dn, 0, false}, {"quantized gate_up", rgu, 0, false}, {"quantized down", rdn, 0, false}} {
			if q := ft(c.w).q; q.input != c.input || q.perToken != c.perToken {
				t.Errorf("gemm=%s: %s after calibration: input %v per token %v, want %v %v", gemm, c.name, q.input, q.perToken, c.input, c.perToken)
			}
		}
		// The GEMM quantizes with the static scale from now on: an input
		// whose own amax is larger saturates.
		x := randF(r, rows*k)
		for j := range x {
			x[j] *= 5
		}
		b.WriteFloat32(xt, x)
		b.MatMul(ot, xt, dyn, rows)
		if err := b.ReadFloat32(got, ot, rows); err != nil {
			t.Fatal(err)
		}
		q, sx := RefFP8Input(x, rows, k, fp8.Scale(amax), false)
		RefFP8GEMM(want, q, sx, codes, []float32{ws}, rows, n, k)
		if e := RelErr(got, want); e > 1e-6 {
			t.Errorf("gemm=%s: after calibration, rel err %g against the static reference", gemm, e)
		}
		// A calibration that sees nothing changes nothing.
		b.CalibrateFP8(true)
		b.CalibrateFP8(false)
		if s := ft(dyn).q.input; s != fp8.Scale(amax) {
			t.Errorf("gemm=%s: an empty calibration changed the scale to %v", gemm, s)
		}
	}
}

// calibRecorder is the CPU backend recording what calibration computes
// from: per FP8 GEMM weight, the largest amax of the inputs its MatMuls saw
// while calibrating, and the weights it quantized and the embedding.
type calibRecorder struct {
	*Backend
	on      bool
	calls   int
	amax    map[string]float32
	weights map[string]*tensor
	embed   *tensor
	ln1     *tensor // layer 0's input norm weight
}

func newCalibRecorder(t *testing.T) *calibRecorder {
	return &calibRecorder{Backend: newBackend(t, GemmAuto, 2), amax: map[string]float32{}, weights: map[string]*tensor{}}
}

func (c *calibRecorder) CalibrateFP8(on bool) error {
	c.on = on
	c.calls++
	return c.Backend.CalibrateFP8(on)
}

func (c *calibRecorder) MatMul(out, x, w model.Tensor, rows int) {
	if wt := ft(w); c.on && wt.q != nil {
		c.amax[wt.name] = max(c.amax[wt.name], fp8.AbsMax(ft(x).f[:rows*wt.shape[1]]))
	}
	c.Backend.MatMul(out, x, w, rows)
}

func (c *calibRecorder) QuantizeFP8(w model.Tensor) (model.Tensor, error) {
	q, err := c.Backend.QuantizeFP8(w)
	if err == nil {
		c.weights[ft(q).name] = ft(q)
	}
	return q, err
}

func (c *calibRecorder) Random(name string, kind model.WeightKind, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	t, err := c.Backend.Random(name, kind, shape, seed, scale)
	if err == nil && name == "model.embed_tokens.weight" {
		c.embed = ft(t)
	}
	return t, err
}

func (c *calibRecorder) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	t, err := c.Backend.Upload(name, kind, h)
	if err == nil && name == "model.layers.0.input_layernorm.weight" {
		c.ln1 = ft(t)
	}
	return t, err
}

func calibShapes() []model.Config {
	dense := model.Config{Name: "tiny-llama", Family: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 160,
		Vocab: 512, DatasetVocab: 500, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096}
	moe := dense
	moe.Name, moe.Family, moe.FFN, moe.Experts, moe.TopK, moe.Routing = "tiny-moe", "mixtral", 96, 4, 2, model.RoutingSoftmaxTopKRenorm
	moe.MaxPos = 100 // the calibration sequence is the model's positions long
	return []model.Config{dense, moe}
}

// TestCalibrateFP8Model: a model of random weights in FP8 (auto or static)
// is calibrated at load: every Matrix weight's static input scale is
// fp8.Scale of the largest amax its GEMM saw in the calibration pass, the
// first one's is that of the first layer's normed embeddings of the
// calibration tokens, computed here by hand, and expert stacks stay
// dynamic. Under dynamic nothing is calibrated. The calibration leaves
// nothing for the run: no KV cache, no expert counts, and uniform routing
// draws the same assignments as a model that was not calibrated.
func TestCalibrateFP8Model(t *testing.T) {
	for _, cfg := range calibShapes() {
		for _, acts := range []model.FP8Activations{model.FP8ActAuto, model.FP8ActStatic, model.FP8ActDynamic} {
			rec := newCalibRecorder(t)
			m, err := model.New(rec, cfg, model.Options{Seed: 5, FP8: true, FP8Activations: acts, Routing: model.Routing{Mode: model.Uniform}})
			if err != nil {
				t.Fatal(err)
			}
			name := cfg.Name + "/" + acts.String()
			if acts == model.FP8ActDynamic {
				if rec.calls != 0 {
					t.Errorf("%s: calibrated (%d calls)", name, rec.calls)
				}
				for n, w := range rec.weights {
					if w.q.input != 0 {
						t.Errorf("%s: %s has the static input scale %v", name, n, w.q.input)
					}
				}
				continue
			}
			if rec.calls != 2 {
				t.Errorf("%s: %d CalibrateFP8 calls, want 2", name, rec.calls)
			}
			matrices := 0
			for n, w := range rec.weights {
				if w.q.experts {
					if w.q.input != 0 || !strings.Contains(n, "experts") {
						t.Errorf("%s: expert stack %s has the input scale %v, want dynamic", name, n, w.q.input)
					}
					continue
				}
				matrices++
				a, ok := rec.amax[n]
				if !ok || w.q.input != fp8.Scale(a) || w.q.input <= 0 {
					t.Errorf("%s: %s's input scale %v, want fp8.Scale(%v) (seen: %v)", name, n, w.q.input, a, ok)
				}
			}
			if want := 2 * cfg.Layers; cfg.MoE() && matrices != want || !cfg.MoE() && matrices != 2*want {
				t.Errorf("%s: %d Matrix weights calibrated", name, matrices)
			}
			// By hand: RMSNorm (layer 0's weight) of the calibration
			// tokens' embeddings, in float64.
			if rec.ln1 == nil {
				t.Fatalf("%s: layer 0's input norm weight was not uploaded", name)
			}
			L := min(256, cfg.MaxPos)
			ids := model.CalibrationTokens(L, cfg.DatasetVocab)
			var amax float64
			H := cfg.Hidden
			for _, id := range ids {
				if int(id) >= cfg.DatasetVocab {
					t.Fatalf("%s: token %d beyond the base vocabulary", name, id)
				}
				row := rec.embed.f[int(id)*H : (int(id)+1)*H]
				var ss float64
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(H)+cfg.RMSEps)
				for j, v := range row {
					amax = max(amax, math.Abs(float64(v)*inv*float64(rec.ln1.f[j])))
				}
			}
			qkv := "model.layers.0.self_attn.qkv_proj.weight"
			if got := float64(rec.weights[qkv].q.input); math.Abs(got/(amax/448)-1) > 1e-5 {
				t.Errorf("%s: %s's input scale %v, want %v from the normed embeddings", name, qkv, got, amax/448)
			}
			// Nothing of the calibration is left for the run.
			if err := m.Forward(batchOf(1, 4, 0)); !errors.Is(err, model.ErrCapacity) {
				t.Errorf("%s: Forward before Reserve: %v, want ErrCapacity (the calibration's KV cache dropped)", name, err)
			}
			if cfg.MoE() {
				counts := make([]int32, cfg.Layers*cfg.Experts)
				m.ExpertCounts(counts)
				for _, c := range counts {
					if c != 0 {
						t.Errorf("%s: expert counts %v after load", name, counts)
						break
					}
				}
			}
			ref, err := model.New(newBackend(t, GemmAuto, 2), cfg, model.Options{Seed: 5, FP8: true, FP8Activations: model.FP8ActDynamic, Routing: model.Routing{Mode: model.Uniform}})
			if err != nil {
				t.Fatal(err)
			}
			for _, mm := range []*model.Model{m, ref} {
				// Smaller than the calibration's capacity, then larger.
				for _, c := range []model.Capacity{{MaxTokens: 6, MaxLogitRows: 2, Slots: 2, MaxLen: 10}, {MaxTokens: 300, MaxLogitRows: 3, Slots: 3, MaxLen: 320}} {
					if err := mm.Reserve(c); err != nil {
						t.Fatal(err)
					}
					if err := mm.Forward(batchOf(2, c.MaxTokens/2, c.MaxLen-c.MaxTokens/2)); err != nil {
						t.Fatalf("%s: %+v: %v", name, c, err)
					}
				}
			}
			if cfg.MoE() {
				a, b := make([]int32, cfg.Layers*cfg.Experts), make([]int32, cfg.Layers*cfg.Experts)
				m.ExpertCounts(a)
				ref.ExpertCounts(b)
				for i := range a {
					if a[i] != b[i] {
						t.Errorf("%s: uniform routing's expert counts %v, %v without calibration", name, a, b)
						break
					}
				}
			}
		}
	}
}

// batchOf is seqs sequences of n tokens each after past cached ones, all
// sampled.
func batchOf(seqs, n, past int) *model.Batch {
	var b model.Batch
	for s := range seqs {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32((7*i + s) % 500)
		}
		b.Add(s, past, ids, true)
	}
	return &b
}

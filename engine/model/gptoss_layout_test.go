package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// fakeSource is a WeightSource (and MXFP4Source) over host tensors.
type fakeSource struct {
	t     map[string]HostTensor
	mxfp4 map[string]HostTensor // by blocks name: the dequantized tensor
}

func (f fakeSource) Tensor(name string) (HostTensor, error) {
	h, ok := f.t[name]
	if !ok {
		return HostTensor{}, fmt.Errorf("no %q", name)
	}
	return h, nil
}
func (f fakeSource) Has(name string) bool {
	_, a := f.t[name]
	_, b := f.mxfp4[name]
	return a || b
}
func (f fakeSource) Where(string) string { return "fake.safetensors" }
func (f fakeSource) MXFP4(blocks, scales string) (HostTensor, error) {
	h, ok := f.mxfp4[blocks]
	if !ok {
		return HostTensor{}, fmt.Errorf("no %q", blocks)
	}
	return h, nil
}

// code is a weight value naming where it is: expert e, row r, column c.
func code(e, r, c int) float32 { return float32(e*10000 + r*100 + c) }

func f32At(h HostTensor, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(h.Data[4*i:]))
}

// TestOSSExpertLayout checks the experts' conversion from transformers'
// layouts to the engine's: gate_up_proj [E, H, 2F] with gate and up
// interleaved by column becomes [E, 2F, H] with the gate rows first;
// down_proj [E, F, H] becomes [E, H, F]; MXFP4's [E, 2F, H] rows are
// de-interleaved only.
func TestOSSExpertLayout(t *testing.T) {
	const E, H, F = 2, 3, 4
	hfGU := make([]float32, E*H*2*F)
	for e := range E {
		for h := range H {
			for c := range 2 * F {
				hfGU[(e*H+h)*2*F+c] = code(e, h, c)
			}
		}
	}
	hfDown := make([]float32, E*F*H)
	for e := range E {
		for f := range F {
			for h := range H {
				hfDown[(e*F+f)*H+h] = code(e, f, h)
			}
		}
	}
	mxGU := make([]float32, E*2*F*H) // [E, 2F, H], rows interleaved
	for e := range E {
		for r := range 2 * F {
			for h := range H {
				mxGU[(e*2*F+r)*H+h] = code(e, r, h)
			}
		}
	}
	col := func(n int) int { // the interleaved index of engine row n
		if n < F {
			return 2 * n
		}
		return 2*(n-F) + 1
	}
	for _, mx := range []bool{false, true} {
		src := fakeSource{t: map[string]HostTensor{}, mxfp4: map[string]HostTensor{}}
		if mx {
			src.mxfp4["gu_blocks"] = HostF32([]int{E, 2 * F, H}, mxGU)
		} else {
			src.t["gu"] = HostF32([]int{E, H, 2 * F}, hfGU)
			src.t["dn"] = HostF32([]int{E, F, H}, hfDown)
		}
		l := &loader{m: &Model{opt: Options{Weights: src}}}
		gu, ok := l.ossExpertWeight("gu", []int{E, H, 2 * F}, []int{E, 2 * F, H}, true)
		if !ok {
			t.Fatal(l.err)
		}
		for e := range E {
			for n := range 2 * F {
				for h := range H {
					want := code(e, h, col(n))
					if mx {
						want = code(e, col(n), h)
					}
					if got := f32At(gu, (e*2*F+n)*H+h); got != want {
						t.Fatalf("mxfp4 %v: gate_up[%d][%d][%d] = %v, want %v", mx, e, n, h, got, want)
					}
				}
			}
		}
		if mx {
			continue
		}
		dn, ok := l.ossExpertWeight("dn", []int{E, F, H}, []int{E, H, F}, false)
		if !ok {
			t.Fatal(l.err)
		}
		for e := range E {
			for h := range H {
				for f := range F {
					if got := f32At(dn, (e*H+h)*F+f); got != code(e, f, h) {
						t.Fatalf("down[%d][%d][%d] = %v, want %v", e, h, f, got, code(e, f, h))
					}
				}
			}
		}
	}
	// A dequantized tensor of the wrong shape is the checkpoint's fault.
	src := fakeSource{mxfp4: map[string]HostTensor{"gu_blocks": HostF32([]int{E, H, 2 * F}, mxGU)}}
	l := &loader{m: &Model{opt: Options{Weights: src}}}
	if _, ok := l.ossExpertWeight("gu", []int{E, H, 2 * F}, []int{E, 2 * F, H}, true); ok {
		t.Error("an MXFP4 tensor of the wrong shape was taken")
	} else if _, bad := l.err.(*WeightError); !bad {
		t.Errorf("%v: want a *WeightError", l.err)
	}
}

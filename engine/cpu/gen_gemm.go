//go:build ignore

// gen_gemm writes gemm_amd64.s:
//   - kern{1..6}x16: AVX2/FMA micro-kernels computing an MR×16 tile
//     C = A·B (overwrite); A row-major (leading dimension lda), B rows of 16
//     floats ldb apart (a packed GEMM panel has ldb = 16; a row-major V
//     cache has ldb = head dim).
//   - vexpsum: x[i] = exp(x[i]·scale + bias) in place, returning the sum.
//   - vsilumul: out[i] = silu(g[i]) · u[i].
//   - vmax: the largest of n >= 8 floats (n a multiple of 8).
//
// Run: go run gen_gemm.go
package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
)

var b bytes.Buffer

func w(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }

func kernel(mr int) {
	// Few rows leave the FMA units waiting on their own results, so
	// rows <= 3 keep a second set of accumulators for odd k.
	split := mr <= 3
	rowAddr := func(r, off int) string {
		base := []string{"(SI)", "(SI)(DX*1)", "(SI)(DX*2)", "(R10)", "(R10)(DX*1)", "(R10)(DX*2)"}[r]
		if off == 0 {
			return base
		}
		return fmt.Sprintf("%d%s", off, base)
	}
	step := func(s int) {
		acc := 0
		if split && s == 1 {
			acc = 2 * mr
		}
		if s == 0 {
			w("\tVMOVUPS (DI), Y12")
			w("\tVMOVUPS 32(DI), Y13")
		} else {
			w("\tVMOVUPS (DI)(BX*1), Y12")
			w("\tVMOVUPS 32(DI)(BX*1), Y13")
		}
		for r := 0; r < mr; r++ {
			bc := 14 + r%2
			w("\tVBROADCASTSS %s, Y%d", rowAddr(r, 4*s), bc)
			w("\tVFMADD231PS Y%d, Y12, Y%d", bc, acc+2*r)
			w("\tVFMADD231PS Y%d, Y13, Y%d", bc, acc+2*r+1)
		}
	}
	w("")
	w("// func kern%dx16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)", mr)
	w("TEXT ·kern%dx16(SB), NOSPLIT, $0-56", mr)
	w("\tMOVQ k+0(FP), CX")
	w("\tMOVQ a+8(FP), SI")
	w("\tMOVQ lda+16(FP), DX")
	w("\tSHLQ $2, DX")
	w("\tMOVQ b+24(FP), DI")
	w("\tMOVQ ldb+32(FP), BX")
	w("\tSHLQ $2, BX")
	w("\tMOVQ c+40(FP), R8")
	w("\tMOVQ ldc+48(FP), R9")
	w("\tSHLQ $2, R9")
	w("\tLEAQ (SI)(DX*2), R10")
	w("\tADDQ DX, R10")
	nacc := 2 * mr
	if split {
		nacc = 4 * mr
	}
	for i := 0; i < nacc; i++ {
		w("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	w("\tCMPQ CX, $2")
	w("\tJL tail")
	w("loop:")
	step(0)
	step(1)
	w("\tADDQ $8, SI")
	w("\tADDQ $8, R10")
	w("\tLEAQ (DI)(BX*2), DI")
	w("\tSUBQ $2, CX")
	w("\tCMPQ CX, $2")
	w("\tJGE loop")
	w("tail:")
	w("\tTESTQ CX, CX")
	w("\tJZ store")
	step(0)
	w("store:")
	if split {
		for i := 0; i < 2*mr; i++ {
			w("\tVADDPS Y%d, Y%d, Y%d", i+2*mr, i, i)
		}
	}
	for r := 0; r < mr; r++ {
		w("\tVMOVUPS Y%d, (R8)", 2*r)
		w("\tVMOVUPS Y%d, 32(R8)", 2*r+1)
		if r < mr-1 {
			w("\tADDQ R9, R8")
		}
	}
	w("\tVZEROUPPER")
	w("\tRET")
}

// constants are 8-lane float32 vectors in read-only data.
var constants = []struct {
	name string
	v    float32
}{
	{"lo", -87}, {"hi", 88.3}, {"log2e", math.Log2E}, {"half", 0.5},
	{"ln2hi", 0.693359375}, {"ln2lo", -2.12194440e-4},
	{"c7", 1.0 / 5040}, {"c6", 1.0 / 720}, {"c5", 1.0 / 120}, {"c4", 1.0 / 24},
	{"c3", 1.0 / 6}, {"c2", 0.5}, {"one", 1},
}

func emitConstants() {
	w("")
	for _, c := range constants {
		for lane := 0; lane < 8; lane++ {
			w("DATA exp_%s<>+%d(SB)/4, $0x%08x", c.name, 4*lane, math.Float32bits(c.v))
		}
		w("GLOBL exp_%s<>(SB), RODATA|NOPTR, $32", c.name)
	}
}

// exp replaces Yx by exp(Yx) (the scalar expf's method: Cody-Waite by
// ln 2, degree-7 Taylor, exponent by integer add), clamped to [-87, 88.3]
// so the exponent never overflows; Yn and Yt are clobbered.
func exp(x, n, t int) {
	w("\tVMOVUPS exp_lo<>(SB), Y%d", t)
	w("\tVMAXPS Y%d, Y%d, Y%d", x, t, x) // NaN in x passes through (second source)
	w("\tVMOVUPS exp_hi<>(SB), Y%d", t)
	w("\tVMINPS Y%d, Y%d, Y%d", x, t, x)
	w("\tVMOVUPS exp_log2e<>(SB), Y%d", n)
	w("\tVMULPS Y%d, Y%d, Y%d", x, n, n)
	w("\tVADDPS exp_half<>(SB), Y%d, Y%d", n, n)
	w("\tVROUNDPS $1, Y%d, Y%d", n, n)
	w("\tVFNMADD231PS exp_ln2hi<>(SB), Y%d, Y%d", n, x)
	w("\tVFNMADD231PS exp_ln2lo<>(SB), Y%d, Y%d", n, x)
	w("\tVMOVUPS exp_c7<>(SB), Y%d", t)
	for _, c := range []string{"c6", "c5", "c4", "c3", "c2", "one", "one"} {
		w("\tVFMADD213PS exp_%s<>(SB), Y%d, Y%d", c, x, t)
	}
	w("\tVCVTPS2DQ Y%d, Y%d", n, n)
	w("\tVPSLLD $23, Y%d, Y%d", n, n)
	w("\tVPADDD Y%d, Y%d, Y%d", n, t, x)
}

func vexpsum() {
	w("")
	w("// func vexpsum(x *float32, n int, scale, bias float32) float32")
	w("TEXT ·vexpsum(SB), NOSPLIT, $0-28")
	w("\tMOVQ x+0(FP), DI")
	w("\tMOVQ n+8(FP), CX")
	w("\tVBROADCASTSS scale+16(FP), Y5")
	w("\tVBROADCASTSS bias+20(FP), Y6")
	w("\tVXORPS Y7, Y7, Y7")
	w("loop:")
	w("\tCMPQ CX, $8")
	w("\tJL done")
	w("\tVMOVUPS (DI), Y0")
	w("\tVFMADD213PS Y6, Y5, Y0") // x = x*scale + bias
	exp(0, 1, 2)
	w("\tVMOVUPS Y0, (DI)")
	w("\tVADDPS Y0, Y7, Y7")
	w("\tADDQ $32, DI")
	w("\tSUBQ $8, CX")
	w("\tJMP loop")
	w("done:")
	w("\tVEXTRACTF128 $1, Y7, X1")
	w("\tVADDPS X1, X7, X7")
	w("\tVHADDPS X7, X7, X7")
	w("\tVHADDPS X7, X7, X7")
	w("\tVMOVSS X7, ret+24(FP)")
	w("\tVZEROUPPER")
	w("\tRET")
}

func vmax() {
	w("")
	w("// func vmax(x *float32, n int) float32")
	w("TEXT ·vmax(SB), NOSPLIT, $0-20")
	w("\tMOVQ x+0(FP), DI")
	w("\tMOVQ n+8(FP), CX")
	w("\tVMOVUPS (DI), Y0")
	w("\tVMOVUPS Y0, Y1")
	w("\tADDQ $32, DI")
	w("\tSUBQ $8, CX")
	w("loop:")
	w("\tCMPQ CX, $16")
	w("\tJL one")
	w("\tVMAXPS (DI), Y0, Y0")
	w("\tVMAXPS 32(DI), Y1, Y1")
	w("\tADDQ $64, DI")
	w("\tSUBQ $16, CX")
	w("\tJMP loop")
	w("one:")
	w("\tCMPQ CX, $8")
	w("\tJL done")
	w("\tVMAXPS (DI), Y0, Y0")
	w("done:")
	w("\tVMAXPS Y1, Y0, Y0")
	w("\tVEXTRACTF128 $1, Y0, X1")
	w("\tVMAXPS X1, X0, X0")
	w("\tVPERMILPS $0x4e, X0, X1")
	w("\tVMAXPS X1, X0, X0")
	w("\tVPERMILPS $0xb1, X0, X1")
	w("\tVMAXPS X1, X0, X0")
	w("\tVMOVSS X0, ret+16(FP)")
	w("\tVZEROUPPER")
	w("\tRET")
}

func vsilumul() {
	w("")
	w("// func vsilumul(out, gate, up *float32, n int)")
	w("TEXT ·vsilumul(SB), NOSPLIT, $0-32")
	w("\tMOVQ out+0(FP), DI")
	w("\tMOVQ gate+8(FP), SI")
	w("\tMOVQ up+16(FP), DX")
	w("\tMOVQ n+24(FP), CX")
	w("\tVXORPS Y7, Y7, Y7")
	w("loop:")
	w("\tCMPQ CX, $8")
	w("\tJL done")
	w("\tVMOVUPS (SI), Y3")
	w("\tVSUBPS Y3, Y7, Y0") // -g
	exp(0, 1, 2)
	w("\tVADDPS exp_one<>(SB), Y0, Y0")
	w("\tVDIVPS Y0, Y3, Y3")
	w("\tVMULPS (DX), Y3, Y3")
	w("\tVMOVUPS Y3, (DI)")
	w("\tADDQ $32, DI")
	w("\tADDQ $32, SI")
	w("\tADDQ $32, DX")
	w("\tSUBQ $8, CX")
	w("\tJMP loop")
	w("done:")
	w("\tVZEROUPPER")
	w("\tRET")
}

func main() {
	w("// Code generated by gen_gemm.go; DO NOT EDIT.")
	w("")
	w("//go:build amd64 && !purego")
	w("")
	w(`#include "textflag.h"`)
	for mr := 1; mr <= 6; mr++ {
		kernel(mr)
	}
	emitConstants()
	vexpsum()
	vmax()
	vsilumul()
	if err := os.WriteFile("gemm_amd64.s", b.Bytes(), 0o644); err != nil {
		panic(err)
	}
}

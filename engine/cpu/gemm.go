package cpu

// GEMMs of the model are y[m, n] = x[m, k] · wᵀ with w an [n, k] weight
// (nn.Linear layout). Two implementations, switched by gemm_plugin:
//   - auto: w is packed once at upload into panels of 16 output columns,
//     [k][16] each, and an MR×16 register-blocked micro-kernel (AVX2/FMA
//     assembly where the CPU has it, portable Go otherwise) walks tiles of
//     C in parallel. A rows are read in place (no packing): broadcasting
//     one A element per row and k needs no particular layout.
//   - disable: a plain dot-product loop over the unpacked [n, k] weight,
//     parallel over output tiles: the engine's own simple kernel.

const (
	nr = 16 // panel width (columns of C per micro-kernel call)
	mr = 6  // rows of C per micro-kernel call
)

// forceGoKernel makes the blocked GEMM use the portable kernel even where
// assembly is available (tests compare the two).
var forceGoKernel = false

// packed is a weight packed into panels for the blocked GEMM.
type packed struct {
	n, k   int
	panels []float32 // ceil(n/16) panels of k×16, zero-padded
}

func packWeight(w []float32, n, k int) *packed {
	np := (n + nr - 1) / nr
	p := &packed{n: n, k: k, panels: make([]float32, np*k*nr)}
	for row := range n {
		panel := p.panels[(row/nr)*k*nr:]
		c := row % nr
		for kk, v := range w[row*k : (row+1)*k] {
			panel[kk*nr+c] = v
		}
	}
	return p
}

// goKernel is the portable micro-kernel: rows × 16 of C over k, B rows
// ldb apart.
func goKernel(rows, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for r := range rows {
		var acc [nr]float32
		for kk, av := range a[r*lda : r*lda+k] {
			p := (*[nr]float32)(b[kk*ldb : kk*ldb+nr])
			acc[0] += av * p[0]
			acc[1] += av * p[1]
			acc[2] += av * p[2]
			acc[3] += av * p[3]
			acc[4] += av * p[4]
			acc[5] += av * p[5]
			acc[6] += av * p[6]
			acc[7] += av * p[7]
			acc[8] += av * p[8]
			acc[9] += av * p[9]
			acc[10] += av * p[10]
			acc[11] += av * p[11]
			acc[12] += av * p[12]
			acc[13] += av * p[13]
			acc[14] += av * p[14]
			acc[15] += av * p[15]
		}
		copy(c[r*ldc:r*ldc+nr], acc[:])
	}
}

// gemmTile computes rows [r0, r1) × panels [p0, p1) of out = x · wᵀ with
// the blocked kernel; scratch (>= mr*16) takes the ragged last panel.
func gemmTile(out []float32, ldo int, x []float32, ldx int, w *packed, r0, r1, p0, p1 int, scratch []float32) {
	k := w.k
	for p := p0; p < p1; p++ {
		panel := w.panels[p*k*nr : (p+1)*k*nr]
		col := p * nr
		cols := min(nr, w.n-col)
		for i := r0; i < r1; i += mr {
			rows := min(mr, r1-i)
			a := x[i*ldx:]
			if cols == nr {
				microKernel(rows, k, a, ldx, panel, nr, out[i*ldo+col:], ldo)
				continue
			}
			microKernel(rows, k, a, ldx, panel, nr, scratch, nr)
			for r := range rows {
				copy(out[(i+r)*ldo+col:(i+r)*ldo+col+cols], scratch[r*nr:r*nr+cols])
			}
		}
	}
}

// plainTile computes rows [r0, r1) × columns [c0, c1) of out = x · wᵀ
// with w unpacked [n, k]: one dot product per output element.
func plainTile(out []float32, ldo int, x []float32, ldx int, w []float32, k, r0, r1, c0, c1 int) {
	for i := r0; i < r1; i++ {
		xr := x[i*ldx : i*ldx+k]
		for j := c0; j < c1; j++ {
			out[i*ldo+j] = dot(xr, w[j*k:j*k+k])
		}
	}
}

// dot is a scalar dot product with four partial sums (the Go compiler does
// not vectorise; independent sums keep the adder busy).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// gemmTask runs one GEMM as tiles over the pool.
type gemmTask struct {
	out, x, w []float32
	pw        *packed
	ldo, ldx  int
	m, n, k   int
	rowTile   int // rows per tile (multiple of mr)
	colTile   int // panels (blocked) or columns (plain) per tile
	colTiles  int
	scratch   [][]float32
}

func (t *gemmTask) run(c, w int) {
	r0 := (c / t.colTiles) * t.rowTile
	r1 := min(r0+t.rowTile, t.m)
	ct := c % t.colTiles
	if t.pw != nil {
		np := (t.n + nr - 1) / nr
		p0 := ct * t.colTile
		gemmTile(t.out, t.ldo, t.x, t.ldx, t.pw, r0, r1, p0, min(p0+t.colTile, np), t.scratch[w])
		return
	}
	c0 := ct * t.colTile
	plainTile(t.out, t.ldo, t.x, t.ldx, t.w, t.k, r0, r1, c0, min(c0+t.colTile, t.n))
}

// minTileFlops is the least work worth handing to another goroutine: waking
// one costs a few microseconds.
const minTileFlops = 1 << 17

// gemm computes out[m, n] = x[m, k] · wᵀ on the pool: blocked when pw is
// set, plain otherwise.
func (b *Backend) gemm(out []float32, ldo int, x []float32, ldx int, m, n, k int, w []float32, pw *packed) {
	if m <= 0 {
		return
	}
	t := &b.gemmT
	*t = gemmTask{out: out, x: x, w: w, pw: pw, ldo: ldo, ldx: ldx, m: m, n: n, k: k, scratch: b.scratch16}
	units := n // columns, or panels of 16 for the blocked kernel
	if pw != nil {
		units = (n + nr - 1) / nr
	}
	flops := 2 * m * n * k
	tiles := max(1, min(4*b.pool.workers, flops/minTileFlops))
	// Split columns first (every tile then reads all of x, which is small
	// in decode), then rows when there are few columns.
	colTiles := min(units, tiles)
	rowTiles := max(1, min((m+mr-1)/mr, tiles/colTiles))
	t.colTile = (units + colTiles - 1) / colTiles
	t.colTiles = (units + t.colTile - 1) / t.colTile
	rows := (m + rowTiles - 1) / rowTiles
	t.rowTile = (rows + mr - 1) / mr * mr
	rowTiles = (m + t.rowTile - 1) / t.rowTile
	b.pool.run(t, rowTiles*t.colTiles)
}

// gemmSerial is gemm on the calling goroutine, for callers that are
// already parallel (MoE experts). scratch must hold mr*16 floats.
func gemmSerial(out []float32, ldo int, x []float32, ldx int, m, n, k int, w []float32, pw *packed, scratch []float32) {
	if pw != nil {
		gemmTile(out, ldo, x, ldx, pw, 0, m, 0, (n+nr-1)/nr, scratch)
		return
	}
	plainTile(out, ldo, x, ldx, w, k, 0, m, 0, n)
}

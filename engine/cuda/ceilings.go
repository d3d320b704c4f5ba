//go:build cgo && linux

package cuda

import (
	"encoding/json"
	"fmt"
	"time"
)

const (
	// ceilCopyBytes is each of the two copy buffers: past any L2, and
	// large enough that the copy's start and end are noise.
	ceilCopyBytes = 1 << 30
	// ceilGemm is the GEMM's M = N = K (operands of 128 MiB at 2 bytes,
	// carved from the copy buffers).
	ceilGemm = 8192
	// ceilWarm is how long the GEMM runs before timing starts: an idle
	// GPU's clocks take a few hundred milliseconds to rise.
	ceilWarm = 400 * time.Millisecond
	// ceilRuns of each are timed; the fastest counts (a ceiling is what
	// the hardware can do, not what it usually does).
	ceilRuns = 10
)

// MeasureCeilings measures g's ceilings (see Ceilings) at dt on s: about
// half a second and 2 GiB of device memory, freed before it returns. Run
// it before the engine allocates its weights and KV cache.
func (g *GPU) MeasureCeilings(s *Stream, dt DType) (Ceilings, error) {
	var c Ceilings
	bl, err := g.BlasLt()
	if err != nil {
		return c, err
	}
	src, err := g.Alloc(ceilCopyBytes)
	if err != nil {
		return c, fmt.Errorf("measuring ceilings: %w", err)
	}
	defer g.Free(src)
	dst, err := g.Alloc(ceilCopyBytes)
	if err != nil {
		return c, fmt.Errorf("measuring ceilings: %w", err)
	}
	defer g.Free(dst)

	// Random operands: a GEMM over zeros draws less power, and so runs
	// at clocks a real one does not get.
	op := ceilGemm * ceilGemm * dt.Size()
	x, w, y := src.Slice(0, op), src.Slice(op, op), dst.Slice(0, op)
	if err := g.RandomFill(s, dt, src.Slice(0, 2*op), 0x5eed, 0, 1); err != nil {
		return c, err
	}
	gemm := func() error { return bl.Matmul(s, dt, y, x, w, ceilGemm, ceilGemm, ceilGemm) }
	for t0 := time.Now(); time.Since(t0) < ceilWarm; {
		for range 20 {
			if err := gemm(); err != nil {
				return c, err
			}
		}
		if err := s.Sync(); err != nil {
			return c, err
		}
	}
	best := func(fn func() error) (time.Duration, error) {
		var b time.Duration
		for range ceilRuns {
			d, err := s.Time(fn)
			if err != nil {
				return 0, err
			}
			if b == 0 || d < b {
				b = d
			}
		}
		return b, nil
	}
	dg, err := best(gemm)
	if err != nil {
		return c, err
	}
	dc, err := best(func() error { return s.Copy(dst, src) })
	if err != nil {
		return c, err
	}
	if dg <= 0 || dc <= 0 {
		return c, fmt.Errorf("measuring ceilings: a GEMM took %v and a copy %v", dg, dc)
	}
	c.FLOPs = 2 * float64(ceilGemm) * ceilGemm * ceilGemm / dg.Seconds()
	c.BytesPerSec = 2 * float64(ceilCopyBytes) / dc.Seconds()
	return c, nil
}

// CachedCeilings returns g's ceilings at dt, measured once and kept in
// the kernel cache directory per GPU (UUID) and dtype, so that every cell
// of a study, and the next study on the same GPU, divides by the same
// ceilings rather than each by its own noisy measurement. remeasure
// measures again and replaces the kept ones. Without a cache directory
// every call measures.
func (g *GPU) CachedCeilings(s *Stream, dt DType, remeasure bool) (Measured, error) {
	path := ""
	if g.cacheDir != "" && g.Info.UUID != "" {
		path = ceilingsPath(g.cacheDir, g.Info.UUID, dt.String())
	}
	if path != "" && !remeasure {
		if m, err := readMeasured(path); err == nil && m.Device == g.Info.Name && m.DType == dt.String() {
			return m, nil
		}
	}
	c, err := g.MeasureCeilings(s, dt)
	if err != nil {
		return Measured{}, err
	}
	m := Measured{Ceilings: c, Device: g.Info.Name, UUID: g.Info.UUID, DType: dt.String(), Measured: time.Now().UTC().Truncate(time.Second)}
	if path != "" {
		if b, err := json.MarshalIndent(m, "", "  "); err == nil {
			// A cache that cannot be written costs a measurement next time.
			_ = writeAtomic(path, append(b, '\n'))
		}
	}
	return m, nil
}

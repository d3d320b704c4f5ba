//go:build cgo && linux

package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMeasureCeilings measures the GPU's ceilings at both dtypes. On a GPU
// with known ceilings (bench/GPU.md's, measured the same way) the measurement
// must land within 25 % below and 15 % above them (H200s of another host
// measured 645-671 TFLOP/s against the kept 790, twice, while the host's
// other GPU ran a study: the GEMM rate varies with the host's clocks and
// power more than the copy bandwidth does); on any other it must at least
// be a plausible GPU's (over 100 GB/s and 10 TFLOP/s). The kept
// measurement is returned as kept, and replaced when asked.
func TestMeasureCeilings(t *testing.T) {
	for _, dt := range []DType{F16, BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				dir := t.(onGPU).TB.TempDir()
				defer func(d string) { g.cacheDir = d }(g.cacheDir)
				g.cacheDir = dir
				m, err := g.CachedCeilings(g.Stream, dt, false)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s: %.3g B/s, %.3g FLOP/s", g.Info.Name, dt, m.BytesPerSec, m.FLOPs)
				if known, kind, ok := KnownCeilings(g.Info.Name); ok {
					for _, q := range []struct {
						what      string
						got, want float64
					}{{"bandwidth", m.BytesPerSec, known.BytesPerSec}, {"GEMM rate", m.FLOPs, known.FLOPs}} {
						if q.got < 0.75*q.want || q.got > 1.15*q.want {
							t.Errorf("%s: %.3g, the %s's measured ceiling is %.3g", q.what, q.got, kind, q.want)
						}
					}
				} else if m.BytesPerSec < 100e9 || m.FLOPs < 10e12 {
					t.Errorf("%.3g B/s, %.3g FLOP/s: not a GPU's", m.BytesPerSec, m.FLOPs)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "ceilings-*-"+dt.String()+".json"))
				if len(files) != 1 {
					t.Fatalf("kept in %v; want one file", files)
				}
				again, err := g.CachedCeilings(g.Stream, dt, false)
				if err != nil || again != m {
					t.Errorf("second call %+v, %v; want the kept %+v", again, err, m)
				}
				// A corrupt file is measured over.
				if err := os.WriteFile(files[0], []byte("{"), 0o644); err != nil {
					t.Fatal(err)
				}
				fresh, err := g.CachedCeilings(g.Stream, dt, true)
				if err != nil || fresh.Measured.Before(m.Measured) || fresh.BytesPerSec <= 0 {
					t.Errorf("remeasured %+v, %v", fresh, err)
				}
				if kept, err := readMeasured(files[0]); err != nil || kept != fresh {
					t.Errorf("kept after remeasuring %+v, %v; want %+v", kept, err, fresh)
				}
			})
		})
	}
}

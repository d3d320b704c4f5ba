//go:build cgo && linux

package backend

import (
	"fmt"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
)

// ceilingsFor returns the ceilings the roofline needs from g when xrun
// has none for it (cuda.KnownCeilings), else nil: measured on g once and
// kept (cuda.CachedCeilings). force (XRUN_MEASURE_CEILINGS=1) measures
// known GPUs too, replacing the kept measurement: to check a known GPU's
// figures, or after a GPU's clocks or power limit changed.
func ceilingsFor(g *cuda.GPU, dt cuda.DType, force bool) (*engine.Ceilings, error) {
	if _, _, known := cuda.KnownCeilings(g.Info.Name); known && !force {
		return nil, nil
	}
	s, err := g.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m, err := g.CachedCeilings(s, dt, force)
	if err != nil {
		return nil, fmt.Errorf("measuring the roofline's ceilings: %w", err)
	}
	return &engine.Ceilings{BytesPerSec: m.BytesPerSec, FLOPs: m.FLOPs, Device: m.Device, DType: m.DType,
		Source: fmt.Sprintf("measured by xrun on this GPU (%s) on %s: device-to-device copy and %s GEMM",
			m.UUID, m.Measured.Format(time.DateOnly), m.DType)}, nil
}

// Ceilings are those ceilingsFor measured when the backend opened its GPU
// (engine.CeilingsReporter); nil for a GPU with known ones.
func (b *Backend) Ceilings() *engine.Ceilings { return b.ceil }

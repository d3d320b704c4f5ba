package engine

import (
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// measuringBackend is the CPU backend posing as one that measured its
// device's ceilings, as the CUDA backend does on a GPU xrun knows none for.
type measuringBackend struct{ model.Backend }

var measured = &Ceilings{BytesPerSec: 1.6e12, FLOPs: 290e12, Device: "NVIDIA A100-SXM4-80GB", DType: "float16", Source: "test"}

func (measuringBackend) Ceilings() *Ceilings { return measured }

// TestCeilingsReported: the engine passes on the ceilings its backend
// measured (the runner keeps them in the cell's record), and says none for
// a backend that measures nothing.
func TestCeilingsReported(t *testing.T) {
	RegisterBackend("measuring-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		return measuringBackend{b}, err
	})
	for _, tc := range []struct {
		backend string
		want    *Ceilings
	}{{"cpu", nil}, {"measuring-test", measured}} {
		e := newEngine(t, Config{Model: "tiny-llama", Backend: tc.backend, BatchSize: 1})
		cr, ok := e.(CeilingsReporter)
		if !ok {
			t.Fatalf("%s: the engine is no CeilingsReporter", tc.backend)
		}
		if got := cr.Ceilings(); got != tc.want {
			t.Errorf("%s: ceilings %+v, want %+v", tc.backend, got, tc.want)
		}
	}
}

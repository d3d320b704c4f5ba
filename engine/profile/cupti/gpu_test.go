//go:build cgo && linux

package cupti

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/cenv"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// openGPU opens GPU 0 or skips the test where there is none.
func openGPU(t *testing.T) *cuda.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cuda.Probe(ctx); err != nil {
		var ng *cuda.NoGPUError
		if errors.As(err, &ng) {
			t.Skipf("no usable GPU, CUPTI check skipped: %v", ng.Reason)
		}
		t.Fatal(err)
	}
	dev, err := cuda.Open(0, cuda.WithKernelCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// fillKernel is a kernel of known name: engine/cuda's RandomFill compiles
// random_fill_f16 as extern "C", so CUPTI reports it unmangled.
const fillKernel = "random_fill_f16"

// launches queues n RandomFill launches of a small buffer and waits for
// them; the time per launch is what CUPTI's cost is measured on.
func launches(dev *cuda.Device, buf cuda.Buffer, n int) (time.Duration, error) {
	var per time.Duration
	err := dev.Do(func(g *cuda.GPU) error {
		t0 := time.Now()
		for i := range n {
			if err := g.RandomFill(g.Stream, cuda.F16, buf, uint64(i), 0, 1); err != nil {
				return err
			}
		}
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		per = time.Since(t0) / time.Duration(n)
		return nil
	})
	return per, err
}

// TestGPUActivity runs on a GPU: the self-test on random_fill_f16, then a
// two-iteration window with kernels, a host-to-device copy and a memset,
// checking each record, and the cost of CUPTI per eager launch (printed
// for bench/gpu.sh check --tests cupti). It must be the first test to Open CUPTI in
// the binary.
func TestGPUActivity(t *testing.T) {
	dev := openGPU(t)
	var buf cuda.Buffer
	if err := dev.Do(func(g *cuda.GPU) (err error) { buf, err = g.Alloc(1 << 16); return err }); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	launches(dev, buf, 200) // compile and warm up
	base, err := launches(dev, buf, n)
	if err != nil {
		t.Fatal(err)
	}

	s, err := Open()
	if err != nil {
		t.Fatalf("Open on a GPU machine: %v", err)
	}
	st := s.Stats()
	t.Logf("CUPTI API version %d, layout %s", st.Version, st.Layout)
	loaded, _ := launches(dev, buf, n)

	err = s.SelfTest(func() error { _, err := launches(dev, buf, 1); return err }, fillKernel)
	RecordSelfTest(err)
	if err != nil {
		t.Fatal(err)
	}

	epoch := time.Now()
	s.Begin(epoch)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.Mark(0)
	enabled, err := launches(dev, buf, n)
	if err != nil {
		t.Fatal(err)
	}
	s.Mark(1)
	host := make([]byte, 1<<16)
	if err := dev.Do(func(g *cuda.GPU) error {
		if err := g.Stream.Upload(buf, host); err != nil {
			return err
		}
		g.Stream.Zero(buf)
		if err := g.RandomFill(g.Stream, cuda.F16, buf, 9, 0, 1); err != nil {
			return err
		}
		return g.Stream.Sync()
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ops, err := s.Drain()
	drain := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var last model.OpRecord
	for _, op := range ops {
		count[fmt.Sprint(op.Kind, "/", op.Iteration)]++
		if op.Kind == model.OpKernel {
			if op.Name != fillKernel || op.Duration <= 0 || op.Block != [3]uint32{256, 1, 1} || op.Grid[0] == 0 || op.Stream == 0 {
				t.Errorf("kernel record %+v", op)
			}
			if op.Start < 0 || op.Start > time.Since(epoch) {
				t.Errorf("kernel record starts at %v, outside the run (%v so far)", op.Start, time.Since(epoch))
			}
		}
		last = op
	}
	if count["kernel/0"] != n || count["kernel/1"] != 1 || count["memcpy/1"] < 1 || count["memset/1"] != 1 {
		t.Errorf("records by kind/iteration %v; want %d kernels in iteration 0, then a kernel, a copy and a memset in 1", count, n)
	}
	var copied int64
	for _, op := range ops {
		if op.Kind == model.OpMemcpy {
			copied += op.Bytes
			if op.Copy != "HtoD" {
				t.Errorf("memcpy record %+v; want HtoD", op)
			}
		}
	}
	if copied != 1<<16 {
		t.Errorf("copies moved %d bytes; want %d", copied, 1<<16)
	}
	if last.Kind != model.OpKernel {
		t.Errorf("the last record is a %s; want the final kernel", last.Kind)
	}
	st = s.Stats()
	if st.Dropped != 0 || !st.Verified {
		t.Errorf("stats %+v", st)
	}
	// The cost of CUPTI, in the format bench/gpu.sh greps.
	fmt.Printf("PROFILE launch_us base=%.3f cupti_loaded=%.3f cupti_enabled=%.3f drain_ms=%.3f records=%d layout=%s version=%d\n",
		us(base), us(loaded), us(enabled), float64(drain)/1e6, len(ops), st.Layout, st.Version)
	if n := Notes(); len(n) != 0 {
		t.Errorf("Notes after a clean window: %q", n)
	}
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// TestGPUStepAside runs under an outside profiler (bench/gpu.sh check
// wraps this test in ncu): open must see it (attachedProfiler) and step
// aside; then CUPTI itself is asked (loadBackend, past that check), and
// what cuptiSubscribe did under the profiler is printed.
func TestGPUStepAside(t *testing.T) {
	if os.Getenv("XRUN_UNDER_PROFILER") == "" {
		t.Skip("not under an outside profiler (bench/gpu.sh check --tests cupti sets XRUN_UNDER_PROFILER=1 under ncu)")
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUDA_INJECTION") || strings.HasPrefix(kv, "LD_PRELOAD") || strings.HasPrefix(kv, "NV_") || strings.HasPrefix(kv, "NSYS") {
			fmt.Printf("PROFILE env %s\n", kv)
		}
	}
	openGPU(t) // an injected tool attaches when CUDA initialises
	seen := attachedProfiler(cenv.Getenv, cenv.SelfMaps)
	var ue *UnavailableError
	if _, err := open(); seen == "" || !errors.As(err, &ue) || !ue.StepAside {
		t.Errorf("open under the outside profiler (seen as %q): %v, want a step-aside UnavailableError", seen, err)
	} else {
		fmt.Printf("PROFILE step_aside=seen: %s\n", seen)
	}
	b, err := loadBackend()
	switch {
	case errors.As(err, &ue) && ue.StepAside:
		fmt.Printf("PROFILE subscribe=refused: %s\n", ue.Reason)
	case err == nil:
		s, err := newSession(b)
		if err == nil {
			s.Close()
		}
		fmt.Printf("PROFILE subscribe=succeeded under the outside profiler: only open's check keeps xrun out of its way\n")
	default:
		fmt.Printf("PROFILE subscribe=other: %v\n", strings.TrimSpace(err.Error()))
	}
}

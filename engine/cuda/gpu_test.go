//go:build cgo && linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/cpu"
)

// The GPU checks share one device, opened on first use. On a machine with
// no usable GPU every GPU test skips with the probe's explanation, so
// `go test ./...` passes there without pretending anything ran.
var (
	testOnce sync.Once
	testDev  *Device
	testErr  error
)

func TestMain(m *testing.M) {
	if job := os.Getenv(compileChildEnv); job != "" {
		os.Exit(compileChild(job))
	}
	code := m.Run()
	if testDev != nil {
		if err := testDev.Close(); err != nil {
			os.Stderr.WriteString("closing the GPU: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func testGPU(t testing.TB) *Device {
	t.Helper()
	testOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := Probe(ctx); err != nil {
			testErr = err
			return
		}
		// Synchronizing after each launch makes a fault name its kernel.
		testDev, testErr = Open(0, WithSyncLaunches(true))
		if testErr != nil {
			return
		}
		// Every family compiled up front, concurrently: the checks would
		// otherwise compile them one at a time on the GPU's thread as
		// each first needs one, which on a cold kernel cache was most of
		// some tests' time (TestAttentionFP8: 115 s of NVRTC in 105 s).
		// A family that does not compile is not an error here: the first
		// test that launches from it reports it, as before.
		_ = testDev.Do(func(g *GPU) error { return g.LoadKernels() })
	})
	if testErr != nil {
		var ng *NoGPUError
		if errors.As(testErr, &ng) {
			t.Skipf("no usable GPU, GPU check skipped: %v", ng.Reason)
		}
		t.Fatalf("opening GPU 0: %v", testErr)
	}
	return testDev
}

// onGPU wraps the test for code running on the GPU's thread: Fatal and
// Skip there must not call runtime.Goexit, which would end the GPU's locked
// thread and leave every later test waiting on it, so they panic; Device.Do
// recovers the panic and do reports it on the test's own goroutine.
type onGPU struct{ testing.TB }

type (
	fatal string
	skip  string
)

func (o onGPU) Fatal(args ...any) { o.TB.Helper(); panic(fatal(fmt.Sprint(args...))) }
func (o onGPU) Fatalf(format string, args ...any) {
	o.TB.Helper()
	panic(fatal(fmt.Sprintf(format, args...)))
}
func (o onGPU) FailNow()         { panic(fatal("FailNow")) }
func (o onGPU) Skip(args ...any) { panic(skip(fmt.Sprint(args...))) }
func (o onGPU) Skipf(format string, args ...any) {
	panic(skip(fmt.Sprintf(format, args...)))
}
func (o onGPU) SkipNow() { panic(skip("SkipNow")) }

// do runs fn on the test GPU's thread, giving it a t whose Fatal is safe
// there.
func do(t testing.TB, fn func(t testing.TB, g *GPU)) {
	t.Helper()
	err := testGPU(t).Do(func(g *GPU) error {
		fn(onGPU{t}, g)
		return nil
	})
	var pe *PanicError
	if errors.As(err, &pe) {
		switch v := pe.Value.(type) {
		case fatal:
			t.Fatal(string(v))
		case skip:
			t.Skip(string(v))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// warmFor is how long timeLaunches warms the GPU before timing.
const warmFor = 50 * time.Millisecond

// keepSwitches snapshots g's switches and returns what restores them:
// defer keepSwitches(g)() before a test or benchmark changes some.
func keepSwitches(g *GPU) func() {
	old := g.sw
	return func() { g.sw = old }
}

// timeLaunches is a benchmark's timed loop on the GPU's thread: warm
// launches first (modules, plans, clocks, caches), then b.N more timed with
// device events around them. Launches are not synchronised meanwhile (the
// checks synchronise after every launch; timing must not).
//
// The warm launches repeat until warmFor has passed: a GPU that idled
// (between benchmarks, or before the first of a process) runs at a low
// clock for a while, and a short kernel's few warm launches and b.N timed
// ones can all fall inside that ramp (on an H100 the first sub-benchmark
// of a run, the own qkv GEMM at M = 256, timed 36.8 us against 12.5 when
// run again in the same process).
func timeLaunches(b *testing.B, t testing.TB, g *GPU, warm int, run func(i int) error) time.Duration {
	defer func(on bool) { g.syncLaunches = on }(g.syncLaunches)
	g.syncLaunches = false
	warmLaunches(t, g, warm, run)
	b.ResetTimer()
	d, err := g.Stream.Time(func() error {
		for i := range b.N {
			if err := run(i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// warmLaunches runs warm launches until warmFor has passed (timeLaunches).
func warmLaunches(t testing.TB, g *GPU, warm int, run func(i int) error) {
	start := time.Now()
	for round := 0; round == 0 || time.Since(start) < warmFor; round++ {
		for i := range max(warm, 1) {
			if err := run(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Stream.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// graphLaunches is the most launches timeGraph captures into one graph.
const graphLaunches = 256

// timeGraph is timeLaunches with the timed launches captured into a CUDA
// graph and replayed, as a decode step runs them, so that the time is the
// GPU's whatever the host's launch rate: launched from the host one by
// one, GEMMs of 8-11 us can run as fast as the host queues them rather
// than as fast as they compute (NOTES v51: Go's wall time per launch up to
// 1.6x the GPU's at 20 launches). The graph holds min(b.N, graphLaunches)
// launches; it is replayed once untimed (the first replay uploads it),
// then until at least b.N launches have run, and the time is scaled to b.N
// of them. run must not allocate or synchronise once warm (Stream.Capture).
func timeGraph(b *testing.B, t testing.TB, g *GPU, warm int, run func(i int) error) time.Duration {
	defer func(on bool) { g.syncLaunches = on }(g.syncLaunches)
	g.syncLaunches = false
	warmLaunches(t, g, warm, run)
	n := min(b.N, graphLaunches)
	gr, err := g.Stream.Capture(func() error {
		for i := range n {
			if err := run(i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	if err := gr.Launch(g.Stream); err != nil {
		t.Fatal(err)
	}
	if err := g.Stream.Sync(); err != nil {
		t.Fatal(err)
	}
	reps := ceilDiv(b.N, n)
	b.ResetTimer()
	d, err := g.Stream.Time(func() error {
		for range reps {
			if err := gr.Launch(g.Stream); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d * time.Duration(b.N) / time.Duration(reps*n)
}

// newRand is a fresh generator per test, seeded from the clock (inputs are
// new on every run) and logged so a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

// randVals draws n values uniform in [-scale, scale), rounded to dt so that
// the reference sees exactly what the GPU sees.
func randVals(r *rand.Rand, dt DType, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = dt.ToFloat32(dt.FromFloat32((2*r.Float32() - 1) * scale))
	}
	return v
}

// refAttention is cpu.RefAttention with its n queries spread over the
// cores: each query's output depends only on it and the keys up to its
// position, so a block of queries from t0 is the reference's own call
// with past + t0 keys before it. The serial reference was a third of the
// paged attention checks' time.
func refAttention(out, q, k, v []float32, n, past, heads, kvHeads, D int) {
	w := heads * D
	chunk := max(1, ceilDiv(n, 2*runtime.NumCPU()))
	var wg sync.WaitGroup
	for t0 := 0; t0 < n; t0 += chunk {
		rows := min(chunk, n-t0)
		wg.Go(func() {
			cpu.RefAttention(out[t0*w:(t0+rows)*w], q[t0*w:(t0+rows)*w], k, v, rows, past+t0, heads, kvHeads, D)
		})
	}
	wg.Wait()
}

// forkedStream makes a second stream whose work waits for what g.Stream
// has queued so far (an event recorded there); both go when the test ends.
func forkedStream(t testing.TB, g *GPU) *Stream {
	t.Helper()
	s, err := g.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := g.NewEvent()
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return errors.Join(ev.Close(), s.Close()) }) })
	if err := ev.Record(g.Stream); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ev); err != nil {
		t.Fatal(err)
	}
	return s
}

// devUpload allocates a buffer holding vals as dt.
func devUpload(t testing.TB, g *GPU, dt DType, vals []float32) Buffer {
	t.Helper()
	b, err := g.Alloc(len(vals) * dt.Size())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return g.Free(b) }) })
	if err := UploadSlice(g.Stream, b, dt.Encode(vals)); err != nil {
		t.Fatal(err)
	}
	return b
}

// slackRows is the rows the tests and benchmarks give X past M: enough for
// the widest tile's last row tile (192 rows, a swapped one) to lie inside
// the buffer whatever M.
const slackRows = 191

// devUploadSlack uploads vals, rows of k values, into a buffer with
// slackRows rows of NaN past them: tmaMapRows
// lets a ragged last row tile's box read them, and an output that used
// them would show as NaN.
func devUploadSlack(t testing.TB, g *GPU, dt DType, vals []float32, k int) Buffer {
	t.Helper()
	b := devPoisoned(t, g, dt, len(vals)+slackRows*k)
	if err := UploadSlice(g.Stream, b.Slice(0, len(vals)*dt.Size()), dt.Encode(vals)); err != nil {
		t.Fatal(err)
	}
	return b
}

// devUploadT allocates a buffer holding plain values (int32 ids, float32).
func devUploadT[T any](t testing.TB, g *GPU, vals []T) Buffer {
	t.Helper()
	b, err := g.Alloc(len(asBytes(vals)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return g.Free(b) }) })
	if err := UploadSlice(g.Stream, b, vals); err != nil {
		t.Fatal(err)
	}
	return b
}

// devPoisoned allocates n elements of dt filled with NaN: an output the
// kernel fails to write shows up as NaN, which never passes.
func devPoisoned(t testing.TB, g *GPU, dt DType, n int) Buffer {
	t.Helper()
	b, err := g.Alloc(n * dt.Size())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDev.Do(func(g *GPU) error { return g.Free(b) }) })
	if err := g.Stream.Fill16(b, dt.NaNBits()); err != nil {
		t.Fatal(err)
	}
	return b
}

// download reads n elements of dt as float32.
func download(t testing.TB, g *GPU, dt DType, b Buffer, n int) []float32 {
	t.Helper()
	bits := make([]uint16, n)
	if err := DownloadSlice(g.Stream, bits, b.Slice(0, n*dt.Size())); err != nil {
		t.Fatal(err)
	}
	return dt.Decode(bits)
}

// tol16 is the bound on relative error for fp16/bf16 outputs.
const tol16 = 1e-2

func checkRel(t testing.TB, what string, out, ref []float32) {
	t.Helper()
	if len(out) != len(ref) {
		t.Fatalf("%s: %d outputs, reference has %d", what, len(out), len(ref))
	}
	if e := cpu.RelErr(out, ref); !(e < tol16) {
		i := worst(out, ref)
		t.Errorf("%s: relative error %.3g (bound %g); worst at %d: got %g, want %g", what, e, tol16, i, out[i], ref[i])
	}
}

func worst(out, ref []float32) int {
	wi, wd := 0, -1.0
	for i := range ref {
		d := math.Abs(float64(out[i]) - float64(ref[i]))
		if math.IsNaN(d) {
			return i
		}
		if d > wd {
			wi, wd = i, d
		}
	}
	return wi
}

var dtypes = []DType{F16, BF16}

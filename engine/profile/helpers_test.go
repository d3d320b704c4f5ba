package profile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
	goldenfile "github.com/xrun-dev/xrun/results/golden"
)

// golden compares got with testdata/name: golden.Check, the module's
// golden-file helper (-update rewrites the file).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

// testDevice is a CPU with configured ceilings, so that the diagnosis
// does not depend on the machine running the test.
var testDevice = Device{Name: "cpu", PeakBytesPerSec: 20e9, PeakFLOPs: 400e9, PeakSource: "configured", ElemBytes: 4}

// profiledRun serves a small dataset on tiny-llama with a profile window,
// through engine.New / Run exactly as the runner does, and normalises the
// times (see normalise) so that golden files do not depend on the machine.
func profiledRun(t *testing.T, gemm string) (*engine.Result, engine.ModelConfig) {
	t.Helper()
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", BatchSize: 3, MaxNumTokens: 16,
		GemmPlugin: gemm, ProfileWindow: "3-5,8", Warmup: 1, Seed: 3, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var reqs []datasets.Request
	for i := range 4 {
		in := make([]int32, 5+i)
		for j := range in {
			in[j] = int32(1 + (i*7+j*3)%50)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: in, OutputTokens: 4 + i})
	}
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	normalise(res)
	return res, e.Model()
}

// normalise replaces measured times with ones derived from the ops'
// names and order: each op lasts a fixed time for its name, ops of an
// iteration follow each other 200 ns apart, an iteration spans its ops
// plus 1 µs of host work on each side, iterations follow each other.
// Names, counts, iterations and windows stay as the engine produced them;
// the GEMM's name is made independent of the CPU's features.
func normalise(res *engine.Result) {
	opNs := func(name string) time.Duration {
		var h uint32 = 2166136261
		for i := 0; i < len(name); i++ {
			h = (h ^ uint32(name[i])) * 16777619
		}
		return time.Duration(500 + h%4000)
	}
	seen := map[string]int{}
	byIter := map[int][]int{}
	for i := range res.Ops {
		op := &res.Ops[i]
		if strings.HasPrefix(op.Name, "cpu_gemm_blocked") {
			op.Name = "cpu_gemm_blocked_6x16"
		}
		byIter[op.Iteration] = append(byIter[op.Iteration], i)
	}
	now := 10 * time.Microsecond
	for k := range res.Iterations {
		it := &res.Iterations[k]
		it.Start = now
		t := now + time.Microsecond
		for _, i := range byIter[it.Index] {
			op := &res.Ops[i]
			// Instances of a kernel vary a little, as measured ones do.
			op.Start, op.Duration = t, opNs(op.Name)+time.Duration(seen[op.Name]%3*150)
			seen[op.Name]++
			t += op.Duration + 200
		}
		it.Duration = t - it.Start + time.Microsecond
		now += it.Duration + 3*time.Microsecond
	}
}

// gpuResult is a synthetic CUDA pass: mangled C++ kernel names with grid
// and block, copies and a memset on two streams, two overlapping kernels
// on one stream, two iterations.
func gpuResult() *engine.Result {
	res := &engine.Result{Backend: "cuda/cublaslt", Windows: []engine.Span{{First: 7, Last: 8}}}
	us := time.Microsecond
	res.Iterations = []engine.IterationRecord{
		{Index: 6, CtxRequests: 1, CtxTokens: 16, GenRequests: 1, Start: 0, Duration: 90 * us},
		{Index: 7, CtxRequests: 1, CtxTokens: 16, GenRequests: 2, Start: 100 * us, Duration: 150 * us, Profiled: true},
		{Index: 8, GenRequests: 3, Start: 260 * us, Duration: 150 * us, Profiled: true},
	}
	gemm := "_Z13gemm_f16_tileILi128ELi64EEvPK6__halfS2_PS0_iii" // void gemm_f16_tile<128, 64>(__half const*, __half const*, __half*, int, int, int)
	add := func(name string, iter int, start, dur time.Duration, stream uint32, kind string, grid, block [3]uint32, bytes int64, copy string) {
		res.Ops = append(res.Ops, model.OpRecord{Name: name, Iteration: iter, Start: start, Duration: dur, Stream: stream,
			Kind: kind, Grid: grid, Block: block, Bytes: bytes, Copy: copy})
	}
	// Each iteration: a copy in, two GEMMs around a norm (a memset on a
	// second stream meanwhile), ten short element-wise kernels 3 µs apart
	// (launch-bound), the argmax and the copy out; then the host idles.
	for _, base := range []time.Duration{101 * us, 261 * us} {
		iter := 7
		if base > 200*us {
			iter = 8
		}
		add("", iter, base, 2*us, 7, model.OpMemcpy, [3]uint32{}, [3]uint32{}, 4096, "HtoD")
		add(gemm, iter, base+4*us, 20*us, 7, model.OpKernel, [3]uint32{16, 8, 1}, [3]uint32{256, 1, 1}, 0, "")
		add("rmsnorm_f16", iter, base+26*us, 3*us, 7, "", [3]uint32{4, 1, 1}, [3]uint32{1024, 1, 1}, 0, "")
		// Launched with programmatic dependent launch: starts before the
		// norm ends, on the same stream (the trace puts it on a second lane).
		add("_Z10silu_fusedPK6__halfPS_i", iter, base+28*us, 2*us, 7, "", [3]uint32{4, 1, 1}, [3]uint32{256, 1, 1}, 0, "")
		add(gemm, iter, base+31*us, 15*us+time.Duration(iter)*us, 7, model.OpKernel, [3]uint32{16, 8, 1}, [3]uint32{256, 1, 1}, 0, "")
		add("", iter, base+32*us, 1*us, 9, model.OpMemset, [3]uint32{}, [3]uint32{}, 512, "")
		t := base + 55*us
		for k := range 10 {
			add("add_f16", iter, t, time.Duration(1500+100*k), 7, model.OpKernel, [3]uint32{8, 1, 1}, [3]uint32{256, 1, 1}, 0, "")
			t += 4500
		}
		add("argmax_f16", iter, t, 4*us, 7, model.OpKernel, [3]uint32{3, 1, 1}, [3]uint32{512, 1, 1}, 0, "")
		add("", iter, t+5*us, 1*us, 7, model.OpMemcpy, [3]uint32{}, [3]uint32{}, 12, "DtoH")
	}
	return res
}

package profile

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// bigResult is a long GPU window: 1000 iterations of 250 kernels (the
// size of a TinyLlama decode step) over 20 distinct names.
func bigResult() *engine.Result {
	res := &engine.Result{Backend: "cuda/cublaslt"}
	t := time.Millisecond
	for i := range 1000 {
		it := engine.IterationRecord{Index: i, GenRequests: 64, Start: t, Profiled: true}
		for k := range 250 {
			d := time.Duration(1000 + (i*7+k*13)%20000)
			res.Ops = append(res.Ops, model.OpRecord{Name: fmt.Sprintf("_Z6kernelILi%dEEvPf", k%20), Iteration: i, Start: t, Duration: d,
				Kind: model.OpKernel, Stream: 7, Grid: [3]uint32{64, 1, 1}, Block: [3]uint32{256, 1, 1}})
			t += d + 1500
		}
		it.Duration = t - it.Start
		res.Iterations = append(res.Iterations, it)
		t += 20 * time.Microsecond
	}
	return res
}

func BenchmarkSummarize(b *testing.B) {
	res := bigResult()
	b.ReportAllocs()
	for b.Loop() {
		Summarize(res.Ops)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(res.Ops)), "ns/op-record")
}

func BenchmarkTrace(b *testing.B) {
	res := bigResult()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteTrace(io.Discard, BuildTrace(res, TraceInfo{Device: "GPU 0"})); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(res.Ops)), "ns/op-record")
}

func BenchmarkDiagnose(b *testing.B) {
	res := bigResult()
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	dev, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	b.ReportAllocs()
	for b.Loop() {
		Diagnose(res, mc, dev)
	}
}

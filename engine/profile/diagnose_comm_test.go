package profile

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestDiagnoseCommunication: a split model's profile (rank 0's kernels)
// says what share of its kernel time NCCL's collectives took, beside the
// GEMMs' share, and results.json's stats carry it; an unsplit one's says
// nothing about communication.
func TestDiagnoseCommunication(t *testing.T) {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	h100, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	us := time.Microsecond
	iters := []engine.IterationRecord{
		{Index: 0, GenRequests: 64, Start: 0, Duration: 100 * us, Profiled: true},
		{Index: 1, GenRequests: 64, Start: 100 * us, Duration: 100 * us, Profiled: true},
	}
	var ops []model.OpRecord
	for i := range 2 {
		at := time.Duration(i) * 100 * us
		ops = append(ops,
			model.OpRecord{Name: "nvjet_hsh_64x8", Iteration: i, Start: at, Duration: 50 * us},
			model.OpRecord{Name: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Iteration: i, Start: at + 50*us, Duration: 20 * us},
			model.OpRecord{Name: "add_rmsnorm_bf16", Iteration: i, Start: at + 70*us, Duration: 10 * us},
			model.OpRecord{Name: "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Iteration: i, Start: at + 80*us, Duration: 10 * us},
			model.OpRecord{Name: "gather_blocks", Iteration: i, Start: at + 90*us, Duration: 10 * us},
		)
	}
	d := Diagnose(&engine.Result{Backend: "cuda", Iterations: iters, Ops: ops}, mc, h100)
	i := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternCommunication })
	if i < 0 {
		t.Fatalf("no communication finding; diagnosis:\n%s", strings.Join(d.Lines(), "\n"))
	}
	f := d.Findings[i]
	if got := f.Figures["communication_share"]; math.Abs(got-0.3) > 1e-9 {
		t.Errorf("communication_share = %v, want 0.3 (30 of 100 µs)", got)
	}
	if got := f.Figures["communication_ns_per_iteration"]; got != float64(30*us) {
		t.Errorf("communication_ns_per_iteration = %v, want %v", got, float64(30*us))
	}
	if !strings.Contains(f.Text, "30.0% of kernel time") || !strings.Contains(f.Text, "30.0 µs per iteration") {
		t.Errorf("finding %q", f.Text)
	}
	if got := d.Stats()["communication_share"]; math.Abs(got-0.3) > 1e-9 {
		t.Errorf("Stats communication_share = %v, want 0.3", got)
	}
	if !slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, "rank 0's kernels") }) {
		t.Errorf("no note that the profile is rank 0's: %q", d.Notes)
	}
	// The collectives are not GEMMs: the GEMM share is the GEMM's alone.
	g := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternGEMM })
	if g < 0 || math.Abs(d.Findings[g].Figures["gemm_share"]-0.5) > 1e-9 {
		t.Errorf("GEMM finding %+v", d.Findings)
	}

	var unsplit []model.OpRecord
	for _, op := range ops {
		if !IsCommunication(op.Name) {
			unsplit = append(unsplit, op)
		}
	}
	d = Diagnose(&engine.Result{Backend: "cuda", Iterations: iters, Ops: unsplit}, mc, h100)
	if slices.ContainsFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternCommunication }) {
		t.Errorf("communication finding without collectives:\n%s", strings.Join(d.Lines(), "\n"))
	}
	if len(d.Notes) != 0 {
		t.Errorf("notes on an unsplit profile: %q", d.Notes)
	}
	if _, ok := d.Stats()["communication_share"]; ok {
		t.Error("Stats has communication_share without collectives")
	}
}

// TestDiagnoseOverlap: kernels that start before the one before them on
// their stream ends (programmatic dependent launch) get a note with the
// overlap's share of kernel time; kernels on different streams, or back to
// back, do not.
func TestDiagnoseOverlap(t *testing.T) {
	us := time.Microsecond
	ops := []model.OpRecord{
		{Name: "gemm_wg2w_f16", Start: 0, Duration: 20 * us, Stream: 13},
		// Launched 2 µs in, waits for the GEMM, runs 3 µs: 23 µs recorded.
		{Name: "swiglu_f16", Start: 2 * us, Duration: 21 * us, Stream: 13},
		{Name: "gemm_wg2w_f16", Start: 30 * us, Duration: 20 * us, Stream: 13},
		// Another stream's kernel at the same time is concurrency, not a wait.
		{Name: "other", Start: 30 * us, Duration: 10 * us, Stream: 14},
	}
	d := diagnoseOps("NVIDIA H200", 64, ops)
	i := slices.IndexFunc(d.Notes, func(n string) bool { return strings.Contains(n, "programmatic dependent launch") })
	if i < 0 {
		t.Fatalf("no overlap note; diagnosis:\n%s", strings.Join(d.Lines(), "\n"))
	}
	// 18 µs of overlap (2..20) in 71 µs of kernel time.
	if n := d.Notes[i]; !strings.Contains(n, "1 of 4 kernels") || !strings.Contains(n, "18.0 µs") || !strings.Contains(n, "(25.4%)") {
		t.Errorf("note %q", n)
	}
	ops[1].Start, ops[1].Duration = 20*us, 3*us // back to back: no note
	d = diagnoseOps("NVIDIA H200", 64, ops)
	if slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, "programmatic dependent launch") }) {
		t.Errorf("overlap note without overlap: %q", d.Notes)
	}
}

// TestDiagnoseStreams: kernels on a stream beside the busiest one (the
// L2 prefetch's side stream) get a note with their share of kernel time
// and how much of it ran while the busiest stream ran kernels; a side
// stream's sliver under the threshold gets none.
func TestDiagnoseStreams(t *testing.T) {
	us := time.Microsecond
	ops := []model.OpRecord{
		{Name: "gemv_norm_f16_m1_r2_l16", Start: 0, Duration: 10 * us, Stream: 7},
		{Name: "attention_tc_f16", Start: 12 * us, Duration: 8 * us, Stream: 7},
		{Name: "gemv_normglu_f16_m1_r1", Start: 24 * us, Duration: 40 * us, Stream: 7},
		// 5..35: 5 µs under the QKV GEMV, 8 under the attention, 11
		// under the gate_up GEMV, 6 beside nothing.
		{Name: "l2_prefetch", Start: 5 * us, Duration: 30 * us, Stream: 9},
	}
	d := diagnoseOps("NVIDIA H100 80GB HBM3", 1, ops)
	i := slices.IndexFunc(d.Notes, func(n string) bool { return strings.Contains(n, "beside the busiest one") })
	if i < 0 {
		t.Fatalf("no streams note; diagnosis:\n%s", strings.Join(d.Lines(), "\n"))
	}
	// 30 µs of 88 µs of kernel time, 24 µs of it beside stream 7's kernels.
	for _, want := range []string{"1 kernel ran on 1 stream beside the busiest one (l2_prefetch)", "30.0 µs of the 88.0 µs", "(34.1%)", "24.0 µs of it"} {
		if !strings.Contains(d.Notes[i], want) {
			t.Errorf("note %q lacks %q", d.Notes[i], want)
		}
	}
	ops[3].Duration = 2 * us // 2 of 60 µs: under the threshold
	d = diagnoseOps("NVIDIA H100 80GB HBM3", 1, ops)
	if slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, "beside the busiest one") }) {
		t.Errorf("streams note for a sliver: %q", d.Notes)
	}
}

// diagnoseOps diagnoses ops as one profiled decode iteration of 100 µs
// of gen sequences of TinyLlama-1.1B on the GPU named gpu.
func diagnoseOps(gpu string, gen int, ops []model.OpRecord) *Diagnosis {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	dev, _ := GPUDevice(gpu)
	iters := []engine.IterationRecord{{Index: 0, GenRequests: gen, Start: 0, Duration: 100 * time.Microsecond, Profiled: true}}
	return Diagnose(&engine.Result{Backend: "cuda", Iterations: iters, Ops: ops}, mc, dev)
}

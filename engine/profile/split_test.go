package profile

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestRooflineSplitByHand: a split cell's roofline is one GPU's share of
// the work against one GPU's ceilings, on the fixture of
// TestRooflineByHand.
//
// tiny-llama at tp 2 halves every term (2 heads and 1 KV head a rank, FFN
// 80, 256 vocabulary rows): half the bytes and FLOPs, half the floor,
// twice the throughput at it.
//
// tiny-moe at tp 2 / ep 2 (two groups of 4 whole experts): a rank has 2
// heads and 1 KV head (attention 128*32*(2+2*1) + 2*32*128 = 24,576), the
// router whole (1,024), 1,024 LM head rows (131,072), 128 KV elements and
// 512 attention FLOP per position, and on average half the experts
// reached (14 -> 7, 5 -> 2.5) and half a token's top-2 (1 expert):
//
//	iteration 2: bytes 2*(2*24,576 + 7*98,304 + 2*1,024 + 131,072) + 2*128*8 = 1,742,848
//	             FLOPs 2*8*2*(24,576 + 98,304 + 1,024) + 2*2*131,072 + 512*8*2 = 4,497,408
//	iteration 3: bytes 2*(2*24,576 + 2.5*98,304 + 2*1,024 + 131,072) + 2*128*12 = 859,136
//	             FLOPs 2*2*2*(24,576 + 99,328) + 2*2*131,072 + 512*2*5 = 1,520,640
func TestRooflineSplitByHand(t *testing.T) {
	const bw = 4.3e12
	dir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations, layout.ExpertLoadFile: fixtureExpertLoad})

	whole, err := CellRoofline(dir, fixtureCell("tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	c := fixtureCell("tiny-llama")
	c.Split = Split{TP: 2, EP: 1}
	half, err := CellRoofline(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if !near(half.Work.Bytes, whole.Work.Bytes/2) || !near(half.Work.FLOPs, whole.Work.FLOPs/2) || !near(half.Seconds, whole.Seconds/2) || !near(half.OutputTokS, 2*whole.OutputTokS) {
		t.Errorf("tiny-llama tp 2: %+v\nwant half of %+v", *half, *whole)
	}
	if want := "; per GPU: rank 0's slice of the model (tp 2, ep 1 over 2 GPUs) against one GPU's ceilings"; !strings.HasSuffix(half.Basis, want) {
		t.Errorf("basis %q, want it to end %q", half.Basis, want)
	}

	c = fixtureCell("tiny-moe")
	c.Split = Split{TP: 2, EP: 2}
	moe, err := CellRoofline(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes, wantFLOPs := 1742848.0+859136, 4497408.0+1520640
	if !near(moe.Work.Bytes, wantBytes) || !near(moe.Work.FLOPs, wantFLOPs) || !near(moe.Seconds, wantBytes/bw) {
		t.Errorf("tiny-moe tp 2 ep 2: %+v\nwant bytes %g, FLOPs %g, floor %g s", *moe, wantBytes, wantFLOPs, wantBytes/bw)
	}

	// An external engine's split (GPUs alone): the whole work evenly.
	c = fixtureCell("tiny-llama")
	c.Split = Split{GPUs: 4}
	even, err := CellRoofline(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if !near(even.Work.Bytes, whole.Work.Bytes/4) || !near(even.Seconds, whole.Seconds/4) || !strings.Contains(even.Basis, "divided evenly over 4 GPUs") {
		t.Errorf("4 GPUs evenly: %+v", *even)
	}
}

// TestRankIterationWork: attention replicated where ep exceeds tp (tp 1,
// ep 2: every rank runs all of attention and half the experts), so a
// rank's work is more than half the whole's; a split the built-in engine
// cannot make is divided evenly; no split is the whole work.
func TestRankIterationWork(t *testing.T) {
	mc, _ := engine.ZooModel("mixtral-8x7b")
	it := engine.IterationRecord{GenRequests: 64}
	whole := IterationWork(mc, it, 200, 2)
	if got := RankIterationWork(mc, Split{}, it, 200, 2); got != whole {
		t.Errorf("no split: %+v, want %+v", got, whole)
	}
	ep := RankIterationWork(mc, Split{TP: 1, EP: 2}, it, 200, 2)
	if ep.Bytes <= whole.Bytes/2 || ep.Bytes >= whole.Bytes {
		t.Errorf("tp 1 ep 2: %g bytes of %g; want between half and all", ep.Bytes, whole.Bytes)
	}
	tp := RankIterationWork(mc, Split{TP: 2, EP: 1}, it, 200, 2)
	if tp.Bytes >= ep.Bytes {
		t.Errorf("tp 2 (%g bytes) reads no less than tp 1 ep 2 (%g), which replicates attention", tp.Bytes, ep.Bytes)
	}
	// 32 heads do not split 3 ways: the whole work over 3 GPUs.
	odd := RankIterationWork(mc, Split{TP: 3}, it, 200, 2)
	if math.Abs(odd.Bytes-whole.Bytes/3) > 1e-6*whole.Bytes {
		t.Errorf("tp 3: %g bytes, want a third of %g", odd.Bytes, whole.Bytes)
	}
}

// TestDiagnoseSplit: the diagnosis of a split pass (rank 0's profile)
// compares rank 0's share of the work with one GPU's ceilings: at tp 2
// TinyLlama's share of the roofline halves, and a note says so.
func TestDiagnoseSplit(t *testing.T) {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	h100, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	us := time.Microsecond
	var iters []engine.IterationRecord
	var ops []model.OpRecord
	for i := range 2 {
		at := time.Duration(i) * 100 * us
		iters = append(iters, engine.IterationRecord{Index: i, GenRequests: 64, Start: at, Duration: 100 * us, Profiled: true})
		ops = append(ops, model.OpRecord{Name: "nvjet_hsh_64x8", Iteration: i, Start: at, Duration: 90 * us})
	}
	res := &engine.Result{Backend: "cuda", Iterations: iters, Ops: ops}
	fraction := func(d *Diagnosis) float64 {
		i := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternMemoryBound })
		if i < 0 {
			t.Fatalf("no memory-bound finding:\n%s", strings.Join(d.Lines(), "\n"))
		}
		return d.Findings[i].Figures["roofline_fraction"]
	}
	whole := Diagnose(res, mc, h100)
	split := DiagnoseSplit(res, mc, h100, Split{TP: 2, EP: 1})
	if a, b := fraction(whole), fraction(split); !near(b, a/2) {
		t.Errorf("roofline fraction at tp 2 %v, want half of %v", b, a)
	}
	if !slices.ContainsFunc(split.Notes, func(n string) bool {
		return strings.Contains(n, "roofline per GPU: rank 0's slice of the model (tp 2, ep 1 over 2 GPUs)")
	}) {
		t.Errorf("notes %q lack the per-GPU roofline", split.Notes)
	}
	if len(whole.Notes) != 0 {
		t.Errorf("unsplit notes %q", whole.Notes)
	}
	stats := []KernelStat{{Name: "nvjet_hsh_64x8", Instances: 2, TotalNs: 180000}}
	ext := DiagnoseSummarySplit(stats, res, mc, h100, Split{GPUs: 2})
	if a, b := fraction(DiagnoseSummary(stats, res, mc, h100)), fraction(ext); !near(b, a/2) {
		t.Errorf("external engine over 2 GPUs: roofline fraction %v, want half of %v", b, a)
	}
}

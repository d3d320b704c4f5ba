package runner

import (
	"bufio"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine/cuda"
)

// h100 is an H100's memory as NVML reports it.
const h100 = 85017493504

// TestMemoryMixtralOnH100: Mixtral-8x7B in bfloat16 (46.7B parameters,
// 93.4 GB) cannot fit an 80 GB H100, and the plan says so in the words the
// user reads; its first 16 layers and an H200 can.
func TestMemoryMixtralOnH100(t *testing.T) {
	s := mustParse(t, "params: {model: mixtral-8x7b, dtype: bfloat16, batch_size: 64}\nmatrix:\n  layers: [all, 16]\n")
	p := s.Plan
	if err := p.CheckMemory(MemoryOptions{GPUs: []GPUMemory{{Index: 1, Name: "NVIDIA H200", Bytes: 150109880320}, {Index: 0, Name: "NVIDIA H100 80GB HBM3", Bytes: h100}}}); err != nil {
		t.Fatal(err)
	}
	m := p.Memory
	if m.GPU.Index != 0 || m.GPUs != 2 {
		t.Fatalf("checked against %v of %d GPUs, want the smaller, GPU 0", m.GPU, m.GPUs)
	}
	whole, cut := m.Cells[0], m.Cells[1]
	if whole.Fits || !cut.Fits || m.CannotFit != 1 || m.Counted != 2 {
		t.Errorf("whole fits %v, 16 layers fit %v, %d of %d cannot fit", whole.Fits, cut.Fits, m.CannotFit, m.Counted)
	}
	if w := whole.Weights / 1e9; w < 93 || w > 94 {
		t.Errorf("Mixtral-8x7B's weights %.1f GB, want 93.4", w)
	}
	mark := whole.Mark(m.GPU)
	if want := "needs 89.0 GiB, GPU 0 (NVIDIA H100 80GB HBM3) has 79.2 GiB"; mark != want {
		t.Errorf("mark %q, want %q", mark, want)
	}
	// The need adds up: weights, workspaces and the minimum KV cache over
	// the fraction the cache may take; one request of 256 tokens and the
	// padding slot, 128 KiB a token (32 layers x 8 KV heads x 128 x K,V x 2 bytes).
	if kv := float64(2 * 256 * 32 * 8 * 128 * 2 * 2); whole.KVMin != kv || whole.Longest != 256 {
		t.Errorf("KV minimum %g for %d tokens, want %g for 256", whole.KVMin, whole.Longest, kv)
	}
	if got := whole.Weights + whole.Workspace + whole.KVMin/0.9; math.Abs(got-whole.Need) > 1 {
		t.Errorf("need %g, parts add up to %g", whole.Need, got)
	}
	if whole.Workspace < memContext || whole.Workspace > memContext+2<<30 {
		t.Errorf("workspace %.2f GiB", gib(whole.Workspace))
	}
	// 64 requests of 256 tokens in flight: the whole batch fits.
	if cut.InFlight != 64 || cut.KVBatch != float64(64*256*16*8*128*2*2) {
		t.Errorf("16 layers: %d in flight, KV of the batch %g", cut.InFlight, cut.KVBatch)
	}

	// On an H200 (--gpu) the whole model fits.
	if err := p.CheckMemory(MemoryOptions{GPU: "H200"}); err != nil {
		t.Fatal(err)
	}
	if !p.Memory.Cells[0].Fits || p.Memory.GPU.String() != "an H200 (--gpu)" {
		t.Errorf("on %v: fits %v", p.Memory.GPU, p.Memory.Cells[0].Fits)
	}
	var oe *OptionError
	if err := p.CheckMemory(MemoryOptions{GPU: "A100"}); !errors.As(err, &oe) || oe.Option != "--gpu" {
		t.Errorf("--gpu A100: %v", err)
	}
}

// TestMemoryInFlight: the KV cache holds min(batch_size, what fits)
// requests, every slot sized for the longest request, one slot kept for
// padding rows, as the engine admits them.
func TestMemoryInFlight(t *testing.T) {
	s := mustParse(t, "params: {model: llama-3.1-8b, batch_size: 4096, dataset: {num_requests: 8192, input_mean: 1024, output_mean: 1024, input_stdev: 10, output_stdev: 5}}\n")
	if err := s.Plan.CheckMemory(MemoryOptions{}); err != nil {
		t.Fatal(err)
	}
	m := s.Plan.Memory.Cells[0]
	if m.Longest != 2048+6*15 {
		t.Errorf("longest request %d tokens, want the means + 6 stdevs, 2138", m.Longest)
	}
	perSlot := float64(32*8*128*2*2) * float64(m.Longest)
	want := int(math.Floor(0.9*(h100-m.Weights-m.Workspace)/perSlot)) - 1
	if m.InFlight != want || want >= 4096 || want < 100 {
		t.Errorf("%d in flight, want %d", m.InFlight, want)
	}
}

// TestMemoryNotCounted: cpu cells hold no GPU memory, external engines
// allocate their own; a dataset file's KV cache is unknown.
func TestMemoryNotCounted(t *testing.T) {
	p, err := LoadSpec("testdata/plan/memory.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Plan.CheckMemory(MemoryOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, c := range p.Plan.Cells {
		m := p.Plan.Memory.Cells[i]
		switch {
		case c.Params.Engine == "cpu":
			if m.Counted || m.column() != "-" {
				t.Errorf("cpu cell counted: %+v", m)
			}
		case c.DatasetFile != "":
			if !m.Counted || m.KVMin != 0 || m.Need != m.Weights+m.Workspace || !strings.HasSuffix(m.column(), "+") {
				t.Errorf("dataset file cell: %+v (%s)", m, m.column())
			}
		}
	}
	s := mustParse(t, "params: {model: tinyllama-1.1b, engine: trtllm}\n")
	if err := s.Plan.CheckMemory(MemoryOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := s.Plan.Memory; m.Counted != 0 || len(m.NotCounted) != 1 {
		t.Errorf("trtllm cell: %+v", m)
	}
}

// TestRunRefusesCellsThatCannotFit: xrun run refuses, before anything
// runs, the selected cuda cells that cannot fit the smallest GPU, naming
// each; cells it would not run do not count, and GPUs whose memory is
// unknown are not checked.
func TestRunRefusesCellsThatCannotFit(t *testing.T) {
	spec, err := ParseSpec("fit.yaml", []byte(`name: fit
params: {engine: cuda, dtype: bfloat16}
matrix:
  model: [mixtral-8x7b, tinyllama-1.1b]
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	build := func(mem uint64, only ...string) error {
		dir := t.TempDir()
		s := &study{spec: spec, dir: dir, log: zerolog.Nop(), o: Options{CacheDir: dir}}
		s.gpus = []cuda.DeviceInfo{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-0", MemoryBytes: mem}}
		sel, err := selectCells(spec.Plan, only)
		if err != nil {
			t.Fatal(err)
		}
		return s.buildPlan(sel)
	}
	err = build(h100)
	var me *MemoryError
	if !errors.As(err, &me) || !me.BadInput() || len(me.Cells) != 1 {
		t.Fatalf("error %v, want a MemoryError naming one cell", err)
	}
	id := spec.Plan.Cells[0].ID
	if want := id + ": needs 89.0 GiB, GPU 0 (NVIDIA H100 80GB HBM3) has 79.2 GiB"; me.Cells[0] != want || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want the line %q", err, want)
	}
	if err := build(h100, "model=tinyllama-1.1b"); err != nil {
		t.Errorf("only the cell that fits: %v", err)
	}
	if err := build(0); err != nil {
		t.Errorf("a GPU of unknown memory: %v", err)
	}
}

// TestCheckFitWithoutGPUs: with no GPU nothing is refused.
func TestCheckFitWithoutGPUs(t *testing.T) {
	s := mustParse(t, "params: {model: mixtral-8x7b}\n")
	if err := CheckFit([]*Cell{&s.Plan.Cells[0]}, nil); err != nil {
		t.Error(err)
	}
	if err := CheckFit([]*Cell{&s.Plan.Cells[0]}, []GPUMemory{{Index: 0, Name: "G", Bytes: h100}}); err == nil {
		t.Error("Mixtral-8x7B fits an H100")
	}
}

// TestMemorySplit: a split cell's need is per GPU, each holding its
// rank's slice (engine.Share): Mixtral-8x7B in bfloat16 fits an 80 GB H100
// at tp 2 (about 47 GB of weights a GPU) and at tp 2 / ep 2, not at tp 1;
// the KV cache halves with the KV heads, and the plan says the need is
// per GPU.
func TestMemorySplit(t *testing.T) {
	s := mustParse(t, "params: {model: mixtral-8x7b, dtype: bfloat16, batch_size: 64, engine: cuda}\nmatrix:\n  tp: [1, 2]\n  ep: [1, 2]\n")
	p := s.Plan
	if err := p.CheckMemory(MemoryOptions{GPUs: []GPUMemory{{Index: 0, Name: "NVIDIA H100 80GB HBM3", Bytes: h100}}}); err != nil {
		t.Fatal(err)
	}
	byTPEP := map[[2]int]CellMemory{}
	for i, c := range p.Cells {
		byTPEP[[2]int{c.Params.TP, c.Params.EP}] = p.Memory.Cells[i]
	}
	whole, tp2, tp2ep2, ep2 := byTPEP[[2]int{1, 1}], byTPEP[[2]int{2, 1}], byTPEP[[2]int{2, 2}], byTPEP[[2]int{1, 2}]
	if whole.Fits || whole.GPUs != 1 {
		t.Errorf("tp 1: fits %v on %d GPUs", whole.Fits, whole.GPUs)
	}
	for name, m := range map[string]CellMemory{"tp 2": tp2, "tp 2 ep 2": tp2ep2} {
		if !m.Fits || m.GPUs != 2 || m.InFlight != 64 {
			t.Errorf("%s: fits %v on %d GPUs, %d in flight", name, m.Fits, m.GPUs, m.InFlight)
		}
		if gb := m.Weights / 1e9; gb < 46.5 || gb > 47.5 {
			t.Errorf("%s: %.1f GB of weights a GPU, want about 47", name, gb)
		}
		if m.KVMin != whole.KVMin/2 {
			t.Errorf("%s: KV minimum %g, want half of %g (4 of 8 KV heads)", name, m.KVMin, whole.KVMin)
		}
		if extra := m.Workspace - memContext; extra < memNCCL || extra > memNCCL+2<<30 {
			t.Errorf("%s: workspace %.2f GiB besides the context", name, gib(extra))
		}
	}
	// tp 1 / ep 2: attention replicated, the experts in halves: more a GPU
	// than tp 2, and still the KV cache of all 8 KV heads.
	if !ep2.Fits || ep2.Weights <= tp2.Weights || ep2.KVMin != whole.KVMin {
		t.Errorf("tp 1 ep 2: fits %v, weights %.1f GB (tp 2: %.1f), KV %g", ep2.Fits, ep2.Weights/1e9, tp2.Weights/1e9, ep2.KVMin)
	}
	// Its workspaces are the unsplit cell's (the same activations, no
	// vocabulary split, so no logits gathered) and one NCCL communicator.
	if d := ep2.Workspace - whole.Workspace; d != memNCCL {
		t.Errorf("tp 1 ep 2: workspace %.3f GiB more than unsplit, want %.3f (one NCCL communicator)", gib(d), gib(memNCCL))
	}
	var text strings.Builder
	bw := bufio.NewWriter(&text)
	p.Memory.writeText(bw, p.Cells)
	bw.Flush()
	for _, want := range []string{"1 cell cannot fit it", "3 cells split over GPUs (tp, ep): their need is per GPU", "0.5 GiB for each NCCL communicator"} {
		if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), want) {
			t.Errorf("memory section lacks %q:\n%s", want, text.String())
		}
	}
	// The run refuses the unsplit cell only.
	cells := make([]*Cell, len(p.Cells))
	for i := range p.Cells {
		cells[i] = &p.Cells[i]
	}
	var me *MemoryError
	if err := CheckFit(cells, []GPUMemory{{Index: 0, Name: "NVIDIA H100 80GB HBM3", Bytes: h100}}); !errors.As(err, &me) || len(me.Cells) != 1 || !strings.HasPrefix(me.Cells[0], p.Cells[0].ID+": ") {
		t.Errorf("CheckFit: %v, want the tp 1 cell alone", err)
	}
}

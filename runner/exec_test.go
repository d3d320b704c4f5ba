package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
)

// fakeExecutor stands in for worker processes: it checks that no two cells
// it runs at once share a GPU and that a cell on the cpu backend runs alone.
type fakeExecutor struct {
	t        *testing.T
	mu       sync.Mutex
	busy     map[string]bool // GPU UUIDs in use
	running  int
	cpu      bool // a cpu cell is running
	most     int
	gpusSeen map[string][]string // cell -> GPUs
}

func (f *fakeExecutor) run(_ context.Context, c *workerCell, gpus []string) outcome {
	f.mu.Lock()
	f.running++
	f.most = max(f.most, f.running)
	if c.Engine.Backend == "cpu" && (len(gpus) > 0 || f.running > 1) {
		f.t.Errorf("cpu cell %s runs beside %d others, on GPUs %v", c.ID, f.running-1, gpus)
	}
	if f.cpu {
		f.t.Errorf("cell %s runs beside a cpu cell", c.ID)
	}
	f.cpu = c.Engine.Backend == "cpu"
	if c.Engine.Backend == "cuda" && len(gpus) != c.Engine.NumGPUs {
		f.t.Errorf("cell %s got GPUs %v, want %d", c.ID, gpus, c.Engine.NumGPUs)
	}
	for _, g := range gpus {
		if f.busy[g] {
			f.t.Errorf("cell %s got GPU %s, which another cell holds", c.ID, g)
		}
		f.busy[g] = true
	}
	f.gpusSeen[c.ID] = gpus
	f.mu.Unlock()

	time.Sleep(30 * time.Millisecond)

	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	f.cpu = false
	for _, g := range gpus {
		f.busy[g] = false
	}
	rec := &cellRecord{Cell: results.Cell{ID: c.ID, Status: results.StatusOK, Repeats: []results.Metrics{{"request_throughput_req_s": 1}}}}
	return outcome{id: c.ID, rec: rec, elapsed: 30 * time.Millisecond}
}

// TestExecuteSchedules runs a study on three made-up GPUs: cuda cells side
// by side on distinct GPUs, cpu cells alone.
func TestExecuteSchedules(t *testing.T) {
	spec, err := ParseSpec("sched.yaml", []byte(`schema_version: 1
name: sched
params:
  model: tiny-llama
  dataset: {num_requests: 2, input_mean: 4, output_mean: 2}
matrix:
  engine: [cuda, cpu]
  batch_size: [1, 2, 4, 8, 16]
  include:
    - {engine: cuda, batch_size: 32, gpus_per_cell: 2}
repeats: 1
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fakeExecutor{t: t, busy: map[string]bool{}, gpusSeen: map[string][]string{}}
	s := &study{spec: spec, dir: dir, log: zerolog.Nop(), progress: noProgress{}, exec: f,
		o:    Options{CacheDir: dir},
		gpus: []cuda.DeviceInfo{{Index: 0, Name: "G", UUID: "GPU-0"}, {Index: 1, Name: "G", UUID: "GPU-1"}, {Index: 2, Name: "G", UUID: "GPU-2"}}}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	s.initResults(context.Background())
	res, err := s.execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.most < 2 {
		t.Errorf("at most %d cells ran at once on 3 GPUs", f.most)
	}
	for _, c := range res.Cells {
		if c.Status != results.StatusOK {
			t.Errorf("cell %s: %s %q", c.ID, c.Status, c.Error)
		}
	}
	if len(f.gpusSeen) != len(spec.Plan.Cells) {
		t.Errorf("%d cells ran, want %d", len(f.gpusSeen), len(spec.Plan.Cells))
	}
	two := 0
	for _, g := range f.gpusSeen {
		if len(g) == 2 {
			two++
		}
	}
	if two != 1 {
		t.Errorf("%d cells ran on two GPUs, want the one with gpus_per_cell 2", two)
	}
}

package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestShuffled: a seed gives one order, the same on every platform and Go
// release (the permutations below are part of --order-seed's promise), and
// every cell once.
func TestShuffled(t *testing.T) {
	var q []*runCell
	for i := range 8 {
		q = append(q, &runCell{cell: &Cell{ID: fmt.Sprintf("c%d", i)}})
	}
	order := func(seed int64) string {
		var ids []string
		for _, rc := range shuffled(q, seed) {
			ids = append(ids, rc.cell.ID)
		}
		return strings.Join(ids, " ")
	}
	for seed, want := range map[int64]string{
		1:          "c6 c4 c5 c2 c1 c7 c0 c3",
		42:         "c5 c2 c1 c3 c6 c4 c0 c7",
		2147483647: "c2 c0 c7 c3 c6 c1 c5 c4",
	} {
		if got := order(seed); got != want {
			t.Errorf("seed %d: %s, want %s", seed, got, want)
		}
	}
	if q[0].cell.ID != "c0" || q[7].cell.ID != "c7" {
		t.Error("shuffled reordered its argument")
	}
	if got := shuffled(q[:1], 5); len(got) != 1 || got[0] != q[0] {
		t.Error("one cell: not itself")
	}
	if got := shuffled(nil, 5); len(got) != 0 {
		t.Error("no cells: some")
	}
}

// TestOrderSeed: the options choose the order; a run draws a seed of its
// own when given none.
func TestOrderSeed(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want int64 // -1: drawn
		err  string
	}{
		{Options{}, 0, ""},
		{Options{Order: OrderPlan}, 0, ""},
		{Options{Order: OrderRandom}, -1, ""},
		{Options{Order: OrderRandom, OrderSeed: 9}, 9, ""},
		{Options{OrderSeed: 9}, 9, ""},
		{Options{Order: OrderPlan, OrderSeed: 9}, 0, "--order-seed: only with --order random"},
		{Options{Order: OrderRandom, OrderSeed: -3}, 0, "--order-seed: -3: expected an integer >= 1"},
		{Options{Order: "shuffled"}, 0, `--order: "shuffled": expected plan or random`},
	} {
		s := &study{o: tc.o}
		got, err := s.orderSeed()
		switch {
		case tc.err != "":
			var oe *OptionError
			if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%+v: %d, %v; want %q", tc.o, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc.o, err)
		case tc.want == -1 && (got < 1 || got > maxDrawnSeed):
			t.Errorf("%+v: drew %d, want a seed in [1, %d]", tc.o, got, maxDrawnSeed)
		case tc.want != -1 && got != tc.want:
			t.Errorf("%+v: %d, want %d", tc.o, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want CellOrder
	}{{"plan", OrderPlan}, {"random", OrderRandom}, {" random ", OrderRandom}} {
		if got, err := ParseCellOrder(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseCellOrder(%q) = %q, %v", tc.in, got, err)
		}
	}
	if _, err := ParseCellOrder("planned"); err == nil {
		t.Error("ParseCellOrder(planned): no error")
	}
}

// recordingCells is a cellExecutor whose cells succeed, one repeat each,
// or end as outcomes says; it lists the cells in the order they ran.
type recordingCells struct {
	mu       sync.Mutex
	ran      []string
	outcomes map[string]outcome
}

func (f *recordingCells) run(_ context.Context, c *workerCell, _ []string) outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, c.ID)
	if o, ok := f.outcomes[c.ID]; ok {
		o.id = c.ID
		return o
	}
	rec := &cellRecord{Cell: results.Cell{ID: c.ID, Status: results.StatusOK, Repeats: []results.Metrics{{"request_throughput_req_s": 1}}}}
	return outcome{id: c.ID, rec: rec}
}

// cpuStudy plans a study of six cpu cells in a new directory, its results
// laid out as Run lays them out before the first cell.
func cpuStudy(t *testing.T, log zerolog.Logger) *study {
	t.Helper()
	spec, err := ParseSpec("six.yaml", []byte(`schema_version: 1
name: six
params:
  engine: cpu
  model: tiny-llama
  dataset: {num_requests: 2, input_mean: 4, output_mean: 2}
matrix:
  batch_size: [1, 2, 4]
  gemm_plugin: [auto, disable]
repeats: 1
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &study{spec: spec, dir: dir, log: log, progress: noProgress{}, o: Options{CacheDir: dir}}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExecuteRandomOrder: with a seed, the cells to run run in the order
// it gives (those kept by --resume not at all); results.json keeps the
// plan's order and records the seed.
func TestExecuteRandomOrder(t *testing.T) {
	for _, seed := range []int64{0, 3, 11} {
		s := cpuStudy(t, zerolog.Nop())
		s.seed = seed
		// Two cells complete from an earlier run.
		for _, i := range []int{1, 4} {
			s.cells[i].record = &cellRecord{Cell: results.Cell{ID: s.cells[i].cell.ID, Status: results.StatusOK,
				Repeats: []results.Metrics{{"request_throughput_req_s": 2}}}}
		}
		s.initResults(context.Background())
		f := &recordingCells{}
		s.exec = f
		res, err := s.execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := ids(s, 0, 2, 3, 5)
		if seed != 0 {
			var q []*runCell
			for _, i := range []int{0, 2, 3, 5} {
				q = append(q, s.cells[i])
			}
			want = nil
			for _, rc := range shuffled(q, seed) {
				want = append(want, rc.cell.ID)
			}
		}
		if !slices.Equal(f.ran, want) {
			t.Errorf("seed %d: ran %v, want %v", seed, f.ran, want)
		}
		if got := cellIDs(res); !slices.Equal(got, ids(s, 0, 1, 2, 3, 4, 5)) {
			t.Errorf("seed %d: results list %v, want the plan's order", seed, got)
		}
		disk, err := results.ReadFile(filepath.Join(s.dir, layout.JSONFile))
		if err != nil || res.OrderSeed != seed || disk.OrderSeed != seed {
			t.Errorf("seed %d: results record seed %d, results.json %v (%v)", seed, res.OrderSeed, disk, err)
		}
	}
	// Seeds 3 and 11 give different orders of the four cells: the test
	// above compares something.
	s := cpuStudy(t, zerolog.Nop())
	a, b := shuffled(s.cells, 3), shuffled(s.cells, 11)
	if slices.Equal(a, b) || slices.Equal(a, s.cells) {
		t.Error("seeds 3 and 11 do not shuffle six cells apart")
	}
}

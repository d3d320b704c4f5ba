package runner

import (
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
)

const searchSpec = `name: s
params:
  model: tiny-llama
  engine: cpu
matrix:
  batch_size: [4, 8]
  request_rate: [1, 64]
  include:
    - {batch_size: 2, request_rate: 1}
slo: {ttft_ms: 100}
search: {axis: request_rate, low: 1, high: 64}
`

// point is a measured cell of a plan with the given SLO attainment.
func point(c *Cell, attainment float64) results.Cell {
	m := results.Metrics{"slo_attainment": attainment}
	return results.Cell{ID: c.ID, Params: results.Params(c.Flat()), Status: results.StatusOK, Repeats: []results.Metrics{m, m}}
}

func TestSearchNext(t *testing.T) {
	spec := mustParse(t, searchSpec)
	res := &results.Results{Name: "s"}
	for i := range spec.Plan.Cells {
		c := &spec.Plan.Cells[i]
		// batch 8 meets the SLO at 64 req/s, batch 4 does not; batch 2
		// has only its point at 1.
		att := 1.0
		if c.Params.BatchSize == 4 && c.Params.RequestRate == 64 {
			att = 0.5
		}
		res.Cells = append(res.Cells, point(c, att))
	}
	set, points, err := SearchNext(spec, res)
	if err != nil {
		t.Fatal(err)
	}
	// batch 2 measures high next, batch 4 bisects (8), batch 8's search
	// has ended above high.
	want := []string{"batch_size=2: request_rate=64", "batch_size=4: request_rate=8"}
	if strings.Join(points, "; ") != strings.Join(want, "; ") {
		t.Errorf("points %q, want %q", points, want)
	}
	next := mustParse(t, searchSpec, set)
	got := map[string]bool{}
	for _, c := range next.Plan.Cells {
		got[c.ID] = true
	}
	if len(next.Plan.Cells) != len(spec.Plan.Cells)+2 {
		t.Errorf("%d cells after adding 2 points to %d", len(next.Plan.Cells), len(spec.Plan.Cells))
	}
	for _, c := range spec.Plan.Cells {
		if !got[c.ID] {
			t.Errorf("cell %s (the spec's include entry among them) is gone from the next round", c.ID)
		}
	}
	// Without a search there is nothing to add.
	plain := mustParse(t, "name: p\nparams: {model: tiny-llama}\n")
	if set, points, err := SearchNext(plain, res); set != "" || points != nil || err != nil {
		t.Errorf("no search: %q %v %v", set, points, err)
	}
}

func TestSearchRoundsStop(t *testing.T) {
	spec := mustParse(t, searchSpec)
	rounds := 0
	// A run that never measures anything (every cell skipped, out of
	// time): the same points are asked for again, and the rounds stop
	// there rather than loop.
	run := func(sp *Spec, round int) (*results.Results, error) {
		rounds++
		r := &results.Results{Name: "s"}
		for _, c := range sp.Plan.Cells {
			r.Cells = append(r.Cells, results.Cell{ID: c.ID, Params: results.Params(c.Flat()), Status: results.StatusSkipped})
		}
		return r, nil
	}
	load := func(sets []string) (*Spec, error) {
		return ParseSpec(spec.File, []byte(searchSpec), LoadOptions{Sets: sets})
	}
	if _, err := SearchRounds(spec, load, run, nil); err != nil {
		t.Fatal(err)
	}
	if rounds != 2 {
		t.Errorf("%d rounds, want 2 (the spec's, then the first points once)", rounds)
	}
}

func TestLoadParams(t *testing.T) {
	spec := mustParse(t, `name: l
params: {model: tiny-llama, engine: cpu}
matrix:
  request_rate: [inf, 2.5]
  burstiness: [1, 0.25]
  concurrency: [none, 8]
`)
	// burstiness does not apply without a rate, so those cells collapse.
	if n := len(spec.Plan.Cells); n != 2+4 {
		t.Errorf("%d cells, want 6", n)
	}
	for _, c := range spec.Plan.Cells {
		l := cellLoad(&c.Params)
		if c.Params.RequestRate == 0 && c.applies(pBurstiness) {
			t.Errorf("%s: burstiness applies at rate inf", c.ID)
		}
		if l.RequestRate != c.Params.RequestRate || l.Concurrency != c.Params.Concurrency || l.Seed != uint64(c.Params.Dataset.Seed) {
			t.Errorf("%s: load %+v from %+v", c.ID, l, c.Params)
		}
		if !strings.Contains(c.ID, "rate-") || !strings.Contains(c.ID, "users-") {
			t.Errorf("id %s does not name the load", c.ID)
		}
	}
	// A spec without them keeps its cells' ids: the load parameters are in
	// a cell's identity only where given. YAML's .inf is inf.
	a := mustParse(t, "name: a\nparams: {model: tiny-llama, engine: cpu}\n")
	if _, ok := a.Plan.Cells[0].Flat()["request_rate"]; ok {
		t.Errorf("request_rate in an unloaded cell's parameters: %v", a.Plan.Cells[0].Flat())
	}
	b := mustParse(t, "name: a\nparams: {model: tiny-llama, engine: cpu, request_rate: .inf, concurrency: 3}\n")
	if f := b.Plan.Cells[0].Flat(); f["request_rate"] != 0.0 || f["concurrency"] != 3 {
		t.Errorf("given: %v", f)
	}
}

package runner

import (
	"slices"
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
	for _, tc := range []struct {
		name, err string
		rounds    int
	}{
		// A run that never gets to its cells: the same points are asked
		// for again once, and the rounds stop there rather than loop.
		{"not run", results.NotRunYet, 2},
		// A run that stopped (the time limit, an interrupt): the frontier
		// says the points were not measured, and no round asks again.
		{"stopped", "not run: the study stopped at its time limit (xrun run --resume runs it)", 1},
	} {
		spec := mustParse(t, searchSpec)
		rounds := 0
		run := func(sp *Spec, round int) (*results.Results, error) {
			rounds++
			r := &results.Results{Name: "s"}
			for _, c := range sp.Plan.Cells {
				r.Cells = append(r.Cells, results.Cell{ID: c.ID, Params: results.Params(c.Flat()), Status: results.StatusSkipped, Error: tc.err})
			}
			return r, nil
		}
		load := func(sets []string) (*Spec, error) {
			return ParseSpec(spec.File, []byte(searchSpec), LoadOptions{Sets: sets})
		}
		if _, err := SearchRounds(spec, load, run, nil); err != nil {
			t.Fatal(err)
		}
		if rounds != tc.rounds {
			t.Errorf("%s: %d rounds, want %d", tc.name, rounds, tc.rounds)
		}
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

// attainment is searchSpec's: batch 4 misses the SLO at 64 req/s.
func attainment(c *Cell) float64 {
	if c.Params.BatchSize == 4 && c.Params.RequestRate == 64 {
		return 0.5
	}
	return 1
}

// TestSearchResumed: the points an earlier run's rounds added (cells of
// its results the spec's plan lacks) come back as include entries beside
// the spec's own, with the same ids; another study's results add nothing.
func TestSearchResumed(t *testing.T) {
	spec := mustParse(t, searchSpec)
	res := &results.Results{Name: "s", Axes: []results.Axis{{Name: "batch_size"}, {Name: "request_rate"}}}
	for i := range spec.Plan.Cells {
		c := &spec.Plan.Cells[i]
		res.Cells = append(res.Cells, point(c, attainment(c)))
	}
	set, _, err := SearchNext(spec, res)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier run: its round 1 added points, of which one was
	// measured and one was not (interrupted); both come back.
	earlier := mustParse(t, searchSpec, set)
	prior := &results.Results{Name: "s", Axes: res.Axes}
	var added []string
	for i := range earlier.Plan.Cells {
		c := &earlier.Plan.Cells[i]
		p := point(c, attainment(c))
		if !slices.ContainsFunc(spec.Plan.Cells, func(s Cell) bool { return s.ID == c.ID }) {
			added = append(added, c.ID)
			if len(added) == 2 {
				p.Status, p.Repeats = results.StatusSkipped, nil
			}
		}
		prior.Cells = append(prior.Cells, results.Cell{ID: p.ID, Params: results.Params(earlier.Plan.Cells[i].Flat()), Status: p.Status, Repeats: p.Repeats})
	}
	if len(added) != 2 {
		t.Fatalf("round 1 added %v", added)
	}
	// As read back from results.json: numbers as JSON has them.
	norm, err := results.Normalized(prior)
	if err != nil {
		t.Fatal(err)
	}
	set, ids, err := SearchResumed(spec, norm)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(added))) {
		t.Errorf("ids %v, want %v", ids, added)
	}
	resumed := mustParse(t, searchSpec, set)
	var got []string
	for _, c := range resumed.Plan.Cells {
		got = append(got, c.ID)
	}
	var want []string
	for _, c := range earlier.Plan.Cells {
		want = append(want, c.ID)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("resumed plan %v, want the earlier run's %v", got, want)
	}
	other := *norm
	other.Name = "other"
	if set, ids, err := SearchResumed(spec, &other); set != "" || ids != nil || err != nil {
		t.Errorf("another study's results: %q %v %v", set, ids, err)
	}
}

// TestSearchStalled: the log names the groups whose search did not end,
// with the bracket so far and why, and none of those that ended.
func TestSearchStalled(t *testing.T) {
	spec := mustParse(t, searchSpec)
	res := &results.Results{Name: "s", SLO: spec.SLO, Search: spec.Search,
		Axes: []results.Axis{{Name: "batch_size"}, {Name: "request_rate"}}}
	for i := range spec.Plan.Cells {
		c := &spec.Plan.Cells[i]
		rc := point(c, 1)
		switch {
		case c.Params.BatchSize == 4 && c.Params.RequestRate == 64:
			rc = point(c, 0.5)
		case c.Params.BatchSize == 2:
			// Its only point, at low, was left out by --only.
			rc.Status, rc.Repeats, rc.Error = results.StatusSkipped, nil, results.NotSelected
		}
		res.Cells = append(res.Cells, rc)
	}
	got := strings.Join(SearchStalled(res), "\n")
	for _, want := range []string{
		"batch_size=2: not searched (highest meeting the SLO so far none, lowest failing none): its next point, cell ",
		"batch_size=4: searching (highest meeting the SLO so far 1, lowest failing 64)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stalled groups lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "batch_size=8") {
		t.Errorf("batch 8's search ended above high, yet is listed:\n%s", got)
	}
	if SearchStalled(nil) != nil {
		t.Error("no results: something stalled")
	}
}

// load_duration sizes each rate's dataset for about as long a load:
// ceil(rate x duration) requests, dataset.num_requests the least; it has
// no effect offline, and a dataset file cannot be sized.
func TestLoadDuration(t *testing.T) {
	spec := mustParse(t, `name: l
params: {model: tiny-llama, engine: cpu, load_duration: 5s, dataset: {num_requests: 120}}
matrix:
  request_rate: [inf, 16, 1024, 0.3]
`)
	want := map[float64]int{0: 120, 16: 120, 1024: 5120, 0.3: 120}
	if len(spec.Plan.Cells) != len(want) {
		t.Fatalf("%d cells, want %d", len(spec.Plan.Cells), len(want))
	}
	for _, c := range spec.Plan.Cells {
		if n := c.Params.Dataset.NumRequests; n != want[c.Params.RequestRate] {
			t.Errorf("%s: %d requests, want %d", c.ID, n, want[c.Params.RequestRate])
		}
		if off := c.Params.RequestRate == 0; off == c.applies(pLoadDuration) {
			t.Errorf("%s: load_duration applies %v at rate %v", c.ID, !off, c.Params.RequestRate)
		}
	}
	// 33 req/s for 5 s: 165 requests, one dataset of its own.
	s := mustParse(t, "name: l\nparams: {model: tiny-llama, engine: cpu, request_rate: 33, load_duration: 5s, dataset: {num_requests: 10}}\n")
	if n := s.Plan.Cells[0].Params.Dataset.NumRequests; n != 165 {
		t.Errorf("33 req/s for 5s: %d requests, want 165", n)
	}
	// Without it, as before: its cells keep their ids.
	a, b := mustParse(t, "name: a\nparams: {model: tiny-llama, engine: cpu, request_rate: 16}\n"),
		mustParse(t, "name: a\nparams: {model: tiny-llama, engine: cpu, request_rate: 16, load_duration: none}\n")
	if a.Plan.Cells[0].Params.Dataset.NumRequests != 1000 || b.Plan.Cells[0].Params.Dataset.NumRequests != 1000 {
		t.Errorf("no load_duration: %d and %d requests, want 1000", a.Plan.Cells[0].Params.Dataset.NumRequests, b.Plan.Cells[0].Params.Dataset.NumRequests)
	}
	for _, c := range []struct{ spec, err string }{
		{"params: {model: tiny-llama, engine: cpu, request_rate: 16, load_duration: 5s, dataset: {generator: testdata/plan/data/two.jsonl}}",
			"load_duration sizes a generated dataset"},
		{"params: {model: tiny-llama, engine: cpu, request_rate: 1e9, load_duration: 1h}", "more than dataset.num_requests allows"},
		{"params: {model: tiny-llama, engine: cpu, load_duration: 5}", `give a unit: "5s"`},
		{"params: {model: tiny-llama, engine: cpu, load_duration: -5s}", "expected a positive duration"},
	} {
		parseCase(t, c.spec, c.err)
	}
}

package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// servingStudy is a synthetic SLO search: two engines, each point's
// latencies rising with the request rate towards the engine's capacity
// (an M/M/1-like 1/(1-load)), so that TTFT crosses the SLO between two
// rates. slow multiplies engine b's latencies (a regression) and lowers
// its goodput with its attainment.
func servingStudy(slow float64, seed uint64) *Results {
	slo := &SLO{TTFTms: 200, TPOTms: 50, Percentile: 90}
	r := &Results{
		Name: "serving", Environment: testEnvironment(), SLO: slo,
		Axes: []Axis{{Name: "engine", Values: []any{"a", "b"}},
			{Name: "request_rate", Values: []any{1.0, 8.0, 10.4, 11.8, 13.4, 17.4, 19.8, 22.6, 64.0}}},
		Search: &Search{Axis: "request_rate", Low: 1, High: 64, Metric: SearchGoodput, Tolerance: 0.1},
	}
	capacity := map[string]float64{"a": 20, "b": 12}
	rng := rand.New(rand.NewPCG(seed, 7))
	// The points a search of this study measures: 1 and 64 from the
	// matrix, then the bisections.
	points := map[string][]float64{"a": {1, 8, 13.4, 17.4, 19.8, 22.6, 64}, "b": {1, 8, 10.4, 11.8, 13.4, 22.6, 64}}
	for _, eng := range []string{"a", "b"} {
		for _, rate := range points[eng] {
			p := Params{"engine": eng, "request_rate": rate}
			c := Cell{ID: cellID(fmt.Sprintf("%s_rate-%g", eng, rate), p), Params: p, Status: StatusOK}
			load := math.Min(rate/capacity[eng], 0.999)
			// 8 repeats: enough for the U test to survive the correction
			// over every metric of every point.
			for range 8 {
				noise := 1 + 0.01*rng.NormFloat64()
				ttft := 50 / (1 - load) * noise
				if eng == "b" {
					ttft *= slow
				}
				tpot := 10 * (1 + load) * noise
				met := 1.0
				if ttft > slo.TTFTms {
					met = math.Max(0, 1-(ttft-slo.TTFTms)/slo.TTFTms)
				}
				c.Repeats = append(c.Repeats, Metrics{
					"request_throughput_req_s": math.Min(rate, capacity[eng]) * noise, "ttft_p99_ms": ttft, "tpot_p99_ms": tpot,
					"ttft_p90_ms": ttft * 0.9, "tpot_p90_ms": tpot * 0.95, "itl_p99_ms": tpot * 1.2,
					"per_user_output_throughput_tok_s": 1000 / tpot, "system_output_throughput_tok_s": 128 * math.Min(rate, capacity[eng]) * noise,
					"achieved_request_rate_req_s": rate * noise, "slo_attainment": met, "goodput_req_s": met * math.Min(rate, capacity[eng]) * noise,
				})
			}
			r.Cells = append(r.Cells, c)
		}
	}
	n, err := Normalized(r)
	if err != nil {
		panic(err)
	}
	return n
}

func TestSearchFrontierGolden(t *testing.T) {
	r := servingStudy(1, 1)
	f := r.Search.Frontier
	if len(f) != 2 {
		t.Fatalf("frontier %+v", f)
	}
	// Engine a's capacity is 20 req/s: TTFT 50/(1-load) passes 200 ms
	// at 15 req/s; b's at 9.
	for i, want := range []struct{ best, fail float64 }{{13.4, 17.4}, {8, 10.4}} {
		if f[i].Best == nil || *f[i].Best != want.best || f[i].FailAbove == nil || *f[i].FailAbove != want.fail {
			t.Errorf("%s: best %v fail above %v, want %v and %v", f[i].Label, f[i].Best, f[i].FailAbove, want.best, want.fail)
		}
	}
	var md bytes.Buffer
	if err := Render(&md, "markdown", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "search/serving.md.golden", md.Bytes())
	js, err := json.MarshalIndent(r.Search, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "search/serving-frontier.json.golden", js)
}

// row judges one group's points against a search.
func row(s *Search, pts ...SearchPoint) FrontierRow {
	fr := FrontierRow{Points: pts}
	s.judge(&fr, &Results{})
	return fr
}

func TestSearchJudge(t *testing.T) {
	rate := &Search{Axis: "request_rate", Low: 1, High: 100, Tolerance: 0.1}
	users := &Search{Axis: "concurrency", Low: 1, High: 64}
	capped := &Search{Axis: "request_rate", Low: 1, High: 100, Tolerance: 0.01, MaxPoints: 3}
	pt := func(v float64, meets bool) SearchPoint { return SearchPoint{Value: v, Meets: meets} }
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name       string
		s          *Search
		pts        []SearchPoint
		status     string
		next, best *float64
		failAbove  *float64
	}{
		{"nothing measured: low first", rate, nil, FrontierSearching, f(1), nil, nil},
		{"low met: high next", rate, []SearchPoint{pt(1, true)}, FrontierSearching, f(100), f(1), nil},
		{"low fails", rate, []SearchPoint{pt(1, false), pt(100, false)}, FrontierBelowLow, nil, nil, f(1)},
		{"high met", rate, []SearchPoint{pt(1, true), pt(100, true)}, FrontierAboveHigh, nil, f(100), nil},
		{"geometric midpoint", rate, []SearchPoint{pt(1, true), pt(100, false)}, FrontierSearching, f(10), f(1), f(100)},
		{"within tolerance", rate, []SearchPoint{pt(1, true), pt(100, false), pt(10, true), pt(10.5, false)}, FrontierFound, nil, f(10), f(10.5)},
		// A noisy point above a failure does not count: the frontier is
		// below the lowest failure.
		{"met above a failure", rate, []SearchPoint{pt(1, true), pt(100, true), pt(10, false), pt(5, true)}, FrontierSearching, f(7.07), f(5), f(10)},
		{"users: adjacent integers", users, []SearchPoint{pt(1, true), pt(64, false), pt(8, true), pt(9, false)}, FrontierFound, nil, f(8), f(9)},
		{"users: rounded midpoint", users, []SearchPoint{pt(1, true), pt(64, false), pt(8, true), pt(16, false)}, FrontierSearching, f(11), f(8), f(16)},
		// Sweep points outside [low, high] (other values of the matrix
		// axis) do not bracket the search.
		{"failure below low", rate, []SearchPoint{pt(0.5, false), pt(1, true)}, FrontierSearching, f(100), f(1), nil},
		{"failure above high", rate, []SearchPoint{pt(1, true), pt(100, true), pt(200, false)}, FrontierAboveHigh, nil, f(100), nil},
		{"max points", capped, []SearchPoint{pt(1, true), pt(100, false), pt(10, true)}, FrontierCapped, nil, f(10), f(100)},
	} {
		got := row(tc.s, tc.pts...)
		eq := func(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
		if got.Status != tc.status || !eq(got.Next, tc.next) || !eq(got.Best, tc.best) || !eq(got.FailAbove, tc.failAbove) {
			str := func(p *float64) string {
				if p == nil {
					return "-"
				}
				return fmt.Sprint(*p)
			}
			t.Errorf("%s: status %s next %s best %s fail %s; want %s next %s best %s fail %s", tc.name,
				got.Status, str(got.Next), str(got.Best), str(got.FailAbove), tc.status, str(tc.next), str(tc.best), str(tc.failAbove))
		}
	}
}

// TestSearchMeets: a point is judged by its attainment, or by the latency
// percentiles; a failed cell misses, a skipped one is no point.
func TestSearchMeets(t *testing.T) {
	slo := &SLO{TTFTms: 200, TPOTms: 50, Percentile: 99}
	cell := func(st Status, m map[string]float64) *Cell {
		c := &Cell{Status: st, Summary: map[string]Summary{}}
		for k, v := range m {
			c.Summary[k] = Summary{Median: v, N: 3}
		}
		return c
	}
	gp := &Search{Metric: SearchGoodput}
	pc := &Search{Metric: SearchPercentile}
	for _, tc := range []struct {
		name   string
		s      *Search
		c      *Cell
		meets  bool
		ok     bool
		whyHas string
	}{
		{"attainment enough", gp, cell(StatusOK, map[string]float64{"slo_attainment": 0.995}), true, true, "99.5% of requests"},
		{"attainment short", gp, cell(StatusOK, map[string]float64{"slo_attainment": 0.98}), false, true, "99% needed"},
		{"no attainment", gp, cell(StatusOK, nil), false, true, "no slo_attainment"},
		{"percentiles within", pc, cell(StatusOK, map[string]float64{"ttft_p99_ms": 150, "tpot_p99_ms": 20}), true, true, "ttft_p99_ms 150 <= 200"},
		{"tpot over", pc, cell(StatusOK, map[string]float64{"ttft_p99_ms": 150, "tpot_p99_ms": 60}), false, true, "tpot_p99_ms 60 > 50"},
		{"failed", gp, cell(StatusFailed, nil), false, true, "failed"},
		{"skipped", gp, cell(StatusSkipped, nil), false, false, ""},
	} {
		meets, why, ok := tc.s.meets(tc.c, slo)
		if meets != tc.meets || ok != tc.ok || !bytes.Contains([]byte(why), []byte(tc.whyHas)) {
			t.Errorf("%s: meets %v ok %v why %q", tc.name, meets, ok, why)
		}
	}
}

// TestDiffServingPoints: xrun diff compares load points cell by cell with
// the serving metrics' directions: a slower engine's higher TTFT and
// lower goodput are both regressions.
func TestDiffServingPoints(t *testing.T) {
	old, new := servingStudy(1, 11), servingStudy(1.3, 12)
	d := Diff(old, new, DiffOptions{})
	if !d.Regression {
		t.Fatalf("no regression: %+v", d.Counts)
	}
	seen := map[string]bool{}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if c.ID[0] == 'a' && m.Regression {
				t.Errorf("%s %s: regression on the unchanged engine (%s)", c.ID, m.Metric, m.Verdict)
			}
			if c.ID[0] == 'b' && m.Regression {
				seen[m.Metric] = true
			}
		}
	}
	for _, k := range []string{"ttft_p99_ms", "goodput_req_s"} {
		if !seen[k] {
			t.Errorf("no regression on %s; the metrics judged: %v", k, d.Metrics)
		}
	}
}

// TestSearchFrontierStalled: a group whose next point is a cell that the
// run did not measure says why, rather than reading as still searching or
// ended: --only left it out (not searched), the time limit or an
// interrupt stopped the run (unfinished, with the bracket so far). A point
// still waiting for its turn is a search going on.
func TestSearchFrontierStalled(t *testing.T) {
	const timeLimit = "stopped at the time limit after 1 of 2 repeats; xrun run --resume runs the rest"
	for _, tc := range []struct {
		name, err, status, why string
	}{
		{"waiting", NotRunYet + " (1 of 2 repeats kept from an earlier run)", FrontierSearching, ""},
		{"only", NotSelected, FrontierNotSearched, "is left out by --only"},
		{"time limit", timeLimit, FrontierUnfinished, "was not measured: " + timeLimit},
		{"interrupted", "not run: the study was interrupted (xrun run --resume runs it)", FrontierUnfinished, "the study was interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Results{
				Name: "stalled", Environment: testEnvironment(), SLO: &SLO{TTFTms: 100, Percentile: 50},
				Axes:   []Axis{{Name: "concurrency", Values: []any{int64(1), int64(4), int64(16)}}},
				Search: &Search{Axis: "concurrency", Low: 1, High: 16, Metric: SearchGoodput},
			}
			add := func(users int64, st Status, att float64, err string) {
				p := Params{"concurrency": users}
				c := Cell{ID: fmt.Sprintf("users-%d", users), Params: p, Status: st, Error: err}
				if st == StatusOK {
					c.Repeats = []Metrics{{"slo_attainment": att}, {"slo_attainment": att}}
				}
				r.Cells = append(r.Cells, c)
			}
			add(1, StatusOK, 1, "")
			add(16, StatusOK, 0.2, "")
			add(4, StatusSkipped, 0, tc.err)
			n, err := Normalized(r)
			if err != nil {
				t.Fatal(err)
			}
			f := n.Search.Frontier
			if len(f) != 1 {
				t.Fatalf("frontier %+v", f)
			}
			// The bracket so far is kept whatever the status.
			if f[0].Status != tc.status || f[0].Next == nil || *f[0].Next != 4 || f[0].Best == nil || *f[0].Best != 1 ||
				f[0].FailAbove == nil || *f[0].FailAbove != 16 || !strings.Contains(f[0].Why, tc.why) || (tc.why == "") != (f[0].Why == "") {
				t.Fatalf("row %+v; want %s (next 4, bracket 1 to 16) saying %q", f[0], tc.status, tc.why)
			}
			var md bytes.Buffer
			if err := Render(&md, "markdown", n, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			hasNote := strings.Contains(md.String(), "Searches that did not end")
			if hasNote != (tc.why != "") || tc.why != "" && !strings.Contains(md.String(), tc.why) {
				t.Errorf("results.md (note %v):\n%s", hasNote, md.String())
			}
			if tc.status == FrontierNotSearched && !strings.Contains(md.String(), "| not searched (next 4) |") {
				t.Errorf("results.md does not say the group was not searched:\n%s", md.String())
			}
		})
	}
}

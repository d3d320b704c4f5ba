package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// servingResults is an SLO search over request_rate on two engines whose
// TTFT rises as 1/(1 - load) towards their capacities (20 and 12 req/s),
// plus an offline cell (rate inf, 0) that is no load point.
func servingResults(t *testing.T) *results.Results {
	t.Helper()
	slo := &results.SLO{TTFTms: 200, TPOTms: 50, Percentile: 90}
	r := &results.Results{Name: "serving", SLO: slo,
		Axes: []results.Axis{{Name: "engine", Values: []any{"a", "b"}},
			{Name: "request_rate", Values: []any{1.0, 8.0, 10.4, 13.4, 17.4, 64.0, 0.0}}},
		Search: &results.Search{Axis: "request_rate", Low: 1, High: 64, Metric: results.SearchGoodput, Tolerance: 0.1}}
	capacity := map[string]float64{"a": 20, "b": 12}
	for _, eng := range []string{"a", "b"} {
		for i, rate := range []float64{1, 8, 10.4, 13.4, 17.4, 64, 0} {
			load := math.Min(rate/capacity[eng], 0.999)
			if rate == 0 {
				load = 0.999
			}
			ttft := 50 / (1 - load)
			met := 1.0
			if ttft > slo.TTFTms {
				met = 0.2
			}
			served := math.Min(rate, capacity[eng])
			if rate == 0 {
				served = capacity[eng]
			}
			m := results.Metrics{"ttft_p50_ms": ttft / 2, "ttft_p99_ms": ttft, "tpot_p99_ms": 10 * (1 + load), "itl_p99_ms": 12 * (1 + load),
				"system_output_throughput_tok_s": 128 * served, "output_throughput_per_user_tok_s": 100 * (1 - load/2),
				"goodput_req_s": met * served, "slo_attainment": met}
			p := results.Params{"engine": eng, "request_rate": rate}
			r.Cells = append(r.Cells, results.Cell{ID: fmt.Sprintf("%s_rate-%g-%08x", eng, rate, i), Params: p, Status: results.StatusOK,
				Repeats: []results.Metrics{m, m, m}})
		}
	}
	n, err := results.Normalized(r)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestServingCurves(t *testing.T) {
	r := servingResults(t)
	ch := ServingCurves(r)
	if ch == nil || ch.Axis != "request_rate" || len(ch.Series) != 2 {
		t.Fatalf("chart %+v", ch)
	}
	for _, s := range ch.Series {
		if len(s.Points) != 6 || !slices.IsSortedFunc(s.Points, func(a, b ServingPoint) int { return int(a.X - b.X) }) {
			t.Errorf("%s: points %+v: want the 6 finite rates in order, not the offline cell", s.Label, s.Points)
		}
		if s.Best == nil {
			t.Errorf("%s: no frontier from the search", s.Label)
		}
	}
	if !slices.Equal(ch.Latency, servingLatency) {
		t.Errorf("latency keys %v", ch.Latency)
	}
	b, err := json.MarshalIndent(ch, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "serving-curves.json", b)

	// The page draws it in the latency section, beside the
	// throughput-latency chart and its Pareto front.
	var page bytes.Buffer
	if err := Write(&page, r, Options{}); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, page.Bytes())
	for _, c := range []string{"serving-request_rate", "throughput-latency"} {
		if !slices.Contains(doc.charts, c) {
			t.Errorf("no chart %q; the page has %v", c, doc.charts)
		}
	}
	if !strings.Contains(doc.text, "SLO frontier") {
		t.Error("the page does not mention the SLO frontier")
	}
}

func TestServingCurvesAbsent(t *testing.T) {
	// An offline study (no load axis) gets no serving chart.
	r := servingResults(t)
	r.Axes = r.Axes[:1]
	for i := range r.Cells {
		delete(r.Cells[i].Params, "request_rate")
	}
	r.Cells = r.Cells[:1]
	if ch := ServingCurves(r); ch != nil {
		t.Errorf("offline study: %+v", ch)
	}
}

package runner

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/trtllm"
	"github.com/xrun-dev/xrun/results"
)

// Serving load as parameters: request_rate, burstiness and concurrency
// (engine.Load), decoded here; the slo and search blocks are in
// spec_search.go.

// parseRequestRate reads a rate: a number > 0, or inf (canonical 0: every
// request at once, trtllm-bench's offline mode).
func parseRequestRate(n *yaml.Node) (any, string) {
	const doc = "a number of requests per second > 0, or inf (all at once)"
	if s, ok := scalarString(n); ok {
		switch strings.ToLower(s) {
		case "inf", "infinity":
			return 0.0, ""
		}
		return nil, fmt.Sprintf("%q: expected %s", s, doc)
	}
	if r := resolve(n); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!float" && strings.TrimPrefix(strings.ToLower(r.Value), "+") == ".inf" {
		return 0.0, "" // YAML's own infinity
	}
	v, ok := scalarFloat(n)
	if !ok {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	if !(v > 0) {
		return nil, fmt.Sprintf("expected %s, got %s", doc, formatValue(v))
	}
	return v, ""
}

// showRate writes a rate as the spec does: 0 is inf.
func showRate(v any) string {
	if v.(float64) == 0 {
		return "inf"
	}
	return formatValue(v)
}

func parseBurstiness(n *yaml.Node) (any, string) {
	const doc = "a gamma shape > 0 (1: Poisson arrivals; below 1 burstier, above 1 more regular)"
	v, ok := scalarFloat(n)
	if !ok {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	if !(v > 0) {
		return nil, fmt.Sprintf("expected %s, got %s", doc, formatValue(v))
	}
	return v, ""
}

// parseConcurrency reads a closed loop's users: an integer >= 1, or none
// (canonical 0).
func parseConcurrency(n *yaml.Node) (any, string) {
	const doc = "a number of users >= 1, or none (no closed loop)"
	if s, ok := scalarString(n); ok && s == "none" {
		return 0, ""
	}
	v, ok := scalarInt(n)
	switch {
	case !ok:
		return nil, "expected " + doc + ", got " + describe(n)
	case v < 1:
		return nil, fmt.Sprintf("expected %s, got %d", doc, v)
	case v > 1<<20:
		return nil, fmt.Sprintf("expected at most %d users, got %d", 1<<20, v)
	}
	return int(v), ""
}

func showUsers(v any) string {
	if v.(int) == 0 {
		return "none"
	}
	return strconv.Itoa(v.(int))
}

// cellLoad is a cell's load for its engine; the dataset's seed seeds the
// arrivals, so that every repeat and every engine of a study sees the
// same schedule.
func cellLoad(p *Params) engine.Load {
	return engine.Load{RequestRate: p.RequestRate, Burstiness: p.Burstiness, Concurrency: p.Concurrency, Seed: uint64(p.Dataset.Seed)}
}

// loadNotApplicable are the load parameters that cannot matter for p:
// burstiness without a rate; all of them on engine trtllm, whose
// trtllm-bench throughput submits every request at once.
func loadNotApplicable(p *Params) uint64 {
	var na uint64
	if p.Engine == trtllm.Name {
		return 1<<pRequestRate | 1<<pBurstiness | 1<<pConcurrency | 1<<pLoadDuration
	}
	if p.RequestRate == 0 {
		na |= 1<<pBurstiness | 1<<pLoadDuration
	}
	return na
}

// sizeForLoad gives a cell under a request_rate with load_duration at
// least ceil(request_rate x load_duration) requests, so that every load
// point has as long a steady state: a fixed count is over in a moment at
// a high rate (120 requests at 1024 req/s arrive within 0.12 s, and a p99
// of them is their second slowest), and the ramp up and down is then most
// of what a point measures. dataset.num_requests stays the least. Only a
// generated dataset can be sized.
func (d *decoder) sizeForLoad(p *Params, vals []int32) error {
	if p.LoadDuration <= 0 || p.RequestRate <= 0 || p.Engine == trtllm.Name {
		return nil
	}
	if p.Dataset.Kind() == GenFile {
		n, f := d.blame(vals, pLoadDuration, pGenerator)
		return d.errAt(n, f, "load_duration sizes a generated dataset for the load (ceil(request_rate x load_duration) requests), and dataset.generator is a file, whose requests are sent as they are: remove load_duration, or generate the dataset")
	}
	want := math.Ceil(p.RequestRate * p.LoadDuration.Seconds())
	if hi := float64(maxNumRequests); want > hi {
		n, f := d.blame(vals, pLoadDuration, pRequestRate)
		return d.errAt(n, f, "request_rate %s x load_duration %s is %.0f requests, more than dataset.num_requests allows (%.0f); shorten load_duration", formatValue(p.RequestRate), p.LoadDuration, want, hi)
	}
	p.Dataset.NumRequests = max(p.Dataset.NumRequests, int(want))
	return nil
}

func whyLoadNotApplicable(pi int, p *Params) string {
	if p.Engine == trtllm.Name {
		return fmt.Sprintf("%s has no effect on engine trtllm: trtllm-bench throughput submits every request at once (load trtllm-serve through engine openai)", params[pi].path)
	}
	return fmt.Sprintf("%s has no effect without a request_rate (request_rate inf: every request at once)", params[pi].path)
}

// engineSLO is the spec's slo as the engine's metrics take it.
func engineSLO(s *results.SLO) *engine.SLO {
	if s == nil {
		return nil
	}
	return &engine.SLO{TTFTms: s.TTFTms, TPOTms: s.TPOTms, Percentile: s.Percentile}
}

// addServingMetrics adds what a load point reports (engine.ServingMetrics:
// the achieved rate, inter-token latency, goodput) to a pass's metrics:
// for a cell under load or a study with an SLO, where the records allow.
func addServingMetrics(res *engine.Result, l engine.Load, slo *engine.SLO) {
	if res == nil || len(res.Requests) == 0 || !l.Online() && slo == nil {
		return
	}
	if res.Metrics == nil {
		res.Metrics = map[string]float64{}
	}
	for k, v := range engine.ServingMetrics(res.Requests, slo) {
		// Offline, every request is submitted at once: no rate was kept,
		// and a client's spread of sends is no rate either.
		if k == engine.AchievedRateKey && !l.Online() {
			continue
		}
		res.Metrics[k] = v
	}
}

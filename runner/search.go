package runner

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/results"
)

// The SLO search runs in rounds (SearchRounds): each round is a normal run
// of the spec (with --resume after the first, so measured points are
// kept), and between rounds the frontier (results.SearchFrontier) names
// the next point of every group still searching, which the next round
// adds as a matrix include entry: that group's other parameters and the
// searched axis at the point. Every point is thus a cell of the study,
// with its repeats, id and results like any other.

// SearchNext is the --set that adds the next round's points to spec
// (spec.Sets plus it plan the next round), and the points it adds; none
// when every group's search has ended.
func SearchNext(spec *Spec, res *results.Results) (set string, points []string, err error) {
	if spec.Search == nil || res == nil {
		return "", nil, nil
	}
	// Summaries and canonical values, as results.json has them.
	r, err := results.Normalized(res)
	if err != nil {
		return "", nil, err
	}
	r.Search, r.SLO = spec.Search, spec.SLO
	entries, err := specIncludes(spec)
	if err != nil {
		return "", nil, err
	}
	axis := spec.Search.Axis
	for _, row := range results.SearchFrontier(r) {
		if row.Status != results.FrontierSearching || row.Next == nil {
			continue
		}
		e := map[string]any{}
		for k, v := range row.Group {
			e[k] = setValue(k, v)
		}
		e[axis] = setValue(axis, *row.Next)
		entries = append(entries, e)
		points = append(points, fmt.Sprintf("%s: %s=%s", row.Label, axis, formatValue(*row.Next)))
	}
	if len(points) == 0 {
		return "", nil, nil
	}
	b, err := yaml.Marshal(entries)
	if err != nil {
		return "", nil, err
	}
	return "matrix.include=" + string(b), points, nil
}

// SearchResumed is the --set that puts back into spec the points an
// earlier run of its search added (prior's cells at a value of the
// searched axis that spec's plan lacks), and their cells' ids: with
// --resume the first round then keeps them, as results.json had them,
// rather than dropping them until a later round asks for them again, and
// the search goes on from where it stopped. Nothing is added when prior is
// another study's.
func SearchResumed(spec *Spec, prior *results.Results) (set string, ids []string, err error) {
	if spec.Search == nil || prior == nil || prior.Name != spec.Name {
		return "", nil, nil
	}
	planned := map[string]bool{}
	for i := range spec.Plan.Cells {
		planned[spec.Plan.Cells[i].ID] = true
	}
	entries, err := specIncludes(spec)
	if err != nil {
		return "", nil, err
	}
	axis := spec.Search.Axis
	for _, c := range prior.Cells {
		if _, ok := c.Params[axis]; !ok || planned[c.ID] {
			continue
		}
		// The parameters that varied in that run name the point, as
		// SearchNext's entries did.
		e := map[string]any{}
		for _, a := range prior.Axes {
			if v, ok := c.Params[a.Name]; ok {
				e[a.Name] = setValue(a.Name, v)
			}
		}
		entries = append(entries, e)
		ids = append(ids, c.ID)
	}
	if len(ids) == 0 {
		return "", nil, nil
	}
	b, err := yaml.Marshal(entries)
	if err != nil {
		return "", nil, err
	}
	return "matrix.include=" + string(b), ids, nil
}

// SearchStalled lists the groups of res whose search did not end, each
// with its status, its bracket so far and why (see results.FrontierRow):
// for the log of a run that stops with a search unfinished.
func SearchStalled(res *results.Results) []string {
	if res == nil || res.Search == nil {
		return nil
	}
	r, err := results.Normalized(res)
	if err != nil || r.Search == nil {
		return nil
	}
	opt := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return formatValue(*p)
	}
	var out []string
	for _, f := range r.Search.Frontier {
		switch f.Status {
		case results.FrontierSearching, results.FrontierUnfinished, results.FrontierNotSearched:
			line := fmt.Sprintf("%s: %s (highest meeting the SLO so far %s, lowest failing %s)", f.Label, strings.ReplaceAll(f.Status, "_", " "), opt(f.Best), opt(f.FailAbove))
			if f.Why != "" {
				line += ": " + f.Why
			}
			out = append(out, line)
		}
	}
	return out
}

// setValue writes a results parameter as the spec reads it back.
func setValue(key string, v any) any {
	switch x := v.(type) {
	case int:
		v = float64(x)
	case int64:
		v = float64(x)
	}
	f, isNum := v.(float64)
	switch {
	case key == "request_rate" && isNum && f == 0:
		return "inf"
	case key == "concurrency" && isNum && f == 0:
		return "none"
	case isNum && f == float64(int64(f)) && key != "request_rate" && key != "burstiness":
		return int64(f)
	}
	return v
}

// specIncludes are the include entries the spec (after its --set
// arguments) has, so that a round's set keeps them.
func specIncludes(spec *Spec) ([]map[string]any, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(spec.Effective, &doc); err != nil {
		return nil, err
	}
	m, _ := doc["matrix"].(map[string]any)
	inc, _ := m["include"].([]any)
	var out []map[string]any
	for _, e := range inc {
		if em, ok := e.(map[string]any); ok {
			out = append(out, em)
		}
	}
	return out, nil
}

// SearchRound runs one round of a study: the spec as planned.
type SearchRound func(spec *Spec, round int) (*results.Results, error)

// SearchRounds runs the study and, with a search block, the rounds its
// search needs: load reloads the spec with extra --set arguments, run
// runs a round. It stops when every group's search has ended, when a
// round fails other than by failed cells (a failed point is one that
// misses the SLO), or after the most rounds max_points allows. It returns
// the last round's results and error.
func SearchRounds(spec *Spec, load func(sets []string) (*Spec, error), run SearchRound, log func(round int, points []string)) (*results.Results, error) {
	res, err := run(spec, 0)
	if spec.Search == nil {
		return res, err
	}
	base := slices.Clone(spec.Sets)
	seen := map[string]bool{}
	limit := spec.Search.MaxPoints
	if limit <= 0 {
		limit = results.DefaultSearchMaxPoints
	}
	for round := 1; round <= limit; round++ {
		if err != nil && !errors.Is(err, ErrCellsFailed) || res == nil {
			return res, err
		}
		set, points, nerr := SearchNext(spec, res)
		if nerr != nil {
			return res, nerr
		}
		if len(points) == 0 {
			return res, err
		}
		key := strings.Join(points, "\n")
		if seen[key] {
			// The points asked for were not measured (skipped, out of
			// time): asking again would not measure them either.
			return res, err
		}
		seen[key] = true
		if log != nil {
			log(round, points)
		}
		next, lerr := load(append(slices.Clone(base), set))
		if lerr != nil {
			return res, lerr
		}
		spec = next
		res, err = run(spec, round)
	}
	return res, err
}

// compareLoad orders request rates (inf, canonical 0, last) and numbers
// of users.
func compareLoad(a, b any) int {
	num := func(v any) float64 {
		switch x := v.(type) {
		case int:
			if x == 0 {
				return math.Inf(1) // concurrency none: no closed loop
			}
			return float64(x)
		case float64:
			if x == 0 {
				return math.Inf(1)
			}
			return x
		}
		return math.Inf(1)
	}
	return cmp.Compare(num(a), num(b))
}

// writeServing says what the plan's slo and search blocks will do: the
// cells below are the search's first round.
func writeServing(w io.Writer, s *Spec) {
	if s.SLO != nil {
		fmt.Fprintf(w, "slo: %s per request, percentile %s (goodput counts the requests meeting it)\n", s.SLO.String(), formatValue(s.SLO.Percentile))
	}
	if x := s.Search; x != nil {
		how := "at least the percentile's share of requests meeting it"
		if x.Metric == results.SearchPercentile {
			how = "TTFT and TPOT at the percentile within the targets"
		}
		fmt.Fprintf(w, "search: the highest %s from %s to %s meeting the slo (%s), per combination of the other axes; "+
			"these cells are its first round, xrun run adds the rest\n", x.Axis, formatValue(x.Low), formatValue(x.High), how)
	}
}

package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// roundValue fixes every measured number to 6 significant digits, but
// never coarser than the unit, so counts up to 2^53 stay exact. Timing
// noise is far above the 6th digit, and fixed rounding is what makes the
// same data give the same bytes whatever platform computed it.
func roundValue(v float64) float64 {
	switch {
	case v == 0:
		return 0 // also turns -0 into 0, which JSON would print as "-0"
	case math.IsNaN(v) || math.IsInf(v, 0):
		return v
	case math.Abs(v) >= 1e6:
		return math.Round(v)
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

// Normalized is normalized for callers that change results after reading
// them (xrun report and xrun diff attach rooflines to results written
// before xrun computed them): the fractions and summaries are then
// computed as for results read from disk.
func Normalized(r *Results) (*Results, error) { return normalized(r) }

// normalized returns a deep copy of r in canonical form: schema version
// set, cells sorted by id, parameters as canonical scalars, every number
// rounded, summaries recomputed from the repeats, artifacts sorted. It
// rejects what results.json cannot hold (NaN, nested parameters,
// duplicate ids), naming the cell and field.
func normalized(r *Results) (*Results, error) {
	out := &Results{
		SchemaVersion: SchemaVersion,
		Name:          r.Name,
		Description:   r.Description,
		SpecFile:      r.SpecFile,
		SpecSets:      slices.Clone(r.SpecSets),
		Environment:   normalizeEnvironment(r.Environment),
		Started:       normalizeTime(r.Started),
		Finished:      normalizeTime(r.Finished),
		OrderSeed:     r.OrderSeed,
	}
	spec, err := canonicalSpec(r.Spec)
	if err != nil {
		return nil, err
	}
	out.Spec = spec
	for i, a := range r.Axes {
		na := Axis{Name: a.Name, Values: make([]any, len(a.Values))}
		for j, v := range a.Values {
			if na.Values[j], err = canonicalScalar(v); err != nil {
				return nil, fmt.Errorf("axes[%d] (%s) value %d: %w", i, a.Name, j, err)
			}
		}
		out.Axes = append(out.Axes, na)
	}
	for i, c := range r.Compare {
		b, err := canonicalScalar(c.Baseline)
		if err != nil {
			return nil, fmt.Errorf("compare[%d] (%s) baseline: %w", i, c.Axis, err)
		}
		out.Compare = append(out.Compare, CompareSpec{Axis: c.Axis, Baseline: b})
	}
	seen := map[string]bool{}
	out.Cells = make([]Cell, 0, len(r.Cells))
	for i := range r.Cells {
		c, err := normalizeCell(&r.Cells[i])
		if err != nil {
			return nil, err
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("cell %q: duplicate id", c.ID)
		}
		seen[c.ID] = true
		out.Cells = append(out.Cells, c)
	}
	slices.SortFunc(out.Cells, func(a, b Cell) int { return strings.Compare(a.ID, b.ID) })
	if r.SLO != nil {
		slo := *r.SLO
		out.SLO = &slo
	}
	if r.Reference != nil {
		if out.Reference, err = normalizeReference(r.Reference); err != nil {
			return nil, err
		}
	}
	if r.Search != nil {
		// The frontier follows the cells, as summaries follow repeats.
		s := *r.Search
		s.Frontier = nil
		out.Search = &s
		out.Search.Frontier = SearchFrontier(out)
	}
	return out, nil
}

// normalizeTime keeps whole seconds in UTC: the header times are for
// people, and a monotonic clock reading or a zone must not change bytes.
func normalizeTime(t time.Time) time.Time {
	return t.Round(0).UTC().Truncate(time.Second)
}

func normalizeEnvironment(e Environment) Environment {
	e.GPUs = slices.Clone(e.GPUs)
	for i := range e.GPUs {
		e.GPUs[i].PowerLimitW = roundValue(e.GPUs[i].PowerLimitW)
	}
	slices.SortStableFunc(e.GPUs, func(a, b GPU) int { return a.Index - b.Index })
	if e.GPUs == nil {
		e.GPUs = []GPU{}
	}
	if e.Repo != nil {
		repo := *e.Repo
		e.Repo = &repo
	}
	return e
}

// canonicalSpec re-encodes the spec with sorted keys and no insignificant
// space, so the runner's encoding choices never show up as a diff.
func canonicalSpec(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("spec: not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("spec: must be a JSON object, got %s", jsonKind(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return b, nil
}

func normalizeCell(in *Cell) (Cell, error) {
	c := Cell{ID: in.ID, Status: in.Status, Error: in.Error}
	if c.ID == "" {
		return c, fmt.Errorf("cell with params %v: empty id", in.Params)
	}
	switch c.Status {
	case StatusOK, StatusFailed, StatusSkipped:
	default:
		return c, fmt.Errorf("cell %q: status %q; expected ok, failed or skipped", c.ID, c.Status)
	}
	c.Params = make(Params, len(in.Params))
	for k, v := range in.Params {
		cv, err := canonicalScalar(v)
		if err != nil {
			return c, fmt.Errorf("cell %q: params.%s: %w", c.ID, k, err)
		}
		c.Params[k] = cv
	}
	if c.Status == StatusOK && len(in.Repeats) == 0 {
		return c, fmt.Errorf("cell %q: status ok with no repeats; an ok cell has at least one timed repeat", c.ID)
	}
	c.Repeats = make([]Metrics, len(in.Repeats))
	for i, rep := range in.Repeats {
		m := make(Metrics, len(rep))
		for k, v := range rep {
			if msg := checkMetricValue(v); msg != "" {
				return c, fmt.Errorf("cell %q: repeats[%d].%s: cannot be stored: %s", c.ID, i, k, msg)
			}
			m[k] = roundValue(v)
		}
		c.Repeats[i] = m
	}
	c.Summary = summarizeRepeats(c.Repeats)
	if in.Profile != nil {
		if msg := checkDistinctKernels(in.Profile); msg != "" {
			return c, fmt.Errorf("cell %q: profile.distinct_kernels: %s", c.ID, msg)
		}
		p := *in.Profile
		p.Kernels = slices.Clone(p.Kernels)
		for i := range p.Kernels {
			k := &p.Kernels[i]
			k.TimePct, k.AvgNs, k.MedNs, k.StdDevNs = roundValue(k.TimePct), roundValue(k.AvgNs), roundValue(k.MedNs), roundValue(k.StdDevNs)
		}
		p.OtherKernels = slices.Clone(p.OtherKernels)
		p.Diagnosis = slices.Clone(p.Diagnosis)
		if p.Stats != nil {
			p.Stats = maps.Clone(p.Stats)
			for k, v := range p.Stats {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return c, fmt.Errorf("cell %q: profile.stats.%s: %v cannot be stored; a figure must be finite", c.ID, k, v)
				}
				p.Stats[k] = roundValue(v)
			}
		}
		c.Profile = &p
	}
	if in.Telemetry != nil {
		t := *in.Telemetry
		for _, f := range []*float64{&t.SMClockMHzMean, &t.SMClockMHzMax, &t.MemClockMHzMean, &t.MemClockMHzMax, &t.PowerWMean, &t.PowerWMax,
			&t.GPUUtilPctMean, &t.MemUtilPctMean, &t.TempCMax, &t.EnergyJ, &t.SMClockMHzMin, &t.MaxSMClockMHz, &t.ThrottleThreshold, &t.PowerCappedS} {
			*f = roundValue(*f)
		}
		if t.BelowThresholdShare != nil {
			v := roundValue(*t.BelowThresholdShare)
			t.BelowThresholdShare = &v
		}
		t.ThrottleReasons = slices.Sorted(slices.Values(t.ThrottleReasons))
		c.Telemetry = &t
	}
	if in.ExpertLoad != nil {
		e := *in.ExpertLoad
		e.MaxOverMean = roundValue(e.MaxOverMean)
		e.TotalMaxOverMean = roundValue(e.TotalMaxOverMean)
		e.Histogram = slices.Clone(e.Histogram)
		if e.Histogram == nil {
			e.Histogram = []int64{}
		}
		c.ExpertLoad = &e
	}
	if in.Roofline != nil {
		rf, err := normalizeRoofline(*in.Roofline, c.Summary)
		if err != nil {
			return c, fmt.Errorf("cell %q: roofline.%w", c.ID, err)
		}
		c.Roofline = &rf
	}
	for _, a := range in.Artifacts {
		a = strings.ReplaceAll(a, `\`, "/")
		if a == "" || path.IsAbs(a) || a != path.Clean(a) || strings.HasPrefix(a, "../") || a == ".." {
			return c, fmt.Errorf("cell %q: artifact %q: expected a clean path relative to the results directory", c.ID, a)
		}
		c.Artifacts = append(c.Artifacts, a)
	}
	slices.Sort(c.Artifacts)
	c.Artifacts = slices.Compact(c.Artifacts)
	// What the reader refuses as impossible, the writer does not write.
	if c.Profile != nil {
		if k, msg := checkMetrics(c.Profile.PassMetrics); msg != "" {
			return c, fmt.Errorf("cell %q: profile.pass_metrics.%s: cannot be stored: %s", c.ID, k, msg)
		}
	}
	if c.Telemetry != nil {
		if k, msg := checkTelemetry(c.Telemetry); msg != "" {
			return c, fmt.Errorf("cell %q: telemetry.%s: cannot be stored: %s", c.ID, k, msg)
		}
	}
	return c, nil
}

// SameRepeats reports whether a and b are the same repeats as results.json
// stores them, every value to its 6 significant digits: a cell's record
// (cells/<id>/cell.json) holds full precision, its entry in results.json
// the rounded values.
func SameRepeats(a, b []Metrics) bool {
	return slices.EqualFunc(a, b, func(ra, rb Metrics) bool {
		return maps.EqualFunc(ra, rb, func(x, y float64) bool {
			x, y = roundValue(x), roundValue(y)
			return x == y || math.IsNaN(x) && math.IsNaN(y)
		})
	})
}

// summarizeRepeats summarises every metric that occurs in any repeat.
func summarizeRepeats(reps []Metrics) map[string]Summary {
	out := map[string]Summary{}
	for _, k := range metricKeys(reps) {
		out[k] = Summarize(column(reps, k))
	}
	return out
}

// metricKeys lists the metric keys of reps in registry order.
func metricKeys(reps []Metrics) []string {
	set := map[string]bool{}
	for _, r := range reps {
		for k := range r {
			set[k] = true
		}
	}
	keys := slices.Collect(maps.Keys(set))
	sortMetricKeys(keys)
	return keys
}

// column collects one metric over repeats, skipping repeats without it.
func column(reps []Metrics, key string) []float64 {
	var v []float64
	for _, r := range reps {
		if x, ok := r[key]; ok {
			v = append(v, x)
		}
	}
	return v
}

// canonicalScalar maps any Go scalar to the form the reader returns:
// string, bool, nil, int64 for integral numbers, float64 otherwise.
func canonicalScalar(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		return canonicalUint(uint64(x))
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		return canonicalUint(x)
	case float32:
		return canonicalFloat(float64(x))
	case float64:
		return canonicalFloat(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return canonicalFloat(f)
	}
	return nil, fmt.Errorf("%v (%T) is not a JSON scalar; expected a string, number, bool or null", v, v)
}

func canonicalUint(u uint64) (any, error) {
	if u > math.MaxInt64 {
		return nil, fmt.Errorf("%d is out of range for a parameter", u)
	}
	return int64(u), nil
}

func canonicalFloat(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v is not a finite number", f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f), nil
	}
	return f, nil
}

// formatScalar prints a canonical parameter value for tables, names and
// grouping: two values print the same exactly when they are equal.
func formatScalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	if c, err := canonicalScalar(v); err == nil {
		return formatScalar(c)
	}
	return fmt.Sprint(v)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

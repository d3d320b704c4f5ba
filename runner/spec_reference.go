package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/results"
)

// referenceKeys are the keys of the spec's reference block: a published
// table the study measures itself against, shown in results.md beside the
// measured values with their ratio (results.Reference). For instance:
//
//	reference:
//	  name: trtllm-perf-overview
//	  source: TensorRT-LLM docs/source/performance/perf-overview.md
//	  metric: system_output_throughput_tok_s
//	  rows:
//	    - {match: {dataset.input_mean: 128, dataset.output_mean: 128}, gpu: H100, value: 28312}
var referenceKeys = []string{"name", "source", "metric", "rows"}

var referenceRowKeys = []string{"match", "gpu", "value"}

// referenceBlock decodes the reference block into d.spec.Reference. Match
// keys are parameter paths and their values are checked (and made
// canonical) as the parameter's own are; two rows may not match the same
// cells on the same GPU.
func (d *decoder) referenceBlock(n *yaml.Node) error {
	kvs, err := d.mapping(n, "reference", "a mapping with name, metric and rows (and optionally source)")
	if err != nil {
		return err
	}
	ref := &results.Reference{}
	var rowsNode *yaml.Node
	for _, kv := range kvs {
		f := "reference." + kv.key
		switch kv.key {
		case "name":
			v, ok := scalarString(kv.vn)
			if !ok || !nameRE.MatchString(v) {
				return d.errAt(resolve(kv.vn), f, "expected a name of letters, digits, '.', '_' and '-', got %s", describe(kv.vn))
			}
			ref.Name = v
		case "source":
			v, ok := scalarString(kv.vn)
			if !ok {
				return d.errAt(resolve(kv.vn), f, "expected text (where the table was published), got %s", describe(kv.vn))
			}
			ref.Source = strings.TrimSpace(v)
		case "metric":
			v, ok := scalarString(kv.vn)
			if _, known := results.LookupMetric(v); !ok || !known {
				var names []string
				for _, m := range results.RegisteredMetrics() {
					names = append(names, m.Key)
				}
				return d.errAt(resolve(kv.vn), f, "expected a metric xrun measures, got %s%s", describe(kv.vn), suggestOrList(v, names))
			}
			ref.Metric = v
		case "rows":
			rowsNode = kv.vn
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, referenceKeys))
		}
	}
	for _, k := range []string{"name", "metric", "rows"} {
		if !slices.ContainsFunc(kvs, func(kv keyValue) bool { return kv.key == k }) {
			return d.errAt(n, "reference", "%s is required (a reference block has name, metric and rows)", k)
		}
	}
	items, err := d.sequence(rowsNode, "reference.rows", "a list of {match: {PARAMETER: VALUE, ...}, gpu: NAME, value: NUMBER}")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return d.errAt(resolve(rowsNode), "reference.rows", "expected at least one row")
	}
	seen := map[string]int{}
	for i, item := range items {
		row, err := d.referenceRow(item, index("reference.rows", i))
		if err != nil {
			return err
		}
		key := row.GPU + "\x00" + referenceMatchKey(row.Match)
		if j, dup := seen[key]; dup {
			return d.errAt(resolve(item), index("reference.rows", i), "matches the same cells and GPU as reference.rows[%d]", j)
		}
		seen[key] = i
		ref.Rows = append(ref.Rows, row)
	}
	d.spec.Reference = ref
	return nil
}

func (d *decoder) referenceRow(n *yaml.Node, field string) (results.ReferenceRow, error) {
	row := results.ReferenceRow{Match: map[string]any{}}
	kvs, err := d.mapping(n, field, "a mapping with match, value and optionally gpu")
	if err != nil {
		return row, err
	}
	have := map[string]bool{}
	for _, kv := range kvs {
		f := field + "." + kv.key
		have[kv.key] = true
		switch kv.key {
		case "match":
			mkvs, err := d.mapping(kv.vn, f, "a mapping of parameters to the values a cell must have")
			if err != nil {
				return row, err
			}
			if len(mkvs) == 0 {
				return row, d.errAt(resolve(kv.vn), f, "expected at least one parameter")
			}
			for _, m := range mkvs {
				pi, ok := paramIndex[m.key]
				if !ok {
					return row, d.errAt(m.kn, f+"."+m.key, "not a parameter%s", suggestOrList(m.key, paramPaths(false)))
				}
				if !params[pi].identity {
					// Not among a cell's results parameters: no cell could match.
					return row, d.errAt(m.kn, f+"."+m.key, "%s is not recorded with a cell's results, so no cell can match it; expected a parameter that tells cells apart", m.key)
				}
				v, msg := params[pi].parse(m.vn)
				if msg != "" {
					return row, d.errAt(resolve(m.vn), f+"."+m.key, "%s", msg)
				}
				row.Match[m.key] = v
			}
		case "gpu":
			v, ok := scalarString(kv.vn)
			if !ok || strings.TrimSpace(v) == "" {
				return row, d.errAt(resolve(kv.vn), f, "expected part of a GPU's name (H100, H200), got %s", describe(kv.vn))
			}
			row.GPU = strings.TrimSpace(v)
		case "value":
			v, ok := scalarFloat(kv.vn)
			if !ok || !(v > 0) {
				return row, d.errAt(resolve(kv.vn), f, "expected a positive number, got %s", describe(kv.vn))
			}
			row.Value = v
		default:
			return row, d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, referenceRowKeys))
		}
	}
	for _, k := range []string{"match", "value"} {
		if !have[k] {
			return row, d.errAt(resolve(n), field, "%s is required", k)
		}
	}
	return row, nil
}

// referenceMatchKey is a match's parameters in a fixed order, to find
// duplicate rows.
func referenceMatchKey(m map[string]any) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%v\n", k, m[k])
	}
	return b.String()
}

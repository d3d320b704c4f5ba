package runner

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// matrix decodes the axes, zips, include and exclude. Axes come first so
// that exclude entries and compare can be checked against them wherever
// they appear in the mapping.
func (d *decoder) matrix(n *yaml.Node) error {
	kvs, err := d.mapping(n, "matrix", "a mapping of axes (parameter: [values]), include, exclude and zips")
	if err != nil {
		return err
	}
	var incl, excl *keyValue
	for i := range kvs {
		kv := &kvs[i]
		switch kv.key {
		case "include":
			incl = kv
		case "exclude":
			excl = kv
		case "zips":
			if err := d.zips(kv.vn); err != nil {
				return err
			}
		default:
			if err := d.axis(kv); err != nil {
				return err
			}
		}
	}
	if excl != nil {
		if err := d.entries(excl.vn, "matrix.exclude", true); err != nil {
			return err
		}
	}
	if incl != nil {
		if err := d.entries(incl.vn, "matrix.include", false); err != nil {
			return err
		}
	}
	return nil
}

// axisParam resolves a matrix key to a parameter that may vary.
func (d *decoder) axisParam(kn *yaml.Node, key, field string, extra []string) (int, error) {
	pi, ok := paramIndex[key]
	if !ok {
		if slices.Contains(paramGroups, key) {
			return 0, d.errAt(kn, field, "matrix axes are dotted parameter paths: write %s.input_mean: [...]", key)
		}
		return 0, d.errAt(kn, field, "unknown parameter%s", suggest(key, append(paramPaths(true), extra...), nil))
	}
	if params[pi].noAxis {
		return 0, d.errAt(kn, field, "%s cannot vary between cells: it limits a cell's run time and is not part of what is measured; set params.%s", key, key)
	}
	if ai, dup := d.axisAt[pi]; dup {
		return 0, d.errAt(kn, field, "%s is already an axis (%s)", key, d.where(d.axisKeys[ai]))
	}
	return pi, nil
}

func (d *decoder) axis(kv *keyValue) error {
	field := "matrix." + kv.key
	pi, err := d.axisParam(kv.kn, kv.key, field, []string{"include", "exclude", "zips"})
	if err != nil {
		return err
	}
	vn := resolve(kv.vn)
	if vn.Kind != yaml.SequenceNode {
		return d.errAt(vn, field, "expected a list of values, e.g. [%s], got %s; a single value belongs in params", exampleValue(pi), describe(vn))
	}
	items, err := d.sequence(vn, field, "a list of values")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return d.errAt(vn, field, "empty axis; give at least one value")
	}
	ax := mxAxis{keys: []int{pi}, rows: make([][]int32, len(items))}
	seen := make(map[any]int, len(items))
	for i, item := range items {
		f := index(field, i)
		v, err := d.value(pi, item, f)
		if err != nil {
			return err
		}
		if j, dup := seen[v]; dup {
			return d.errAt(resolve(item), f, "duplicate value %s (also at [%d])", formatValue(v), j)
		}
		seen[v] = i
		ax.rows[i] = []int32{d.addVal(v, item, f)}
	}
	d.addAxis(ax, kv.kn, "")
	return nil
}

func exampleValue(pi int) string {
	if params[pi].def != nil {
		return formatValue(params[pi].def)
	}
	return "..."
}

func (d *decoder) addVal(v any, n *yaml.Node, field string) int32 {
	d.vals = append(d.vals, mval{v: v, node: resolve(n), field: field})
	return int32(len(d.vals) - 1)
}

func (d *decoder) addAxis(ax mxAxis, kn *yaml.Node, zip string) {
	for _, k := range ax.keys {
		d.axisAt[k] = len(d.axes)
	}
	d.axes = append(d.axes, ax)
	d.axisKeys = append(d.axisKeys, kn)
	a := Axis{Zip: zip, Values: make([][]any, len(ax.rows))}
	for _, k := range ax.keys {
		a.Keys = append(a.Keys, params[k].path)
	}
	for r, row := range ax.rows {
		a.Values[r] = make([]any, len(row))
		for k, vi := range row {
			a.Values[r][k] = d.vals[vi].v
		}
	}
	d.spec.Axes = append(d.spec.Axes, a)
}

var zipNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// zips decodes named zips: axes whose values go together. Each zip is a
// list of rows; every row sets the same parameters.
//
//	zips:
//	  lengths:
//	    - {dataset.input_mean: 128, dataset.output_mean: 128}
//	    - {dataset.input_mean: 1000, dataset.output_mean: 1000}
func (d *decoder) zips(n *yaml.Node) error {
	kvs, err := d.mapping(n, "matrix.zips", "a mapping of zip names to lists of rows")
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		field := "matrix.zips." + kv.key
		if !zipNameRE.MatchString(kv.key) {
			return d.errAt(kv.kn, field, "a zip name is letters, digits, '_' and '-'")
		}
		rows, err := d.sequence(kv.vn, field, "a list of rows, each a mapping of parameter: value")
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return d.errAt(resolve(kv.vn), field, "empty zip; give at least one row")
		}
		var ax mxAxis
		seen := map[string]int{}
		for r, row := range rows {
			rf := index(field, r)
			rkvs, err := d.mapping(row, rf, "a row: a mapping of parameter: value")
			if err != nil {
				return err
			}
			if r == 0 {
				if len(rkvs) == 0 {
					return d.errAt(resolve(row), rf, "empty row; a zip row sets one value for each of its parameters")
				}
				for _, rkv := range rkvs {
					pi, err := d.axisParam(rkv.kn, rkv.key, join(rf, rkv.key), nil)
					if err != nil {
						return err
					}
					if slices.Contains(ax.keys, pi) {
						return d.errAt(rkv.kn, join(rf, rkv.key), "duplicate key")
					}
					ax.keys = append(ax.keys, pi)
				}
			}
			vals := make([]int32, len(ax.keys))
			for i := range vals {
				vals[i] = -1
			}
			var sig strings.Builder
			for _, rkv := range rkvs {
				pi, ok := paramIndex[rkv.key]
				k := slices.Index(ax.keys, pi)
				if !ok || k < 0 {
					return d.errAt(rkv.kn, join(rf, rkv.key), "not a parameter of this zip; every row sets the same parameters as the first (%s)", zipKeys(ax.keys))
				}
				v, err := d.value(pi, rkv.vn, join(rf, rkv.key))
				if err != nil {
					return err
				}
				vals[k] = d.addVal(v, rkv.vn, join(rf, rkv.key))
			}
			for k, vi := range vals {
				if vi < 0 {
					return d.errAt(resolve(row), rf, "missing %s; every row sets the same parameters as the first (%s)", params[ax.keys[k]].path, zipKeys(ax.keys))
				}
				sig.WriteString(formatValue(d.vals[vi].v))
				sig.WriteByte(0)
			}
			if j, dup := seen[sig.String()]; dup {
				return d.errAt(resolve(row), rf, "duplicate row (same values as [%d])", j)
			}
			seen[sig.String()] = r
			ax.rows = append(ax.rows, vals)
		}
		d.addAxis(ax, kv.kn, kv.key)
	}
	return nil
}

func zipKeys(keys []int) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = params[k].path
	}
	return strings.Join(names, ", ")
}

// entries decodes include or exclude: lists of mappings of parameter:
// value. Exclude keys must be axes and their values values of those axes
// (anything else could never match); include may set any parameter.
func (d *decoder) entries(n *yaml.Node, field string, exclude bool) error {
	items, err := d.sequence(n, field, "a list of mappings of parameter: value")
	if err != nil {
		return err
	}
	for i, item := range items {
		f := index(field, i)
		kvs, err := d.mapping(item, f, "a mapping of parameter: value")
		if err != nil {
			return err
		}
		if len(kvs) == 0 {
			return d.errAt(resolve(item), f, "empty entry")
		}
		e := entryDef{node: resolve(item), field: f}
		for _, kv := range kvs {
			kf := join(f, kv.key)
			pi, ok := paramIndex[kv.key]
			if !ok {
				return d.errAt(kv.kn, kf, "unknown parameter%s", suggest(kv.key, paramPaths(true), nil))
			}
			if params[pi].noAxis {
				return d.errAt(kv.kn, kf, "%s cannot vary between cells; set params.%s", kv.key, kv.key)
			}
			ai, isAxis := d.axisAt[pi]
			if exclude && !isAxis {
				return d.errAt(kv.kn, kf, "not a matrix axis; exclude removes combinations of the axes (%s)", d.axisNames())
			}
			v, err := d.value(pi, kv.vn, kf)
			if err != nil {
				return err
			}
			if exclude && !d.axisHas(ai, pi, v) {
				return d.errAt(resolve(kv.vn), kf, "%s is not a value of the %s axis (%s), so this entry can never match", formatValue(v), kv.key, d.axisValues(ai, pi))
			}
			e.keys = append(e.keys, pi)
			e.vals = append(e.vals, d.addVal(v, kv.vn, kf))
		}
		if exclude {
			d.exclude = append(d.exclude, e)
		} else {
			d.include = append(d.include, e)
		}
	}
	return nil
}

func (d *decoder) axisNames() string {
	var names []string
	for _, ax := range d.axes {
		for _, k := range ax.keys {
			names = append(names, params[k].path)
		}
	}
	if len(names) == 0 {
		return "there are none"
	}
	return strings.Join(names, ", ")
}

func (d *decoder) axisHas(ai, pi int, v any) bool {
	ax := d.axes[ai]
	k := slices.Index(ax.keys, pi)
	for _, row := range ax.rows {
		if d.vals[row[k]].v == v {
			return true
		}
	}
	return false
}

func (d *decoder) axisValues(ai, pi int) string {
	ax := d.axes[ai]
	k := slices.Index(ax.keys, pi)
	var vs []string
	for _, row := range ax.rows {
		vs = append(vs, formatValue(d.vals[row[k]].v))
	}
	return strings.Join(vs, ", ")
}

// compareEntries decodes compare: [{axis, baseline}]; they are checked
// against the axes and the cells once both exist (see compare).
func (d *decoder) compareEntries(n *yaml.Node) error {
	items, err := d.sequence(n, "compare", "a list of {axis: PARAMETER, baseline: VALUE}")
	if err != nil {
		return err
	}
	for i, item := range items {
		f := index("compare", i)
		kvs, err := d.mapping(item, f, "a mapping {axis: PARAMETER, baseline: VALUE}")
		if err != nil {
			return err
		}
		var axisKV, baseKV *keyValue
		for j := range kvs {
			switch kvs[j].key {
			case "axis":
				axisKV = &kvs[j]
			case "baseline":
				baseKV = &kvs[j]
			default:
				return d.errAt(kvs[j].kn, join(f, kvs[j].key), "unknown key; expected axis and baseline%s", suggest(kvs[j].key, []string{"axis", "baseline"}, nil))
			}
		}
		if axisKV == nil || baseKV == nil {
			missing := "axis"
			if axisKV != nil {
				missing = "baseline"
			}
			return d.errAt(resolve(item), f, "missing %s; expected {axis: PARAMETER, baseline: VALUE}", missing)
		}
		name, ok := scalarString(axisKV.vn)
		if !ok {
			return d.errAt(resolve(axisKV.vn), join(f, "axis"), "expected a matrix axis name, got %s", describe(axisKV.vn))
		}
		pi, ok := paramIndex[name]
		if !ok {
			return d.errAt(resolve(axisKV.vn), join(f, "axis"), "unknown parameter %q%s", name, suggestIn(name, paramPaths(true)))
		}
		for _, c := range d.compares {
			if c.axis == pi {
				return d.errAt(resolve(axisKV.vn), join(f, "axis"), "%s is compared twice (%s)", name, d.where(c.keyNode))
			}
		}
		v, err := d.value(pi, baseKV.vn, join(f, "baseline"))
		if err != nil {
			return err
		}
		d.compares = append(d.compares, compareDef{axis: pi, baseline: v, keyNode: resolve(axisKV.vn), node: resolve(baseKV.vn), field: f})
	}
	return nil
}

// compare checks compare entries against the axes and the planned cells.
func (d *decoder) compare() error {
	plan := d.spec.Plan
	for _, c := range d.compares {
		name := params[c.axis].path
		ai, ok := d.axisAt[c.axis]
		if !ok {
			return d.errAt(c.keyNode, c.field+".axis", "%s is not a matrix axis (axes: %s)", name, d.axisNames())
		}
		if !d.axisHas(ai, c.axis, c.baseline) {
			return d.errAt(c.node, c.field+".baseline", "%s is not a value of the %s axis (%s)", formatValue(c.baseline), name, d.axisValues(ai, c.axis))
		}
		found, other := false, false
		for i := range plan.Cells {
			cell := &plan.Cells[i]
			if !cell.applies(c.axis) {
				continue
			}
			if params[c.axis].get(&cell.Params) == c.baseline {
				found = true
			} else {
				other = true
			}
		}
		if !found {
			return d.errAt(c.node, c.field+".baseline", "no cell has %s %s (excluded or collapsed); nothing to compare against", name, formatValue(c.baseline))
		}
		if !other {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("compare %s: every cell has the baseline %s; nothing to compare", name, formatValue(c.baseline)))
		}
		d.spec.Compare = append(d.spec.Compare, Compare{Axis: name, Baseline: c.baseline})
	}
	return nil
}

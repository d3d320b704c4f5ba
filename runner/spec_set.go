package runner

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// applySet applies one --set PATH=VALUE to the spec's node tree before it
// is decoded, so that overrides get exactly the file's validation. Every
// node it adds is remembered as coming from that argument, which is what
// errors then name instead of file:line.
//
// PATH is rooted at the spec's top level: name, description, repeats, out,
// compare, schema_version; params.A.B (nested parameters, e.g.
// params.dataset.num_requests); matrix.AXIS (the axis name may itself be
// dotted: matrix.dataset.input_mean), matrix.include, matrix.exclude,
// matrix.zips.NAME; or matrix to replace the whole matrix. VALUE is YAML.
func (d *decoder) applySet(root *yaml.Node, arg string) error {
	setErr := func(field, format string, args ...any) error {
		e := d.errAt(nil, field, format, args...)
		e.Set, e.Line, e.Column = arg, 0, 0
		return e
	}
	path, value, ok := strings.Cut(arg, "=")
	path = strings.TrimSpace(path)
	if !ok || path == "" {
		return setErr("", "expected PATH=VALUE, e.g. --set matrix.batch_size=[8,16] or --set params.dataset.num_requests=100")
	}
	segs := strings.Split(path, ".")
	if slices.Contains(segs, "") {
		return setErr(path, "empty path segment")
	}
	var vdoc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &vdoc); err != nil {
		return setErr(path, "VALUE is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var vn *yaml.Node
	if len(vdoc.Content) > 0 {
		vn = vdoc.Content[0]
	} else {
		vn = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	d.markSet(vn, arg)

	// keys are the mapping keys to walk from the root; the last one is
	// replaced or added.
	var keys []string
	switch top := segs[0]; {
	case top == "params":
		keys = segs
	case top == "matrix" && len(segs) == 1:
		keys = segs
	case top == "matrix" && segs[1] == "zips" && len(segs) > 2:
		keys = []string{"matrix", "zips", strings.Join(segs[2:], ".")}
	case top == "matrix":
		keys = []string{"matrix", strings.Join(segs[1:], ".")}
	case slices.Contains(topKeys, top):
		if len(segs) > 1 {
			return setErr(path, "%s has no sub-keys; use --set %s=VALUE", top, top)
		}
		keys = segs
	default:
		return setErr(path, "unknown key %q%s", top, suggestOrList(top, topKeys))
	}

	// An override wins over the other place a parameter may be given:
	// --set params.batch_size=8 pins an axis of the file, and
	// --set matrix.dataset.input_mean=[...] sweeps a fixed parameter.
	if segs[0] == "params" && len(segs) > 1 {
		removeKey(root, "matrix", strings.Join(segs[1:], "."))
		pinZips(root, strings.Join(segs[1:], "."))
	} else if segs[0] == "matrix" {
		for _, axis := range axesIn(keys[1:], vn) {
			removeKey(root, append([]string{"params"}, strings.Split(axis, ".")...)...)
		}
	}

	n := root
	for i, key := range keys {
		last := i == len(keys)-1
		if n.Kind != yaml.MappingNode {
			return setErr(strings.Join(keys[:i], "."), "is %s in the spec (line %d), not a mapping; cannot set %s inside it", describe(n), n.Line, key)
		}
		var found *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Value == key {
				if last {
					n.Content[j+1] = vn
				}
				found = resolve(n.Content[j+1])
				break
			}
		}
		if found == nil {
			kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
			d.origin[kn] = arg
			child := vn
			if !last {
				child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				d.origin[child] = arg
			}
			n.Content = append(n.Content, kn, child)
			found = child
		}
		n = found
	}
	return nil
}

func (d *decoder) markSet(n *yaml.Node, arg string) {
	if n == nil {
		return
	}
	d.origin[n] = arg
	for _, c := range n.Content {
		d.markSet(c, arg)
	}
}

// removeKey deletes the entry at the path of mapping keys, if it is there.
func removeKey(n *yaml.Node, keys ...string) {
	for i, key := range keys {
		n = resolve(n)
		if n == nil || n.Kind != yaml.MappingNode {
			return
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Value == key {
				if i == len(keys)-1 {
					n.Content = append(n.Content[:j:j], n.Content[j+2:]...)
					return
				}
				next = n.Content[j+1]
				break
			}
		}
		n = next
	}
}

// axesIn lists the axis names a --set value for matrix.<keys> declares.
func axesIn(keys []string, vn *yaml.Node) []string {
	var axes []string
	zipRows := func(rows *yaml.Node) {
		if rows = resolve(rows); rows != nil && rows.Kind == yaml.SequenceNode {
			for _, row := range rows.Content {
				if row = resolve(row); row.Kind == yaml.MappingNode {
					for i := 0; i < len(row.Content); i += 2 {
						axes = append(axes, row.Content[i].Value)
					}
				}
			}
		}
	}
	zips := func(z *yaml.Node) {
		if z = resolve(z); z != nil && z.Kind == yaml.MappingNode {
			for i := 1; i < len(z.Content); i += 2 {
				zipRows(z.Content[i])
			}
		}
	}
	switch {
	case len(keys) == 0: // the whole matrix
		if m := resolve(vn); m != nil && m.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(m.Content); i += 2 {
				switch k := m.Content[i].Value; k {
				case "include", "exclude":
				case "zips":
					zips(m.Content[i+1])
				default:
					axes = append(axes, k)
				}
			}
		}
	case keys[0] == "zips" && len(keys) == 1:
		zips(vn)
	case keys[0] == "zips":
		zipRows(vn)
	case keys[0] != "include" && keys[0] != "exclude":
		axes = append(axes, keys[0])
	}
	return axes
}

// pinZips takes axis out of every zip of the matrix, as --set params.AXIS
// takes a plain axis out: each row loses it, a row left the same as an
// earlier one goes (the zip's other values were paired with it alone),
// and a zip left with empty rows goes.
func pinZips(root *yaml.Node, axis string) {
	zips := resolve(mappingValue(resolve(mappingValue(resolve(root), "matrix")), "zips"))
	if zips == nil || zips.Kind != yaml.MappingNode {
		return
	}
	for j := 0; j+1 < len(zips.Content); j += 2 {
		rows := resolve(zips.Content[j+1])
		if rows == nil || rows.Kind != yaml.SequenceNode {
			continue
		}
		var kept []*yaml.Node
		var seen []string
		empty := true
		for _, row := range rows.Content {
			removeKey(row, axis)
			b, err := yaml.Marshal(resolve(row))
			if err != nil || !slices.Contains(seen, string(b)) {
				seen = append(seen, string(b))
				kept = append(kept, row)
			}
			if r := resolve(row); r == nil || r.Kind != yaml.MappingNode || len(r.Content) > 0 {
				empty = false
			}
		}
		rows.Content = kept
		if empty {
			zips.Content = append(zips.Content[:j:j], zips.Content[j+2:]...)
			j -= 2
		}
	}
}

// mappingValue is n's value under key (n a mapping), nil if none.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[j+1]
		}
	}
	return nil
}

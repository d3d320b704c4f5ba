package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

func (d *decoder) errAt(n *yaml.Node, field, format string, args ...any) *SpecError {
	e := &SpecError{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
		if s, ok := d.origin[n]; ok {
			e.Set = s
		}
	}
	if e.Set == "" && e.Line == 0 {
		e.Line, e.Column = 1, 1
	}
	return e
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse reads the one YAML document of the spec into a node tree.
func (d *decoder) parse() (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(d.data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err == io.EOF {
		root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1}
		d.rootNode = root
		return root, nil
	}
	if err != nil {
		return nil, d.syntaxError(err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		if err != nil {
			return nil, d.syntaxError(err)
		}
		return nil, d.errAt(&next, "", "a second YAML document; a spec is one document (remove the \"---\")")
	}
	if len(doc.Content) == 0 {
		root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1}
		d.rootNode = root
		return root, nil
	}
	root := resolve(doc.Content[0])
	d.rootNode = root
	if root.Kind != yaml.MappingNode {
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1}, nil
		}
		return nil, d.errAt(root, "", "expected a mapping of spec keys (name, params, matrix, ...), got %s", describe(root))
	}
	return root, nil
}

func (d *decoder) syntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	return &SpecError{File: d.file, Line: line, Column: firstColumn(d.data, line), Msg: "invalid YAML: " + msg}
}

type keyValue struct {
	key    string
	kn, vn *yaml.Node
}

// mapping lists a mapping's entries, rejecting anything but a mapping with
// unique string keys.
func (d *decoder) mapping(n *yaml.Node, field, expected string) ([]keyValue, error) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, field, "expected %s, got %s", expected, describe(n))
	}
	d.visits += len(n.Content)
	if d.visits > 1_000_000 {
		return nil, d.errAt(n, field, "the spec is too large (more than a million YAML nodes, counting aliases)")
	}
	kvs := make([]keyValue, 0, len(n.Content)/2)
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key, ok := scalarString(kn)
		if !ok {
			return nil, d.errAt(kn, field, "keys must be names, got %s", describe(kn))
		}
		if first, dup := seen[key]; dup {
			return nil, d.errAt(kn, join(field, key), "duplicate key (first at line %d)", first.Line)
		}
		seen[key] = kn
		kvs = append(kvs, keyValue{key, kn, vn})
	}
	return kvs, nil
}

func (d *decoder) sequence(n *yaml.Node, field, expected string) ([]*yaml.Node, error) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, field, "expected %s, got %s", expected, describe(n))
	}
	d.visits += len(n.Content)
	if d.visits > 1_000_000 {
		return nil, d.errAt(n, field, "the spec is too large (more than a million YAML nodes, counting aliases)")
	}
	return n.Content, nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

// paramGroups are the nested mappings inside params.
var paramGroups = []string{"dataset"}

// params decodes a params mapping (or a nested group of it).
func (d *decoder) params(n *yaml.Node, field, prefix string) error {
	kvs, err := d.mapping(n, field, "a mapping of parameters")
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		path := prefix + kv.key
		f := join(field, kv.key)
		if strings.Contains(kv.key, ".") {
			if _, ok := paramIndex[path]; ok {
				group, sub, _ := strings.Cut(kv.key, ".")
				return d.errAt(kv.kn, f, "params are nested mappings: write %s: {%s: ...}; dotted paths are for matrix axes and --set", group, sub)
			}
		} else if pi, ok := paramIndex[path]; ok {
			v, err := d.value(pi, kv.vn, f)
			if err != nil {
				return err
			}
			params[pi].set(&d.spec.Params, v)
			d.explicit[pi] = true
			d.paramNode[pi] = resolve(kv.vn)
			d.paramField[pi] = f
			continue
		}
		if prefix == "" && slices.Contains(paramGroups, kv.key) {
			if err := d.params(kv.vn, f, kv.key+"."); err != nil {
				return err
			}
			continue
		}
		var cands []string
		for _, p := range params {
			if rest, ok := strings.CutPrefix(p.path, prefix); ok && !strings.Contains(rest, ".") {
				cands = append(cands, rest)
			}
		}
		if prefix == "" {
			cands = append(cands, paramGroups...)
		}
		return d.errAt(kv.kn, f, "unknown parameter%s", suggestOrList(kv.key, cands))
	}
	return nil
}

// suggestOrList suggests the closest name, or lists them all when none is
// close and the list is short enough to read.
func suggestOrList(word string, cands []string) string {
	if s := suggest(word, cands, nil); s != "" {
		return s
	}
	return "; expected one of " + strings.Join(cands, ", ")
}

// value decodes one parameter value: type, range, and for models and
// dataset files, that they exist.
func (d *decoder) value(pi int, n *yaml.Node, field string) (any, error) {
	n = resolve(n)
	v, msg := params[pi].parse(n)
	if msg != "" {
		return nil, d.errAt(n, field, "%s", msg)
	}
	switch pi {
	case pModel:
		if err := d.lookupModel(v.(string), n, field); err != nil {
			return nil, err
		}
	case pGenerator:
		if s := v.(string); s != GenNorm && s != GenUnif {
			p := d.resolvePath(s)
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				return nil, d.errAt(n, field, "%q: no such dataset file (relative paths start at the spec's directory)", s)
			}
		}
	case pExtraOptions:
		if s := v.(string); s != "none" {
			st, err := os.Stat(d.resolvePath(s))
			if err != nil || !st.Mode().IsRegular() {
				return nil, d.errAt(n, field, "%q: no such file of LLM API options (relative paths start at the spec's directory)", s)
			}
		}
	}
	return v, nil
}

func (d *decoder) resolvePath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(d.spec.Dir, filepath.FromSlash(p))
}

// lookupModel validates a model value once per distinct value: a zoo name,
// or a directory (relative to the spec) holding a usable config.json.
func (d *decoder) lookupModel(name string, n *yaml.Node, field string) error {
	if _, ok := d.models[name]; ok {
		return nil
	}
	isPath := strings.ContainsAny(name, `/\`)
	if c, ok := engine.ZooModel(name); ok && !isPath {
		d.models[name] = &c
		return nil
	}
	dir := d.resolvePath(name)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if isPath {
			return d.errAt(n, field, "%q: no such model directory (relative paths start at the spec's directory)", name)
		}
		return d.errAt(n, field, "%q is not a zoo model%s nor a directory with config.json; zoo models: %s",
			name, suggestIn(name, engine.ModelNames()), strings.Join(engine.ModelNames(), ", "))
	}
	c, err := engine.LookupModel(dir)
	if err != nil {
		var ce *engine.ConfigError
		if errors.As(err, &ce) {
			return d.errAt(n, field, "model directory %q: %s", name, ce.Error())
		}
		return d.errAt(n, field, "model directory %q: %v", name, err)
	}
	// A truncated or malformed checkpoint fails every engine; headers and
	// file sizes tell, without reading a tensor. A directory without one
	// is left to the engines (trtllm takes pytorch_model.bin).
	if err := safetensors.Validate(dir); err != nil && !errors.Is(err, safetensors.ErrNoCheckpoint) {
		return d.errAt(n, field, "model directory %q: %v", name, err)
	}
	d.models[name] = &c
	return nil
}

// suggestIn is suggest phrased to sit inside a sentence.
func suggestIn(word string, cands []string) string {
	if best := closest(word, cands, nil); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

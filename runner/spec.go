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
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/safetensors"
	"github.com/xrun-dev/xrun/engine/trtllm"
)

// SchemaVersion is the version of the spec format this xrun reads.
const SchemaVersion = 1

// DefaultMaxCells is the most cells a study may have unless raised with
// LoadOptions.MaxCells (xrun's --max-cells).
const DefaultMaxCells = 10_000

// DefaultRepeats is how often each cell runs unless the spec says.
const DefaultRepeats = 3

// maxSpecBytes keeps a mistaken argument (a dataset, a binary) from being
// read whole as a spec.
const maxSpecBytes = 16 << 20

// SpecError is a problem with a spec or a --set override. It names where
// (file:line:column, or the --set argument), the field and what was expected.
type SpecError struct {
	File   string
	Line   int // 1-based; 0 when the problem has no position (an unreadable file)
	Column int
	// Set is the --set PATH=VALUE argument the problem is in, if it is in one.
	Set   string
	Field string // dotted path, e.g. "matrix.batch_size[2]"
	Msg   string
}

// Error formats the problem as "file:line:col: field: message".
func (e *SpecError) Error() string {
	var b strings.Builder
	switch {
	case e.Set != "":
		b.WriteString("--set ")
		b.WriteString(e.Set)
	case e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d", e.File, e.Line, e.Column)
	default:
		b.WriteString(e.File)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// BadInput marks spec problems as the user's (exit status 2).
func (e *SpecError) BadInput() bool { return true }

// LoadOptions adjust how a spec is loaded.
type LoadOptions struct {
	// Sets are --set PATH=VALUE overrides, applied in order before
	// validation, e.g. "matrix.batch_size=[8,16]".
	Sets []string
	// MaxCells is the most cells the plan may have; 0 means DefaultMaxCells.
	MaxCells int
}

// Spec is a decoded, validated and expanded study.
type Spec struct {
	File string // as given to LoadSpec
	// Dir is the directory that relative model and dataset paths in the
	// spec (and in --set values) are resolved against: the spec's own.
	Dir           string
	SchemaVersion int
	Name          string
	Description   string
	// Out is the results directory (default results/<name>), relative to
	// the working directory; OutAt is where the spec set it, as errors
	// name it ("FILE:LINE:COL", "--set out=DIR"), "" for the default.
	Out     string
	OutAt   string
	Repeats int
	// Params are the defaults overlaid with the spec's params; vocab_size
	// and eos_id stay 0 unless given (each cell takes them from its model).
	Params  Params
	Axes    []Axis
	Compare []Compare
	Sets    []string
	// Effective is the spec after the --set overrides, as YAML: what the
	// plan was built from, for the results file.
	Effective []byte
	// Plan is the expanded list of cells.
	Plan *Plan
	// Command is the command block (engine: command); Trtllm the trtllm
	// block's settings (engine: trtllm), defaults when the spec has none.
	Command *command.Definition
	Trtllm  *trtllm.Options
}

// Axis is one dimension of the matrix: a plain axis has one key, a named
// zip several keys whose values go together row by row.
type Axis struct {
	Zip    string   // the zip's name; "" for a plain axis
	Keys   []string // parameter paths
	Values [][]any  // Values[row][k] is Keys[k]'s value in that row
}

// Compare asks the results tables to compare every value of Axis against
// Baseline, all other parameters equal.
type Compare struct {
	Axis     string
	Baseline any
}

// LoadSpec reads, decodes, validates and expands the spec at path. Every
// problem is a *SpecError.
func LoadSpec(path string, opts LoadOptions) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &SpecError{File: path, Msg: "cannot read the spec: " + errText(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return nil, &SpecError{File: path, Msg: "cannot read the spec: " + errText(err)}
	}
	if len(data) > maxSpecBytes {
		return nil, &SpecError{File: path, Msg: fmt.Sprintf("larger than %d MiB; is this a spec?", maxSpecBytes>>20)}
	}
	return ParseSpec(path, data, opts)
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ParseSpec is LoadSpec on bytes already read; file names them in errors
// and its directory anchors relative paths.
func ParseSpec(file string, data []byte, opts LoadOptions) (*Spec, error) {
	maxCells := opts.MaxCells
	if maxCells <= 0 {
		maxCells = DefaultMaxCells
	}
	d := &decoder{
		file:   file,
		data:   data,
		origin: map[*yaml.Node]string{},
		models: map[string]*engine.ModelConfig{},
		spec: &Spec{
			File: file, Dir: filepath.Dir(file), SchemaVersion: SchemaVersion,
			Repeats: DefaultRepeats, Sets: slices.Clone(opts.Sets),
		},
		axisAt: map[int]int{},
	}
	for i, p := range params {
		if p.def != nil {
			p.set(&d.spec.Params, p.def)
		}
		d.paramField[i] = "params." + p.path
	}
	root, err := d.parse()
	if err != nil {
		return nil, err
	}
	for _, s := range opts.Sets {
		if err := d.applySet(root, s); err != nil {
			return nil, err
		}
	}
	if len(root.Content) == 0 {
		return nil, d.errAt(root, "", "the spec is empty; expected a mapping with name, params and matrix")
	}
	if err := d.top(root); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err == nil {
		d.spec.Effective = buf.Bytes()
	}
	plan, err := d.expand(maxCells)
	if err != nil {
		return nil, err
	}
	d.spec.Plan = plan
	if err := d.compare(); err != nil {
		return nil, err
	}
	return d.spec, nil
}

// mval is one value written in the matrix (an axis value, an include or
// exclude value) with where it was written.
type mval struct {
	v     any
	node  *yaml.Node
	field string
}

type entryDef struct {
	keys  []int // parameter indices
	vals  []int32
	node  *yaml.Node
	field string
}

type decoder struct {
	file   string
	data   []byte
	origin map[*yaml.Node]string // nodes that came from a --set argument
	visits int
	spec   *Spec
	models map[string]*engine.ModelConfig

	rootNode   *yaml.Node
	commandKey *yaml.Node
	trtllmKey  *yaml.Node
	paramsKey  *yaml.Node
	matrixKey  *yaml.Node
	paramNode  [numParams]*yaml.Node // where params: set each parameter
	paramField [numParams]string
	explicit   [numParams]bool // given in params (not a default)

	vals     []mval
	axes     []mxAxis
	axisKeys []*yaml.Node // key node of each axis (the zip's name for zips)
	axisAt   map[int]int  // parameter index -> index in axes
	include  []entryDef
	exclude  []entryDef
	compares []compareDef
}

type compareDef struct {
	axis     int
	baseline any
	keyNode  *yaml.Node
	node     *yaml.Node
	field    string
}

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

var topKeys = []string{"schema_version", "name", "description", "params", "matrix", "repeats", "compare", "out", "command", "trtllm"}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

func (d *decoder) top(root *yaml.Node) error {
	kvs, err := d.mapping(root, "", "a mapping of spec keys")
	if err != nil {
		return err
	}
	s := d.spec
	var outSet bool
	for _, kv := range kvs {
		switch kv.key {
		case "schema_version":
			v, ok := scalarInt(kv.vn)
			if !ok {
				return d.errAt(resolve(kv.vn), kv.key, "expected the integer %d, got %s", SchemaVersion, describe(kv.vn))
			}
			if v != SchemaVersion {
				return d.errAt(resolve(kv.vn), kv.key, "unsupported schema version %d; this xrun reads schema_version %d", v, SchemaVersion)
			}
		case "name":
			v, ok := scalarString(kv.vn)
			if !ok || !nameRE.MatchString(v) {
				what := describe(kv.vn)
				return d.errAt(resolve(kv.vn), kv.key, "expected a name of letters, digits, '.', '_' and '-' (it names the results directory), got %s", what)
			}
			s.Name = v
		case "description":
			v, ok := scalarString(kv.vn)
			if !ok {
				return d.errAt(resolve(kv.vn), kv.key, "expected text, got %s", describe(kv.vn))
			}
			s.Description = strings.TrimSpace(v)
		case "out":
			v, ok := scalarString(kv.vn)
			if !ok || strings.TrimSpace(v) == "" {
				return d.errAt(resolve(kv.vn), kv.key, "expected a directory path, got %s", describe(kv.vn))
			}
			s.Out, outSet = filepath.Clean(v), true
			if e := d.errAt(resolve(kv.vn), kv.key, ""); e.Set != "" {
				s.OutAt = "--set " + e.Set
			} else {
				s.OutAt = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
			}
		case "repeats":
			v, ok := scalarInt(kv.vn)
			if !ok || v < 1 || v > 1000 {
				return d.errAt(resolve(kv.vn), kv.key, "expected an integer in [1, 1000], got %s", describe(kv.vn))
			}
			s.Repeats = int(v)
		case "params":
			d.paramsKey = kv.kn
			if err := d.params(kv.vn, "params", ""); err != nil {
				return err
			}
		case "matrix":
			d.matrixKey = kv.kn
			if err := d.matrix(kv.vn); err != nil {
				return err
			}
		case "compare":
			if err := d.compareEntries(kv.vn); err != nil {
				return err
			}
		case "command":
			if err := d.commandBlock(kv.kn, kv.vn); err != nil {
				return err
			}
		case "trtllm":
			if err := d.trtllmBlock(kv.kn, kv.vn); err != nil {
				return err
			}
		default:
			return d.errAt(kv.kn, kv.key, "unknown key%s", suggestOrList(kv.key, topKeys))
		}
	}
	if s.Name == "" {
		base := strings.TrimSuffix(filepath.Base(d.file), filepath.Ext(d.file))
		if !nameRE.MatchString(base) {
			return d.errAt(d.rootNode, "name", "required: the file name %q is not usable as a study name; add name: to the spec", base)
		}
		s.Name = base
	}
	if !outSet {
		s.Out = filepath.Join("results", s.Name)
	}
	for pi, ai := range d.axisAt {
		if d.explicit[pi] {
			return d.errAt(d.paramNode[pi], d.paramField[pi], "also a matrix axis (%s); give it in one place (from the command line, --set params.%s=VALUE pins the axis)",
				d.where(d.axisKeys[ai]), params[pi].path)
		}
	}
	return nil
}

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

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
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/engine/trtllm"
	"github.com/xrun-dev/xrun/results"
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
	// OpenAI is the openai block (engine: openai); SLO and Search the
	// slo and search blocks (spec_serving.go).
	OpenAI *openai.Options
	SLO    *results.SLO
	Search *results.Search
	// Reference is the reference block: a published table results.md
	// sets beside the measured values (spec_reference.go); nil without.
	Reference *results.Reference
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
	if err := d.checkSearch(); err != nil {
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
	sloKey     *yaml.Node
	searchKey  *yaml.Node
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

var topKeys = []string{"schema_version", "name", "description", "params", "matrix", "repeats", "compare", "out", "command", "trtllm", "reference", "openai", "slo", "search"}

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
		case "reference":
			if err := d.referenceBlock(kv.vn); err != nil {
				return err
			}
		case "openai":
			if err := d.openaiBlock(kv.kn, kv.vn); err != nil {
				return err
			}
		case "slo":
			if err := d.sloBlock(kv.kn, kv.vn); err != nil {
				return err
			}
		case "search":
			if err := d.searchBlock(kv.kn, kv.vn); err != nil {
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

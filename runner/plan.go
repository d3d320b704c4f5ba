package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/engine/trtllm"
)

// Plan is a study expanded into cells, with what was excluded or
// collapsed and why, the datasets the cells need and the work they add up to.
type Plan struct {
	Spec  *Spec
	Cells []Cell
	// Varying are the matrix parameters (axes and include keys) that take
	// more than one value among the cells, in the order the spec gives
	// them; cell ids spell them out.
	Varying   []string
	Excluded  []Excluded
	Collapsed []Collapsed
	Datasets  []*Dataset
	Totals    Totals
	// Warnings are caveats that do not stop the study (an exclude entry
	// that matched nothing, a comparison with one side only).
	Warnings []string
	// Estimate is the cells' expected run time, once EstimateTime has
	// made it; WriteText and WriteJSON show it then.
	Estimate *Estimate
	// Memory is the cells' GPU memory, once CheckMemory has computed it;
	// WriteText and WriteJSON show it then.
	Memory *Memory
}

// Setting is one parameter and its value, as a matrix combination gives it.
type Setting struct {
	Key   string
	Value any
}

// Excluded is a combination removed by an exclude entry.
type Excluded struct {
	Values []Setting
	By     string // the entry, e.g. "matrix.exclude[0]"
	Line   int    // its line in the spec; 0 when it came from --set
}

// Collapsed is a combination that resolved to the same parameters as an
// earlier cell, because what set it apart cannot matter (routing_mode on a
// dense model, dtype on the cpu engine, ...) or because it was listed twice.
type Collapsed struct {
	Values []Setting
	Into   string // the id of the cell it is the same as
	Reason string
}

// Cell is one point of the study, with fully resolved parameters.
type Cell struct {
	Index int
	// ID is a readable slug of the cell's Varying values, "-", and the
	// first 8 hex digits of Hash; the same spec gives the same ids on
	// every machine.
	ID string
	// Hash is the hex SHA-256 of the canonical encoding of every
	// parameter that applies to the cell (see Flat). It depends on the
	// parameters only, not on the rest of the study.
	Hash   string
	Params Params
	// Model is the model's configuration (zoo or config.json), cut to the
	// cell's layers when it sets them (engine.WithLayers): what its engine
	// builds, and what its estimates and memory are computed from.
	Model *engine.ModelConfig
	// ModelRef is the model as the engine takes it: the zoo name, or the
	// directory resolved against the spec's directory.
	ModelRef string
	// DatasetFile is the resolved path of a dataset file; "" for generators.
	DatasetFile string
	Dataset     *Dataset

	na   uint64  // bit i set: params[i] does not apply to this cell
	vals []int32 // the matrix value ids that made the cell (see mxCombo)
	// unset are the parameters of na that apply but are in the identity
	// only where the spec gives them (whenGiven), and it does not.
	unset uint64
	// autoCuda is what CheckBackend returns should engine auto resolve to
	// cuda: nil unless the cell cannot run there.
	autoCuda *SpecError
}

// Dataset is one distinct set of requests that cells need. Cells whose
// dataset parameters are equal share it (for example two models with the
// same tokenizer vocabulary).
type Dataset struct {
	// ID is "ds-" and 8 hex digits of the dataset parameters' hash.
	ID string
	// Params holds the parameters that apply to the generator; the others
	// are zero.
	Params DatasetParams
	File   string // resolved path of a dataset file
	Cells  int    // how many cells use it
	// Requests and tokens of one pass over the dataset. Tokens are exact
	// when every length is fixed (stdev 0, min == max), else estimated
	// from the mean (norm) or the midpoint (unif). Unknown (zero, Known
	// false) for dataset files until they are read.
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	Exact        bool
	Known        bool

	na uint64 // the dataset parameters that do not apply (as Cell.na)
}

// Totals add up one pass over every cell's dataset (repeats multiply it).
type Totals struct {
	Cells        int
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	Exact        bool
	// UnknownCells use dataset files, whose requests are not counted.
	UnknownCells int
	Repeats      int
}

// applies reports whether parameter pi can matter for the cell.
func (c *Cell) applies(pi int) bool { return c.na&(1<<pi) == 0 }

// Flat returns the cell's parameters as dotted keys and JSON scalars
// ("dataset.input_mean": 128), exactly those that identify the cell: those
// that apply to it (no routing_mode on a dense model), without execution
// limits (timeout), and without layers when the spec does not set it.
func (c *Cell) Flat() map[string]any {
	m := make(map[string]any, numParams)
	for pi, p := range params {
		if p.identity && c.applies(pi) {
			v := p.get(&c.Params)
			if d, ok := v.(time.Duration); ok { // results files hold JSON scalars
				v = showDuration(d)
			}
			m[p.path] = v
		}
	}
	return m
}

// NotApplicable lists the parameters that cannot matter for this cell and
// so are left out of Flat and the hash (not those left out because the
// spec does not set them).
func (c *Cell) NotApplicable() []string {
	var out []string
	for pi, p := range params {
		if !c.applies(pi) && c.unset&(1<<pi) == 0 {
			out = append(out, p.path)
		}
	}
	return out
}

// declaredKeys are the parameters the matrix sets: axes in order, then
// keys that only include entries set, in order of appearance.
func (d *decoder) declaredKeys() []int {
	var keys []int
	for _, ax := range d.axes {
		keys = append(keys, ax.keys...)
	}
	for _, e := range d.include {
		for _, k := range e.keys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

func (d *decoder) settings(vals []int32, keys []int) []Setting {
	var out []Setting
	for _, k := range keys {
		if vals[k] >= 0 {
			out = append(out, Setting{params[k].path, d.vals[vals[k]].v})
		}
	}
	return out
}

// source finds where a cell's value of parameter pi was written: its
// matrix value, or params; nil for defaults and values derived from the model.
func (d *decoder) source(vals []int32, pi int) (*yaml.Node, string) {
	if vals[pi] >= 0 {
		v := d.vals[vals[pi]]
		return v.node, v.field
	}
	if d.explicit[pi] {
		return d.paramNode[pi], d.paramField[pi]
	}
	return nil, ""
}

// where names a node's place for messages: "line N", or the --set argument.
func (d *decoder) where(n *yaml.Node) string {
	if s, ok := d.origin[n]; ok {
		return "--set " + s
	}
	return "line " + strconv.Itoa(n.Line)
}

// expand turns the decoded matrix into the plan.
func (d *decoder) expand(maxCells int) (*Plan, error) {
	m := &matrixDef{nkeys: numParams, axes: d.axes, same: func(a, b int32) bool { return d.vals[a].v == d.vals[b].v }}
	for _, e := range d.exclude {
		m.exclude = append(m.exclude, mxEntry{keys: e.keys, vals: e.vals})
	}
	for _, e := range d.include {
		m.include = append(m.include, mxEntry{keys: e.keys, vals: e.vals})
	}
	// Exclusion can only shrink the cross product so much; refuse to
	// enumerate one far beyond the limit.
	limit := 4 * maxCells
	if n := m.originals(limit); n > limit {
		count := "more than " + strconv.Itoa(limit)
		if n := m.originals(1 << 50); n <= 1<<50 {
			count = strconv.Itoa(n)
		}
		return nil, d.errAt(d.matrixKey, "matrix", "the axes make %s combinations before exclusion, over 4 times --max-cells (%d); narrow the matrix or raise --max-cells", count, maxCells)
	}
	res := m.expand()
	if len(res.combos) == 0 {
		return nil, d.errAt(d.matrixKey, "matrix", "no cells: every combination is excluded and nothing is included")
	}
	declared := d.declaredKeys()
	plan := &Plan{Spec: d.spec}
	for _, x := range res.excluded {
		e := d.exclude[x.by]
		line := e.node.Line
		if _, fromSet := d.origin[e.node]; fromSet {
			line = 0 // from --set
		}
		plan.Excluded = append(plan.Excluded, Excluded{Values: d.settings(x.vals, declared), By: e.field, Line: line})
	}
	for i, hits := range res.excludeHits {
		if hits == 0 {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s (%s) matches no combination", d.exclude[i].field, d.where(d.exclude[i].node)))
		}
	}

	type collapsedAt struct {
		vals []int32
		into int
		p    Params
		na   uint64
		why  map[int]string
	}
	var collapsed []collapsedAt
	warned := map[string]bool{}
	warn := func(msg string) {
		if !warned[msg] {
			warned[msg] = true
			plan.Warnings = append(plan.Warnings, msg)
		}
	}
	cells := make([]Cell, 0, len(res.combos))
	cut := map[cutKey]*engine.ModelConfig{}
	seen := make(map[[sha256.Size]byte]int, len(res.combos))
	buf := make([]byte, 0, 1024)
	enc := d.newEncoder()
	for _, c := range res.combos {
		p := d.spec.Params
		explicit := d.explicit
		for _, k := range declared {
			if vi := c.vals[k]; vi >= 0 {
				params[k].set(&p, d.vals[vi].v)
				explicit[k] = true
			}
		}
		if p.Model == "" {
			n := d.paramsKey
			if n == nil {
				n = d.rootNode
			}
			return nil, d.errAt(n, "params.model", "required: set params.model or a matrix.model axis (zoo models: %s)", strings.Join(engine.ModelNames(), ", "))
		}
		model := d.models[p.Model]
		if !explicit[pVocabSize] {
			p.Dataset.VocabSize = model.DatasetVocab
		}
		if !explicit[pEOSID] {
			p.Dataset.EOSID = model.EOS
		}
		if err := d.sizeForLoad(&p, c.vals); err != nil {
			return nil, err
		}
		if err := d.layersCheck(&p, model, c.vals); err != nil {
			return nil, err
		}
		pl, err := d.planner(&p, c.vals)
		if err != nil {
			return nil, err
		}
		if pl != nil && !explicit[pGPUsPerCell] && p.Engine == trtllm.Name {
			// As trtllm-bench does: tp x pp GPUs unless told otherwise.
			p.GPUsPerCell = max(p.GPUsPerCell, p.TP*p.PP)
		}
		if pl == nil && !explicit[pGPUsPerCell] {
			// The ranks tp and ep split the model over (plan_parallel.go).
			p.GPUsPerCell = max(p.GPUsPerCell, engine.WorldSize(p.TP, builtinEP(&p, model)))
		}
		na, why := notApplicable(&p, model, pl)
		if pl == nil {
			na &^= parallelGiven(model, explicit[:])
		}
		// Parameters in the identity only where given are left out of it
		// as parameters that do not apply are.
		var unset uint64
		for _, pi := range whenGiven {
			if !explicit[pi] {
				unset |= 1 << pi
			}
		}
		na |= unset
		if err := d.crossCheck(&p, na, c.vals); err != nil {
			return nil, err
		}
		if err := d.engineCheck(&p, model, pl, c.vals); err != nil {
			return nil, err
		}
		if err := d.cellChecks(&p, model, na, c.vals, warn); err != nil {
			return nil, err
		}
		buf = enc.appendCell(buf[:0], &p, na, c.vals)
		sum := sha256.Sum256(buf)
		if j, dup := seen[sum]; dup {
			collapsed = append(collapsed, collapsedAt{vals: c.vals, into: j, p: p, na: na, why: why})
			continue
		}
		if len(cells) == maxCells {
			return nil, d.errAt(d.matrixKey, "matrix", "more than %d cells (--max-cells); narrow the matrix or raise --max-cells", maxCells)
		}
		seen[sum] = len(cells)
		cell := Cell{Index: len(cells), Hash: hex.EncodeToString(sum[:]), Params: p, Model: cutModel(cut, model, p.Layers), na: na, unset: unset, vals: c.vals,
			autoCuda: d.autoCudaError(&p, na, c.vals)}
		cell.ModelRef = p.Model
		if model.Path != "" {
			cell.ModelRef = d.resolvePath(p.Model)
		}
		if p.Dataset.Kind() == GenFile {
			cell.DatasetFile = d.resolvePath(p.Dataset.Generator)
		}
		cells = append(cells, cell)
	}
	plan.Cells = cells
	plan.Varying = varying(cells, declared)
	enc.assignIDs(cells, plan.Varying)
	for _, c := range collapsed {
		var reasons []string
		for _, k := range declared {
			if c.vals[k] >= 0 && c.na&(1<<k) != 0 {
				if r, ok := c.why[k]; ok {
					reasons = append(reasons, r)
				} else {
					reasons = append(reasons, whyNotApplicable(k, &c.p))
				}
			}
		}
		if r := d.layersReason(c.vals, cells[c.into].vals, &c.p); r != "" {
			reasons = append(reasons, r)
		}
		reason := strings.Join(reasons, "; ")
		if reason == "" {
			reason = "the same parameters are listed twice"
		}
		plan.Collapsed = append(plan.Collapsed, Collapsed{Values: d.settings(c.vals, declared), Into: cells[c.into].ID, Reason: reason})
	}
	plan.Datasets, plan.Totals = datasets(cells, d.spec.Repeats)
	return plan, nil
}

// planner is the driver of an external engine's cell (nil for the
// built-in engine).
func (d *decoder) planner(p *Params, vals []int32) (driver.Planner, error) {
	switch p.Engine {
	case command.Name:
		if d.spec.Command == nil {
			n, f := d.source(vals, pEngine)
			return nil, d.errAt(n, f, "engine command needs a command block saying what to run, e.g. command: {argv: [python3, bench.py, --dataset, \"{dataset}\", --records, \"{records}\"]}")
		}
		return command.Planner{Def: d.spec.Command}, nil
	case trtllm.Name:
		if d.spec.Trtllm == nil {
			d.spec.Trtllm = &trtllm.Options{}
		}
		return trtllm.Planner{Opt: d.spec.Trtllm.WithDefaults()}, nil
	case openai.Name:
		if d.spec.OpenAI == nil {
			n, f := d.source(vals, pEngine)
			return nil, d.errAt(n, f, `engine openai needs an openai block saying which server to load: openai: {url: "http://127.0.0.1:8000/v1"}, or openai: {server: {argv: [xrun, serve, --model, "{model}", --listen, "127.0.0.1:{port}"]}}`)
		}
		return openai.Planner{Opt: *d.spec.OpenAI}, nil
	}
	return nil, nil
}

// engineCheck refuses what the cell's engine cannot run: parallel sizes
// on the built-in engine, and what an external engine's driver names.
func (d *decoder) engineCheck(p *Params, m *engine.ModelConfig, pl driver.Planner, vals []int32) error {
	blame := func(pi int, msg string) error {
		n, f := d.source(vals, pi)
		if n == nil {
			n, f = d.source(vals, pEngine)
		}
		if n == nil {
			n, f = d.rootNode, params[pi].path
		}
		return d.errAt(n, f, "%s", msg)
	}
	if pl == nil {
		if p.PP != 1 {
			return blame(pPP, fmt.Sprintf("pp %d: engine %s has no pipeline parallelism; pp is for engine trtllm or command (tp and ep split the model here)", p.PP, p.Engine))
		}
		return d.parallelCheck(p, m, vals)
	}
	if m.Path == "" && engine.HFName(p.Model) == "" && p.Engine == trtllm.Name {
		return blame(pModel, fmt.Sprintf("%s is a test shape with no published checkpoint; engine trtllm needs a Hugging Face model: a zoo model with a published checkpoint (%s) or a model directory", p.Model, strings.Join(engine.HFModels(), ", ")))
	}
	if prob := pl.Check(driverParams(p), m); prob != nil {
		pi, ok := paramIndex[prob.Param]
		if !ok {
			pi = pEngine
		}
		return blame(pi, prob.Msg)
	}
	return nil
}

// layersCheck refuses more layers than the cell's model has, and makes
// the value canonical: the model's own count is all of them (0), so that
// layers: 32 on a 32-layer model is the cell of layers: all.
func (d *decoder) layersCheck(p *Params, m *engine.ModelConfig, vals []int32) error {
	switch {
	case p.Layers == m.Layers:
		p.Layers = 0
	case p.Layers > m.Layers:
		n, f := d.blame(vals, pLayers)
		return d.errAt(n, f, "layers %d: model %s has %d layers; expected all or an integer from 1 to %d", p.Layers, p.Model, m.Layers, m.Layers)
	}
	return nil
}

// cutModel is m cut to its first n layers (n 0: m), one copy per model
// and count (kept in cut) however many cells share them.
func cutModel(cut map[cutKey]*engine.ModelConfig, m *engine.ModelConfig, n int) *engine.ModelConfig {
	if n == 0 {
		return m
	}
	key := cutKey{m, n}
	if c, ok := cut[key]; ok {
		return c
	}
	// layersCheck has made n valid for m.
	c, _ := engine.WithLayers(*m, n)
	cut[key] = &c
	return &c
}

// cutKey is a model cut to a number of layers.
type cutKey struct {
	m *engine.ModelConfig
	n int
}

// layersReason says why a combination collapsed into a cell when the two
// asked for the layers differently (a count equal to the model's, and
// all): "" when they asked alike.
func (d *decoder) layersReason(vals, into []int32, p *Params) string {
	asked := func(vals []int32) int {
		if vi := vals[pLayers]; vi >= 0 {
			return d.vals[vi].v.(int)
		}
		return d.spec.Params.Layers
	}
	a, b := asked(vals), asked(into)
	n := d.models[p.Model].Layers
	if min(a, b) != 0 || max(a, b) != n {
		return ""
	}
	return fmt.Sprintf("layers %d is all of model %s's %d layers", n, p.Model, n)
}

// crossCheck validates what no single value can: min <= max. (eos_id may
// be >= vocab_size: Llama 3's EOS is an added token outside the base
// vocabulary that datasets draw from, so the EOS scrub never fires.)
func (d *decoder) crossCheck(p *Params, na uint64, vals []int32) error {
	// Blame the value the matrix gave this cell, if either is one: it is
	// what makes this cell differ from the others.
	pair := func(lo, hi int, loV, hiV int) error {
		if na&(1<<lo) != 0 || loV <= hiV {
			return nil
		}
		n, f := d.source(vals, hi)
		if vals[lo] >= 0 || n == nil {
			n, f = d.source(vals, lo)
		}
		return d.errAt(n, f, "%s %d is above %s %d", params[lo].path, loV, params[hi].path, hiV)
	}
	ds := &p.Dataset
	if err := pair(pInputMin, pInputMax, ds.InputMin, ds.InputMax); err != nil {
		return err
	}
	if err := pair(pOutputMin, pOutputMax, ds.OutputMin, ds.OutputMax); err != nil {
		return err
	}
	return nil
}

// varying keeps the declared keys that take two or more values among the
// cells they apply to.
func varying(cells []Cell, declared []int) []string {
	var out []string
	for _, k := range declared {
		var first any
		have := false
		for i := range cells {
			if !cells[i].applies(k) {
				continue
			}
			v := params[k].get(&cells[i].Params)
			if !have {
				first, have = v, true
			} else if v != first {
				out = append(out, params[k].path)
				break
			}
		}
	}
	return out
}

// datasets groups the cells by the dataset they need and adds up the work.
func datasets(cells []Cell, repeats int) ([]*Dataset, Totals) {
	var list []*Dataset
	byKey := map[DatasetParams]*Dataset{}
	t := Totals{Cells: len(cells), Exact: true, Repeats: repeats}
	var buf []byte
	for i := range cells {
		c := &cells[i]
		key := c.Params.Dataset
		clearNotApplicable(&key, c.na)
		ds, ok := byKey[key]
		if !ok {
			buf = appendCanonical(buf[:0], &c.Params, c.na, "dataset.")
			sum := sha256.Sum256(buf)
			ds = &Dataset{ID: "ds-" + hex.EncodeToString(sum[:4]), Params: key, File: c.DatasetFile, na: c.na}
			ds.estimate()
			byKey[key] = ds
			list = append(list, ds)
		}
		ds.Cells++
		c.Dataset = ds
		if !ds.Known {
			t.UnknownCells++
			continue
		}
		t.Requests += ds.Requests
		t.InputTokens += ds.InputTokens
		t.OutputTokens += ds.OutputTokens
		t.Exact = t.Exact && ds.Exact
	}
	return list, t
}

// clearNotApplicable zeroes the dataset parameters that do not apply, so
// that cells differing only in those share a dataset.
func clearNotApplicable(d *DatasetParams, na uint64) {
	var p Params
	p.Dataset = *d
	for pi := pGenerator; pi <= pRandTaskID; pi++ {
		if na&(1<<pi) != 0 {
			params[pi].set(&p, zeroOf(params[pi].kind))
		}
	}
	*d = p.Dataset
}

func zeroOf(k valueKind) any {
	switch k {
	case kindInt:
		return 0
	case kindFloat:
		return 0.0
	case kindString:
		return ""
	case kindTaskRange:
		return TaskIDRange{}
	}
	return nil
}

// estimate fills in the requests and tokens of one pass.
func (ds *Dataset) estimate() {
	p := ds.Params
	n := int64(p.NumRequests)
	switch p.Generator {
	case GenNorm:
		// Lengths are max(1, ceil(x)) of normal draws: with stdev 0 every
		// request has exactly the mean.
		ds.InputTokens, ds.OutputTokens = n*int64(p.InputMean), n*int64(p.OutputMean)
		ds.Exact = p.InputStdev == 0 && p.OutputStdev == 0
	case GenUnif:
		ds.InputTokens = n * int64(p.InputMin+p.InputMax) / 2
		ds.OutputTokens = n * int64(p.OutputMin+p.OutputMax) / 2
		ds.Exact = p.InputMin == p.InputMax && p.OutputMin == p.OutputMax
	default:
		return
	}
	ds.Requests, ds.Known = n, true
}

package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xrun-dev/xrun/results"
)

// WriteText writes the plan for people: the cells and the parameters that
// vary, what was excluded or collapsed and why, the datasets and the total
// work. The same plan always gives the same bytes.
func (p *Plan) WriteText(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	s := p.Spec
	fmt.Fprintf(bw, "study %s", s.Name)
	if s.Description != "" {
		fmt.Fprintf(bw, ": %s", firstLine(s.Description))
	}
	fmt.Fprintf(bw, "\nspec %s, %s, results in %s\n", s.File, plural(s.Repeats, "repeat"), s.Out)
	for _, set := range s.Sets {
		fmt.Fprintf(bw, "  --set %s\n", set)
	}
	for _, c := range s.Compare {
		fmt.Fprintf(bw, "compare %s against baseline %s\n", c.Axis, showValue(paramIndex[c.Axis], c.Baseline))
	}
	if note := untestableNote(s); note != "" {
		fmt.Fprintf(bw, "warning: %s\n", note)
	}
	writeServing(bw, s)
	bw.WriteByte('\n')

	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	tw.Write([]byte("CELL"))
	for _, v := range p.Varying {
		tw.Write([]byte("\t" + strings.ToUpper(v)))
	}
	tw.Write([]byte("\tDATASET"))
	mem := p.Memory
	if mem != nil && mem.Counted == 0 {
		mem = nil
	}
	if mem != nil {
		tw.Write([]byte("\tMEMORY"))
	}
	est := p.Estimate
	if est != nil {
		tw.Write([]byte("\tTIME\tFROM"))
	}
	tw.Write([]byte("\n"))
	keys := make([]int, len(p.Varying))
	for i, v := range p.Varying {
		keys[i] = paramIndex[v]
	}
	line := make([]byte, 0, 256)
	for i := range p.Cells {
		c := &p.Cells[i]
		line = append(line[:0], c.ID...)
		for _, k := range keys {
			line = append(line, '\t')
			if c.applies(k) {
				line = append(line, showValue(k, params[k].get(&c.Params))...)
			} else {
				line = append(line, '-')
			}
		}
		line = append(line, '\t')
		line = append(line, c.Dataset.ID...)
		if mem != nil {
			line = append(line, '\t')
			line = append(line, mem.Cells[i].column()...)
		}
		if est != nil {
			ce := &est.Cells[i]
			line = append(line, '\t')
			line = append(line, fmtEstimate(ce.Time)...)
			line = append(line, '\t')
			line = append(line, ce.Basis...)
		}
		line = append(line, '\n')
		tw.Write(line)
	}
	tw.Flush()

	fmt.Fprintf(bw, "\n%s to run, %s excluded, %s collapsed\n",
		plural(len(p.Cells), "cell"), group(int64(len(p.Excluded))), group(int64(len(p.Collapsed))))
	if len(p.Excluded) > 0 {
		fmt.Fprintf(bw, "\nexcluded:\n")
		for _, x := range p.Excluded {
			where := x.By
			if x.Line > 0 {
				where += " (line " + strconv.Itoa(x.Line) + ")"
			}
			fmt.Fprintf(bw, "  %s  by %s\n", settingsText(x.Values), where)
		}
	}
	if len(p.Collapsed) > 0 {
		fmt.Fprintf(bw, "\ncollapsed:\n")
		for _, c := range p.Collapsed {
			fmt.Fprintf(bw, "  %s  -> %s: %s\n", settingsText(c.Values), c.Into, c.Reason)
		}
	}

	fmt.Fprintf(bw, "\ndatasets:\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	for _, ds := range p.Datasets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ds.ID, ds.describe(), plural(ds.Cells, "cell"))
	}
	tw.Flush()

	t := p.Totals
	exact := ""
	if !t.Exact {
		exact = "  (estimated)"
	}
	rows := [][3]string{
		{"", "one pass", "x" + plural(t.Repeats, "repeat")},
		{"requests", group(t.Requests), group(t.Requests * int64(t.Repeats))},
		{"input tokens", group(t.InputTokens), group(t.InputTokens * int64(t.Repeats))},
		{"output tokens", group(t.OutputTokens), group(t.OutputTokens * int64(t.Repeats))},
	}
	w1, w2 := 0, 0
	for _, r := range rows {
		w1, w2 = max(w1, len(r[1])), max(w2, len(r[2]))
	}
	fmt.Fprintf(bw, "\ntotal work:\n")
	for i, r := range rows {
		note := ""
		if i >= 2 {
			note = exact
		}
		fmt.Fprintf(bw, "  %-13s  %*s  %*s%s\n", r[0], w1, r[1], w2, r[2], note)
	}
	if t.UnknownCells > 0 {
		fmt.Fprintf(bw, "  (not counting %s that read dataset files)\n", plural(t.UnknownCells, "cell"))
	}
	if p.Memory != nil {
		p.Memory.writeText(bw, p.Cells)
	}
	if est != nil {
		est.writeText(bw, p.Spec.Repeats)
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintf(bw, "\nwarnings:\n")
		for _, w := range p.Warnings {
			fmt.Fprintf(bw, "  %s\n", w)
		}
	}
	return bw.Flush()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func settingsText(vs []Setting) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Key + "=" + showValue(paramIndex[v.Key], v.Value)
	}
	return strings.Join(parts, " ")
}

func (ds *Dataset) describe() string {
	p := ds.Params
	switch p.Generator {
	case GenNorm, GenUnif:
		var lens string
		if p.Generator == GenNorm {
			lens = fmt.Sprintf("input %d sd %d, output %d sd %d", p.InputMean, p.InputStdev, p.OutputMean, p.OutputStdev)
		} else {
			lens = fmt.Sprintf("input %d..%d, output %d..%d", p.InputMin, p.InputMax, p.OutputMin, p.OutputMax)
		}
		s := fmt.Sprintf("%s\t%s requests, %s, seed %d, vocab %d, eos %d", p.Generator, group(int64(p.NumRequests)), lens, p.Seed, p.VocabSize, p.EOSID)
		if p.RandTaskID.Set {
			s += ", task ids " + p.RandTaskID.String()
		}
		return s
	}
	return "file\t" + p.Generator
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return group(int64(n)) + " " + noun + "s"
}

// group writes n with thousands separators: 1,234,567.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// The JSON form of a plan, for machines. Keys are fixed; params are flat
// maps, which encoding/json writes sorted.
type planJSON struct {
	SchemaVersion int             `json:"schema_version"`
	Spec          string          `json:"spec"`
	Name          string          `json:"name"`
	Description   string          `json:"description,omitempty"`
	Out           string          `json:"out"`
	Repeats       int             `json:"repeats"`
	Sets          []string        `json:"sets,omitempty"`
	Axes          []axisJSON      `json:"axes"`
	Compare       []compareJSON   `json:"compare"`
	Varying       []string        `json:"varying"`
	Counts        countsJSON      `json:"counts"`
	Cells         []cellJSON      `json:"cells"`
	Excluded      []excludedJSON  `json:"excluded"`
	Collapsed     []collapsedJSON `json:"collapsed"`
	Datasets      []datasetJSON   `json:"datasets"`
	Totals        totalsJSON      `json:"totals"`
	Warnings      []string        `json:"warnings"`
	Estimate      *estimateJSON   `json:"estimate,omitempty"`
	Memory        *memoryJSON     `json:"memory,omitempty"`
}

type axisJSON struct {
	Zip    string   `json:"zip,omitempty"`
	Keys   []string `json:"keys"`
	Values [][]any  `json:"values"`
}

type compareJSON struct {
	Axis     string `json:"axis"`
	Baseline any    `json:"baseline"`
}

type countsJSON struct {
	Cells     int `json:"cells"`
	Excluded  int `json:"excluded"`
	Collapsed int `json:"collapsed"`
}

type cellJSON struct {
	ID            string            `json:"id"`
	Hash          string            `json:"hash"`
	Params        map[string]any    `json:"params"`
	Dataset       string            `json:"dataset"`
	NotApplicable []string          `json:"not_applicable,omitempty"`
	Estimate      *cellEstimateJSON `json:"estimate,omitempty"`
	Memory        *cellMemoryJSON   `json:"memory,omitempty"`
}

type excludedJSON struct {
	Values map[string]any `json:"values"`
	By     string         `json:"by"`
	Line   int            `json:"line,omitempty"`
}

type collapsedJSON struct {
	Values map[string]any `json:"values"`
	Into   string         `json:"into"`
	Reason string         `json:"reason"`
}

type datasetJSON struct {
	ID           string         `json:"id"`
	Params       map[string]any `json:"params"`
	File         string         `json:"file,omitempty"`
	Cells        int            `json:"cells"`
	Requests     *int64         `json:"requests"`
	InputTokens  *int64         `json:"input_tokens"`
	OutputTokens *int64         `json:"output_tokens"`
	Exact        bool           `json:"exact"`
}

type totalsJSON struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Exact        bool  `json:"exact"`
	UnknownCells int   `json:"unknown_cells,omitempty"`
	Repeats      int   `json:"repeats"`
}

// WriteJSON writes the plan as indented JSON: every cell's id, hash and
// flat parameters, and everything WriteText shows.
func (p *Plan) WriteJSON(w io.Writer) error {
	s := p.Spec
	out := planJSON{
		SchemaVersion: s.SchemaVersion, Spec: s.File, Name: s.Name, Description: s.Description,
		Out: s.Out, Repeats: s.Repeats, Sets: s.Sets,
		Axes: []axisJSON{}, Compare: []compareJSON{}, Varying: p.Varying,
		Counts:   countsJSON{len(p.Cells), len(p.Excluded), len(p.Collapsed)},
		Cells:    make([]cellJSON, len(p.Cells)),
		Excluded: []excludedJSON{}, Collapsed: []collapsedJSON{}, Datasets: []datasetJSON{},
		Totals: totalsJSON{p.Totals.Requests, p.Totals.InputTokens, p.Totals.OutputTokens,
			p.Totals.Exact, p.Totals.UnknownCells, p.Totals.Repeats},
		Warnings: p.Warnings,
	}
	if out.Varying == nil {
		out.Varying = []string{}
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	if p.Estimate != nil {
		out.Estimate = p.Estimate.json()
	}
	if p.Memory != nil {
		out.Memory = p.Memory.json(p.Cells)
	}
	for _, a := range s.Axes {
		out.Axes = append(out.Axes, axisJSON{Zip: a.Zip, Keys: a.Keys, Values: jsonValues(a.Values)})
	}
	for _, c := range s.Compare {
		out.Compare = append(out.Compare, compareJSON{c.Axis, jsonValue(c.Baseline)})
	}
	for i := range p.Cells {
		c := &p.Cells[i]
		out.Cells[i] = cellJSON{ID: c.ID, Hash: c.Hash, Params: c.Flat(), Dataset: c.Dataset.ID, NotApplicable: c.NotApplicable()}
		if p.Estimate != nil {
			out.Cells[i].Estimate = p.Estimate.Cells[i].json()
		}
		if p.Memory != nil {
			out.Cells[i].Memory = p.Memory.Cells[i].json()
		}
	}
	for _, x := range p.Excluded {
		out.Excluded = append(out.Excluded, excludedJSON{settingsMap(x.Values), x.By, x.Line})
	}
	for _, c := range p.Collapsed {
		out.Collapsed = append(out.Collapsed, collapsedJSON{settingsMap(c.Values), c.Into, c.Reason})
	}
	for _, ds := range p.Datasets {
		dj := datasetJSON{ID: ds.ID, File: ds.File, Cells: ds.Cells, Exact: ds.Exact, Params: map[string]any{}}
		var pp Params
		pp.Dataset = ds.Params
		for pi := pGenerator; pi <= pRandTaskID; pi++ {
			if ds.na&(1<<pi) == 0 {
				dj.Params[strings.TrimPrefix(params[pi].path, "dataset.")] = params[pi].get(&pp)
			}
		}
		if ds.Known {
			dj.Requests, dj.InputTokens, dj.OutputTokens = &ds.Requests, &ds.InputTokens, &ds.OutputTokens
		}
		out.Datasets = append(out.Datasets, dj)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	return bw.Flush()
}

func settingsMap(vs []Setting) map[string]any {
	m := make(map[string]any, len(vs))
	for _, v := range vs {
		m[v.Key] = jsonValue(v.Value)
	}
	return m
}

// jsonValue turns canonical values that are not JSON scalars into their
// written form.
func jsonValue(v any) any {
	switch v.(type) {
	case int, float64, string:
		return v
	}
	return formatValue(v)
}

func jsonValues(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = make([]any, len(r))
		for j, v := range r {
			out[i][j] = jsonValue(v)
		}
	}
	return out
}

// untestableNote says why a spec's comparisons can never come out
// significant, when they cannot: too few repeats for the U test. Empty
// when the spec compares nothing or has repeats enough.
func untestableNote(s *Spec) string {
	if len(s.Compare) == 0 || results.Testable(s.Repeats, s.Repeats) {
		return ""
	}
	return fmt.Sprintf("with %s a side no comparison can come out significant (the U test's smallest p is %.3f, alpha %g): use repeats: %d or more",
		plural(s.Repeats, "repeat"), results.MinP(s.Repeats, s.Repeats), results.Alpha, results.TestableRepeats())
}

// fmtEstimate writes an estimated time to the second below an hour, to the
// minute above: 45s, 12m05s, 1h02m; "-" for none.
func fmtEstimate(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// efficiencySource says where DefaultEfficiency and ownGEMMDerate come
// from, for the plan's reader.
const efficiencySource = "xrun's CUDA engine reached 46-57 % with cuBLASLt GEMMs and 18-38 % on its own from batch 4 " +
	"(bench/results/gemm-plugin-h200, bench/results/hf-engine-h100)"

// writeText writes the estimate's section of the text plan.
func (e *Estimate) writeText(bw *bufio.Writer, repeats int) {
	fmt.Fprintf(bw, "\nestimated time on an %s (--gpu):\n", e.GPU)
	fmt.Fprintf(bw, "  %s: %s of GPU time", plural(e.Estimated, "cell"), fmtEstimate(e.Total))
	if e.ColdStart > 0 {
		fmt.Fprintf(bw, ", %s of it compiling the kernels once (a cold kernel cache)", fmtEstimate(e.ColdStart))
	}
	fmt.Fprintf(bw, "\n  on %s (--gpus), longest cells first: %s; the longest cell %s\n",
		plural(e.GPUs, "GPU"), fmtEstimate(e.Wall), fmtEstimate(e.Longest))
	for _, n := range slices.Sorted(maps.Keys(e.NotEstimated)) {
		fmt.Fprintf(bw, "  not estimated: %s %s\n", plural(e.NotEstimated[n], "cell"), n)
	}
	bases := map[string]int{}
	for i := range e.Cells {
		if e.Cells[i].Time > 0 {
			bases[e.Cells[i].Basis]++
		}
	}
	var from []string
	for _, b := range []string{BasisMeasured, BasisSimilar, BasisRoofline, BasisRooflineExternal} {
		if bases[b] > 0 {
			from = append(from, fmt.Sprintf("%s %s", group(int64(bases[b])), b))
		}
	}
	if len(from) > 0 {
		fmt.Fprintf(bw, "  from: %s\n", strings.Join(from, ", "))
	}
	fmt.Fprintf(bw, "  a cell: %s x (warm-up + timed pass), the profiled pass (%gx one; on xrun's engine only up\n    to its window's end) where it has a window,\n",
		plural(repeats, "repeat"), e.ProfileOverhead)
	fmt.Fprintf(bw, "    and start-up: %s on xrun's engine plus the warming of its decode batch sizes, %s each pass on\n    external engines (a guess)\n",
		fmtEstimate(e.Startup), fmtEstimate(e.ExternalStartup))
	fmt.Fprintf(bw, "  roofline: %.1f TB/s and %.0f TFLOP/s (%s),\n    %.1f GiB of memory, over each cell's schedule\n",
		e.Device.PeakBytesPerSec/1e12, e.Device.PeakFLOPs/1e12, e.Device.PeakSource, gib(e.Memory))
	wrapText(bw, fmt.Sprintf("at %s of it (--efficiency), %s on the engine's own GEMMs (gemm_plugin disable) for dense models from batch %d: %s; external engines (roofline-external) may be far slower",
		pct(e.Efficiency), pct(e.OwnGEMMEfficiency), ownGEMMMinBatch, efficiencySource))
	for _, n := range e.Notes {
		wrapText(bw, n)
	}
	if r := e.Results; r != nil {
		fmt.Fprintf(bw, "  results (--results): %s, study %s", r.Dir, r.Study)
		if r.GPU != "" {
			fmt.Fprintf(bw, " on %s", r.GPU)
		}
		if r.Unused != "" {
			fmt.Fprintf(bw, ": not used, %s", r.Unused)
		}
		bw.WriteByte('\n')
	}
}

// wrapText writes s as an indented paragraph of the plan's section,
// broken at spaces before 100 columns.
func wrapText(bw *bufio.Writer, s string) {
	indent, width := "  ", 0
	for _, w := range strings.Fields(s) {
		if width > 0 && width+1+len(w) > 100 {
			bw.WriteByte('\n')
			indent, width = "    ", 0
		}
		if width == 0 {
			bw.WriteString(indent)
			width = len(indent)
		} else {
			bw.WriteByte(' ')
			width++
		}
		bw.WriteString(w)
		width += len(w)
	}
	bw.WriteByte('\n')
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'g', 4, 64) + " %" }

type estimateJSON struct {
	GPU               string               `json:"gpu"`
	MemoryBytes       float64              `json:"memory_bytes"`
	PeakBytesPerS     float64              `json:"peak_bytes_per_s"`
	PeakFLOPS         float64              `json:"peak_flop_per_s"`
	PeakSource        string               `json:"peak_source"`
	Efficiency        float64              `json:"efficiency"`
	OwnGEMMEfficiency float64              `json:"own_gemm_efficiency"`
	EfficiencySource  string               `json:"efficiency_source"`
	StartupS          float64              `json:"startup_s"`
	ColdStartS        float64              `json:"cold_start_s"`
	ExternalStartupS  float64              `json:"external_startup_s"`
	ProfileOverhead   float64              `json:"profile_overhead"`
	GPUs              int                  `json:"gpus"`
	Results           *estimateResultsJSON `json:"results,omitempty"`
	Cells             int                  `json:"cells"`
	NotEstimated      map[string]int       `json:"not_estimated"`
	TotalS            float64              `json:"total_s"`
	WallS             float64              `json:"wall_s"`
	LongestS          float64              `json:"longest_s"`
	Notes             []string             `json:"notes,omitempty"`
}

// estimateResultsJSON is EstimateResults in the JSON plan.
type estimateResultsJSON struct {
	Dir    string `json:"dir"`
	Study  string `json:"study"`
	GPU    string `json:"gpu,omitempty"`
	Unused string `json:"unused,omitempty"`
}

type cellEstimateJSON struct {
	Seconds    float64 `json:"seconds"`
	PassS      float64 `json:"pass_s"`
	WarmupS    float64 `json:"warmup_s"`
	ProfiledS  float64 `json:"profiled_s"`
	StartupS   float64 `json:"startup_s"`
	Basis      string  `json:"basis"`
	From       string  `json:"from,omitempty"`
	Distance   int     `json:"distance,omitempty"`
	Efficiency float64 `json:"efficiency,omitempty"`
	Note       string  `json:"note,omitempty"`
}

// secs rounds a duration to the millisecond, in seconds, so that the JSON
// does not carry the estimate's noise digits.
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func (e *Estimate) json() *estimateJSON {
	out := &estimateJSON{GPU: e.GPU, MemoryBytes: e.Memory, PeakBytesPerS: e.Device.PeakBytesPerSec, PeakFLOPS: e.Device.PeakFLOPs,
		PeakSource: e.Device.PeakSource, Efficiency: e.Efficiency, OwnGEMMEfficiency: e.OwnGEMMEfficiency,
		EfficiencySource: efficiencySource, StartupS: secs(e.Startup), ColdStartS: secs(e.ColdStart), ExternalStartupS: secs(e.ExternalStartup),
		ProfileOverhead: e.ProfileOverhead, GPUs: e.GPUs, Cells: e.Estimated, NotEstimated: e.NotEstimated,
		TotalS: secs(e.Total), WallS: secs(e.Wall), LongestS: secs(e.Longest), Notes: e.Notes}
	if r := e.Results; r != nil {
		out.Results = &estimateResultsJSON{r.Dir, r.Study, r.GPU, r.Unused}
	}
	return out
}

func (c *CellEstimate) json() *cellEstimateJSON {
	return &cellEstimateJSON{Seconds: secs(c.Time), PassS: secs(c.Pass), WarmupS: secs(c.Warmup), ProfiledS: secs(c.Profiled),
		StartupS: secs(c.Startup), Basis: c.Basis, From: c.From, Distance: c.Distance,
		Efficiency: math.Round(c.Efficiency*1000) / 1000, Note: c.Note}
}

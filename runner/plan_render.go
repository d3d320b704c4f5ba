package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

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
		fmt.Fprintf(bw, "compare %s against baseline %s\n", c.Axis, formatValue(c.Baseline))
	}
	if note := untestableNote(s); note != "" {
		fmt.Fprintf(bw, "warning: %s\n", note)
	}
	bw.WriteByte('\n')

	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	tw.Write([]byte("CELL"))
	for _, v := range p.Varying {
		tw.Write([]byte("\t" + strings.ToUpper(v)))
	}
	tw.Write([]byte("\tDATASET\n"))
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
				line = append(line, formatValue(params[k].get(&c.Params))...)
			} else {
				line = append(line, '-')
			}
		}
		line = append(line, '\t')
		line = append(line, c.Dataset.ID...)
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
		parts[i] = v.Key + "=" + formatValue(v.Value)
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
	ID            string         `json:"id"`
	Hash          string         `json:"hash"`
	Params        map[string]any `json:"params"`
	Dataset       string         `json:"dataset"`
	NotApplicable []string       `json:"not_applicable,omitempty"`
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
	for _, a := range s.Axes {
		out.Axes = append(out.Axes, axisJSON{Zip: a.Zip, Keys: a.Keys, Values: jsonValues(a.Values)})
	}
	for _, c := range s.Compare {
		out.Compare = append(out.Compare, compareJSON{c.Axis, jsonValue(c.Baseline)})
	}
	for i := range p.Cells {
		c := &p.Cells[i]
		out.Cells[i] = cellJSON{ID: c.ID, Hash: c.Hash, Params: c.Flat(), Dataset: c.Dataset.ID, NotApplicable: c.NotApplicable()}
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

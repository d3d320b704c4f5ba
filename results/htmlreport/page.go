package htmlreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"path/filepath"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

//go:embed assets/page.html.tmpl
var pageTemplate string

//go:embed assets/page.css
var pageCSS string

var tmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"rowclass": func(classes []string, i int) string {
		if i < len(classes) {
			return classes[i]
		}
		return ""
	},
}).Parse(pageTemplate))

// page is what the template draws: a header, sections of blocks.
type page struct {
	Title    string
	Heading  string
	Subtitle string
	Verdict  *verdictLine
	CSS      template.CSS
	Sections []*section
	Footer   string
}

type verdictLine struct {
	Label, Text, Class string
}

// section is a <section id=...> of the page.
type section struct {
	ID     string
	Title  string
	Blocks []block
}

// block is one element of a section; Kind says which fields it uses.
type block struct {
	Kind   string // h3, p, ul, pre, chart, table, details
	ID     string
	Text   string
	Class  string
	Items  []string
	Chart  *chartFigure
	Table  *tableData
	Open   bool
	Blocks []block
}

type chartFigure struct {
	Name    string
	Caption string
	SVG     template.HTML
	Err     string
}

type tableData struct {
	Caption  string
	Columns  []results.Column
	Rows     [][]string
	RowClass []string
	Notes    []string
}

func (s *section) add(b ...block) { s.Blocks = append(s.Blocks, b...) }

func (s *section) p(text string) { s.add(block{Kind: "p", Text: text}) }

func (s *section) muted(text string) { s.add(block{Kind: "p", Text: text, Class: "muted"}) }

func (s *section) h3(text string) { s.add(block{Kind: "h3", Text: text}) }

func (s *section) list(items []string, class string) {
	if len(items) > 0 {
		s.add(block{Kind: "ul", Items: items, Class: class})
	}
}

// chart draws a chart in place: its SVG, or why it could not be drawn.
func (s *section) chart(name, caption string, svg template.HTML, err error) {
	f := &chartFigure{Name: name, Caption: caption, SVG: svg}
	if err != nil {
		f.Err = err.Error()
	}
	s.add(block{Kind: "chart", Chart: f})
}

func (s *section) table(t *results.Table, class string) {
	if t == nil {
		return
	}
	s.add(tableBlock(t, class))
}

func tableBlock(t *results.Table, class string) block {
	return block{Kind: "table", Class: class, Table: &tableData{Caption: t.Title, Columns: t.Columns, Rows: t.Rows, Notes: t.Notes}}
}

func writePage(w io.Writer, p *page) error {
	p.CSS = template.CSS(pageCSS)
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Write renders report.html for results r to w. r need not be normalized;
// o.Dir is the results directory whose cells/ the telemetry and expert
// load charts read.
func Write(w io.Writer, r *results.Results, o Options) error {
	n, err := results.Normalized(r)
	if err != nil {
		return err
	}
	return writePage(w, studyPage(n, BuildStudy(n, o), o))
}

// WriteDir writes dir/report.html for results r, atomically, reading the
// cells' files in dir: what the runner calls after results.WriteDir.
func WriteDir(dir string, r *results.Results, o Options) error {
	o.Dir = dir
	var buf bytes.Buffer
	if err := Write(&buf, r, o); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, layout.HTMLFile), err)
	}
	return results.WriteFileAtomic(filepath.Join(dir, layout.HTMLFile), buf.Bytes())
}

// StudyJSON is the data behind every chart of report.html as indented
// JSON: what the golden tests compare.
func StudyJSON(r *results.Results, o Options) ([]byte, error) {
	n, err := results.Normalized(r)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(BuildStudy(n, o), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

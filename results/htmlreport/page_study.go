package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/results"
)

// Section ids of report.html, in page order; tests and the browser test
// find the sections by them.
const (
	SectionEnvironment = "environment"
	SectionReproduce   = "reproduce"
	SectionSummary     = "summary"
	SectionThroughput  = "throughput"
	SectionLatency     = "latency"
	SectionComparisons = "comparisons"
	SectionProfiles    = "profiles"
	SectionTelemetry   = "telemetry"
	SectionMoE         = "moe"
	SectionEnergy      = "energy"
)

// StudySections lists report.html's section ids in page order.
var StudySections = []string{SectionEnvironment, SectionReproduce, SectionSummary, SectionThroughput, SectionLatency,
	SectionComparisons, SectionProfiles, SectionTelemetry, SectionMoE, SectionEnergy}

const ciCaption = "Bars are the 95% confidence interval of the median over the repeats (none below 6 repeats, where it is unbounded)."

// studyPage lays out report.html: the tables of results.md (BuildReport)
// with the charts of st beside them.
func studyPage(r *results.Results, st *Study, o Options) *page {
	ro := results.RenderOptions{Metrics: o.Metrics}
	rep := results.BuildReport(r, ro)
	p := &page{Title: "xrun report: " + r.Name, Heading: "xrun report: " + r.Name, Subtitle: r.Description,
		Footer: "Written by xrun from results.json; every number is in results.json and results.md beside this file. The page loads nothing from the network."}

	env := &section{ID: SectionEnvironment, Title: "Environment and spec"}
	env.list(rep.Environment, "")
	if r.SpecFile != "" {
		env.p("Spec file: " + r.SpecFile + pick(len(r.SpecSets) > 0, ", with --set "+strings.Join(r.SpecSets, " --set "), ""))
	} else {
		env.muted("results.json does not record the spec file (written before xrun recorded it); the commands below say SPEC for it.")
	}
	if spec := prettyJSON(r.Spec); spec != "" {
		env.add(block{Kind: "details", Text: "The resolved spec (results.json's spec)", Blocks: []block{{Kind: "pre", Text: spec}}})
	}
	env.list(rep.Notes, "notes")

	repro := &section{ID: SectionReproduce, Title: "Reproduce a cell"}
	repro.p("Each command runs one cell of the study again. Into a directory that already holds results, add --out NEW_DIR (or delete cells/<id>/ there and add --resume).")
	var cmds []string
	for _, c := range st.Commands {
		cmds = append(cmds, "# "+c.Label+pick(c.Status != string(results.StatusOK), " ("+c.Status+")", "")+"\n"+c.Command)
	}
	if len(cmds) > DefaultMaxCellCharts {
		repro.add(block{Kind: "details", Text: plural(len(cmds), "cell") + ": show every command", Blocks: []block{{Kind: "pre", Class: "commands", Text: strings.Join(cmds, "\n")}}})
	} else if len(cmds) > 0 {
		repro.add(block{Kind: "pre", Class: "commands", Text: strings.Join(cmds, "\n")})
	} else {
		repro.muted("The study has no cells.")
	}

	sum := &section{ID: SectionSummary, Title: "Summary"}
	sum.table(rep.Summary, "summary")
	// results.md's other study-wide tables: the SLO search's frontier, the
	// roofline by kind of iteration and the cells against the spec's
	// published figures.
	sum.table(rep.Frontier, "frontier")
	sum.table(rep.RooflineByKind, "roofline-kinds")
	sum.table(rep.Reference, "reference")

	p.Sections = []*section{env, repro, sum, throughputSection(st), latencySection(st), comparisonsSection(r, rep, st, ro),
		profilesSection(rep, st), telemetrySection(st, o), moeSection(st), energySection(r, st)}
	return p
}

func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return ""
	}
	return b.String()
}

func throughputSection(st *Study) *section {
	s := &section{ID: SectionThroughput, Title: "Throughput against the axes"}
	if len(st.Throughput) == 0 {
		s.muted("No cell is ok with a throughput metric: nothing to draw.")
		return s
	}
	for _, ch := range st.Throughput {
		svg, err := drawAxisChart(ch)
		caption := ciCaption
		if ch.Axis != "" {
			caption = "One line per combination of the other axes. " + caption
			if len(ch.Roofline) > 0 {
				caption += " Dashed: the roofline, the output throughput if the run took only the time its bytes and FLOPs need on this GPU."
			}
		} else {
			caption = "No numeric axis varies: every cell side by side. " + caption
			if len(ch.Roofline) > 0 {
				caption += " Roofline: the output throughput if the run took only the time its bytes and FLOPs need on this GPU."
			}
		}
		s.chart(ch.Name, caption, svg, err)
		s.list(ch.Notes, "notes")
	}
	return s
}

func latencySection(st *Study) *section {
	s := &section{ID: SectionLatency, Title: "Throughput and latency"}
	ch := st.Latency
	if ch == nil {
		s.muted("The cells lack total or per-user output throughput: nothing to draw.")
		return servingCharts(s, st.Serving)
	}
	svg, err := drawLatency(ch)
	s.chart(ch.Name, "What one user gets against what the engine delivers in all, per cell"+
		pick(ch.Along != "", ", a line along "+ch.Along+" per combination of the other axes", "")+
		". The Pareto front (rings, dashed) joins the cells that no other cell beats on both. "+ciCaption, svg, err)
	s.list(ch.Notes, "notes")
	t := &results.Table{Title: "Pareto front", Columns: []results.Column{{Name: "cell"}, {Name: "parameters"},
		{Name: metricLabel(ch.X), Right: true}, {Name: metricLabel(ch.Y), Right: true}}}
	for _, pt := range ch.Front {
		t.Rows = append(t.Rows, []string{pt.Cell, pt.Label, results.FormatSig(pt.X, 4), results.FormatSig(pt.Y, 4)})
	}
	s.table(t, "")
	return servingCharts(s, st.Serving)
}

func comparisonsSection(r *results.Results, rep *results.Report, st *Study, ro results.RenderOptions) *section {
	s := &section{ID: SectionComparisons, Title: "Comparisons"}
	if len(rep.Comparisons) == 0 {
		s.muted("No comparison: the spec has no compare entry and no axis has exactly two values.")
		return s
	}
	s.p("Each chart is one compared axis and metric: the ratio of each value's median to the baseline's, per combination of the other axes, " +
		"coloured by the verdict of the Mann-Whitney U test (green faster, orange slower, grey no significant difference). " +
		"Bars bound the ratio by the two medians' 95% intervals (wider than an interval of the ratio; none below 6 repeats).")
	metrics := results.ShownMetrics(r, ro)
	charts := map[string]CompareChart{}
	for _, ch := range st.Comparisons {
		charts[ch.Name] = ch
	}
	pairs := map[string]KernelPairChart{}
	for _, ch := range st.KernelPairs {
		pairs[ch.BaseCell+" "+ch.Cell] = ch
	}
	for _, ct := range rep.Comparisons {
		s.h3(ct.Title)
		for j, t := range ct.Tables {
			if j < len(metrics) {
				if ch, ok := charts["compare-"+ct.Axis+"-"+metrics[j]]; ok {
					svg, err := drawCompare(ch)
					s.chart(ch.Name, "", svg, err)
					s.list(ch.Notes, "notes")
				}
			}
			s.add(block{Kind: "details", Text: "Table: " + t.Title, Blocks: []block{tableBlock(t, "")}})
		}
		s.list(ct.Notes, "notes")
		if len(ct.Kernels) > 0 {
			s.add(block{Kind: "h3", Text: "Kernel changes: " + ct.Axis})
			s.muted(results.KernelsNote)
			for _, kp := range ct.Kernels {
				head := kp.Base + " → " + kp.Value
				if kp.Where != "" {
					head = kp.Where + ": " + head
				}
				s.p(head + " (xrun kernels DIR " + kp.BaseID + " " + kp.CellID + ")")
				s.list(kp.Changes, "")
				if ch, ok := pairs[kp.BaseID+" "+kp.CellID]; ok {
					svg, err := drawKernelPair(ch)
					s.chart(ch.Name, "Kernel time by kind in the two cells' profile windows ("+ch.Unit+").", svg, err)
				}
			}
		}
	}
	if n := st.Left["kernel_pairs"]; n != "" {
		s.muted(n)
	}
	return s
}

func profilesSection(rep *results.Report, st *Study) *section {
	s := &section{ID: SectionProfiles, Title: "Profiles"}
	if len(st.Profiles) == 0 {
		s.muted("No cell was profiled (profile_window: none everywhere), so there are no kernels to show.")
		return s
	}
	tables := map[string]results.ProfileSection{}
	for _, ps := range rep.Profiles {
		tables[ps.Cell] = ps
	}
	for _, pc := range st.Profiles {
		s.h3(pc.Label + " (" + pc.Cell + "), window " + pc.Window)
		svg, err := drawBars("Top kernels", pc.Kernels.Unit, pc.Kernels.Top, colorAt(0))
		s.chart(pc.Name, "The cell's top kernels by time in its profiled pass ("+pc.Kernels.Unit+").", svg, err)
		svg, err = drawBars("Kernel time by kind", pc.Kernels.Unit, pc.Kernels.Categories, colorAt(2))
		cap := "GEMM, attention, norm, rope, MoE stages (router, grouping, expert GEMM, combine), memory (copies, fills, gathers) and other."
		if !pc.Kernels.Complete {
			cap += " The cell lists only its top kernels; the rest of the kernel time, from the top kernel's share, is \"unlisted\"."
		}
		s.chart("kernel-categories-"+pc.Cell, cap, svg, err)
		ps := tables[pc.Cell]
		s.list(ps.Diagnosis, "")
		if ps.Kernels != nil && len(ps.Kernels.Rows) > 0 {
			s.add(block{Kind: "details", Text: "Table: " + ps.Kernels.Title, Blocks: []block{tableBlock(ps.Kernels, "")}})
		}
	}
	if n := st.Left["profiles"]; n != "" {
		s.muted(n)
	}
	return s
}

func telemetrySection(st *Study, o Options) *section {
	s := &section{ID: SectionTelemetry, Title: "GPU telemetry"}
	if len(st.Throttle) == 0 && len(st.Telemetry) == 0 {
		s.muted("No cell has GPU telemetry (the CPU backend, or no NVML): nothing was sampled, and throttling was not judged.")
		return s
	}
	if len(st.Throttle) > 0 {
		t := &results.Table{Title: "Throttle verdicts", Columns: []results.Column{{Name: "cell"}, {Name: "parameters"}, {Name: "verdict"}}}
		var classes []string
		for _, l := range st.Throttle {
			t.Rows = append(t.Rows, []string{l.Cell, l.Label, l.Verdict})
			classes = append(classes, pick(l.Throttled, "bad", ""))
		}
		b := tableBlock(t, "")
		b.Table.RowClass = classes
		s.add(b)
	}
	switch {
	case len(st.Telemetry) > 0:
	case o.Dir == "":
		s.muted("Telemetry over time needs the results directory's cells/; only results.json was read.")
	default:
		s.muted("The results directory has no cells/ with telemetry.csv (only results.json was kept): no telemetry over time.")
	}
	for _, ch := range st.Telemetry {
		s.h3(ch.Label + " (" + ch.Cell + ")")
		caption := "Shaded: the timed repeats (each with the engine's warm-up requests) and the profile window (or the profiled pass), from cell.json's pass times. Throttle rule: " + ch.Verdict + "."
		if ch.Averaged {
			caption += fmt.Sprintf(" The %d samples are averaged in runs to at most %d points a line.", ch.Samples, maxTelemetryPoints)
		}
		if len(ch.GPUs) == 0 {
			s.list(ch.Notes, "notes")
			continue
		}
		svg, err := drawTelemetry(ch)
		s.chart(ch.Name, caption, svg, err)
		s.list(ch.Notes, "notes")
	}
	if n := st.Left["telemetry"]; n != "" {
		s.muted(n)
	}
	return s
}

func moeSection(st *Study) *section {
	s := &section{ID: SectionMoE, Title: "MoE expert loads"}
	if len(st.MoE) == 0 {
		s.muted("No MoE cell: no expert loads to show.")
		return s
	}
	for _, ch := range st.MoE {
		s.h3(ch.Label + " (" + ch.Cell + ")")
		caption := fmt.Sprintf("Tokens routed to each expert over the first timed repeat, summed over layers; busiest expert / mean per step %s", fmtFloat(ch.MaxOverMean))
		if ch.TotalMaxOverMean > 0 {
			caption += fmt.Sprintf(", over the run %s", fmtFloat(ch.TotalMaxOverMean))
		}
		caption += " (1 = balanced)."
		if len(ch.Layers) > 0 {
			caption += " Below: each layer's busiest expert over the mean, per iteration, from expert_load.csv."
		}
		svg, err := drawExperts(ch)
		s.chart(ch.Name, caption, svg, err)
		s.list(ch.Notes, "notes")
	}
	if n := st.Left["moe"]; n != "" {
		s.muted(n)
	}
	return s
}

func energySection(r *results.Results, st *Study) *section {
	s := &section{ID: SectionEnergy, Title: "Energy"}
	if len(st.Energy) == 0 {
		s.muted("No cell carries energy metrics (" + EnergyPerTokenMetric + ", " + TokensPerWattMetric + "): they come from the GPU's NVML energy counter over the timed iterations, so CPU cells, GPUs without the counter and results written before xrun measured energy have none.")
		return s
	}
	for _, ch := range st.Energy {
		svg, err := drawEnergy(ch)
		caption := ciCaption
		if ch.Estimated {
			caption = results.EnergyEstimated + ": these results did not measure energy per repeat, so there is no interval."
		}
		s.chart(ch.Name, caption, svg, err)
	}
	t := &results.Table{Title: "Energy (median ±95% CI)", Columns: []results.Column{{Name: "cell"}, {Name: "parameters"}}}
	var keys []string
	for _, ch := range st.Energy {
		if slices.Contains(keys, ch.Metric) {
			continue
		}
		keys = append(keys, ch.Metric)
		t.Columns = append(t.Columns, results.Column{Name: metricLabel(ch.Metric), Right: true})
	}
	s2 := newStudy(r)
	for _, c := range s2.cells {
		if c.Status != results.StatusOK {
			continue
		}
		row := []string{c.ID, s2.labels[c.ID]}
		any := false
		for _, k := range keys {
			if sm, ok := c.Summary[k]; ok {
				row = append(row, results.FormatSummary(sm))
				any = true
			} else if v, ok := results.EstimateEnergy(c, k); ok {
				row = append(row, "≈"+strconv.FormatFloat(v, 'g', 4, 64))
				any = true
			} else {
				row = append(row, "-")
			}
		}
		if any {
			t.Rows = append(t.Rows, row)
		}
	}
	s.table(t, "")
	return s
}

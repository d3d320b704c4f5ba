package results

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ProfileSection is one profiled cell's kernel table (Nsight Systems'
// "CUDA GPU Kernel Summary" columns) and diagnosis, as results.md shows
// them.
type ProfileSection struct {
	Cell string
	// Label is the cell's axis values, "batch_size=64 gemm_plugin=auto".
	Label     string
	Kernels   *Table
	Diagnosis []string
}

// profileSections builds a section per cell with a profile, in table
// order.
func profileSections(r *Results, ax []axisInfo) []ProfileSection {
	cells := cellPtrs(r)
	sortCells(cells, ax)
	var out []ProfileSection
	for _, c := range cells {
		p := c.Profile
		if p == nil {
			continue
		}
		var label []string
		for _, a := range ax {
			label = append(label, a.Name+"="+paramString(c, a.Name))
		}
		title := "Kernels in window " + p.Window
		if p.Iterations > 0 {
			title += fmt.Sprintf(" (%d iterations)", p.Iterations)
		}
		t := &Table{Title: title, Columns: []Column{{"Time (%)", true}, {"Total Time (ns)", true}, {"Instances", true},
			{"Avg (ns)", true}, {"Med (ns)", true}, {"Min (ns)", true}, {"Max (ns)", true}, {"StdDev (ns)", true}, {"Name", false}}}
		// The exclusive time, where the profile has it, last: as
		// kernels.csv puts it after Nsight's columns.
		exclusive := slices.ContainsFunc(p.Kernels, func(k Kernel) bool { return k.ExclusiveNs > 0 })
		if exclusive {
			t.Columns = append(t.Columns, Column{"Exclusive Time (ns)", true})
		}
		f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
		for _, k := range p.Kernels {
			row := []string{f1(k.TimePct), fmt.Sprint(k.TotalNs), fmt.Sprint(k.Instances), f1(k.AvgNs), f1(k.MedNs),
				fmt.Sprint(k.MinNs), fmt.Sprint(k.MaxNs), f1(k.StdDevNs), clip(k.Name, 100)}
			if exclusive {
				row = append(row, fmt.Sprint(k.ExclusiveNs))
			}
			t.Rows = append(t.Rows, row)
		}
		diag := p.Diagnosis
		if line := passLine(c, p); line != "" {
			diag = append([]string{line}, diag...)
		}
		if line := warmupLine(p); line != "" {
			diag = append([]string{line}, diag...)
		}
		out = append(out, ProfileSection{Cell: c.ID, Label: strings.Join(label, " "), Kernels: t, Diagnosis: diag})
	}
	return out
}

// passLine sets the profiled pass's speed beside the timed repeats': the
// cost of profiling, which the repeats never pay. A pass that stopped
// after its window compares the window's iterations with the same
// iterations of the repeats; one that ran to its end (older files,
// external engines), its output throughput with their median.
func passLine(c *Cell, p *Profile) string {
	const key = "system_output_throughput_tok_s"
	pass, ok := p.PassMetrics[key]
	if !ok {
		if p.WindowIterationNs <= 0 {
			return ""
		}
		line := fmt.Sprintf("profiled window: %s ms an iteration", formatSig(p.WindowIterationNs/1e6, 4))
		if t := p.TimedWindowIterationNs; t > 0 {
			line += fmt.Sprintf(", %.3fx the same iterations of the timed repeats (%s ms; what profiling cost, which the repeats never pay)",
				p.WindowIterationNs/t, formatSig(t/1e6, 4))
		}
		return line
	}
	line := "profiled pass: " + formatSig(pass, 4) + " output tok/s"
	if s, ok := c.Summary[key]; ok && s.Median > 0 {
		line += fmt.Sprintf(", %.3fx the timed repeats' median of %s (what profiling cost; the repeats run without the profiler)",
			pass/s.Median, formatSig(s.Median, 4))
	}
	return line
}

// warmupLine says that a window profiled warm-up iterations, which run
// the warm-up requests (a batch of a few) rather than the timed ones: its
// kernel table is not the run's.
func warmupLine(p *Profile) string {
	if p.WarmupIterations <= 0 {
		return ""
	}
	of := ""
	if p.Iterations > 0 {
		of = fmt.Sprintf(" of its %d", p.Iterations)
	}
	if p.FirstTimedIteration <= 0 {
		// The pass stopped inside the warm-up, and no timed repeat said
		// where it ends: no number is better than a wrong one.
		return fmt.Sprintf("NOT THE TIMED RUN: %d%s iterations ran the warm-up requests, and the pass stopped after its window still in the warm-up, so this profile is the warm-up's; a profile_window after the warm-up's last iteration (iterations.csv's warmup column) profiles the run",
			p.WarmupIterations, of)
	}
	return fmt.Sprintf("NOT THE TIMED RUN: %d%s iterations ran the warm-up requests (the timed ones start at iteration %d), so this profile is largely the warm-up's; a profile_window from %d on profiles the run",
		p.WarmupIterations, of, p.FirstTimedIteration, p.FirstTimedIteration)
}

// writeProfilesMarkdown draws the profile sections under one heading.
func writeProfilesMarkdown(b *strings.Builder, ps []ProfileSection) error {
	if len(ps) == 0 {
		return nil
	}
	b.WriteString("\n## Profiles\n")
	for _, p := range ps {
		head := "cell " + p.Cell
		if p.Label != "" {
			head = p.Label + " (" + p.Cell + ")"
		}
		b.WriteString("\n### " + mdEscape(head) + "\n\n")
		if len(p.Kernels.Rows) > 0 {
			b.WriteString(mdEscape(p.Kernels.Title) + ":\n\n")
			t := *p.Kernels
			t.Title = ""
			if err := t.WriteMarkdown(b, 4); err != nil {
				return err
			}
			b.WriteString("\n")
		}
		for _, d := range p.Diagnosis {
			b.WriteString("- " + mdEscape(d) + "\n")
		}
	}
	return nil
}

// writeKernelPairsMarkdown draws a comparison's kernel changes: a short
// list per pair, and the command that shows the pair in full.
func writeKernelPairsMarkdown(b *strings.Builder, pairs []KernelPair) {
	if len(pairs) == 0 {
		return
	}
	b.WriteString("\n### Kernel changes\n\n" + kernelsNote + "\n")
	for _, p := range pairs {
		b.WriteString("\n**" + mdEscape(p.heading()) + "** · `" + p.command() + "`\n\n")
		for _, l := range p.Changes {
			b.WriteString("- " + mdEscape(l) + "\n")
		}
	}
}

// clip cuts a long name (demangled C++ kernel names run to hundreds of
// characters) for a table; results.json keeps it whole.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

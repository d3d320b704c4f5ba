package results

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

type benchOutput struct{}

func (benchOutput) Format() string { return "bench" }

// Render writes the Go benchmark format
// (golang.org/design/14313-benchmark-format) so benchstat works on xrun
// results: configuration lines from the environment, a Unit line per
// metric declaring better=higher|lower (and assume=exact for counts), then
// one line per cell and repeat:
//
//	Benchmarkgemm-plugin/batch_size=16/gemm_plugin=auto 1 141.3 req/s 18086 out-tok/s ...
//
// The name's key=value parts are the axes, so `benchstat -col
// /gemm_plugin` compares them. Failed and skipped cells are left out.
func (benchOutput) Render(w io.Writer, r *Results, opts RenderOptions) error {
	var b strings.Builder
	for _, kv := range benchConfig(r) {
		if kv[1] != "" {
			fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
		}
	}
	metrics := opts.Metrics
	if len(metrics) == 0 {
		metrics = slices.Collect(maps.Keys(presentMetrics(r)))
		sortMetricKeys(metrics)
	}
	for _, m := range metrics {
		d := MetricFor(m)
		var meta string
		if d.Better != Neither {
			meta += " better=" + d.Better.String()
		}
		if d.Exact {
			meta += " assume=exact"
		}
		if meta != "" {
			fmt.Fprintf(&b, "Unit %s%s\n", d.BenchUnit, meta)
		}
	}
	ax := axes(r)
	cells := cellPtrs(r)
	sortCells(cells, ax)
	base := "Benchmark" + benchNameField(r.Name)
	if r.Name == "" {
		base = "BenchmarkXrun"
	}
	for _, c := range cells {
		if c.Status != StatusOK {
			continue
		}
		name := base
		for _, a := range ax {
			name += "/" + benchNameField(a.Name) + "=" + benchNameField(paramString(c, a.Name))
		}
		name = avoidProcsSuffix(name)
		for _, rep := range c.Repeats {
			b.WriteString(name + " 1")
			for _, m := range metrics {
				if v, ok := rep[m]; ok {
					fmt.Fprintf(&b, " %s %s", formatFloat(v), MetricFor(m).BenchUnit)
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// benchConfig is the file-level configuration, as "key: value" lines.
// Keys are lower case without spaces, as the format requires.
func benchConfig(r *Results) [][2]string {
	e := r.Environment
	cfg := [][2]string{
		{"study", r.Name},
		{"xrun", strings.TrimSpace(e.Xrun.Version + " " + shortHash(e.Xrun.Commit))},
		{"goos", strings.Split(e.OS, "/")[0]},
		{"host", e.Host},
		{"cpu", e.CPUModel},
	}
	for _, g := range e.GPUs {
		cfg = append(cfg, [2]string{"gpu" + strconv.Itoa(g.Index), fmt.Sprintf("%s (driver %s, CUDA %s)", g.Name, g.Driver, g.CUDAVersion)})
	}
	for i := range cfg {
		cfg[i][1] = strings.Join(strings.Fields(cfg[i][1]), " ")
	}
	return cfg
}

// benchNameField makes a value safe inside a benchmark name: no spaces
// (they end the name) and no "/" (it separates parts); "=" would split a
// key from its value.
func benchNameField(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' || r == '=' {
			return '_'
		}
		return r
	}, s)
}

// avoidProcsSuffix keeps a name ending in "-<digits>" (profile_window=100-150)
// from being read as a GOMAXPROCS suffix, which benchstat would strip.
func avoidProcsSuffix(name string) string {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i < len(name) && i > 0 && name[i-1] == '-' {
		return name[:i-1] + "_" + name[i:]
	}
	return name
}

// formatFloat prints a stored value in full, without an exponent.
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

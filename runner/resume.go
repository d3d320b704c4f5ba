package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine"
)

// fingerprint identifies everything a cell's numbers depend on: the cell's
// resolved parameters (its hash), how many repeats it runs, the xrun build
// (version, commit, modified flag, Go version), the backend it runs on, the
// device (the GPUs' names and driver for cuda, the CPU model and count for
// cpu), and the engine switches not at their defaults in the workers'
// environment (study.switches). --resume reuses a cell's record only while
// its fingerprint is unchanged, so a new parameter value, a new xrun build,
// another driver, another kind of machine or another switch setting
// measures the cell again. Hosts with the same hardware share
// fingerprints: a study may resume on a sister machine.
func fingerprint(c *Cell, repeats int, b BuildInfo, backend, device string, switches map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "xrun-fingerprint/1\ncell=%s\nrepeats=%d\nxrun=%s commit=%s modified=%t go=%s\nbackend=%s\ndevice=%s\n",
		c.Hash, repeats, b.Version, b.Commit, b.Modified, b.GoVersion, backend, device)
	// Only when there are any: without, fingerprints stay those of the
	// results recorded before switches were, which stay resumable.
	if len(switches) > 0 {
		fmt.Fprintf(h, "switches=%s\n", engine.FormatSwitches(switches, ","))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// switches are the engine switches not at their defaults in the
// environment the workers get (Options.Env, else this process's): those
// the workers record in cell.json, which go into the fingerprints and
// results.json's environment.
func (s *study) switches() map[string]string {
	getenv := os.Getenv
	if s.o.Env != nil {
		getenv = envLookup(s.o.Env)
	}
	return engine.NonDefaultSwitches(getenv)
}

// OptionError is a bad run option (--only, --gpus, --resume with --fresh,
// ...): the user's input, exit status 2.
type OptionError struct {
	Option string // the flag, e.g. "--only"
	Msg    string
}

func (e *OptionError) Error() string  { return e.Option + ": " + e.Msg }
func (e *OptionError) BadInput() bool { return true }

// onlyTerm is one --only KEY=VALUE.
type onlyTerm struct{ key, value string }

// selectCells returns, for each cell of the plan, whether every --only
// term matches it. Keys are the plan's parameter keys (batch_size,
// dataset.input_mean, ...) or id; values are compared as the plan prints
// them. A key no cell has, or a term that matches no cell, is an error, so
// that a typo never silently selects nothing.
func selectCells(p *Plan, only []string) ([]bool, error) {
	sel := make([]bool, len(p.Cells))
	var terms []onlyTerm
	for _, s := range only {
		k, v, ok := strings.Cut(s, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, &OptionError{"--only", fmt.Sprintf("%q: expected KEY=VALUE, e.g. batch_size=8", s)}
		}
		terms = append(terms, onlyTerm{k, v})
	}
	flats := make([]map[string]any, len(p.Cells))
	keys := map[string]bool{"id": true}
	for i := range p.Cells {
		flats[i] = p.Cells[i].Flat()
		for k := range flats[i] {
			keys[k] = true
		}
	}
	for _, t := range terms {
		if !keys[t.key] {
			known := slices.Sorted(func(yield func(string) bool) {
				for k := range keys {
					if !yield(k) {
						return
					}
				}
			})
			return nil, &OptionError{"--only", fmt.Sprintf("%s=%s: no cell has a parameter %q%s; keys are %s",
				t.key, t.value, t.key, suggestIn(t.key, known), strings.Join(known, ", "))}
		}
		var values []string
		matched := false
		for i := range p.Cells {
			v := p.Cells[i].ID
			if t.key != "id" {
				fv, ok := flats[i][t.key]
				if !ok {
					continue
				}
				v = formatValue(fv)
			}
			if v == t.value {
				matched = true
			}
			if !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
		if !matched {
			return nil, &OptionError{"--only", fmt.Sprintf("%s=%s matches no cell; %s takes %s", t.key, t.value, t.key, strings.Join(values, ", "))}
		}
	}
	some := false
	for i := range p.Cells {
		sel[i] = true
		for _, t := range terms {
			v := p.Cells[i].ID
			if t.key != "id" {
				fv, ok := flats[i][t.key]
				if !ok {
					sel[i] = false
					break
				}
				v = formatValue(fv)
			}
			if v != t.value {
				sel[i] = false
				break
			}
		}
		some = some || sel[i]
	}
	if !some {
		return nil, &OptionError{"--only", fmt.Sprintf("%s together match no cell", strings.Join(only, " and "))}
	}
	return sel, nil
}

// ParseGPUs reads --gpus: a comma list of GPU indices as `xrun devices`
// lists them.
func ParseGPUs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, &OptionError{"--gpus", fmt.Sprintf("%q: expected GPU indices as xrun devices lists them, e.g. 0,1", s)}
		}
		if slices.Contains(out, n) {
			return nil, &OptionError{"--gpus", fmt.Sprintf("%q: GPU %d is listed twice", s, n)}
		}
		out = append(out, n)
	}
	return out, nil
}

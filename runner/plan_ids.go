package runner

import (
	"bytes"
	"slices"
	"strings"
)

// hashOrder is the canonical order of parameters in the cell encoding:
// sorted by path, so that the encoding does not depend on the registry's order.
var hashOrder = func() []int {
	order := make([]int, numParams)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(params[a].path, params[b].path) })
	return order
}()

const canonicalVersion = "xrun-cell/1\n"

// appendCanonical writes the canonical encoding of the parameters that
// identify a cell: a version line, then "path=value" lines in path order.
// Changing it changes every id, so it is versioned.
func appendCanonical(b []byte, p *Params, na uint64, prefix string) []byte {
	b = append(b, canonicalVersion...)
	for _, pi := range hashOrder {
		pm := params[pi]
		if !pm.identity || na&(1<<pi) != 0 || !strings.HasPrefix(pm.path, prefix) {
			continue
		}
		b = append(b, pm.path...)
		b = append(b, '=')
		b = pm.appendValue(b, p)
		b = append(b, '\n')
	}
	return b
}

const maxSlug = 80

// cellEncoder caches, per distinct matrix value and per fixed parameter,
// the line it contributes to the canonical encoding and its slug: values
// repeat across thousands of cells, so each is formatted once.
type cellEncoder struct {
	d         *decoder
	valLine   [][]byte
	valSlug   []string
	baseLine  [numParams][]byte
	baseSlug  [numParams]string
	identity  []int // hashOrder without the parameters that are not identity
	perCellPi [numParams]bool
	// derived are the parameters set per cell from others, whatever the
	// spec gave (dataset.num_requests under load_duration: sizeForLoad).
	derived [numParams]bool
}

func (d *decoder) newEncoder() *cellEncoder {
	e := &cellEncoder{d: d, valLine: make([][]byte, len(d.vals)), valSlug: make([]string, len(d.vals))}
	for _, pi := range hashOrder {
		if params[pi].identity {
			e.identity = append(e.identity, pi)
		}
	}
	for pi := range params {
		// Derived per cell from its model unless given; gpus_per_cell
		// from tp x pp on engine trtllm.
		e.perCellPi[pi] = (params[pi].def == nil || pi == pGPUsPerCell) && !d.explicit[pi]
		if !e.perCellPi[pi] {
			e.baseLine[pi] = appendLine(nil, pi, &d.spec.Params)
		}
	}
	e.derived[pNumRequests] = d.spec.Params.LoadDuration > 0
	return e
}

func appendLine(b []byte, pi int, p *Params) []byte {
	b = append(b, params[pi].path...)
	b = append(b, '=')
	b = params[pi].appendValue(b, p)
	return append(b, '\n')
}

// appendCell is appendCanonical(b, p, na, "") for a cell whose matrix
// values are vals, from the caches.
func (e *cellEncoder) appendCell(b []byte, p *Params, na uint64, vals []int32) []byte {
	b = append(b, canonicalVersion...)
	for _, pi := range e.identity {
		switch vi := vals[pi]; {
		case na&(1<<pi) != 0:
		case params[pi].whenGiven, e.derived[pi]:
			// Made canonical per cell (layers: a model's own count is
			// all).
			b = appendLine(b, pi, p)
		case vi >= 0:
			if e.valLine[vi] == nil {
				e.valLine[vi] = appendLine(nil, pi, p)
			}
			b = append(b, e.valLine[vi]...)
		case e.perCellPi[pi]:
			b = appendLine(b, pi, p)
		default:
			b = append(b, e.baseLine[pi]...)
		}
	}
	return b
}

func (e *cellEncoder) slug(c *Cell, pi int) string {
	if vi := c.vals[pi]; vi >= 0 {
		if e.valSlug[vi] == "" {
			e.valSlug[vi] = cleanSlug(params[pi].slug(params[pi].get(&c.Params)))
		}
		return e.valSlug[vi]
	}
	if e.baseSlug[pi] == "" {
		e.baseSlug[pi] = cleanSlug(params[pi].slug(params[pi].get(&c.Params)))
	}
	return e.baseSlug[pi]
}

// assignIDs gives every cell its id: the slug of its varying values and
// the short hash. Ids are unique; should two cells' slugs and 8-digit
// hashes both coincide, the later one gets 16 digits.
func (e *cellEncoder) assignIDs(cells []Cell, vary []string) {
	keys := make([]int, len(vary))
	for i, v := range vary {
		keys[i] = paramIndex[v]
	}
	used := make(map[string]bool, len(cells))
	b := make([]byte, 0, 128)
	for i := range cells {
		c := &cells[i]
		b = b[:0]
		for _, k := range keys {
			if !c.applies(k) {
				continue
			}
			if len(b) > 0 {
				b = append(b, '_')
			}
			b = append(b, e.slug(c, k)...)
		}
		if len(b) > maxSlug {
			b = bytes.TrimRight(b[:maxSlug], "_-.")
		}
		if len(b) == 0 {
			b = append(b, "cell"...)
		}
		n := len(b)
		b = append(b, '-')
		b = append(b, c.Hash[:8]...)
		c.ID = string(b)
		if used[c.ID] {
			c.ID = string(append(b[:n+1], c.Hash[:16]...))
		}
		used[c.ID] = true
	}
}

// cleanSlug keeps letters, digits, '.', '+' and '-'; anything else (path
// separators, spaces, '_' which separates parameters) becomes '-'.
func cleanSlug(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '+', c == '-':
		default:
			b[i] = '-'
		}
	}
	return string(b)
}

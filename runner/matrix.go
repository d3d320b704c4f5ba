package runner

// The matrix expansion follows GitHub Actions' documented strategy.matrix
// rules, on keys and values reduced to small integers so that the same code
// runs the documentation's examples in tests and 100,000-cell studies:
//
//  1. The original combinations are the cross product of the axes, the
//     first axis varying slowest. A zip is one axis whose rows set several
//     keys at once.
//  2. exclude removes every original combination an entry matches
//     partially (all of the entry's key: value pairs equal).
//  3. Then, for each include entry in order: its pairs are added to every
//     remaining original combination none of whose original (axis) values
//     they would overwrite; values added by earlier include entries may be
//     overwritten. An entry that fits no original combination becomes a
//     new combination of its own pairs only; later entries never extend
//     such added combinations.
//
// With no axes there are no original combinations and every include entry
// is its own combination (GitHub's include-only matrix). xrun adds one rule
// of its own: with neither axes nor include, the study is one combination
// of the fixed params.

// mxAxis is one dimension: keys, and rows of value ids (one per key).
type mxAxis struct {
	keys []int
	rows [][]int32
}

// mxEntry is one include or exclude entry: keys[i] takes vals[i].
type mxEntry struct {
	keys []int
	vals []int32
}

type matrixDef struct {
	nkeys   int
	axes    []mxAxis
	exclude []mxEntry
	include []mxEntry
	// same reports whether two value ids hold equal values; ids differ
	// when the same value is written twice.
	same func(a, b int32) bool
}

// mxCombo is one combination: vals[key] is a value id, or -1 where the
// key is not set.
type mxCombo struct {
	vals []int32
	// origin is the index of the original combination, or -1-i for a
	// combination added by include entry i.
	origin int
}

type mxExcluded struct {
	vals []int32
	by   int // the first exclude entry that matched
}

type mxResult struct {
	combos   []mxCombo
	excluded []mxExcluded
	// excludeHits counts, per exclude entry, the combinations it removed
	// (each counted for the first entry that matched it).
	excludeHits []int
}

// originals is the size of the cross product, saturating at limit+1.
func (m *matrixDef) originals(limit int) int {
	if len(m.axes) == 0 {
		return 0
	}
	n := 1
	for _, ax := range m.axes {
		n *= len(ax.rows)
		if n > limit || n < 0 {
			return limit + 1
		}
	}
	return n
}

// expand applies the rules above. The caller bounds originals() first.
func (m *matrixDef) expand() mxResult {
	n := m.originals(int(^uint(0) >> 2))
	res := mxResult{excludeHits: make([]int, len(m.exclude))}
	isAxis := make([]bool, m.nkeys)
	for _, ax := range m.axes {
		for _, k := range ax.keys {
			isAxis[k] = true
		}
	}
	// One backing array for every original combination's values.
	slab := make([]int32, n*m.nkeys)
	for i := range slab {
		slab[i] = -1
	}
	res.combos = make([]mxCombo, 0, n+len(m.include))
	idx := make([]int, len(m.axes))
	for c := 0; c < n; c++ {
		vals := slab[c*m.nkeys : (c+1)*m.nkeys : (c+1)*m.nkeys]
		for a, ax := range m.axes {
			row := ax.rows[idx[a]]
			for k, key := range ax.keys {
				vals[key] = row[k]
			}
		}
		if by := m.excludedBy(vals); by >= 0 {
			res.excluded = append(res.excluded, mxExcluded{vals: vals, by: by})
			res.excludeHits[by]++
		} else {
			res.combos = append(res.combos, mxCombo{vals: vals, origin: c})
		}
		// Odometer: the last axis varies fastest.
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < len(m.axes[a].rows) {
				break
			}
			idx[a] = 0
		}
	}
	nOriginal := len(res.combos)
	for i, e := range m.include {
		matched := false
		for c := 0; c < nOriginal; c++ {
			vals := res.combos[c].vals
			if !m.fits(e, vals, isAxis) {
				continue
			}
			matched = true
			for j, key := range e.keys {
				if !isAxis[key] {
					vals[key] = e.vals[j]
				}
			}
		}
		if !matched {
			vals := make([]int32, m.nkeys)
			for k := range vals {
				vals[k] = -1
			}
			for j, key := range e.keys {
				vals[key] = e.vals[j]
			}
			res.combos = append(res.combos, mxCombo{vals: vals, origin: -1 - i})
		}
	}
	if len(m.axes) == 0 && len(m.include) == 0 {
		vals := make([]int32, m.nkeys)
		for k := range vals {
			vals[k] = -1
		}
		res.combos = append(res.combos, mxCombo{vals: vals})
	}
	return res
}

func (m *matrixDef) excludedBy(vals []int32) int {
	for i, e := range m.exclude {
		match := true
		for j, key := range e.keys {
			if vals[key] < 0 || !m.same(vals[key], e.vals[j]) {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// fits reports whether include entry e can be added to an original
// combination without overwriting one of its original values.
func (m *matrixDef) fits(e mxEntry, vals []int32, isAxis []bool) bool {
	for j, key := range e.keys {
		if isAxis[key] && !m.same(vals[key], e.vals[j]) {
			return false
		}
	}
	return true
}

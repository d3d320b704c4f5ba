package results

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// EnvChange is one environment field that differs between two results.
type EnvChange struct {
	// Field is the JSON path, e.g. "gpus[0].driver".
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// DiffEnvironment lists every field of the fingerprint that differs,
// in field order. go-cmp walks the structs; a custom reporter collects
// the leaves, because cmp.Diff's own text is deliberately unstable and
// speaks Go, not results.json. Only stable facts are compared: the SM and
// memory clocks read at start (GPU.SMClockMHz, MemClockMHz) are whatever
// the idle GPU happened to run at (345 MHz, then 1980 MHz a minute
// later), so they are left out; the clocks during the timed repeats are
// compared per cell (CellDiff.Clock).
func DiffEnvironment(old, new Environment) []EnvChange {
	var rep envReporter
	cmp.Equal(old, new, cmp.Reporter(&rep), unstableEnvironment)
	return rep.changes
}

// unstableEnvironment are the environment fields DiffEnvironment ignores.
var unstableEnvironment = cmpopts.IgnoreFields(GPU{}, "SMClockMHz", "MemClockMHz")

type envReporter struct {
	path    cmp.Path
	changes []EnvChange
}

func (r *envReporter) PushStep(ps cmp.PathStep) { r.path = append(r.path, ps) }
func (r *envReporter) PopStep()                 { r.path = r.path[:len(r.path)-1] }

func (r *envReporter) Report(rs cmp.Result) {
	if rs.Equal() {
		return
	}
	vx, vy := r.path.Last().Values()
	r.changes = append(r.changes, EnvChange{Field: jsonPath(r.path), Old: envValue(vx), New: envValue(vy)})
}

// jsonPath spells a cmp path with the JSON names of results.json.
func jsonPath(p cmp.Path) string {
	var b strings.Builder
	for i, step := range p {
		switch s := step.(type) {
		case cmp.StructField:
			name := s.Name()
			if i > 0 {
				parent := p[i-1].Type()
				for parent.Kind() == reflect.Pointer {
					parent = parent.Elem()
				}
				if f, ok := parent.FieldByName(s.Name()); ok {
					if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
						name = tag
					}
				}
			}
			if b.Len() > 0 {
				b.WriteString(".")
			}
			b.WriteString(name)
		case cmp.SliceIndex:
			k := s.Key()
			if k < 0 {
				kx, ky := s.SplitKeys()
				k = max(kx, ky)
			}
			fmt.Fprintf(&b, "[%d]", k)
		case cmp.MapIndex: // switches
			fmt.Fprintf(&b, ".%v", s.Key())
		}
	}
	return b.String()
}

// envValue prints one side of a change; "(none)" for a side that lacks
// the field (a GPU that is gone, a repo that is not recorded).
func envValue(v reflect.Value) string {
	if !v.IsValid() || ((v.Kind() == reflect.Pointer || v.Kind() == reflect.Map) && v.IsNil()) {
		return "(none)"
	}
	if v.Kind() == reflect.String {
		if v.String() == "" {
			return `""`
		}
		return v.String()
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(b)
}

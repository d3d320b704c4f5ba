package runner

import (
	"errors"
	"strings"
	"testing"
)

// parseCase parses a one-line test spec: with wantErr, it checks that
// parsing fails with a *SpecError saying it and returns nil; without, it
// returns the spec.
func parseCase(t *testing.T, spec, wantErr string) *Spec {
	t.Helper()
	s, err := ParseSpec("t.yaml", []byte(spec+"\n"), LoadOptions{})
	if wantErr != "" {
		var se *SpecError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want a *SpecError saying %q", err, wantErr)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkWarning checks that the plan warned once, saying want, or (want
// "") not at all.
func checkWarning(t *testing.T, warned []string, want string) {
	t.Helper()
	switch {
	case want == "" && len(warned) > 0:
		t.Errorf("warnings %q, want none", warned)
	case want != "" && (len(warned) != 1 || !strings.Contains(warned[0], want)):
		t.Errorf("warnings %q, want one saying %q", warned, want)
	}
}

// planCells is parseCase that also checks the plan's cell count; nil where
// the spec failed as wanted.
func planCells(t *testing.T, spec, wantErr string, cells int) *Spec {
	t.Helper()
	s := parseCase(t, spec, wantErr)
	if s != nil && len(s.Plan.Cells) != cells {
		t.Errorf("%d cells, want %d", len(s.Plan.Cells), cells)
	}
	return s
}

// checkIDWhenGiven checks a parameter added after cells had ids: base (a
// spec's params) plans the same cell ids without it, a value given puts it
// in the id (with != without, and no slugPrefix in the id without it), and
// an axis of values gives each cell its slug.
func checkIDWhenGiven(t *testing.T, base, param, given, slugPrefix string, axis []string) {
	t.Helper()
	without := mustParse(t, "params: {"+base+"}\n")
	with := mustParse(t, "params: {"+base+", "+param+": "+given+"}\n")
	if a, b := without.Plan.Cells[0].ID, with.Plan.Cells[0].ID; a == b || strings.Contains(a, slugPrefix) {
		t.Errorf("ids %q without %s and %q with it", a, param, b)
	}
	ax := mustParse(t, "params: {"+base+"}\nmatrix: {"+param+": ["+strings.Join(axis, ", ")+"]}\n")
	for i, v := range axis {
		if id, want := ax.Plan.Cells[i].ID, slugPrefix+v; !strings.Contains(id, want) {
			t.Errorf("cell %d id %q lacks %q", i, id, want)
		}
	}
}

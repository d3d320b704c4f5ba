package results

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEnvironmentSwitches: engine switches a run had set survive
// results.json, are named in results.md's environment lines and show in
// xrun diff's environment changes, one switch at a time.
func TestEnvironmentSwitches(t *testing.T) {
	r := gemmStudy().build()
	if lines := environmentLines(r); slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "switches") }) {
		t.Errorf("no switches set, yet the environment says %q", lines)
	}
	r.Environment.Switches = map[string]string{"XRUN_OVERLAP": "0", "XRUN_CUDA_GRAPHS": "0"}
	if lines := environmentLines(r); !slices.Contains(lines, "engine switches: XRUN_CUDA_GRAPHS=0, XRUN_OVERLAP=0") {
		t.Errorf("environment lines %q do not name the switches", lines)
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteFile(path, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Environment.Switches, r.Environment.Switches) {
		t.Errorf("read back %v, wrote %v", back.Environment.Switches, r.Environment.Switches)
	}
	old := Environment{Switches: map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_CUDA_MOE_TILE": "s"}}
	got := DiffEnvironment(old, r.Environment)
	// Everything else differs too; only the switches are looked at.
	got = slices.DeleteFunc(got, func(c EnvChange) bool { return !strings.HasPrefix(c.Field, "switches") })
	want := []EnvChange{
		{Field: "switches.XRUN_CUDA_MOE_TILE", Old: "s", New: "(none)"},
		{Field: "switches.XRUN_OVERLAP", Old: "(none)", New: "0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("switch changes %+v, want %+v", got, want)
	}
	if got := DiffEnvironment(Environment{}, Environment{Switches: map[string]string{"XRUN_OVERLAP": "0"}}); len(got) != 1 ||
		got[0] != (EnvChange{Field: "switches", Old: "(none)", New: `{"XRUN_OVERLAP":"0"}`}) {
		t.Errorf("switches set only in NEW: %+v", got)
	}
}

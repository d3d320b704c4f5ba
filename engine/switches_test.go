package engine

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's table of switches")

// notSwitches are variables of the switches' spelling that are not
// switches: xrun sets them for its own child processes.
var notSwitches = map[string]string{
	"XRUN_CUDA_PROBE_WORKER": "marks the child process that probes the GPUs (engine/cuda/probe.go)",
}

var (
	switchToken   = regexp.MustCompile(`XRUN_(?:CUDA_[A-Z0-9_]+|KV_[A-Z0-9_]+|OVERLAP|MEASURE_CEILINGS|MLA_ABSORB|WARM_SHAPES)\b`)
	switchLiteral = regexp.MustCompile("[\"`](" + switchToken.String() + ")[\"`]")
)

// TestSwitchesComplete: every switch the module's code names is in the
// table, and only the table spells one as a string of its own (what
// os.Getenv would take), so that no code reads one around the table.
func TestSwitchesComplete(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, name := range switchToken.FindAllString(string(b), -1) {
			if _, not := notSwitches[name]; !not && Switches.Lookup(name) == nil {
				t.Errorf("%s names %s, which is not in engine.Switches: add it to the table", rel, name)
			}
		}
		if rel == filepath.Join("engine", "switches.go") {
			return nil
		}
		for _, m := range switchLiteral.FindAllStringSubmatch(string(b), -1) {
			if _, not := notSwitches[m[1]]; !not {
				t.Errorf("%s spells %s as a string: read it through engine.Switches", rel, m[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files under %s", files, root)
	}
	// The walk must find the table itself.
	if b, _ := os.ReadFile("switches.go"); len(switchLiteral.FindAll(b, -1)) != len(Switches.All()) {
		t.Errorf("switches.go spells %d switch names, the table has %d", len(switchLiteral.FindAll(b, -1)), len(Switches.All()))
	}
}

// TestSwitchDefaults pins every switch's name, default and whether runs
// record it: changing one changes what unset means for every committed
// result.
func TestSwitchDefaults(t *testing.T) {
	type entry struct {
		def      string
		recorded bool
	}
	want := map[string]entry{
		"XRUN_OVERLAP":                {"1", true},
		"XRUN_CUDA_GRAPHS":            {"1", true},
		"XRUN_CUDA_PDL":               {"1", true},
		"XRUN_CUDA_FUSE":              {"1", true},
		"XRUN_CUDA_FUSE_NORM":         {"1", true},
		"XRUN_CUDA_FP8_FUSE":          {"1", true},
		"XRUN_CUDA_GEMV":              {"1", true},
		"XRUN_CUDA_GEMV_MAXM":         {"4", true},
		"XRUN_CUDA_GEMV_PLAN":         {"1", true},
		"XRUN_CUDA_L2_PREFETCH":       {"15", true},
		"XRUN_CUDA_ATTN_TC":           {"auto", true},
		"XRUN_CUDA_ATTN_SPLIT":        {"1", true},
		"XRUN_CUDA_ATTN_ROPE":         {"auto", true},
		"XRUN_CUDA_ATTN_SHORT":        {"256", true},
		"XRUN_CUDA_ATTN_PREFILL_ROWS": {"auto", true},
		"XRUN_CUDA_ATTN_WGMMA":        {"1", true},
		"XRUN_CUDA_ATTN_WG_E4M3":      {"0", true},
		"XRUN_CUDA_ATTN_WS":           {"1", true},
		"XRUN_CUDA_ATTN_F8_REGS":      {"1", true},
		"XRUN_CUDA_ATTN_F8_MMA":       {"0", true},
		"XRUN_CUDA_ATTN_F8_SWAP":      {"auto", true},
		"XRUN_CUDA_ATTN_SWAP":         {"0", true},
		"XRUN_CUDA_MOE_TILE":          {"auto", true},
		"XRUN_CUDA_WGMMA":             {"1", true},
		"XRUN_CUDA_WGMMA_FP8":         {"1", true},
		"XRUN_CUDA_WGMMA_TILE":        {"auto", true},
		"XRUN_CUDA_GEMM_WAVES":        {"0", true},
		"XRUN_CUDA_GEMM_SPLIT":        {"0", true},
		"XRUN_CUDA_GEMM_TMA":          {"auto", true},
		"XRUN_CUDA_GEMM_EPILOGUE":     {"1", true},
		"XRUN_CUDA_GEMM_EARLY_W":      {"1", true},
		"XRUN_CUDA_GEMM_PERSIST":      {"1", true},
		"XRUN_CUDA_GEMM_MULTICAST":    {"1", true},
		"XRUN_CUDA_MOE_HINTS":         {"3", true},
		"XRUN_CUDA_MOE_LT":            {"1", true},
		"XRUN_CUDA_LT_TUNE":           {"1", true},
		"XRUN_CUDA_LT_REUSE":          {"0", true},
		"XRUN_CUDA_SYNC":              {"0", true},
		"XRUN_CUDA_LT_LOG":            {"0", false},
		"XRUN_MEASURE_CEILINGS":       {"0", false},
		"XRUN_MLA_ABSORB":             {"1", true},
		"XRUN_KV_PAGED":               {"1", true},
		"XRUN_CUDA_KV_PAGED":          {"auto", true},
		"XRUN_KV_BLOCK":               {"32", true},
		"XRUN_WARM_SHAPES":            {"1", true},
	}
	got := map[string]entry{}
	for _, s := range Switches.All() {
		if _, dup := got[s.Name]; dup {
			t.Errorf("%s is in the table twice", s.Name)
		}
		got[s.Name] = entry{s.Default, s.Recorded}
		if s.Values == "" || s.Meaning == "" {
			t.Errorf("%s: values %q, meaning %q; the table is the documentation", s.Name, s.Values, s.Meaning)
		}
		if v := s.Value(func(string) string { return "" }); v != s.Default {
			t.Errorf("%s unset: %q, want its default %q", s.Name, v, s.Default)
		}
		if v := s.Value(func(string) string { return s.Default }); v != s.Default {
			t.Errorf("%s=%s (its default): %q", s.Name, s.Default, v)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("switches (name: default, recorded):\n got %v\nwant %v", got, want)
	}
}

// TestSwitchValues: the value in effect of each kind of switch, for the
// texts its reader used to take apart itself.
func TestSwitchValues(t *testing.T) {
	for _, c := range []struct {
		sw        *Switch
		raw, want string
	}{
		{&Switches.CUDAGraphs.Switch, "0", "0"},
		{&Switches.CUDAGraphs.Switch, "1", "1"},
		{&Switches.CUDAGraphs.Switch, "false", "1"}, // only "0" turned it off
		{&Switches.CUDAGraphs.Switch, "00", "1"},
		{&Switches.Overlap.Switch, "0", "0"},
		{&Switches.CUDASync.Switch, "1", "1"},
		{&Switches.CUDASync.Switch, "true", "0"}, // only "1" turned it on
		{&Switches.CUDAGemvMaxM.Switch, "0", "0"},
		{&Switches.CUDAGemvMaxM.Switch, "8", "8"},
		{&Switches.CUDAGemvMaxM.Switch, "08", "8"},
		{&Switches.CUDAGemvMaxM.Switch, "9", "4"},
		{&Switches.CUDAGemvMaxM.Switch, "-1", "4"},
		{&Switches.CUDAGemvMaxM.Switch, "two", "4"},
		{&Switches.CUDAAttnShort.Switch, "-1", "-1"},
		{&Switches.CUDAAttnShort.Switch, "0", "0"},
		{&Switches.CUDAAttnShort.Switch, "+512", "512"},
		{&Switches.CUDAAttnShort.Switch, "1e3", "256"},
		{&Switches.CUDAMoEHints.Switch, "0", "0"},
		{&Switches.CUDAMoEHints.Switch, "4", "3"},
		{&Switches.CUDAMoETile.Switch, "s", "s"},
		{&Switches.CUDAMoETile.Switch, "l", "l"},
		{&Switches.CUDAMoETile.Switch, "S", "auto"},
		{&Switches.CUDAMoETile.Switch, "xl", "auto"},
		{&Switches.CUDAAttnTC.Switch, "0", "0"},
		{&Switches.CUDAAttnTC.Switch, "tc-m1-k4-t16-s3", "tc-m1-k4-t16-s3"},
		{&Switches.CUDAAttnTC.Switch, "tc-m01-k4-t16-s3", "auto"}, // attnTC.String never pads
		{&Switches.CUDAAttnTC.Switch, "cuda-core", "auto"},
		{&Switches.CUDAAttnTC.Switch, "1", "auto"},
		{&Switches.KVPaged.Switch, "0", "0"},
		{&Switches.KVBlock.Switch, "16", "16"},
		{&Switches.KVBlock.Switch, "0256", "256"},
		{&Switches.KVBlock.Switch, "48", "32"}, // not a power of two
		{&Switches.KVBlock.Switch, "8", "32"},  // below the attention kernel's panel
		{&Switches.KVBlock.Switch, "512", "32"},
	} {
		if got := c.sw.Value(func(k string) string { return map[string]string{c.sw.Name: c.raw}[k] }); got != c.want {
			t.Errorf("%s=%s: %q, want %q", c.sw.Name, c.raw, got, c.want)
		}
	}
}

// TestSwitchAccessors: the typed readers read the environment they are
// given.
func TestSwitchAccessors(t *testing.T) {
	unset := func(string) string { return "" }
	if !Switches.CUDAGraphs.On(unset) || Switches.CUDASync.On(unset) || Switches.CUDAGemvMaxM.Int(unset) != 4 || Switches.CUDAMoETile.Get(unset) != "auto" {
		t.Fatalf("unset: graphs %t, sync %t, gemv max M %d, MoE tile %q", Switches.CUDAGraphs.On(unset), Switches.CUDASync.On(unset),
			Switches.CUDAGemvMaxM.Int(unset), Switches.CUDAMoETile.Get(unset))
	}
	env := map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_CUDA_SYNC": "1", "XRUN_CUDA_GEMV_MAXM": "2", "XRUN_CUDA_ATTN_SHORT": "-3", "XRUN_CUDA_MOE_TILE": "m"}
	set := func(k string) string { return env[k] }
	if Switches.CUDAGraphs.On(set) || !Switches.CUDASync.On(set) || Switches.CUDAGemvMaxM.Int(set) != 2 ||
		Switches.CUDAAttnShort.Int(set) != -3 || Switches.CUDAMoETile.Get(set) != "m" {
		t.Errorf("set: graphs %t, sync %t, gemv max M %d, short keys %d, MoE tile %q", Switches.CUDAGraphs.On(set), Switches.CUDASync.On(set),
			Switches.CUDAGemvMaxM.Int(set), Switches.CUDAAttnShort.Int(set), Switches.CUDAMoETile.Get(set))
	}
}

// TestParseSwitches: every entry of the table sets the field of
// model.Switches of its own name, of its kind's type, and no other: set
// alone to a value other than its default, it changes that field only.
func TestParseSwitches(t *testing.T) {
	def := DefaultSwitches()
	dv := reflect.ValueOf(def)
	if n, m := dv.NumField(), len(Switches.All()); n != m {
		t.Fatalf("model.Switches has %d fields, the table %d switches", n, m)
	}
	// A value other than the default, per kind of switch.
	other := map[string]string{"XRUN_CUDA_ATTN_TC": "tc-m1-k4-t16-s3", "XRUN_CUDA_MOE_TILE": "l", "XRUN_CUDA_WGMMA_TILE": "wg2w", "XRUN_CUDA_GEMM_TMA": "1",
		"XRUN_CUDA_ATTN_F8_MMA": "qkpv", "XRUN_CUDA_ATTN_ROPE": "0", "XRUN_CUDA_KV_PAGED": "1",
		"XRUN_CUDA_ATTN_PREFILL_ROWS": "128", "XRUN_CUDA_ATTN_F8_SWAP": "0"}
	tv := reflect.ValueOf(Switches)
	for i := range tv.NumField() {
		field := tv.Type().Field(i).Name
		sw := tv.Field(i).FieldByName("Switch").Interface().(Switch)
		f, ok := dv.Type().FieldByName(field)
		if !ok {
			t.Errorf("%s (%s): model.Switches has no field %s", sw.Name, field, field)
			continue
		}
		var raw string
		want := map[string]reflect.Kind{"FlagSwitch": reflect.Bool, "IntSwitch": reflect.Int, "ChoiceSwitch": reflect.String}[tv.Field(i).Type().Name()]
		switch s := tv.Field(i).Interface().(type) {
		case FlagSwitch:
			raw = map[string]string{"0": "1", "1": "0"}[s.Default]
		case IntSwitch:
			raw = strconv.Itoa(s.Min)
			if raw == s.Default {
				raw = strconv.Itoa(s.Max)
			}
		case ChoiceSwitch:
			raw = other[sw.Name]
		}
		if f.Type.Kind() != want {
			t.Errorf("%s: model.Switches.%s is a %s, want a %s", sw.Name, field, f.Type.Kind(), want)
			continue
		}
		if raw == "" {
			t.Errorf("%s: no value other than its default to test with", sw.Name)
			continue
		}
		got := reflect.ValueOf(ParseSwitches(func(k string) string { return map[string]string{sw.Name: raw}[k] }))
		for j := range got.NumField() {
			name := got.Type().Field(j).Name
			changed := !got.Field(j).Equal(dv.Field(j))
			if changed != (name == field) {
				t.Errorf("%s=%s: model.Switches.%s is %v (default %v); want %s alone changed", sw.Name, raw, name, got.Field(j), dv.Field(j), field)
			}
		}
		if v := fmt.Sprint(got.FieldByName(field)); sw.effective(raw) != raw || (f.Type.Kind() != reflect.Bool && v != raw) {
			t.Errorf("%s=%s: parsed as %s", sw.Name, raw, v)
		}
	}
	if d := DefaultSwitches(); !d.Overlap || !d.CUDAGraphs || d.CUDASync || d.CUDAGemvMaxM != 4 || d.CUDAAttnShort != 256 ||
		d.CUDAAttnTC != "auto" || d.CUDAAttnRope != "auto" || d.CUDAKVPaged != "auto" || d.CUDAMoETile != "auto" || d.CUDAMoEHints != 3 {
		t.Errorf("defaults: %+v", d)
	}
}

func TestNonDefaultSwitches(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := NonDefaultSwitches(env(nil)); got != nil {
		t.Errorf("nothing set: %v, want nil", got)
	}
	got := NonDefaultSwitches(env(map[string]string{
		"XRUN_CUDA_GRAPHS":       "0",
		"XRUN_OVERLAP":           "0",
		"XRUN_CUDA_MOE_TILE":     "s",
		"XRUN_CUDA_GEMV_MAXM":    "04", // the default, spelled otherwise
		"XRUN_CUDA_PDL":          "1",  // the default
		"XRUN_CUDA_MOE_HINTS":    "9",  // ignored by the engine
		"XRUN_CUDA_LT_LOG":       "1",  // not recorded: prints only
		"XRUN_MEASURE_CEILINGS":  "1",  // not recorded: cell.json's ceilings say so
		"XRUN_CUDA_PROBE_WORKER": "1",  // not a switch
	}))
	want := map[string]string{"XRUN_CUDA_GRAPHS": "0", "XRUN_OVERLAP": "0", "XRUN_CUDA_MOE_TILE": "s"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if s := FormatSwitches(got, ", "); s != "XRUN_CUDA_GRAPHS=0, XRUN_CUDA_MOE_TILE=s, XRUN_OVERLAP=0" {
		t.Errorf("FormatSwitches: %q", s)
	}
}

func TestSwitchLookup(t *testing.T) {
	if s := Switches.Lookup("XRUN_CUDA_GEMV_MAXM"); s != &Switches.CUDAGemvMaxM.Switch {
		t.Errorf("Lookup(XRUN_CUDA_GEMV_MAXM) = %p, want the table's entry %p", s, &Switches.CUDAGemvMaxM.Switch)
	}
	if s := Switches.Lookup("XRUN_CUDA_NOPE"); s != nil {
		t.Errorf("Lookup of an unknown name: %+v", s)
	}
	names := []string{}
	for _, s := range Switches.All() {
		names = append(names, s.Name)
	}
	if names[0] != "XRUN_OVERLAP" || !slices.Contains(names, "XRUN_CUDA_SYNC") {
		t.Errorf("All: %v", names)
	}
}

// The README's table sits between these lines.
const (
	readmeBegin = "<!-- switches: generated from engine.Switches; go test ./engine -update -->\n"
	readmeEnd   = "<!-- end of switches -->\n"
)

// TestSwitchesReadme: the README's table is the table's; -update writes
// it there.
func TestSwitchesReadme(t *testing.T) {
	path := filepath.Join("..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(b, []byte(readmeBegin)), bytes.Index(b, []byte(readmeEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no table of switches between %q and %q", path, readmeBegin, readmeEnd)
	}
	want := SwitchesMarkdown()
	got := string(b[i+len(readmeBegin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's table of switches is not engine.Switches' (go test ./engine -update rewrites it):\n%s\nwant\n%s", path, got, want)
	}
	out := slices.Concat(b[:i+len(readmeBegin)], []byte(want), b[j:])
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

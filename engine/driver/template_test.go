package driver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func known(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

func TestTemplate(t *testing.T) {
	tp, err := ParseTemplate("--bs={batch_size} {{literal}} {dataset.input_mean}x", known("batch_size", "dataset.input_mean"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Expand(map[string]string{"batch_size": "16", "dataset.input_mean": "128"}); got != "--bs=16 {literal} 128x" {
		t.Errorf("expanded to %q", got)
	}
	if !slices.Equal(tp.Names(), []string{"batch_size", "dataset.input_mean"}) {
		t.Errorf("names %v", tp.Names())
	}
	b, _ := json.Marshal(tp)
	var back Template
	if err := json.Unmarshal(b, &back); err != nil || back.Expand(map[string]string{"batch_size": "1", "dataset.input_mean": "2"}) != "--bs=1 {literal} 2x" {
		t.Errorf("round trip: %s %v", b, err)
	}
	for _, bad := range []string{"{nope}", "{", "a}", "{}"} {
		if _, err := ParseTemplate(bad, known("x"), func(string) string { return " (hint)" }); err == nil {
			t.Errorf("%q parsed", bad)
		} else if bad == "{nope}" && !strings.Contains(err.Error(), "unknown placeholder {nope} (hint)") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// FuzzTemplate checks that a template survives the workers' plan.json:
// written as its text and read back, it has the same placeholders and
// expands to the same words.
func FuzzTemplate(f *testing.F) {
	f.Add("--x={a}{{b}}")
	f.Add("}}{")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTemplate(s, func(string) bool { return true }, nil)
		if err != nil || !utf8.ValidString(s) { // specs are YAML, so UTF-8
			return
		}
		b, err := json.Marshal(tp)
		if err != nil {
			t.Fatal(err)
		}
		var back Template
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		vars := map[string]string{}
		for i, n := range tp.Names() {
			vars[n] = strings.Repeat("v", i)
		}
		if !slices.Equal(back.Names(), tp.Names()) || back.Expand(vars) != tp.Expand(vars) {
			t.Fatalf("%q came back as %q", s, back.Raw)
		}
	})
}

func TestLookupNumber(t *testing.T) {
	var doc any
	json.Unmarshal([]byte(`{"performance":{"tok_s":12.5,"p":{"p50":3}},"runs":[{"x":1},{"x":-2}],"s":"a"}`), &doc)
	for _, tc := range []struct {
		path string
		want float64
		err  string
	}{
		{"performance.tok_s", 12.5, ""},
		{"performance.p.p50", 3, ""},
		{"runs[0].x", 1, ""},
		{"runs[1].x", 0, "expected a finite number >= 0"},
		{"runs[2].x", 0, "runs[2]: index out of range (2 elements)"},
		{"performance.nope", 0, "performance.nope: no such key (the object has p, tok_s)"},
		{"s", 0, "s: expected a number, got a string"},
		{"s.x", 0, "s: not an object"},
		{"a..b", 0, "an empty key"},
		{"runs[x]", 0, "is not an index"},
	} {
		got, err := LookupNumber(doc, tc.path)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: got %v, %v; want %v", tc.path, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want an error with %q", tc.path, err, tc.err)
		}
	}
}

func FuzzLookupNumber(f *testing.F) {
	f.Add("a.b[0].c")
	f.Add("[1][2]")
	f.Fuzz(func(t *testing.T, path string) {
		var doc any
		json.Unmarshal([]byte(`{"a":{"b":[{"c":1}]},"x":[[0,1,2]]}`), &doc)
		if err := CheckPath(path); err != nil {
			return
		}
		LookupNumber(doc, path)
	})
}

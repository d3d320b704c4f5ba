package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	spec, err := ParseSpec("tiny.yaml", []byte(tinyStudy), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := &spec.Plan.Cells[0], &spec.Plan.Cells[1]
	b := BuildInfo{Version: "v1.0.0", Commit: "abc", GoVersion: "go1.26"}
	base := fingerprint(c0, 3, b, "cpu", "cpu X", nil)
	if again := fingerprint(c0, 3, b, "cpu", "cpu X", nil); again != base {
		t.Fatalf("fingerprint is not stable: %s, %s", base, again)
	}
	modified := b
	modified.Modified = true
	newer := b
	newer.Commit = "abd"
	otherGo := b
	otherGo.GoVersion = "go1.27"
	for name, fp := range map[string]string{
		"another cell":    fingerprint(c1, 3, b, "cpu", "cpu X", nil),
		"more repeats":    fingerprint(c0, 5, b, "cpu", "cpu X", nil),
		"modified build":  fingerprint(c0, 3, modified, "cpu", "cpu X", nil),
		"another commit":  fingerprint(c0, 3, newer, "cpu", "cpu X", nil),
		"another Go":      fingerprint(c0, 3, otherGo, "cpu", "cpu X", nil),
		"another backend": fingerprint(c0, 3, b, "cuda", "cpu X", nil),
		"another device":  fingerprint(c0, 3, b, "cpu", "cpu Y", nil),
	} {
		if fp == base {
			t.Errorf("%s does not change the fingerprint", name)
		}
	}
}

func TestSelectCells(t *testing.T) {
	spec, err := ParseSpec("tiny.yaml", []byte(tinyStudy), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(sel []bool) []string {
		var out []string
		for i, ok := range sel {
			if ok {
				out = append(out, spec.Plan.Cells[i].ID)
			}
		}
		return out
	}
	all := ids(slices.Repeat([]bool{true}, len(spec.Plan.Cells)))
	first := spec.Plan.Cells[0].ID
	for _, c := range []struct {
		only []string
		want []string // cell ids; nil with err
		err  string
	}{
		{nil, all, ""},
		{[]string{"batch_size=2"}, []string{all[2], all[3]}, ""},
		{[]string{" batch_size = 2 ", "profile_window=2-3"}, []string{all[3]}, ""},
		{[]string{"dataset.num_requests=3"}, all, ""},
		{[]string{"id=" + first}, []string{first}, ""},
		{[]string{"batch_size=3"}, nil, "batch_size=3 matches no cell; batch_size takes 1, 2"},
		{[]string{"bacth_size=2"}, nil, `did you mean "batch_size"?`},
		{[]string{"batch_size"}, nil, "expected KEY=VALUE"},
		{[]string{"=2"}, nil, "expected KEY=VALUE"},
		{[]string{"batch_size=1", "batch_size=2"}, nil, "batch_size=1 and batch_size=2 together match no cell"},
	} {
		sel, err := selectCells(spec.Plan, c.only)
		if c.err != "" {
			var oe *OptionError
			if !errors.As(err, &oe) || !oe.BadInput() || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want an *OptionError with %q", c.only, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.only, err)
			continue
		}
		if got := ids(sel); !slices.Equal(got, c.want) {
			t.Errorf("%q selects %v, want %v", c.only, got, c.want)
		}
	}
}

func TestParseGPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"0", []int{0}, ""},
		{"0,1, 3", []int{0, 1, 3}, ""},
		{"1,1", nil, "listed twice"},
		{"a", nil, "expected GPU indices"},
		{"-1", nil, "expected GPU indices"},
		{"0,", nil, "expected GPU indices"},
	} {
		got, err := ParseGPUs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

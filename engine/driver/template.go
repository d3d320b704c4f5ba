package driver

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Template is a string with {name} placeholders; {{ and }} write braces.
type Template struct {
	Raw   string
	parts []part
}

type part struct {
	lit  string
	name string // "" for a literal
}

// ParseTemplate parses s; known says which placeholder names exist, and
// suggest, when not nil, proposes one for a name that does not.
func ParseTemplate(s string, known func(string) bool, suggest func(string) string) (Template, error) {
	t := Template{Raw: s}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return t, fmt.Errorf("%q: an unclosed {; write {{ for a literal brace", s)
			}
			name := strings.TrimSpace(s[i+1 : i+end])
			if name == "" {
				return t, fmt.Errorf("%q: an empty {}; write {{}} for literal braces", s)
			}
			if !known(name) {
				hint := ""
				if suggest != nil {
					hint = suggest(name)
				}
				return t, fmt.Errorf("%q: unknown placeholder {%s}%s", s, name, hint)
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, part{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, part{name: name})
			i += end
		case c == '}':
			return t, fmt.Errorf("%q: a lone }; write }} for a literal brace", s)
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	return t, nil
}

// Names lists the placeholders t uses.
func (t Template) Names() []string {
	var out []string
	for _, p := range t.parts {
		if p.name != "" {
			out = append(out, p.name)
		}
	}
	return out
}

// Expand fills the placeholders from vars; a name vars lacks expands to
// its placeholder, which the plan prevents.
func (t Template) Expand(vars map[string]string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.lit)
			continue
		}
		v, ok := vars[p.name]
		if !ok {
			v = "{" + p.name + "}"
		}
		b.WriteString(v)
	}
	return b.String()
}

// MarshalJSON writes the template as its text (the workers' plan.json).
func (t Template) MarshalJSON() ([]byte, error) { return json.Marshal(t.Raw) }

// UnmarshalJSON reads a template written by MarshalJSON; its names were
// checked when the spec was read.
func (t *Template) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	p, err := ParseTemplate(s, func(string) bool { return true }, nil)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

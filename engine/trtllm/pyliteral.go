package trtllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parsePyLiteral reads one Python literal as repr() writes it — a dict,
// list, tuple, str, int, float, True, False or None — and returns it as
// encoding/json would decode the equivalent JSON: map[string]any, []any,
// string, float64, bool, nil. trtllm-bench's --iteration_log writes each
// iteration's statistics this way (str(dict)); JSON, being almost a
// subset, reads too (true, false, null). Dict keys must be strings.
func parsePyLiteral(s string) (any, error) {
	p := &pyParser{s: s}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.s) {
		return nil, p.errf("unexpected %q after the value", p.rest())
	}
	return v, nil
}

type pyParser struct {
	s string
	i int
}

const maxPyDepth = 64

func (p *pyParser) errf(format string, args ...any) error {
	return fmt.Errorf("column %d: %s", p.i+1, fmt.Sprintf(format, args...))
}

func (p *pyParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

func (p *pyParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) value(depth int) (any, error) {
	if depth > maxPyDepth {
		return nil, p.errf("nested deeper than %d", maxPyDepth)
	}
	if p.i >= len(p.s) {
		return nil, p.errf("unexpected end; expected a value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '[' || c == '(':
		return p.list(depth, map[byte]byte{'[': ']', '(': ')'}[c])
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.word()
	}
}

func (p *pyParser) dict(depth int) (any, error) {
	p.i++ // {
	m := map[string]any{}
	for {
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return m, nil
		}
		if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
			return nil, p.errf("expected a string key or }")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errf("expected : after the key %q", k)
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k.(string)] = v
		p.ws()
		switch {
		case p.i < len(p.s) && p.s[p.i] == ',':
			p.i++
		case p.i < len(p.s) && p.s[p.i] == '}':
		default:
			return nil, p.errf("expected , or } in a dict")
		}
	}
}

func (p *pyParser) list(depth int, end byte) (any, error) {
	p.i++
	out := []any{}
	for {
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.ws()
		switch {
		case p.i < len(p.s) && p.s[p.i] == ',':
			p.i++
		case p.i < len(p.s) && p.s[p.i] == end:
		default:
			return nil, p.errf("expected , or %c", end)
		}
	}
}

func (p *pyParser) str() (any, error) {
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), nil
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return nil, p.errf("unterminated string")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '\'', '"', '/':
				b.WriteByte(e)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.i+n > len(p.s) {
					return nil, p.errf("short \\%c escape", e)
				}
				r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil || !utf8.ValidRune(rune(r)) {
					return nil, p.errf("bad \\%c escape", e)
				}
				b.WriteRune(rune(r))
				p.i += n
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '\n':
			return nil, p.errf("newline in a string")
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return nil, p.errf("unterminated string")
}

func (p *pyParser) number() (any, error) {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-0123456789.eE_xXabcdefABCDEFinfINFNa", p.s[p.i]) >= 0 {
		p.i++
	}
	text := strings.ReplaceAll(p.s[start:p.i], "_", "")
	switch strings.TrimLeft(text, "+-") {
	case "inf":
		return math.Inf(map[bool]int{true: -1, false: 1}[strings.HasPrefix(text, "-")]), nil
	case "nan":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		i, ierr := strconv.ParseInt(text, 0, 64)
		if ierr != nil {
			p.i = start
			return nil, p.errf("%q is not a number", text)
		}
		f = float64(i)
	}
	return f, nil
}

func (p *pyParser) word() (any, error) {
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z') {
		p.i++
	}
	switch w := p.s[start:p.i]; w {
	case "True", "true":
		return true, nil
	case "False", "false":
		return false, nil
	case "None", "null":
		return nil, nil
	case "inf":
		return math.Inf(1), nil
	case "nan":
		return math.NaN(), nil
	default:
		p.i = start
		return nil, p.errf("unexpected %q; expected a dict, list, string, number, True, False or None", p.rest())
	}
}

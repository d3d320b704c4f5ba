package runner

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/results/editdist"
	"go.yaml.in/yaml/v3"
)

// resolve follows YAML aliases (*name) to the anchored node, so anchors
// work everywhere a value does.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func scalarInt(n *yaml.Node) (int64, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		return 0, false
	}
	return v, true
}

func scalarFloat(n *yaml.Node) (float64, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return 0, false
	}
	if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func scalarString(n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", false
	}
	return n.Value, true
}

// describe names what a node holds, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!str":
		return "string " + strconv.Quote(v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	}
	return strconv.Quote(v)
}

// suggest returns `; did you mean "x"?` for the candidate closest to word,
// or "" when none is close: within a small edit distance, a known alias,
// or the only candidate word is a prefix of.
func suggest(word string, candidates []string, alias map[string]string) string {
	if best := closest(word, candidates, alias); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

func closest(word string, candidates []string, alias map[string]string) string {
	lw := strings.ToLower(word)
	if a, ok := alias[lw]; ok {
		for _, c := range candidates {
			if c == a {
				return a
			}
		}
	}
	limit := 1
	if len(lw) >= 5 {
		limit = max(2, len(lw)/4)
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editdist.Distance(lw, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(lw) >= 3 {
		var prefixed []string
		for _, c := range candidates {
			if strings.HasPrefix(strings.ToLower(c), lw) {
				prefixed = append(prefixed, c)
			}
		}
		if len(prefixed) == 1 {
			return prefixed[0]
		}
	}
	return ""
}

// cleanPath normalises a path as written so that "m/../x" and "x/" are
// one model (and one cell hash) on every machine. A leading "./" stays: it
// is how a directory that shares a zoo model's name is written.
func cleanPath(s string) string {
	if !strings.ContainsAny(s, `/\`) {
		return s
	}
	c := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	if !strings.Contains(c, "/") || strings.HasPrefix(s, "./") && !strings.HasPrefix(c, "../") && c != "." {
		c = "./" + c
	}
	return c
}

// firstColumn guesses a column for YAML syntax errors, which the parser
// reports by line only: the first non-blank character of that line.
func firstColumn(data []byte, line int) int {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return 1
	}
	l := lines[line-1]
	return len(l) - len(strings.TrimLeft(l, " \t")) + 1
}

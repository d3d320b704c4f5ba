package driver

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CheckPath validates a JSON path as LookupPath reads it: dot-separated
// object keys, each optionally followed by [N] array indices
// ("performance.system_output_throughput_tok_s", "results[0].tok_s").
func CheckPath(path string) error {
	_, err := splitPath(path)
	return err
}

type pathStep struct {
	key   string
	index int // -1: a key step
}

func splitPath(path string) ([]pathStep, error) {
	if path == "" {
		return nil, fmt.Errorf("empty JSON path")
	}
	var steps []pathStep
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" && rest == "" {
			return nil, fmt.Errorf("%q: an empty key (two dots, or a dot at an end)", path)
		}
		if key != "" {
			steps = append(steps, pathStep{key: key, index: -1})
		}
		if rest == "" {
			continue
		}
		for _, ix := range strings.Split("["+rest, "[")[1:] {
			num, ok := strings.CutSuffix(ix, "]")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("%q: %q is not an index [N]", path, "["+ix)
			}
			steps = append(steps, pathStep{index: n})
		}
	}
	return steps, nil
}

// LookupNumber finds the number at path in a decoded JSON document (as
// encoding/json decodes into any, with UseNumber or not).
func LookupNumber(doc any, path string) (float64, error) {
	steps, err := splitPath(path)
	if err != nil {
		return 0, err
	}
	cur := doc
	for i, s := range steps {
		where := path
		if i < len(steps)-1 {
			where = pathPrefix(steps[:i+1])
		}
		if s.index < 0 {
			obj, ok := cur.(map[string]any)
			if !ok {
				return 0, fmt.Errorf("%s: not an object", pathPrefix(steps[:i]))
			}
			v, ok := obj[s.key]
			if !ok {
				return 0, fmt.Errorf("%s: no such key (the object has %s)", where, strings.Join(SortedKeys(obj), ", "))
			}
			cur = v
			continue
		}
		arr, ok := cur.([]any)
		if !ok {
			return 0, fmt.Errorf("%s: not an array", pathPrefix(steps[:i]))
		}
		if s.index >= len(arr) {
			return 0, fmt.Errorf("%s: index out of range (%d elements)", where, len(arr))
		}
		cur = arr[s.index]
	}
	var f float64
	switch v := cur.(type) {
	case float64:
		f = v
	case json.Number:
		var err error
		if f, err = v.Float64(); err != nil {
			return 0, fmt.Errorf("%s: %v", path, err)
		}
	default:
		return 0, fmt.Errorf("%s: expected a number, got %s", path, jsonKind(cur))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%s: expected a finite number >= 0, got %v", path, f)
	}
	return f, nil
}

func pathPrefix(steps []pathStep) string {
	var b strings.Builder
	for _, s := range steps {
		if s.index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	if b.Len() == 0 {
		return "(the document)"
	}
	return b.String()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/xrun-dev/xrun/results/atomicfile"
	"github.com/xrun-dev/xrun/results/layout"
)

// Marshal encodes r as results.json bytes in canonical form (see
// normalized): the same data always gives the same bytes. r itself is not
// modified.
func Marshal(r *Results) ([]byte, error) {
	n, err := normalized(r)
	if err != nil {
		return nil, err
	}
	return encode(n)
}

// encode writes an already normalized Results. Struct fields keep schema
// order, map keys are sorted by encoding/json, and the file ends with a
// newline so that git and editors leave it alone.
func encode(n *Results) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // error messages stay readable
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes r to path as results.json, atomically: a reader sees
// the old file or the new one, never a part.
func WriteFile(path string, r *Results) error {
	data, err := Marshal(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteBytes(path, data)
}

// WriteDir writes results.json and results.md into dir (created if
// needed). Both are rendered before either is written, so a rejected
// Results leaves the directory untouched.
func WriteDir(dir string, r *Results) error {
	n, err := normalized(r)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, layout.JSONFile), err)
	}
	data, err := encode(n)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := (markdownOutput{}).Render(&md, n, RenderOptions{}); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, layout.MarkdownFile), md.Bytes()); err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, layout.JSONFile), data)
}

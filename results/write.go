package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
	return writeAtomic(path, data)
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
	if err := writeAtomic(filepath.Join(dir, layout.MarkdownFile), md.Bytes()); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, layout.JSONFile), data)
}

// writeAtomic writes data to a temporary file beside path, syncs it and
// renames it over path, then syncs the directory so the rename survives a
// crash.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		// Not every filesystem can sync a directory; the data is safe
		// either way, only the rename's durability is at stake.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

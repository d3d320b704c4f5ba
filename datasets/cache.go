package datasets

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Cache keeps generated datasets under Dir, content addressed: a parameter
// set's file is <slug>-<key>.jsonl, where key hashes Params.Canonical, next
// to <file>.sha256 holding the SHA-256 of its contents in sha256sum's
// format (so `sha256sum -c` checks it too). A dataset is generated once and
// verified against its hash before every reuse; a missing, truncated or
// altered file is generated again.
type Cache struct {
	Dir string
}

// Entry describes a cached dataset.
type Entry struct {
	Path   string
	SHA256 string
	// Generated is true when this call wrote the file; Reason then says why
	// (missing, or what failed verification).
	Generated bool
	Reason    string
}

// FilePath is where p's dataset file is (or will be) kept; unlike Path it
// neither checks nor generates it.
func (c Cache) FilePath(p Params) string {
	return filepath.Join(c.Dir, p.Slug()+"-"+p.Key()+".jsonl")
}

// Path returns the path of p's dataset file, generating it if needed.
func (c Cache) Path(p Params) (string, error) {
	e, err := c.Ensure(p)
	return e.Path, err
}

// Ensure makes sure p's dataset is in the cache and intact, and describes it.
func (c Cache) Ensure(p Params) (Entry, error) {
	return c.EnsureContext(context.Background(), p)
}

// EnsureContext is Ensure, stopped when ctx ends: it then returns ctx's
// error (context.Canceled on an interrupt) promptly, even part-way through
// a large dataset. A generation that fails or is stopped leaves nothing in
// the cache: no partial file, no hash, and not the directories it created.
func (c Cache) EnsureContext(ctx context.Context, p Params) (e Entry, err error) {
	if err := p.Validate(); err != nil {
		return Entry{}, err
	}
	if c.Dir == "" {
		return Entry{}, fmt.Errorf("dataset cache: no directory given")
	}
	e = Entry{Path: c.FilePath(p)}
	sumPath := e.Path + ".sha256"

	sum, reason := verify(e.Path, sumPath)
	if reason == "" {
		e.SHA256 = sum
		return e, nil
	}
	e.Generated, e.Reason = true, reason
	if err := ctx.Err(); err != nil {
		return e, err
	}
	created := firstMissing(c.Dir)
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return e, fmt.Errorf("dataset cache: %w", err)
	}
	if created != "" {
		defer func() {
			if err != nil {
				// Only what this call created, and only if nothing else
				// was put there meanwhile (Remove fails on a non-empty
				// directory): the cache may be shared.
				removeEmptyUpTo(c.Dir, created)
			}
		}()
	}
	h := sha256.New()
	err = WriteFileAtomic(e.Path, func(w io.Writer) error {
		return WriteContext(ctx, io.MultiWriter(w, h), p)
	})
	if err != nil {
		return e, fmt.Errorf("dataset cache: writing %s: %w", e.Path, err)
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	err = WriteFileAtomic(sumPath, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s  %s\n", e.SHA256, filepath.Base(e.Path))
		return err
	})
	if err != nil {
		os.Remove(e.Path) // a file without its hash is not in the cache
		return e, fmt.Errorf("dataset cache: writing %s: %w", sumPath, err)
	}
	return e, nil
}

// firstMissing is the outermost directory of dir (dir itself or one of its
// parents) that does not exist yet, which os.MkdirAll(dir) would create;
// "" when dir exists.
func firstMissing(dir string) string {
	missing := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !os.IsNotExist(err) {
			return missing
		}
		missing = d
		if parent := filepath.Dir(d); parent == d {
			return missing
		}
	}
}

// removeEmptyUpTo removes dir and its parents up to and including top (one
// of them, as firstMissing returned it), as long as they are empty.
func removeEmptyUpTo(dir, top string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if os.Remove(d) != nil || d == top || filepath.Dir(d) == d {
			return
		}
	}
}

// verify hashes path and compares it with the sum recorded in sumPath. It
// returns the sum, or why the file cannot be reused.
func verify(path, sumPath string) (sum, reason string) {
	rec, err := os.ReadFile(sumPath)
	if err != nil {
		return "", "not cached yet"
	}
	want, _, _ := strings.Cut(string(bytes.TrimSpace(rec)), " ")
	if len(want) != sha256.Size*2 {
		return "", "hash file is malformed"
	}
	f, err := os.Open(path)
	if err != nil {
		return "", "dataset file is missing"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReaderSize(f, 1<<20)); err != nil {
		return "", fmt.Sprintf("reading it failed: %v", err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return "", "its contents do not match the recorded SHA-256 (corrupted)"
	}
	return got, ""
}

package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplaces: the new content replaces the old whole, readable by
// all, and nothing else is left in the directory.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new\n" {
		t.Errorf("file holds %q, want %q", got, "new\n")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", st.Mode().Perm(), err)
	}
	err := Write(filepath.Join(dir, "data.jsonl"), func(w io.Writer) error {
		for _, s := range []string{"a\n", "b\n"} {
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "data.jsonl")); string(got) != "a\nb\n" {
		t.Errorf("streamed file holds %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("directory holds %v; want results.json and data.jsonl only", entries)
	}
}

// TestWriteFailure: a writer that fails leaves the old file as it was and
// no temporary file behind, and its error comes back unwrapped.
func TestWriteFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return io.ErrUnexpectedEOF
	})
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Errorf("file became %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftover files: %v", entries)
	}
	// A directory that does not exist: nothing to create the file in.
	if err := WriteBytes(filepath.Join(dir, "missing", "f"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v; want ErrNotExist", err)
	}
}

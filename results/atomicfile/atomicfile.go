// Package atomicfile replaces files whole: what it writes goes to a
// temporary file beside the target, which is synced and renamed over it
// only when every write succeeded, so a reader (or a run resumed after
// kill -9) sees the old file or the new one, never a part, and a failed
// write leaves nothing behind. Every file xrun writes for others to read
// (results.json, a cell's records and artifacts, generated datasets, the
// Slurm scripts) goes through here.
//
// It lives under results/ beside the other leaves that the runner, the
// engine's profiler and drivers, and the datasets package all import, and
// has no dependencies beyond the standard library.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write streams a file into place: fn writes to a temporary file beside
// path, which is synced, made readable (0644) and renamed over path only
// if fn and every write succeeded. On any error the temporary file is
// removed and path is left as it was. Datasets can be hundreds of
// megabytes, hence a writer rather than a byte slice.
func Write(path string, fn func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = fn(f); err != nil {
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
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// Make the rename itself durable where the filesystem allows it; not
	// every one can sync a directory, and only the rename's durability is
	// at stake.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// WriteBytes replaces path with data, as Write does.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

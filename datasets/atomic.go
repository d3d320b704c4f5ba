package datasets

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic streams a file into place: fn writes to a temporary file
// beside path, which is synced and renamed over path only if fn and every
// write succeeded. On any error the temporary file is removed and path is
// left as it was, so a failed or interrupted generation never leaves a
// partial dataset behind. Datasets can be hundreds of megabytes, hence a
// writer rather than a byte slice.
func WriteFileAtomic(path string, fn func(io.Writer) error) (err error) {
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
	// Make the rename itself durable where the filesystem allows it.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

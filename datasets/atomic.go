package datasets

import (
	"io"

	"github.com/xrun-dev/xrun/results/atomicfile"
)

// WriteFileAtomic streams a file into place (atomicfile.Write): fn writes
// to a temporary file beside path, which is synced and renamed over path
// only if fn and every write succeeded. On any error the temporary file is
// removed and path is left as it was, so a failed or interrupted
// generation never leaves a partial dataset behind.
func WriteFileAtomic(path string, fn func(io.Writer) error) error {
	return atomicfile.Write(path, fn)
}

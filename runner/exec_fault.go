package runner

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// WriteFaultEnv names the environment variable (of the run, in
// Options.Env) that makes the run's writes of results.json fail as on a
// full disk. Like FaultEnv it exists for xrun's own tests and has no use in
// a study: "N" makes the N-th write of the results (1: the first, before any
// cell runs; then one after every cell and one at the end) and every later
// one fail with ENOSPC, so that a test sees what a full disk does without
// filling one.
const WriteFaultEnv = "XRUN_TEST_WRITE_FAULT"

// resultsWriter returns what writes the study's results: results.WriteDir,
// failing from the write WriteFaultEnv names on when it is set.
func resultsWriter(getenv func(string) string) (func(dir string, r *results.Results) error, error) {
	v := strings.TrimSpace(getenv(WriteFaultEnv))
	if v == "" {
		return results.WriteDir, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: expected the number (from 1) of the first results write to fail", WriteFaultEnv, v)
	}
	writes := 0
	return func(dir string, r *results.Results) error {
		if writes++; writes >= n {
			return &fs.PathError{Op: "write", Path: filepath.Join(dir, layout.JSONFile), Err: syscall.ENOSPC}
		}
		return results.WriteDir(dir, r)
	}, nil
}

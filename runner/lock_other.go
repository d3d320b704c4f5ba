//go:build !unix

package runner

import "os"

// Without flock(2) the directory is not locked: xrun runs studies on Linux;
// other systems only plan, report and diff.
func tryLock(*os.File) (bool, error) { return false, nil }

func unlock(*os.File) {}

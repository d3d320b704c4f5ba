//go:build !(cgo && linux)

package cenv

import (
	"errors"
	"os"
)

// Getenv is os.Getenv: without cgo there is no C environment apart.
func Getenv(name string) string { return os.Getenv(name) }

// Setenv sets name in the one environment there is.
func Setenv(name, v string) {
	if v == "" {
		os.Unsetenv(name)
		return
	}
	os.Setenv(name, v)
}

// Spawn needs libc's posix_spawn through cgo; without it there is none,
// and callers start the child with os/exec.
func Spawn(path string, argv, env []string, out *os.File, newGroup bool) (*os.Process, error) {
	return nil, errors.New("cenv: Spawn needs cgo on Linux")
}

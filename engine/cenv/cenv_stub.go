//go:build !(cgo && linux)

package cenv

import "os"

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

package cenv

import (
	"os"
	"testing"
)

// TestGetenvC: a variable set in the C environment only is found, and
// removing it there leaves Go's value (or none).
func TestGetenvC(t *testing.T) {
	const name = "XRUN_CENV_TEST"
	Setenv(name, "/opt/tool/libinjection.so")
	defer Setenv(name, "")
	if got := Getenv(name); got != "/opt/tool/libinjection.so" {
		t.Errorf("Getenv after Setenv = %q", got)
	}
	Setenv(name, "")
	if got := Getenv(name); got != os.Getenv(name) {
		t.Errorf("Getenv after removal = %q, Go's is %q", got, os.Getenv(name))
	}
}

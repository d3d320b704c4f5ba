//go:build cgo && linux

package cupti

import (
	"errors"
	"os"
	"testing"

	"github.com/xrun-dev/xrun/engine/cenv"
)

// TestInjectionPathC: a profiler's launcher that sets CUDA_INJECTION64_PATH
// in the C environment after exec (where os.Getenv cannot see it) still
// makes open step aside, so that the profiler, not xrun, holds CUPTI.
func TestInjectionPathC(t *testing.T) {
	if os.Getenv(injectionEnv) != "" {
		t.Skip("already under a profiler")
	}
	cenv.Setenv(injectionEnv, "/opt/tool/libinjection.so")
	defer cenv.Setenv(injectionEnv, "")
	if os.Getenv(injectionEnv) != "" {
		t.Fatal("os.Getenv saw the C-only variable: the test does not test the C environment")
	}
	if got := cenv.Getenv(injectionEnv); got != "/opt/tool/libinjection.so" {
		t.Errorf("cenv.Getenv(injectionEnv) = %q, want the C environment's value", got)
	}
	var ue *UnavailableError
	if _, err := open(); !errors.As(err, &ue) || !ue.StepAside {
		t.Errorf("open under an injected profiler: %v, want a step-aside UnavailableError", err)
	}
}

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStderrSummary(t *testing.T) {
	for _, c := range []struct{ name, stderr, want string }{
		{"empty", "", ""},
		{"panic", "some log\npanic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/x.go:5 +0x1d\nexit status 2\n",
			"panic: runtime error: index out of range [3] with length 3"},
		{"fatal", "fatal error: runtime: out of memory\n\nruntime stack:\n", "fatal error: runtime: out of memory"},
		{"xrun error", "{\"level\":\"info\"}\nxrun: cell x: recording it: disk full\n", "cell x: recording it: disk full"},
		{"last line", "first\nsecond\n\n", "second"},
		{"long", strings.Repeat("é", 500), strings.Repeat("é", 400) + "…"},
	} {
		p := filepath.Join(t.TempDir(), "stderr.log")
		os.WriteFile(p, []byte(c.stderr), 0o644)
		if got := stderrSummary(p); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := stderrSummary(filepath.Join(t.TempDir(), "missing")); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

//go:build cgo && linux

package cenv

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSpawn: the child gets its arguments and environment, writes stdout
// and stderr to the file given, reads an empty stdin, leads a process
// group of its own, and its exit status comes back through Wait.
func TestSpawn(t *testing.T) {
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	script := `echo "$1 $XR_SPAWN"; echo err >&2; cat; ps_pgid=$(cut -d' ' -f5 /proc/self/stat); [ "$ps_pgid" = "$$" ] && echo leader; exit 3`
	p, err := Spawn("/bin/sh", []string{"sh", "-c", script, "sh", "arg"}, []string{"XR_SPAWN=env", "PATH=/usr/bin:/bin"}, out, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode() != 3 {
		t.Errorf("exit status %d, want 3", st.ExitCode())
	}
	b, _ := os.ReadFile(out.Name())
	if got, want := string(b), "arg env\nerr\nleader\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if _, err := Spawn("/nonexistent/xr", []string{"xr"}, nil, nil, false); err == nil {
		t.Error("a missing program spawned")
	} else if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing program: %v, want ENOENT", err)
	}
}

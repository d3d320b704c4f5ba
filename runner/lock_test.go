package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	l, err := lockDir(dir, "xrun run study.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// flock(2) locks belong to open files, so a second open in this
	// process conflicts just as another process would.
	_, err = lockDir(dir, "xrun run other.yaml")
	var le *LockedError
	if !errors.As(err, &le) || !le.BadInput() {
		t.Fatalf("second lock: %v, want a *LockedError", err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "xrun run study.yaml", "--out"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	l.release()
	l2, err := lockDir(dir, "")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.release()
}

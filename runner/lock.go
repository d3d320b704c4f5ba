package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/results/layout"
)

// lockHolder is written into the lock file by the run that holds it, so a
// refused run can say who is in the way.
type lockHolder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"`
}

// LockedError says that another run holds a results directory. Two runs
// writing one directory would interleave their cells, so the second is
// refused; it is reported like bad usage (exit status 2), because the fix
// is the user's: wait, or choose another --out.
type LockedError struct {
	Dir    string
	Holder string // "pid 4242 on gpu-node-7, started 2026-03-01 02:00:00 UTC", or "" if unknown
}

func (e *LockedError) Error() string {
	who := "another xrun run"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("%s is in use by %s; wait for it to finish, or write elsewhere with --out", e.Dir, who)
}

// BadInput marks the refusal as the user's to resolve (exit status 2).
func (e *LockedError) BadInput() bool { return true }

// dirLock is the held lock of one results directory. The kernel releases
// it when the process ends, however it ends (kill -9 included), so a stale
// lock file never blocks the next run.
type dirLock struct {
	f *os.File
}

// lockDir creates dir/.xrun and takes dir/.xrun/lock without waiting.
func lockDir(dir, command string) (*dirLock, error) {
	state := filepath.Join(dir, layout.StateDir)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(state, layout.LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if held {
		f.Close()
		return nil, &LockedError{Dir: dir, Holder: readHolder(path)}
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockHolder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second), Command: command})
	// The lock is on the open file, not its contents: rewriting them is safe.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(b, '\n'), 0)
	}
	return &dirLock{f: f}, nil
}

// release gives the lock back; the file stays (its contents are history).
func (l *dirLock) release() {
	if l != nil && l.f != nil {
		unlock(l.f)
		l.f.Close()
		l.f = nil
	}
}

func readHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var h lockHolder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return ""
	}
	s := fmt.Sprintf("pid %d on %s, started %s", h.PID, h.Host, h.Started.Format("2006-01-02 15:04:05 MST"))
	if h.Command != "" {
		s += ": " + strings.TrimSpace(h.Command)
	}
	return s
}

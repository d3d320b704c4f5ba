package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultGrace is how long a tool asked to stop (SIGTERM to its process
// group) has before the group is killed. It is shorter than the runner's
// grace for the worker, so that the worker outlives its tools.
const DefaultGrace = 5 * time.Second

// ExecOptions adjust Exec.
type ExecOptions struct {
	// Env is the environment the command's own Env is added to.
	Env []string
	// Log receives everything the tool prints (stdout and stderr), as it
	// comes; LogPath names it in errors.
	Log     io.Writer
	LogPath string
	// Stdout, when set, also receives the tool's standard output alone
	// (for tools whose report is their output).
	Stdout io.Writer
	// Grace is DefaultGrace when 0.
	Grace time.Duration
	// Audit, when set, receives a line per command run (commands.jsonl).
	Audit *Audit
	// Pass is the pass the command belongs to (0-based; -1 for none), for
	// the audit.
	Pass int
}

// ToolError is a tool that did not succeed: not found, a non-zero exit,
// killed. Its message is the tool's own (the last lines it printed that
// say what went wrong) and where its whole output is.
type ToolError struct {
	Command Command
	// Status is the exit status; -1 when the tool was killed by a signal
	// or never started.
	Status int
	Signal string
	// Tail is what the tool last said about the failure.
	Tail string
	// Reason classifies what is recognised: "not found", "out of GPU
	// memory", "out of host memory", "stopped" (the cell was cancelled or
	// timed out).
	Reason  string
	LogPath string
	Err     error
}

func (e *ToolError) Error() string {
	name := "command"
	if len(e.Command.Argv) > 0 {
		name = filepath.Base(e.Command.Argv[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", name, e.Command.Stage)
	switch {
	case e.Reason == "not found":
		fmt.Fprintf(&b, ": %s: not found", e.Command.Argv[0])
		return b.String()
	case e.Reason == "stopped":
		b.WriteString(": stopped (the cell was interrupted or reached its timeout); its process group was killed")
	case e.Signal != "":
		fmt.Fprintf(&b, ": killed by %s", e.Signal)
	case e.Status >= 0:
		fmt.Fprintf(&b, ": exit status %d", e.Status)
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Reason != "" && e.Reason != "stopped" {
		b.WriteString(" (" + e.Reason + ")")
	}
	if e.Tail != "" {
		b.WriteString(": ")
		b.WriteString(e.Tail)
	}
	if e.LogPath != "" {
		b.WriteString(" [full output: " + e.LogPath + "]")
	}
	return b.String()
}

func (e *ToolError) Unwrap() error { return e.Err }

// Exec runs c and waits for it. The tool runs in a process group of its
// own; when ctx ends, the group gets SIGTERM and, Grace later, SIGKILL,
// and whatever the tool left running in its group is killed when it
// exits. A failure is a *ToolError.
func Exec(ctx context.Context, c Command, o ExecOptions) error {
	if len(c.Argv) == 0 {
		return &ToolError{Command: c, Status: -1, Err: errors.New("empty command")}
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	env := append(append([]string(nil), o.Env...), c.Env...)
	path, err := lookPath(c.Argv[0], c.Dir, env)
	if err != nil {
		e := &ToolError{Command: c, Status: -1, Reason: "not found", Err: err}
		o.Audit.record(c, o.Pass, time.Now(), 0, e)
		return e
	}
	cmd := exec.Command(path, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Dir = c.Dir
	cmd.Env = env
	tail := &tailBuffer{max: 64 << 10}
	var logw io.Writer = tail
	if o.Log != nil {
		logw = io.MultiWriter(o.Log, tail)
	}
	lw := &lockedWriter{w: logw}
	cmd.Stderr = lw
	cmd.Stdout = lw
	if o.Stdout != nil {
		cmd.Stdout = io.MultiWriter(lw, o.Stdout)
	}
	setGroup(cmd)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		e := &ToolError{Command: c, Status: -1, Err: err, LogPath: o.LogPath}
		o.Audit.record(c, o.Pass, t0, 0, e)
		return e
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			signalGroup(cmd.Process.Pid, false)
			select {
			case <-time.After(o.Grace):
				signalGroup(cmd.Process.Pid, true)
			case <-done:
			}
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	// Whatever the tool started and left behind goes with it.
	signalGroup(cmd.Process.Pid, true)
	elapsed := time.Since(t0)
	if err == nil && ctx.Err() == nil {
		o.Audit.record(c, o.Pass, t0, elapsed, nil)
		return nil
	}
	e := &ToolError{Command: c, Status: -1, LogPath: o.LogPath, Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.Status = ee.ExitCode()
		e.Signal = signalName(ee)
	}
	switch {
	case ctx.Err() != nil:
		e.Reason, e.Err = "stopped", ctx.Err()
	default:
		e.Tail, e.Reason = Diagnose(tail.Bytes())
		if e.Reason == "" && e.Signal == "SIGKILL" {
			e.Reason = "out of host memory?"
		}
	}
	o.Audit.record(c, o.Pass, t0, elapsed, e)
	return e
}

// lookPath finds a program as the shell would in the tool's own
// environment (its PATH, which a spec's env may set), names with a slash
// relative to dir.
func lookPath(name, dir string, env []string) (string, error) {
	isExe := func(p string) error {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", p)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := isExe(p); err != nil {
			return "", err
		}
		return p, nil
	}
	path, found := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path, found = v, true
		}
	}
	if !found {
		return exec.LookPath(name)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if p := filepath.Join(d, name); isExe(p) == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

var (
	oomGPU  = regexp.MustCompile(`(?i)cuda out of memory|outofmemoryerror|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|out of memory.*(gpu|cuda|device)|(gpu|cuda|device).*out of memory`)
	oomHost = regexp.MustCompile(`(?i)cannot allocate memory|std::bad_alloc|MemoryError|Killed$`)
	errLine = regexp.MustCompile(`(?i)(error|exception|failed|fatal|abort|traceback|out of memory)`)
)

// Diagnose picks, from a tool's last output, the lines that say what went
// wrong, and recognises running out of memory.
func Diagnose(out []byte) (tail, reason string) {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(stripANSI(l))
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", ""
	}
	for _, l := range lines {
		switch {
		case oomGPU.MatchString(l):
			reason = "out of GPU memory"
		case reason == "" && oomHost.MatchString(l):
			reason = "out of host memory"
		}
	}
	// The last line that names an error, or else the last line; a Python
	// traceback ends with the exception, which is the line people read.
	pick := lines[len(lines)-1]
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-40; i-- {
		if errLine.MatchString(lines[i]) && !strings.HasPrefix(lines[i], "File ") && lines[i] != "Traceback (most recent call last):" {
			pick = lines[i]
			break
		}
	}
	const most = 600
	if len(pick) > most {
		pick = pick[:most] + "…"
	}
	return pick, reason
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.max {
		return bytes.Clone(t.buf[len(t.buf)-t.max:])
	}
	return bytes.Clone(t.buf)
}

// lockedWriter serialises the tool's two streams into one log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Audit appends a JSON line per command run to a cell's commands.jsonl,
// so that what produced a cell's numbers can be read and rerun.
type Audit struct {
	mu   sync.Mutex
	Path string
}

type auditLine struct {
	Command
	Pass     int     `json:"pass"` // -1: not a pass (version, build, stats)
	Started  string  `json:"started"`
	Seconds  float64 `json:"seconds"`
	Status   int     `json:"status"`
	Error    string  `json:"error,omitempty"`
	ShellCmd string  `json:"shell"`
}

func (a *Audit) record(c Command, pass int, started time.Time, elapsed time.Duration, err *ToolError) {
	if a == nil || a.Path == "" {
		return
	}
	l := auditLine{Command: c, Pass: pass, Started: started.UTC().Format(time.RFC3339Nano), Seconds: elapsed.Seconds(), ShellCmd: c.String()}
	if err != nil {
		l.Status, l.Error = err.Status, err.Error()
	}
	b, mErr := json.Marshal(l)
	if mErr != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, oErr := os.OpenFile(a.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if oErr != nil {
		return
	}
	f.Write(append(b, '\n'))
	f.Close()
}

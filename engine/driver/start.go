package driver

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"time"
)

// Process is a tool that runs beside the passes rather than as one (an
// inference server a load generator talks to), started by Start in a
// process group of its own, as Exec runs tools.
type Process struct {
	Command Command
	cmd     *exec.Cmd
	o       ExecOptions
	tail    *tailBuffer
	started time.Time
	done    chan struct{}
	// exited is set once the tool has exited: nil only when Stop ended it.
	mu      sync.Mutex
	exited  error
	stopped bool
}

// Start starts c and returns at once; the tool runs until Stop, or until
// it exits by itself (Done closes, Exited says how).
func Start(c Command, o ExecOptions) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, &ToolError{Command: c, Status: -1, Err: errors.New("empty command")}
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	env := append(append([]string(nil), o.Env...), c.Env...)
	path, err := lookPath(c.Argv[0], c.Dir, env)
	if err != nil {
		e := &ToolError{Command: c, Status: -1, Reason: "not found", Err: err}
		o.Audit.record(c, o.Pass, time.Now(), 0, e)
		return nil, e
	}
	cmd := exec.Command(path, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Dir = c.Dir
	cmd.Env = env
	p := &Process{Command: c, cmd: cmd, o: o, tail: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	var logw = p.tail.Write
	if o.Log != nil {
		lw := &lockedWriter{w: o.Log}
		logw = func(b []byte) (int, error) {
			p.tail.Write(b)
			return lw.Write(b)
		}
	}
	w := writerFunc(logw)
	cmd.Stdout, cmd.Stderr = w, w
	setGroup(cmd)
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		e := &ToolError{Command: c, Status: -1, Err: err, LogPath: o.LogPath}
		o.Audit.record(c, o.Pass, p.started, 0, e)
		return nil, e
	}
	go p.wait()
	return p, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *Process) wait() {
	err := p.cmd.Wait()
	// Whatever the tool started and left behind goes with it.
	signalGroup(p.cmd.Process.Pid, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	e := &ToolError{Command: p.Command, Status: 0, LogPath: p.o.LogPath, Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.Status = ee.ExitCode()
		e.Signal = signalName(ee)
	}
	switch {
	case p.stopped:
		p.o.Audit.record(p.Command, p.o.Pass, p.started, time.Since(p.started), nil)
	default:
		e.Tail, e.Reason = Diagnose(p.tail.Bytes())
		if err == nil {
			// A server that exits with status 0 before it was asked to
			// still did not serve.
			e.Err = errors.New("exited")
		}
		p.exited = e
		p.o.Audit.record(p.Command, p.o.Pass, p.started, time.Since(p.started), e)
	}
	close(p.done)
}

// Done is closed once the tool has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited is how the tool ended by itself (a *ToolError with its last
// error line and where its output is); nil while it runs or once Stop
// ended it.
func (p *Process) Exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return nil
	}
	return p.exited
}

// Tail is the tool's last output, for a message.
func (p *Process) Tail() string {
	t, _ := Diagnose(p.tail.Bytes())
	return t
}

// Stop asks the tool's process group to end (SIGTERM), kills it after the
// grace period, and waits; ctx ending kills it at once.
func (p *Process) Stop(ctx context.Context) {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return
	default:
	}
	p.stopped = true
	p.mu.Unlock()
	signalGroup(p.cmd.Process.Pid, false)
	select {
	case <-p.done:
	case <-time.After(p.o.Grace):
		signalGroup(p.cmd.Process.Pid, true)
		<-p.done
	case <-ctx.Done():
		signalGroup(p.cmd.Process.Pid, true)
		<-p.done
	}
}

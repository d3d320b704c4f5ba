package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/layout"
)

// Session is what an external engine's passes over one cell share: the
// cell, the audit of every command (commands.jsonl), the distinct
// commands for the cell's record, and the count of timed passes.
type Session struct {
	Cell     *Cell
	Audit    *Audit
	commands []Command
	stages   map[string]bool
	timed    int
}

// NewSession prepares a cell's directory for its tools.
func NewSession(c *Cell) (*Session, error) {
	if err := os.MkdirAll(filepath.Join(c.Dir, layout.ToolDir), 0o755); err != nil {
		return nil, err
	}
	return &Session{Cell: c, Audit: &Audit{Path: filepath.Join(c.Dir, layout.CommandsFile)}, stages: map[string]bool{}}, nil
}

// Remember keeps the first command of each stage for the record.
func (s *Session) Remember(c Command) {
	if !s.stages[c.Stage] {
		s.stages[c.Stage] = true
		s.commands = append(s.commands, c)
	}
}

// Commands are the distinct commands run so far.
func (s *Session) Commands() []Command { return slices.Clone(s.commands) }

// PassDir is where pass n's files go (tool/pass-<n>); -1 is the profiled
// pass (tool/profiled).
func PassDir(c *Cell, n int) string {
	name := "pass-" + strconv.Itoa(n)
	if n < 0 {
		name = "profiled"
	}
	return filepath.Join(c.Dir, layout.ToolDir, name)
}

// Pass is one pass about to run.
type Pass struct {
	// N counts the timed passes from 0; the profiled pass has the next
	// number but its own directory.
	N        int
	Profiled bool
	Dir      string // empty, made for this pass
}

// NextPass makes the next pass's directory afresh.
func (s *Session) NextPass(profiled bool) (Pass, error) {
	p := Pass{N: s.timed, Profiled: profiled}
	if profiled {
		p.Dir = PassDir(s.Cell, -1)
	} else {
		p.Dir = PassDir(s.Cell, s.timed)
		s.timed++
	}
	if err := os.RemoveAll(p.Dir); err != nil {
		return p, err
	}
	return p, os.MkdirAll(p.Dir, 0o755)
}

// Run runs a pass's command, its output logged in the pass's
// output.log; a failure is the tool's own (*ToolError).
func (s *Session) Run(ctx context.Context, p Pass, c Command) error {
	s.Remember(c)
	logPath := filepath.Join(p.Dir, "output.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	return Exec(ctx, c, ExecOptions{Env: s.Cell.Env, Log: logf, LogPath: logPath, Audit: s.Audit, Pass: p.N})
}

// PassSteps are what differs between drivers in a pass: the command, how
// its output becomes the result's records and metrics, and how the
// profiled pass's profile is collected.
type PassSteps struct {
	Backend string
	Command func(Pass) Command
	Read    func(*engine.Result, Pass) error
	Collect func(context.Context, *engine.Result, Pass) error
}

// RunPass runs one pass: a timed one, or the profiled one. A profiled
// pass is read for its profile; its numbers are never reported, so output
// it lacks is only noted.
func (s *Session) RunPass(ctx context.Context, profiled bool, st PassSteps) (*engine.Result, error) {
	pass, err := s.NextPass(profiled)
	if err != nil {
		return nil, err
	}
	if err := s.Run(ctx, pass, st.Command(pass)); err != nil {
		return nil, err
	}
	res := &engine.Result{Backend: st.Backend, MaxInFlight: s.Cell.Engine.BatchSize}
	if err := st.Read(res, pass); err != nil {
		if !profiled {
			return nil, err
		}
		res.Notes = append(res.Notes, "the profiled pass's own numbers are missing: "+err.Error())
	}
	if profiled {
		res.Windows = MarkWindow(res.Iterations, s.Cell.Engine.ProfileWindow)
		if err := st.Collect(ctx, res, pass); err != nil {
			return nil, err
		}
	}
	return res, nil
}

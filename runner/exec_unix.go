//go:build unix

package runner

import (
	"os"
	"syscall"
)

// signalGroup sends SIGTERM (or SIGKILL when hard) to the worker's process
// group.
func signalGroup(p *os.Process, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		_ = p.Signal(sig)
	}
}

// killedOutright reports whether the process died of SIGKILL.
func killedOutright(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

//go:build unix

package runner

import (
	"os"
	"os/exec"
	"syscall"
)

// signalGroup sends SIGTERM (or SIGKILL when hard) to the worker's process
// group.
func signalGroup(cmd *exec.Cmd, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// killedOutright reports whether the process died of SIGKILL.
func killedOutright(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

//go:build unix

package driver

import (
	"os/exec"
	"syscall"
)

// signalGroup sends SIGTERM (or SIGKILL) to the process group pid leads.
func signalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}

func signalName(ee *exec.ExitError) string {
	var ws syscall.WaitStatus
	if s, ok := ee.Sys().(syscall.WaitStatus); ok {
		ws = s
	} else {
		return ""
	}
	if !ws.Signaled() {
		return ""
	}
	switch ws.Signal() {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	}
	return ws.Signal().String()
}

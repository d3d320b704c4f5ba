//go:build linux

package driver

import (
	"os/exec"
	"syscall"
)

// setGroup starts the tool in a process group of its own, and kills it
// should the worker die first.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

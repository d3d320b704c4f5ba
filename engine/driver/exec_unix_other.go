//go:build unix && !linux

package driver

import (
	"os/exec"
	"syscall"
)

// setGroup starts the tool in a process group of its own.
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

//go:build unix && !linux

package runner

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the worker in its own process group (see the Linux
// version; other systems have no parent-death signal).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

package runner

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the worker in its own process group, so that a Ctrl-C
// on the terminal reaches only xrun, which stops the worker itself, and
// has the kernel kill it if xrun dies (kill -9 included), so no orphan
// goes on measuring a cell that a resumed run measures again.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

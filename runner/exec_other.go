//go:build !unix

package runner

import (
	"os"
	"os/exec"
)

func setProcAttrs(*exec.Cmd) {}

// Without process groups and signals, stopping a worker means killing it.
func signalGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }

func killedOutright(*os.ProcessState) bool { return false }

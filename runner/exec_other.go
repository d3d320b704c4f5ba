//go:build !unix

package runner

import (
	"os"
	"os/exec"
)

func setProcAttrs(*exec.Cmd) {}

// Without process groups and signals, stopping a worker means killing it.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }

func killedOutright(*os.ProcessState) bool { return false }

//go:build !unix

package driver

import (
	"os"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

// signalGroup can only kill the tool itself here.
func signalGroup(pid int, _ bool) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func signalName(*exec.ExitError) string { return "" }

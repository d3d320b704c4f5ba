package runner

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// FaultEnv names the environment variable that makes workers fail on
// purpose. It exists for xrun's own tests of failure isolation and has no
// use in a study: "PREFIX:KIND", or several separated by commas, makes the
// worker of every cell whose id starts with PREFIX, once its engine is
// ready, do KIND:
//
//	error  fail with an error, as a CUDA error or an out-of-memory would
//	crash  panic (the process dies, its stack on stderr)
//	hang   stop making progress, deaf to SIGTERM, as a hung driver does
//	kill   SIGKILL itself, as the kernel's out-of-memory killer would
const FaultEnv = "XRUN_TEST_FAULT"

// faultFor returns the fault the variable's value asks of cell id, or "".
func faultFor(value, id string) string {
	for _, f := range strings.Split(value, ",") {
		prefix, kind, ok := strings.Cut(strings.TrimSpace(f), ":")
		if ok && strings.HasPrefix(id, prefix) {
			return kind
		}
	}
	return ""
}

// injectFault does what a fault asks; for "" it does nothing.
func injectFault(kind string) error {
	switch kind {
	case "":
		return nil
	case "error":
		return errors.New("injected error (" + FaultEnv + ")")
	case "crash":
		panic("xrun test fault: injected crash")
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "kill":
		p, err := os.FindProcess(os.Getpid())
		if err == nil {
			err = p.Kill()
		}
		time.Sleep(time.Minute) // the signal is on its way
		return err
	}
	return fmt.Errorf("%s: unknown fault %q; expected error, crash, hang or kill", FaultEnv, kind)
}

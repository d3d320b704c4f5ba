package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// FaultEnv names the environment variable that makes workers fail on
// purpose. It exists for xrun's own tests of failure isolation and resume
// and has no use in a study: "PREFIX:KIND" or "PREFIX:KIND@POINT", or
// several separated by commas, makes the worker of every cell whose id
// starts with PREFIX do KIND at POINT:
//
//	error  fail with an error, as a CUDA error or an out-of-memory would
//	crash  panic (the process dies, its stack on stderr)
//	hang   stop making progress, deaf to SIGTERM, as a hung driver does
//	kill   SIGKILL itself, as the kernel's out-of-memory killer would
//	slow   go on until interrupted, as a long repeat does (SIGTERM or a
//	       cancelled context stops it, and the worker with it)
//	took=DUR  (no POINT) every pass takes DUR longer on the worker's
//	       clock, which the time limit and the repeats' records read
//
// POINT is when: absent once the engine is ready; rN once repeat N (from
// 1) is recorded; profile before the profiled pass; write-rN half-way
// through writing repeat N's record, before the rename that commits it.
const FaultEnv = "XRUN_TEST_FAULT"

// faultFor returns the fault the variable's value asks of cell id
// ("KIND" or "KIND@POINT"), or "".
func faultFor(value, id string) string {
	for _, f := range strings.Split(value, ",") {
		prefix, kind, ok := strings.Cut(strings.TrimSpace(f), ":")
		if ok && strings.HasPrefix(id, prefix) {
			return kind
		}
	}
	return ""
}

// faultAt returns the kind of fault (as faultFor gives it) to inject at
// point, or "".
func faultAt(fault, point string) string {
	kind, at, _ := strings.Cut(fault, "@")
	if fault == "" || at != point {
		return ""
	}
	return kind
}

// injectFault does what a fault asks; for "" it does nothing.
func injectFault(ctx context.Context, kind string) error {
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
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	}
	return fmt.Errorf("%s: unknown fault %q; expected error, crash, hang, kill or slow", FaultEnv, kind)
}

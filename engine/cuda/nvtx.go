//go:build cgo && linux

package cuda

/*
#include <stdlib.h>
#include "nvtx.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xrun-dev/xrun/engine/cenv"
)

// NVTXInjectionEnv names the variable through which a profiler (Nsight
// Systems, Nsight Compute) hands NVTX its tool library.
const NVTXInjectionEnv = "NVTX_INJECTION64_PATH"

// NVTX state: nvtxOn only once a tool accepted the attach. The fast path of
// every call is one atomic load of it.
const (
	nvtxFresh uint32 = iota
	nvtxOn
	nvtxOff
)

var (
	nvtxState atomic.Uint32
	nvtxOnce  sync.Once
	nvtxErr   error
)

// NVTXEnabled reports whether an NVTX tool is attached. The first call
// (from any of the NVTX functions) attaches the one NVTXInjectionEnv names,
// once per process; with the variable unset nothing is loaded. After that
// it costs one atomic load.
func NVTXEnabled() bool {
	if s := nvtxState.Load(); s != nvtxFresh {
		return s == nvtxOn
	}
	return nvtxFirstUse()
}

// nvtxFirstUse is NVTXEnabled's slow path, kept apart so that the fast one
// inlines into its callers.
func nvtxFirstUse() bool {
	nvtxOnce.Do(nvtxAttach)
	return nvtxState.Load() == nvtxOn
}

// NVTXError says why the tool NVTXInjectionEnv names is not attached (it
// did not load, lacks the entry point, or refused), nil when it is attached
// or none was asked for. NVTX then stays off for the process.
func NVTXError() error {
	NVTXEnabled()
	return nvtxErr
}

func nvtxAttach() {
	state := nvtxOff
	defer func() { nvtxState.Store(state) }()
	path := cenv.Getenv(NVTXInjectionEnv) // where a launcher may set it after exec
	if path == "" {
		return
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	switch rc := C.xr_nvtx_attach(cpath, &msg[0], C.size_t(len(msg))); rc {
	case C.XR_NVTX_ATTACHED:
		state = nvtxOn
	case C.XR_NVTX_DLOPEN_FAILED:
		nvtxErr = fmt.Errorf("NVTX off: loading the tool library %s=%s: %s", NVTXInjectionEnv, path, C.GoString(&msg[0]))
	case C.XR_NVTX_NO_ENTRY:
		nvtxErr = fmt.Errorf("NVTX off: the tool library %s=%s has no InitializeInjectionNvtx2", NVTXInjectionEnv, path)
	case C.XR_NVTX_INIT_FAILED:
		nvtxErr = fmt.Errorf("NVTX off: the tool library %s=%s refused to attach (InitializeInjectionNvtx2 returned 0)", NVTXInjectionEnv, path)
	default:
		nvtxErr = fmt.Errorf("NVTX off: attaching %s=%s: status %d", NVTXInjectionEnv, path, int(rc))
	}
}

// RangePush opens a range named msg on the calling OS thread, nested in any
// open one. NVTX keeps one range stack per thread, so the matching RangePop
// must run on the same thread: from Go, a locked thread such as a GPU's
// (Device.Do, Device.Post). Without a tool it is one atomic load and
// allocates nothing; with one, msg is copied to add the terminating NUL.
func RangePush(msg string) {
	// Only a fresh or attached state goes further; the body stays small
	// enough to inline.
	if nvtxState.Load() != nvtxOff {
		nvtxPush(msg)
	}
}

// RangePop closes the calling thread's innermost range.
func RangePop() {
	if nvtxState.Load() != nvtxOff {
		nvtxPop()
	}
}

func nvtxPush(msg string) {
	if NVTXEnabled() {
		// The string's bytes hold no Go pointers, so C may read them for
		// the call's duration.
		C.xr_nvtx_push((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
	}
}

func nvtxPop() {
	if NVTXEnabled() {
		C.xr_nvtx_pop()
	}
}

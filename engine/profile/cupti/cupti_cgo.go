//go:build cgo && linux

package cupti

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// errMultipleSubscribers is CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.
const errMultipleSubscribers = 39

// libraryCandidates are tried in order: XRUN_LIBCUPTI, the sonames through
// the loader's search, then the CUDA toolkit's folders (libcupti is not in
// the loader cache everywhere; some toolkits keep it under extras/CUPTI).
func libraryCandidates() []string {
	sonames := []string{"libcupti.so.13", "libcupti.so.12"}
	var out []string
	if p := os.Getenv("XRUN_LIBCUPTI"); p != "" {
		out = append(out, p)
	}
	out = append(out, sonames...)
	triple := map[string]string{"amd64": "x86_64-linux", "arm64": "sbsa-linux"}[runtime.GOARCH]
	var roots []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if r := os.Getenv(env); r != "" {
			roots = append(roots, r)
		}
	}
	roots = append(roots, "/usr/local/cuda")
	for _, so := range sonames {
		for _, r := range roots {
			out = append(out, filepath.Join(r, "targets", triple, "lib", so), filepath.Join(r, "extras", "CUPTI", "lib64", so), filepath.Join(r, "lib64", so))
		}
	}
	return out
}

func loadBackend() (backend, error) {
	var tried []string
	loaded := false
	for _, path := range libraryCandidates() {
		cpath := C.CString(path)
		var buf [512]C.char
		rc := C.xc_load(cpath, &buf[0], C.size_t(len(buf)))
		C.free(unsafe.Pointer(cpath))
		if rc == C.XC_OK {
			loaded = true
			break
		}
		tried = append(tried, C.GoString(&buf[0]))
		if rc == C.XC_SYMBOL_MISSING {
			break
		}
	}
	if !loaded {
		return nil, &UnavailableError{Reason: fmt.Sprintf("libcupti.so.13 or .12 not found in the loader's path, CUDA_HOME or /usr/local/cuda (%d paths tried; set XRUN_LIBCUPTI to its path): %s",
			len(tried), tried[0])}
	}
	if rc := C.xc_subscribe(); rc != 0 {
		name := C.GoString(C.xc_result_string(rc))
		if rc == errMultipleSubscribers || strings.Contains(name, "MULTIPLE_SUBSCRIBERS") {
			return nil, &UnavailableError{StepAside: true,
				Reason: "another profiler holds CUPTI (cuptiSubscribe: " + name + "); xrun steps aside and that profiler records the window (cuProfilerStart/Stop)"}
		}
		return nil, &UnavailableError{Reason: fmt.Sprintf("cuptiSubscribe: %s (%d)", name, int(rc))}
	}
	if rc := C.xc_register(); rc != 0 {
		C.xc_unsubscribe()
		return nil, &UnavailableError{Reason: fmt.Sprintf("cuptiActivityRegisterCallbacks: %s (%d)", C.GoString(C.xc_result_string(rc)), int(rc))}
	}
	return lib{}, nil
}

// lib is CUPTI through the shim.
type lib struct{}

func check(call string, rc C.CUptiResult) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (%d)", call, C.GoString(C.xc_result_string(rc)), int(rc))
}

func (lib) version() uint32 {
	var v C.uint32_t
	if C.xc_get_version(&v) != 0 {
		return 0
	}
	return uint32(v)
}

func (lib) timestamp() uint64 {
	var t C.uint64_t
	C.xc_timestamp(&t)
	return uint64(t)
}

func (lib) enable(kind uint32) error {
	return check(fmt.Sprintf("cuptiActivityEnable(kind %d)", kind), C.xc_enable(C.int(kind)))
}

func (lib) disable(kind uint32) error {
	return check(fmt.Sprintf("cuptiActivityDisable(kind %d)", kind), C.xc_disable(C.int(kind)))
}

func (lib) flush() error { return check("cuptiActivityFlushAll", C.xc_flush()) }

// maxRecord bounds the bytes handed to the parser: more than any field it
// reads, never past the buffer's valid bytes.
const maxRecord = 256

func (lib) records(fn func(rec []byte)) error {
	for b := C.xc_take(); b != nil; {
		var rec *C.uint8_t
		base := uintptr(unsafe.Pointer(b.data))
		for C.xc_next(b.data, b.valid, &rec) == 0 {
			off := uintptr(unsafe.Pointer(rec)) - base
			n := min(uintptr(b.valid)-off, maxRecord)
			fn(unsafe.Slice((*byte)(unsafe.Pointer(rec)), n))
		}
		next := b.next
		C.xc_free(b)
		b = next
	}
	return nil
}

func (lib) name(p uint64) string {
	if p == 0 {
		return ""
	}
	return C.GoString(C.xc_name(C.uint64_t(p)))
}

func (lib) dropped() uint64 { return uint64(C.xc_dropped()) + uint64(C.xc_buffers_failed()) }

func (lib) close() { C.xc_unsubscribe() }

//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
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
	"sync"
	"unsafe"
)

// Library identifiers for xr_lib_path.
const (
	libDriver = 0
	libBlasLt = 1
	libNVRTC  = 2
)

// libSearchDirs are the folders tried, in order, after the loader's own
// search (LD_LIBRARY_PATH, /etc/ld.so.cache, /lib, /usr/lib) failed for a
// bare soname: containers often mount the driver or the toolkit in places
// the loader cache does not list.
func libSearchDirs() []string {
	triple := map[string]string{"amd64": "x86_64-linux", "arm64": "sbsa-linux"}[runtime.GOARCH]
	gnu := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "targets", triple, "lib"))
		}
	}
	dirs = append(dirs,
		"/usr/local/nvidia/lib64",
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/"+triple+"/lib",
		"/usr/lib/"+gnu,
		"/usr/lib64",
		"/usr/lib/wsl/lib",
	)
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

type loadFunc func(path string) (rc int, msg string)

// loadLibrary tries each soname first through the loader's search, then in
// each search folder, and stops at the first that loads.
// An environment variable naming a file puts that file first: for a
// toolkit installed somewhere unusual, or an older NVRTC used only to check
// that the kernels compile.
func loadLibrary(role, env string, sonames []string, load loadFunc) error {
	le := &LoadError{Library: strings.Join(sonames, " or "), Role: role}
	var candidates []string
	if p := os.Getenv(env); p != "" {
		candidates = append(candidates, p)
	}
	for _, so := range sonames {
		candidates = append(candidates, so)
	}
	for _, so := range sonames {
		for _, d := range libSearchDirs() {
			candidates = append(candidates, filepath.Join(d, so))
		}
	}
	for _, path := range candidates {
		rc, msg := load(path)
		msg = strings.TrimPrefix(msg, path+": ") // dlerror repeats the path
		switch rc {
		case int(C.XR_OK):
			return nil
		case int(C.XR_DLOPEN_FAILED):
			if !strings.Contains(path, "/") {
				path += " (loader search: LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib)"
			}
			le.Tried = append(le.Tried, Attempt{Path: path, Err: msg})
		default:
			// Found but unusable: looking further would only find the same
			// driver through another link.
			le.Tried = append(le.Tried, Attempt{Path: path, Err: "loaded"})
			le.Reason = msg
			return le
		}
	}
	return le
}

func callLoader(f func(path *C.char, err *C.char, n C.size_t) C.int) loadFunc {
	return func(path string) (int, string) {
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		var buf [1024]C.char
		rc := f(cpath, &buf[0], C.size_t(len(buf)))
		return int(rc), C.GoString(&buf[0])
	}
}

var (
	driverOnce sync.Once
	driverErr  error
	ltOnce     sync.Once
	ltErr      error
	nvrtcOnce  sync.Once
	nvrtcErr   error
)

// loadDriver opens libcuda.so.1 and resolves its entry points at the CUDA 13
// API version. It does not call cuInit.
func loadDriver() error {
	driverOnce.Do(func() {
		driverErr = loadLibrary("the NVIDIA driver's CUDA library; is an NVIDIA driver installed?", "XRUN_LIBCUDA",
			[]string{"libcuda.so.1"},
			callLoader(func(p, e *C.char, n C.size_t) C.int { return C.xr_load_cuda(p, e, n) }))
	})
	return driverErr
}

func loadBlasLt() error {
	ltOnce.Do(func() {
		ltErr = loadLibrary("cuBLASLt from the CUDA toolkit, used for gemm_plugin auto", "XRUN_LIBCUBLASLT",
			[]string{"libcublasLt.so.13", "libcublasLt.so.12"},
			callLoader(func(p, e *C.char, n C.size_t) C.int { return C.xr_load_cublaslt(p, e, n) }))
	})
	return ltErr
}

func loadNVRTC() error {
	nvrtcOnce.Do(func() {
		nvrtcErr = loadLibrary("NVRTC from the CUDA toolkit, which compiles xrun's kernels", "XRUN_LIBNVRTC",
			[]string{"libnvrtc.so.13", "libnvrtc.so.12"},
			callLoader(func(p, e *C.char, n C.size_t) C.int { return C.xr_load_nvrtc(p, e, n) }))
	})
	return nvrtcErr
}

// libPath is the file a loaded library came from, symbolic links resolved
// (so libcuda.so.1 shows the driver version in its name).
func libPath(which int) string {
	var buf [4096]C.char
	C.xr_lib_path(C.int(which), &buf[0], C.size_t(len(buf)))
	p := C.GoString(&buf[0])
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// cuErr turns a CUresult into a Go error naming the call.
func cuErr(call string, rc C.CUresult) error {
	if rc == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(rc), Name: "CUDA_ERROR_UNKNOWN_CODE"}
	var s *C.char
	if C.xr_cuGetErrorName(rc, &s) == 0 && s != nil {
		e.Name = C.GoString(s)
	}
	if C.xr_cuGetErrorString(rc, &s) == 0 && s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

// cuErrf is cuErr with a description of what the call was asked.
func cuErrf(call string, rc C.CUresult, format string, args ...any) error {
	err := cuErr(call, rc)
	if err != nil {
		err.(*Error).Detail = fmt.Sprintf(format, args...)
	}
	return err
}

// ltErr turns a cublasStatus_t into a Go error naming the call.
func blasErr(call string, st C.cublasStatus_t, detail string) error {
	if st == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(st), Detail: detail}
	if s := C.xr_cublasLtGetStatusName(st); s != nil {
		e.Name = C.GoString(s)
	} else if n, ok := cublasStatusNames[int(st)]; ok {
		e.Name = n
	} else {
		e.Name = "CUBLAS_STATUS_UNKNOWN"
	}
	if s := C.xr_cublasLtGetStatusString(st); s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

// nvrtcErrf turns an nvrtcResult into a Go error naming the call.
func nvrtcErrf(call string, r C.nvrtcResult, detail string) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: C.GoString(C.xr_nvrtcGetErrorString(r)), Detail: detail}
}

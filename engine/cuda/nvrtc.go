//go:build cgo && linux

package cuda

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"
)

// nvrtcVersion is the loaded NVRTC's version; part of the cache key, since a
// newer compiler may emit different code for the same source.
func nvrtcVersion() string {
	v := nvrtcVersionNum()
	return fmt.Sprintf("%d.%d", v/100, v%100)
}

// nvrtcVersionNum is the loaded NVRTC's version as major * 100 + minor,
// as common.cuh's XR_CUDA_VER.
func nvrtcVersionNum() int {
	var maj, min C.int
	C.xr_nvrtcVersion(&maj, &min)
	return int(maj)*100 + int(min)
}

// kernelOptions are the NVRTC options every kernel is compiled with, besides
// the architecture. -lineinfo costs nothing at run time and lets profilers
// map time to source lines.
var kernelOptions = []string{"-std=c++17", "-lineinfo", "--fmad=true"}

// archOptions are the NVRTC options for one target architecture.
func archOptions(arch string) []string {
	return append([]string{"--gpu-architecture=" + arch}, kernelOptions...)
}

// cacheKey is sha256 over everything that decides the compiled code.
func cacheKey(src string, headers map[string]string, opts []string, arch, compiler string) string {
	h := sha256.New()
	fmt.Fprintf(h, "nvrtc %s\x00arch %s\x00", compiler, arch)
	for _, o := range opts {
		fmt.Fprintf(h, "opt %s\x00", o)
	}
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "header %s %d\x00%s", n, len(headers[n]), headers[n])
	}
	fmt.Fprintf(h, "source %d\x00%s", len(src), src)
	return hex.EncodeToString(h.Sum(nil))
}

// compileCached returns the cubin for src, from the disk cache when present.
func (g *GPU) compileCached(name, src string, headers map[string]string) ([]byte, string, error) {
	if err := loadNVRTC(); err != nil {
		return nil, "", err
	}
	arch := g.Info.Arch()
	opts := archOptions(arch)
	key := cacheKey(src, headers, opts, arch, nvrtcVersion())
	path := ""
	if g.cacheDir != "" {
		path = filepath.Join(g.cacheDir, key+".cubin")
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, path, nil
		}
	}
	cubin, err := nvrtcCompile(name, src, headers, opts)
	if err != nil {
		return nil, "", err
	}
	if path != "" {
		// A cache that cannot be written only costs a recompile next time.
		_ = writeAtomic(path, cubin)
	}
	return cubin, path, nil
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %v %v", path, werr, cerr)
	}
	return os.Rename(f.Name(), path)
}

// nvrtcCompile compiles one translation unit to a cubin for the options'
// architecture. Headers are passed by name, so no include path is needed.
func nvrtcCompile(name, src string, headers map[string]string, opts []string) ([]byte, error) {
	cubin, _, err := nvrtcCompileLog(name, src, headers, opts)
	return cubin, err
}

// nvrtcCompileLog is nvrtcCompile returning the compiler's log as well.
func nvrtcCompileLog(name, src string, headers map[string]string, opts []string) ([]byte, string, error) {
	cstrs := []*C.char{}
	cstr := func(s string) *C.char {
		p := C.CString(s)
		cstrs = append(cstrs, p)
		return p
	}
	defer func() {
		for _, p := range cstrs {
			C.free(unsafe.Pointer(p))
		}
	}()
	// The arrays of C strings live in C memory: cgo forbids passing Go
	// memory that holds pointers.
	arr := func(ss []string) **C.char {
		if len(ss) == 0 {
			return nil
		}
		a := (*[1 << 20]*C.char)(C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		cstrs = append(cstrs, (*C.char)(unsafe.Pointer(a)))
		for i, s := range ss {
			a[i] = cstr(s)
		}
		return &a[0]
	}
	var hnames, hsrcs []string
	for n, s := range headers {
		hnames = append(hnames, n)
		hsrcs = append(hsrcs, s)
	}
	var prog C.nvrtcProgram
	if err := nvrtcErrf("nvrtcCreateProgram", C.xr_nvrtcCreateProgram(&prog, cstr(src), cstr(name),
		C.int(len(headers)), arr(hsrcs), arr(hnames)), name); err != nil {
		return nil, "", err
	}
	defer C.xr_nvrtcDestroyProgram(&prog)
	rc := C.xr_nvrtcCompileProgram(prog, C.int(len(opts)), arr(opts))
	if rc != 0 {
		return nil, "", nvrtcErrf("nvrtcCompileProgram", rc, fmt.Sprintf("%s with %s\n%s", name, strings.Join(opts, " "), programLog(prog)))
	}
	var n C.size_t
	if err := nvrtcErrf("nvrtcGetCUBINSize", C.xr_nvrtcGetCUBINSize(prog, &n), name); err != nil {
		return nil, "", err
	}
	if n == 0 {
		return nil, programLog(prog), nil // a virtual architecture (compute_XX): PTX only, no cubin
	}
	cubin := make([]byte, int(n))
	if err := nvrtcErrf("nvrtcGetCUBIN", C.xr_nvrtcGetCUBIN(prog, (*C.char)(unsafe.Pointer(&cubin[0]))), name); err != nil {
		return nil, "", err
	}
	return cubin, programLog(prog), nil
}

func programLog(prog C.nvrtcProgram) string {
	var n C.size_t
	if C.xr_nvrtcGetProgramLogSize(prog, &n) != 0 || n <= 1 {
		return "(no compiler log)"
	}
	buf := make([]byte, int(n))
	if C.xr_nvrtcGetProgramLog(prog, (*C.char)(unsafe.Pointer(&buf[0]))) != 0 {
		return "(compiler log unavailable)"
	}
	return strings.TrimRight(string(buf), "\x00\n")
}

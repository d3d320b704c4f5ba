//go:build cgo && linux

package cenv

/*
#include <stdlib.h>
*/
import "C"

import (
	"os"
	"unsafe"
)

// Getenv is the C environment's value of name, else Go's.
func Getenv(name string) string {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	if v := C.getenv(cn); v != nil {
		return C.GoString(v)
	}
	return os.Getenv(name)
}

// Setenv sets name to v (an empty v removes it) in the C environment only,
// as a launcher's preloaded library does; tests stand in for one with it.
func Setenv(name, v string) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	if v == "" {
		C.unsetenv(cn)
		return
	}
	cv := C.CString(v)
	defer C.free(unsafe.Pointer(cv))
	C.setenv(cn, cv, 1)
}

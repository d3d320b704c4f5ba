//go:build cgo && linux

// The NVTX side of the shim: xrun speaks NVTX v3's tool-attachment protocol
// itself instead of including NVIDIA's header-only library, so building
// still needs no CUDA or NVTX header. Only what xrun emits is exposed: a
// tool is loaded from the path the caller read from NVTX_INJECTION64_PATH,
// and ranges are pushed and popped on the calling thread.

#ifndef XRUN_CUDA_NVTX_H
#define XRUN_CUDA_NVTX_H

#include <stddef.h>

// Outcome of xr_nvtx_attach.
enum {
	XR_NVTX_ATTACHED = 0,
	XR_NVTX_DLOPEN_FAILED = 1, // err holds dlerror()
	XR_NVTX_NO_ENTRY = 2,      // the library lacks InitializeInjectionNvtx2
	XR_NVTX_INIT_FAILED = 3,   // InitializeInjectionNvtx2 returned 0; unloaded
	XR_NVTX_AGAIN = 4,         // called twice: the tool attaches once
};

// xr_nvtx_attach loads the injection library at path and lets it fill the
// core module's callback slots. Call it at most once per process.
int xr_nvtx_attach(const char *path, char *err, size_t errlen);

// xr_nvtx_push opens a range named by msg[0:n] (not NUL-terminated) on the
// calling thread; xr_nvtx_pop closes that thread's innermost one. Both do
// nothing when the tool left the slot empty.
void xr_nvtx_push(const char *msg, size_t n);
void xr_nvtx_pop(void);

#endif

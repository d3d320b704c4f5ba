//go:build cgo && linux

// The C side of the CUPTI shim. libcupti is opened with dlopen at run time:
// only the few types and prototypes used are declared here, by hand, from
// the CUPTI documentation (cupti_activity.h, cupti_callbacks.h).

#ifndef XRUN_CUPTI_SHIM_H
#define XRUN_CUPTI_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUptiResult;
typedef struct CUctx_st *CUcontext;

// Loader results.
enum { XC_OK = 0, XC_DLOPEN_FAILED = 1, XC_SYMBOL_MISSING = 2 };

// xc_load opens libcupti at path and resolves every entry point; on failure
// err holds dlerror()'s text or the missing symbol.
int xc_load(const char *path, char *err, size_t errlen);

CUptiResult xc_get_version(uint32_t *version);
const char *xc_result_string(CUptiResult r);
// xc_subscribe claims CUPTI's single subscriber slot with a callback that
// does nothing: a second profiler (nsys, ncu) already holding it makes this
// fail, which is how xrun knows to step aside.
CUptiResult xc_subscribe(void);
CUptiResult xc_unsubscribe(void);
// xc_register hands CUPTI the shim's buffer callbacks.
CUptiResult xc_register(void);
CUptiResult xc_enable(int kind);
CUptiResult xc_disable(int kind);
CUptiResult xc_flush(void);
CUptiResult xc_timestamp(uint64_t *ts);

// A completed activity buffer, queued by CUPTI's completion callback.
typedef struct xc_buffer {
	uint8_t *data;
	size_t valid;
	struct xc_buffer *next;
} xc_buffer;

// xc_take detaches the queue of completed buffers (oldest first).
xc_buffer *xc_take(void);
void xc_free(xc_buffer *b);
// xc_next advances *rec to the buffer's next record (NULL to start); any
// result but 0 ends the walk (CUPTI_ERROR_MAX_LIMIT_REACHED at the end).
CUptiResult xc_next(uint8_t *data, size_t valid, uint8_t **rec);
// xc_dropped is how many records CUPTI reported dropped so far.
uint64_t xc_dropped(void);
// xc_buffers_failed counts buffers the shim could not allocate.
uint64_t xc_buffers_failed(void);
// xc_name turns a record's name field into a pointer on the C side, so
// that Go never converts an integer to a pointer.
const char *xc_name(uint64_t p);

#endif

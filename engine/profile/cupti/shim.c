//go:build cgo && linux

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

// CUPTI's buffer size: 8 MiB holds ~40k kernel records, a long window of
// a large model; CUPTI asks for another buffer when one fills.
#define XC_BUFFER_BYTES (8u << 20)
// Activity records are 8-byte aligned (ACTIVITY_RECORD_ALIGNMENT).
#define XC_ALIGN 8

typedef void (*request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*complete_fn)(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
typedef void (*callback_fn)(void *userdata, int domain, uint32_t cbid, const void *data);
typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;

static CUptiResult (*p_cuptiGetVersion)(uint32_t *);
static CUptiResult (*p_cuptiGetResultString)(CUptiResult, const char **);
static CUptiResult (*p_cuptiSubscribe)(CUpti_SubscriberHandle *, callback_fn, void *);
static CUptiResult (*p_cuptiUnsubscribe)(CUpti_SubscriberHandle);
static CUptiResult (*p_cuptiActivityRegisterCallbacks)(request_fn, complete_fn);
static CUptiResult (*p_cuptiActivityEnable)(int);
static CUptiResult (*p_cuptiActivityDisable)(int);
static CUptiResult (*p_cuptiActivityFlushAll)(uint32_t);
static CUptiResult (*p_cuptiActivityGetNextRecord)(uint8_t *, size_t, void **);
static CUptiResult (*p_cuptiActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
static CUptiResult (*p_cuptiGetTimestamp)(uint64_t *);

struct entry { const char *name; void **slot; };
#define E(n) { #n, (void **)&p_##n }
static const struct entry entries[] = {
	E(cuptiGetVersion), E(cuptiGetResultString), E(cuptiSubscribe), E(cuptiUnsubscribe),
	E(cuptiActivityRegisterCallbacks), E(cuptiActivityEnable), E(cuptiActivityDisable),
	E(cuptiActivityFlushAll), E(cuptiActivityGetNextRecord), E(cuptiActivityGetNumDroppedRecords),
	E(cuptiGetTimestamp),
};

static void *handle;
static CUpti_SubscriberHandle subscriber;

int xc_load(const char *path, char *err, size_t errlen) {
	if (handle) {
		return XC_OK;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return XC_DLOPEN_FAILED;
	}
	for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
		*entries[i].slot = dlsym(h, entries[i].name);
		if (!*entries[i].slot) {
			snprintf(err, errlen, "%s: no symbol %s", path, entries[i].name);
			dlclose(h);
			return XC_SYMBOL_MISSING;
		}
	}
	handle = h;
	return XC_OK;
}

CUptiResult xc_get_version(uint32_t *v) { return p_cuptiGetVersion(v); }

const char *xc_result_string(CUptiResult r) {
	const char *s = NULL;
	if (!p_cuptiGetResultString || p_cuptiGetResultString(r, &s) != 0 || !s) {
		return "unknown CUPTI result";
	}
	return s;
}

static void noop_callback(void *userdata, int domain, uint32_t cbid, const void *data) {
	(void)userdata; (void)domain; (void)cbid; (void)data;
}

CUptiResult xc_subscribe(void) { return p_cuptiSubscribe(&subscriber, noop_callback, NULL); }

CUptiResult xc_unsubscribe(void) {
	CUptiResult r = subscriber ? p_cuptiUnsubscribe(subscriber) : 0;
	subscriber = NULL;
	return r;
}

// ---- activity buffers ----
// CUPTI calls on_request and on_complete on its own threads; the queue of
// completed buffers is guarded by a mutex, and Go takes it after a flush.

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static xc_buffer *head, *tail;
static uint64_t dropped, failed;

static void on_request(uint8_t **buffer, size_t *size, size_t *max_records) {
	uint8_t *b = aligned_alloc(XC_ALIGN, XC_BUFFER_BYTES);
	*buffer = b;
	*size = b ? XC_BUFFER_BYTES : 0; // a zero size makes CUPTI drop records, and count them
	*max_records = 0;
	if (!b) {
		pthread_mutex_lock(&mu);
		failed++;
		pthread_mutex_unlock(&mu);
	}
}

static void on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
	(void)size;
	size_t n = 0;
	int have = p_cuptiActivityGetNumDroppedRecords(ctx, stream, &n) == 0;
	xc_buffer *node = NULL;
	if (buffer && valid > 0) {
		node = malloc(sizeof *node);
		if (node) {
			node->data = buffer;
			node->valid = valid;
			node->next = NULL;
		}
	}
	pthread_mutex_lock(&mu);
	if (have) {
		dropped += n;
	}
	if (node) {
		if (tail) {
			tail->next = node;
		} else {
			head = node;
		}
		tail = node;
	} else if (buffer && valid > 0) {
		failed++;
	}
	pthread_mutex_unlock(&mu);
	if (!node) {
		free(buffer);
	}
}

CUptiResult xc_register(void) { return p_cuptiActivityRegisterCallbacks(on_request, on_complete); }
CUptiResult xc_enable(int kind) { return p_cuptiActivityEnable(kind); }
CUptiResult xc_disable(int kind) { return p_cuptiActivityDisable(kind); }
// 1 is CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: flush buffers still being filled.
CUptiResult xc_flush(void) { return p_cuptiActivityFlushAll(1); }
CUptiResult xc_timestamp(uint64_t *ts) { return p_cuptiGetTimestamp(ts); }

xc_buffer *xc_take(void) {
	pthread_mutex_lock(&mu);
	xc_buffer *b = head;
	head = tail = NULL;
	pthread_mutex_unlock(&mu);
	return b;
}

void xc_free(xc_buffer *b) {
	free(b->data);
	free(b);
}

CUptiResult xc_next(uint8_t *data, size_t valid, uint8_t **rec) {
	return p_cuptiActivityGetNextRecord(data, valid, (void **)rec);
}

uint64_t xc_dropped(void) {
	pthread_mutex_lock(&mu);
	uint64_t n = dropped;
	pthread_mutex_unlock(&mu);
	return n;
}

uint64_t xc_buffers_failed(void) {
	pthread_mutex_lock(&mu);
	uint64_t n = failed;
	pthread_mutex_unlock(&mu);
	return n;
}

const char *xc_name(uint64_t p) { return (const char *)(uintptr_t)p; }

//go:build cgo && linux

// NVTX v3 without NVIDIA's headers. A profiler that wants NVTX events (Nsight
// Systems, Nsight Compute) sets NVTX_INJECTION64_PATH to a library of its
// own; the instrumented program opens it, calls its InitializeInjectionNvtx2
// with a function that hands out "export tables", and the tool, through the
// callbacks table, asks for each module's table of function-pointer slots
// and writes its handlers into the slots it implements. From then on an
// NVTX call is a load of its slot and, when the slot is set, a call.
//
// The numbers below are the protocol's (nvtxDetail/nvtxTypes.h in NVIDIA's
// NVTX repository): export table ids, module ids, how many callback ids
// each module has (its invalid id 0 included), and the core module's ids of
// the two calls xrun makes. Every module gets a table, not only the core
// one, because a tool may ask for all of them and should find them where
// any NVTX instance has them.

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvtx.h"

typedef void (*xr_nvtx_fn)(void);

enum {
	ETBL_CALLBACKS = 1,   // NVTX_ETID_CALLBACKS
	ETBL_VERSIONINFO = 3, // NVTX_ETID_VERSIONINFO
};

enum {
	MOD_CORE = 1, // NVTX_CB_MODULE_CORE; 2 CUDA, 3 OPENCL, 4 CUDART, 5 CORE2, 6 SYNC
	MOD_COUNT = 7,
	MAX_IDS = 16,
};

// NVTX_CBID_<module>_SIZE per module id: core 16, CUDA 9, OpenCL 15,
// CUDA runtime 7, core2 (domains) 16, sync 7.
static const unsigned module_ids[MOD_COUNT] = {0, 16, 9, 15, 7, 16, 7};

enum {
	CORE_RANGE_PUSH_A = 9, // NVTX_CBID_CORE_RangePushA: int (*)(const char *)
	CORE_RANGE_POP = 11,   // NVTX_CBID_CORE_RangePop: int (*)(void)
};

// The slots the tool writes, and per module the array of pointers to them
// that the tool receives: entry 0 (the invalid id) and the entry after the
// last id are NULL, so a tool reading one past the end finds a NULL rather
// than a neighbour's slot.
static xr_nvtx_fn slots[MOD_COUNT][MAX_IDS];
static xr_nvtx_fn *tables[MOD_COUNT][MAX_IDS + 1];

// The two export tables; their layout is read by the tool.
struct xr_nvtx_callbacks {
	size_t struct_size;
	int (*module_table)(int module, xr_nvtx_fn ***table, unsigned *ids);
};
struct xr_nvtx_version {
	size_t struct_size;
	uint32_t version; // the NVTX API version of this instance: 3
	uint32_t reserved;
	void (*set_tool_version)(uint32_t version);
};

_Static_assert(sizeof(struct xr_nvtx_callbacks) == 2 * sizeof(void *), "callbacks table: size, one function");
_Static_assert(sizeof(struct xr_nvtx_version) == 2 * sizeof(void *) + 8, "version table: size, two uint32, one function");

static int module_table(int module, xr_nvtx_fn ***table, unsigned *ids) {
	if (module < 1 || module >= MOD_COUNT) {
		return 0;
	}
	if (table) {
		*table = tables[module];
	}
	if (ids) {
		*ids = module_ids[module];
	}
	return 1;
}

// The tool reports its own NVTX version here; nothing in xrun depends on it.
static void set_tool_version(uint32_t version) { (void)version; }

static const struct xr_nvtx_callbacks etbl_callbacks = {sizeof etbl_callbacks, module_table};
static const struct xr_nvtx_version etbl_version = {sizeof etbl_version, 3, 0, set_tool_version};

static const void *export_table(uint32_t id) {
	switch (id) {
	case ETBL_CALLBACKS:
		return &etbl_callbacks;
	case ETBL_VERSIONINFO:
		return &etbl_version;
	}
	return NULL;
}

typedef int (*xr_nvtx_init_fn)(const void *(*)(uint32_t));

static int attached_once;

int xr_nvtx_attach(const char *path, char *err, size_t errlen) {
	if (__atomic_exchange_n(&attached_once, 1, __ATOMIC_ACQ_REL)) {
		return XR_NVTX_AGAIN;
	}
	err[0] = 0;
	// Lazy binding, as NVTX itself opens the tool: the tool's own
	// dependencies resolve when first called.
	void *h = dlopen(path, RTLD_LAZY);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return XR_NVTX_DLOPEN_FAILED;
	}
	xr_nvtx_init_fn init = (xr_nvtx_init_fn)dlsym(h, "InitializeInjectionNvtx2");
	if (!init) {
		dlclose(h);
		return XR_NVTX_NO_ENTRY;
	}
	for (int m = 1; m < MOD_COUNT; m++) {
		for (unsigned id = 1; id < module_ids[m]; id++) {
			tables[m][id] = &slots[m][id];
		}
	}
	if (init(export_table) == 0) {
		// A refusing tool must leave nothing behind that points into it.
		for (int m = 1; m < MOD_COUNT; m++) {
			for (unsigned id = 0; id < MAX_IDS; id++) {
				__atomic_store_n(&slots[m][id], NULL, __ATOMIC_RELEASE);
			}
		}
		dlclose(h);
		return XR_NVTX_INIT_FAILED;
	}
	return XR_NVTX_ATTACHED;
}

// Messages up to this long are copied onto the stack to add the NUL; longer
// ones go through malloc (iteration names are well under it).
enum { SHORT_MSG = 256 };

void xr_nvtx_push(const char *msg, size_t n) {
	// Read on every call, as NVTX does: a tool may set its handlers late.
	int (*push)(const char *) = (int (*)(const char *))__atomic_load_n(&slots[MOD_CORE][CORE_RANGE_PUSH_A], __ATOMIC_ACQUIRE);
	if (!push) {
		return;
	}
	char short_buf[SHORT_MSG];
	char *s = short_buf;
	if (n >= sizeof short_buf) {
		s = malloc(n + 1);
		if (!s) {
			// Still push, truncated: a missing push would unbalance the
			// caller's pop.
			s = short_buf;
			n = sizeof short_buf - 1;
		}
	}
	if (n > 0) {
		memcpy(s, msg, n);
	}
	s[n] = 0;
	push(s);
	if (s != short_buf) {
		free(s);
	}
}

void xr_nvtx_pop(void) {
	int (*pop)(void) = (int (*)(void))__atomic_load_n(&slots[MOD_CORE][CORE_RANGE_POP], __ATOMIC_ACQUIRE);
	if (pop) {
		pop();
	}
}

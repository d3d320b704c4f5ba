//go:build cgo && linux

#ifndef _GNU_SOURCE
#define _GNU_SOURCE // dlinfo
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>

#include "shim_nccl.h"

static void *h_nccl;

static const char *(*p_ncclGetErrorString)(ncclResult_t);
static ncclResult_t (*p_ncclGetVersion)(int *);
static ncclResult_t (*p_ncclGetUniqueId)(ncclUniqueId *);
static ncclResult_t (*p_ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
static ncclResult_t (*p_ncclCommDestroy)(ncclComm_t);
static ncclResult_t (*p_ncclCommAbort)(ncclComm_t);
static ncclResult_t (*p_ncclCommGetAsyncError)(ncclComm_t, ncclResult_t *);
static ncclResult_t (*p_ncclAllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
static ncclResult_t (*p_ncclAllGather)(const void *, void *, size_t, int, ncclComm_t, CUstream);

struct nccl_entry { const char *name; void **slot; };
#define N(n) { #n, (void **)&p_##n }
static const struct nccl_entry nccl_entries[] = {
	N(ncclGetErrorString), N(ncclGetVersion), N(ncclGetUniqueId), N(ncclCommInitRank),
	N(ncclCommDestroy), N(ncclCommAbort), N(ncclCommGetAsyncError), N(ncclAllReduce),
	N(ncclAllGather),
};
#undef N

int xr_load_nccl(const char *path, char *err, size_t errlen) {
	if (h_nccl) {
		return XR_OK;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return XR_DLOPEN_FAILED;
	}
	for (size_t i = 0; i < sizeof nccl_entries / sizeof nccl_entries[0]; i++) {
		*nccl_entries[i].slot = dlsym(h, nccl_entries[i].name);
		if (!*nccl_entries[i].slot) {
			snprintf(err, errlen, "%s not exported by %s", nccl_entries[i].name, path);
			dlclose(h);
			return XR_SYMBOL_MISSING;
		}
	}
	h_nccl = h;
	return XR_OK;
}

void xr_nccl_path(char *out, size_t outlen) {
	struct link_map *lm = NULL;
	out[0] = 0;
	if (h_nccl && dlinfo(h_nccl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) {
		snprintf(out, outlen, "%s", lm->l_name);
	}
}

const char *xr_ncclGetErrorString(ncclResult_t r) { return p_ncclGetErrorString(r); }
ncclResult_t xr_ncclGetVersion(int *v) { return p_ncclGetVersion(v); }
ncclResult_t xr_ncclGetUniqueId(ncclUniqueId *id) { return p_ncclGetUniqueId(id); }
ncclResult_t xr_ncclCommInitRank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank) {
	return p_ncclCommInitRank(comm, nranks, *id, rank);
}
ncclResult_t xr_ncclCommDestroy(ncclComm_t comm) { return p_ncclCommDestroy(comm); }
ncclResult_t xr_ncclCommAbort(ncclComm_t comm) { return p_ncclCommAbort(comm); }
ncclResult_t xr_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) { return p_ncclCommGetAsyncError(comm, async); }
ncclResult_t xr_ncclAllReduce(CUdeviceptr send, CUdeviceptr recv, size_t count, int dtype, int op,
	ncclComm_t comm, CUstream s) {
	return p_ncclAllReduce((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, dtype, op, comm, s);
}
ncclResult_t xr_ncclAllGather(CUdeviceptr send, CUdeviceptr recv, size_t sendcount, int dtype,
	ncclComm_t comm, CUstream s) {
	return p_ncclAllGather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, sendcount, dtype, comm, s);
}

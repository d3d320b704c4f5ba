//go:build cgo && linux

#ifndef _GNU_SOURCE
#define _GNU_SOURCE // dlinfo
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

static void *h_cuda, *h_lt, *h_nvrtc;
static int api_version;

// ---- driver entry points, resolved with cuGetProcAddress_v2 ----
// A plain dlsym("cuMemAlloc") returns the legacy 32-bit-size version; asking
// the driver for the symbol at an API version returns the one that version's
// cuda.h maps the name to (cuMemAlloc_v2, cuDeviceGetUuid_v2, ...).
typedef CUresult (*getproc_fn)(const char *, void **, int, unsigned long long, int *);

static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemAllocHost)(void **, size_t);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult (*p_cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
static CUresult (*p_cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned);
static CUresult (*p_cuStreamBeginCapture)(CUstream, int);
static CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph *);
static CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream);
static CUresult (*p_cuGraphDestroy)(CUgraph);
static CUresult (*p_cuGraphExecDestroy)(CUgraphExec);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleUnload)(CUmodule);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuFuncSetAttribute)(CUfunction, int, int);
static CUresult (*p_cuFuncGetAttribute)(int *, int, CUfunction);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
	unsigned, unsigned, unsigned, CUstream, void **, void **);

// CUlaunchConfig and CUlaunchAttribute as cuda.h (12.0+) lays them out, for
// the attributes used: programmatic stream serialization (PDL) and the
// thread-block cluster's dimensions.
typedef struct {
	int id;
	char pad[4];
	union {
		char raw[64];
		int programmaticStreamSerializationAllowed;
		struct { unsigned x, y, z; } clusterDim;
	} value;
} xr_launch_attr;
typedef struct {
	unsigned gridDimX, gridDimY, gridDimZ;
	unsigned blockDimX, blockDimY, blockDimZ;
	unsigned sharedMemBytes;
	CUstream hStream;
	xr_launch_attr *attrs;
	unsigned numAttrs;
} xr_launch_config;
_Static_assert(sizeof(xr_launch_attr) == 72, "CUlaunchAttribute is 4 + 4 + 64 bytes");
_Static_assert(sizeof(xr_launch_config) == 56, "CUlaunchConfig is 7 x 4 bytes, a stream, a pointer and a count");
static CUresult (*p_cuLaunchKernelEx)(const xr_launch_config *, CUfunction, void **, void **);
static CUresult (*p_cuOccupancyMaxActiveClusters)(int *, CUfunction, const xr_launch_config *);

// cuTensorMapEncodeTiled (12.0+), for TMA loads; the map is 128 opaque
// bytes, 64-byte aligned.
typedef struct { _Alignas(64) unsigned long long v[16]; } xr_tensor_map;
static CUresult (*p_cuTensorMapEncodeTiled)(xr_tensor_map *, int, unsigned, void *, const unsigned long long *,
	const unsigned long long *, const unsigned *, const unsigned *, int, int, int, int);

static CUresult (*p_cuProfilerStart)(void);
static CUresult (*p_cuProfilerStop)(void);

struct entry { const char *name; void **slot; };

#define E(n) { #n, (void **)&p_##n }
static const struct entry driver_entries[] = {
	E(cuGetErrorName), E(cuGetErrorString), E(cuInit), E(cuDriverGetVersion),
	E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceGetName), E(cuDeviceGetUuid),
	E(cuDeviceTotalMem), E(cuDeviceGetAttribute), E(cuDeviceGetPCIBusId),
	E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease), E(cuCtxSetCurrent),
	E(cuMemGetInfo), E(cuMemAlloc), E(cuMemFree), E(cuMemAllocHost),
	E(cuMemFreeHost), E(cuMemcpyHtoD), E(cuMemcpyDtoH), E(cuMemcpyHtoDAsync),
	E(cuMemcpyDtoHAsync), E(cuMemcpyDtoDAsync), E(cuMemsetD8Async), E(cuMemsetD16Async),
	E(cuMemsetD32Async), E(cuStreamCreate), E(cuStreamDestroy), E(cuStreamSynchronize),
	E(cuStreamWaitEvent), E(cuStreamBeginCapture), E(cuStreamEndCapture),
	E(cuGraphInstantiateWithFlags), E(cuGraphLaunch), E(cuGraphDestroy), E(cuGraphExecDestroy),
	E(cuEventCreate), E(cuEventDestroy), E(cuEventRecord), E(cuEventSynchronize),
	E(cuEventElapsedTime), E(cuModuleLoadData), E(cuModuleUnload), E(cuModuleGetFunction),
	E(cuFuncSetAttribute), E(cuFuncGetAttribute), E(cuLaunchKernel),
};

int xr_load_cuda(const char *path, char *err, size_t errlen) {
	if (h_cuda) {
		return XR_OK;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return XR_DLOPEN_FAILED;
	}
	getproc_fn gp = (getproc_fn)dlsym(h, "cuGetProcAddress_v2");
	if (!gp) {
		snprintf(err, errlen, "cuGetProcAddress_v2 is not exported: the driver predates CUDA 12.0");
		dlclose(h);
		return XR_DRIVER_TOO_OLD;
	}
	int status = 0, drv = 0;
	CUresult r = gp("cuDriverGetVersion", (void **)&p_cuDriverGetVersion, 12000, 0, &status);
	if (r != 0 || !p_cuDriverGetVersion || p_cuDriverGetVersion(&drv) != 0) {
		snprintf(err, errlen, "cuDriverGetVersion could not be resolved or called (result %d, status %d)", r, status);
		dlclose(h);
		return XR_DRIVER_TOO_OLD;
	}
	if (drv < 12000) {
		snprintf(err, errlen, "the driver supports CUDA %d.%d; xrun needs 12.0 or newer", drv / 1000, (drv % 1000) / 10);
		dlclose(h);
		return XR_DRIVER_TOO_OLD;
	}
	// Every prototype above has been the same since CUDA 12.0, so a 12.x
	// driver is asked at its own version rather than refused.
	api_version = drv < XR_CUDA_API_VERSION ? drv : XR_CUDA_API_VERSION;
	for (size_t i = 0; i < sizeof driver_entries / sizeof driver_entries[0]; i++) {
		status = 0;
		r = gp(driver_entries[i].name, driver_entries[i].slot, api_version, 0, &status);
		if (r != 0 || !*driver_entries[i].slot) {
			snprintf(err, errlen, "%s at API version %d (result %d, query status %d)",
				driver_entries[i].name, api_version, r, status);
			dlclose(h);
			return XR_SYMBOL_MISSING;
		}
	}
	// Optional entry points: a driver without them still runs xrun, and the
	// calls that need them report CUDA_ERROR_NOT_SUPPORTED.
	status = 0;
	if (gp("cuProfilerStart", (void **)&p_cuProfilerStart, api_version, 0, &status) != 0) {
		p_cuProfilerStart = NULL;
	}
	status = 0;
	if (gp("cuProfilerStop", (void **)&p_cuProfilerStop, api_version, 0, &status) != 0) {
		p_cuProfilerStop = NULL;
	}
	status = 0;
	if (gp("cuLaunchKernelEx", (void **)&p_cuLaunchKernelEx, api_version, 0, &status) != 0) {
		p_cuLaunchKernelEx = NULL;
	}
	status = 0;
	if (gp("cuOccupancyMaxActiveClusters", (void **)&p_cuOccupancyMaxActiveClusters, api_version, 0, &status) != 0) {
		p_cuOccupancyMaxActiveClusters = NULL;
	}
	status = 0;
	if (gp("cuTensorMapEncodeTiled", (void **)&p_cuTensorMapEncodeTiled, api_version, 0, &status) != 0) {
		p_cuTensorMapEncodeTiled = NULL;
	}
	h_cuda = h;
	return XR_OK;
}

int xr_cuda_api_version(void) { return api_version; }

// ---- cuBLASLt and NVRTC: versioned names are exported as such ----
static size_t (*p_cublasLtGetVersion)(void);
static const char *(*p_cublasLtGetStatusName)(cublasStatus_t);
static const char *(*p_cublasLtGetStatusString)(cublasStatus_t);
static cublasStatus_t (*p_cublasLtCreate)(cublasLtHandle_t *);
static cublasStatus_t (*p_cublasLtDestroy)(cublasLtHandle_t);
static cublasStatus_t (*p_cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *, int, int);
static cublasStatus_t (*p_cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
static cublasStatus_t (*p_cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int, const void *, size_t);
static cublasStatus_t (*p_cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t, int64_t);
static cublasStatus_t (*p_cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
static cublasStatus_t (*p_cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *);
static cublasStatus_t (*p_cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
static cublasStatus_t (*p_cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int, const void *, size_t);
static cublasStatus_t (*p_cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t,
	cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *, int *);
static cublasStatus_t (*p_cublasLtMatmulAlgoCheck)(cublasLtHandle_t, cublasLtMatmulDesc_t,
	cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	const cublasLtMatmulAlgo_t *, cublasLtMatmulHeuristicResult_t *);
static cublasStatus_t (*p_cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,
	const void *, cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *,
	const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
	const cublasLtMatmulAlgo_t *, void *, size_t, CUstream);

static const struct entry lt_entries[] = {
	E(cublasLtGetVersion), E(cublasLtCreate), E(cublasLtDestroy), E(cublasLtMatmulDescCreate),
	E(cublasLtMatmulDescDestroy), E(cublasLtMatmulDescSetAttribute), E(cublasLtMatrixLayoutCreate),
	E(cublasLtMatrixLayoutDestroy), E(cublasLtMatmulPreferenceCreate),
	E(cublasLtMatmulPreferenceDestroy), E(cublasLtMatmulPreferenceSetAttribute),
	E(cublasLtMatmulAlgoGetHeuristic), E(cublasLtMatmulAlgoCheck), E(cublasLtMatmul),
};

static nvrtcResult (*p_nvrtcVersion)(int *, int *);
static const char *(*p_nvrtcGetErrorString)(nvrtcResult);
static nvrtcResult (*p_nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
	const char *const *, const char *const *);
static nvrtcResult (*p_nvrtcDestroyProgram)(nvrtcProgram *);
static nvrtcResult (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
static nvrtcResult (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
static nvrtcResult (*p_nvrtcGetProgramLog)(nvrtcProgram, char *);
static nvrtcResult (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
static nvrtcResult (*p_nvrtcGetCUBIN)(nvrtcProgram, char *);

static const struct entry nvrtc_entries[] = {
	E(nvrtcVersion), E(nvrtcGetErrorString), E(nvrtcCreateProgram), E(nvrtcDestroyProgram),
	E(nvrtcCompileProgram), E(nvrtcGetProgramLogSize), E(nvrtcGetProgramLog),
	E(nvrtcGetCUBINSize), E(nvrtcGetCUBIN),
};
#undef E

static int load_plain(void **out, const char *path, const struct entry *ents, size_t n,
	char *err, size_t errlen) {
	if (*out) {
		return XR_OK;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return XR_DLOPEN_FAILED;
	}
	for (size_t i = 0; i < n; i++) {
		*ents[i].slot = dlsym(h, ents[i].name);
		if (!*ents[i].slot) {
			snprintf(err, errlen, "%s not exported by %s", ents[i].name, path);
			dlclose(h);
			return XR_SYMBOL_MISSING;
		}
	}
	*out = h;
	return XR_OK;
}

int xr_load_cublaslt(const char *path, char *err, size_t errlen) {
	int rc = load_plain(&h_lt, path, lt_entries, sizeof lt_entries / sizeof lt_entries[0], err, errlen);
	if (rc == XR_OK) {
		// Status names arrived in cuBLASLt 11.4; Go falls back to its own table.
		p_cublasLtGetStatusName = (const char *(*)(cublasStatus_t))dlsym(h_lt, "cublasLtGetStatusName");
		p_cublasLtGetStatusString = (const char *(*)(cublasStatus_t))dlsym(h_lt, "cublasLtGetStatusString");
	}
	return rc;
}

int xr_load_nvrtc(const char *path, char *err, size_t errlen) {
	return load_plain(&h_nvrtc, path, nvrtc_entries, sizeof nvrtc_entries / sizeof nvrtc_entries[0], err, errlen);
}

void xr_lib_path(int which, char *out, size_t outlen) {
	void *h = which == 0 ? h_cuda : which == 1 ? h_lt : h_nvrtc;
	struct link_map *lm = NULL;
	out[0] = 0;
	if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) {
		snprintf(out, outlen, "%s", lm->l_name);
	}
}

// ---- thin wrappers: cgo cannot call through a C function pointer ----
CUresult xr_cuGetErrorName(CUresult e, const char **s) { return p_cuGetErrorName(e, s); }
CUresult xr_cuGetErrorString(CUresult e, const char **s) { return p_cuGetErrorString(e, s); }
CUresult xr_cuInit(unsigned flags) { return p_cuInit(flags); }
CUresult xr_cuDriverGetVersion(int *v) { return p_cuDriverGetVersion(v); }
CUresult xr_cuDeviceGetCount(int *n) { return p_cuDeviceGetCount(n); }
CUresult xr_cuDeviceGet(CUdevice *d, int ordinal) { return p_cuDeviceGet(d, ordinal); }
CUresult xr_cuDeviceGetName(char *name, int len, CUdevice d) { return p_cuDeviceGetName(name, len, d); }
CUresult xr_cuDeviceGetUuid(CUuuid *u, CUdevice d) { return p_cuDeviceGetUuid(u, d); }
CUresult xr_cuDeviceTotalMem(size_t *bytes, CUdevice d) { return p_cuDeviceTotalMem(bytes, d); }
CUresult xr_cuDeviceGetAttribute(int *v, int attr, CUdevice d) { return p_cuDeviceGetAttribute(v, attr, d); }
CUresult xr_cuDeviceGetPCIBusId(char *id, int len, CUdevice d) { return p_cuDeviceGetPCIBusId(id, len, d); }
CUresult xr_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
CUresult xr_cuDevicePrimaryCtxRelease(CUdevice d) { return p_cuDevicePrimaryCtxRelease(d); }
CUresult xr_cuCtxSetCurrent(CUcontext c) { return p_cuCtxSetCurrent(c); }
CUresult xr_cuMemGetInfo(size_t *f, size_t *t) { return p_cuMemGetInfo(f, t); }
CUresult xr_cuMemAlloc(CUdeviceptr *p, size_t bytes) { return p_cuMemAlloc(p, bytes); }
CUresult xr_cuMemFree(CUdeviceptr p) { return p_cuMemFree(p); }
CUresult xr_cuMemAllocHost(void **p, size_t bytes) { return p_cuMemAllocHost(p, bytes); }
CUresult xr_cuMemFreeHost(void *p) { return p_cuMemFreeHost(p); }
CUresult xr_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { return p_cuMemcpyHtoD(dst, src, n); }
CUresult xr_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return p_cuMemcpyDtoH(dst, src, n); }
CUresult xr_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) { return p_cuMemcpyHtoDAsync(dst, src, n, s); }
CUresult xr_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) { return p_cuMemcpyDtoHAsync(dst, src, n, s); }
CUresult xr_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return p_cuMemcpyDtoDAsync(dst, src, n, s); }
CUresult xr_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return p_cuMemsetD8Async(d, v, n, s); }
CUresult xr_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return p_cuMemsetD16Async(d, v, n, s); }
CUresult xr_cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return p_cuMemsetD32Async(d, v, n, s); }
CUresult xr_cuStreamCreate(CUstream *s, unsigned flags) { return p_cuStreamCreate(s, flags); }
CUresult xr_cuStreamDestroy(CUstream s) { return p_cuStreamDestroy(s); }
CUresult xr_cuStreamSynchronize(CUstream s) { return p_cuStreamSynchronize(s); }
CUresult xr_cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) { return p_cuStreamWaitEvent(s, e, f); }
CUresult xr_cuStreamBeginCapture(CUstream s, int mode) { return p_cuStreamBeginCapture(s, mode); }
CUresult xr_cuStreamEndCapture(CUstream s, CUgraph *g) { return p_cuStreamEndCapture(s, g); }
CUresult xr_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f) { return p_cuGraphInstantiateWithFlags(e, g, f); }
CUresult xr_cuGraphLaunch(CUgraphExec e, CUstream s) { return p_cuGraphLaunch(e, s); }
CUresult xr_cuGraphDestroy(CUgraph g) { return p_cuGraphDestroy(g); }
CUresult xr_cuGraphExecDestroy(CUgraphExec e) { return p_cuGraphExecDestroy(e); }
CUresult xr_cuEventCreate(CUevent *e, unsigned flags) { return p_cuEventCreate(e, flags); }
CUresult xr_cuEventDestroy(CUevent e) { return p_cuEventDestroy(e); }
CUresult xr_cuEventRecord(CUevent e, CUstream s) { return p_cuEventRecord(e, s); }
CUresult xr_cuEventSynchronize(CUevent e) { return p_cuEventSynchronize(e); }
CUresult xr_cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return p_cuEventElapsedTime(ms, a, b); }
CUresult xr_cuModuleLoadData(CUmodule *m, const void *image) { return p_cuModuleLoadData(m, image); }
CUresult xr_cuModuleUnload(CUmodule m) { return p_cuModuleUnload(m); }
CUresult xr_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) { return p_cuModuleGetFunction(f, m, name); }
CUresult xr_cuFuncSetAttribute(CUfunction f, int attr, int v) { return p_cuFuncSetAttribute(f, attr, v); }
CUresult xr_cuFuncGetAttribute(int *v, int attr, CUfunction f) { return p_cuFuncGetAttribute(v, attr, f); }

// 801 is CUDA_ERROR_NOT_SUPPORTED.
CUresult xr_cuProfilerStart(void) { return p_cuProfilerStart ? p_cuProfilerStart() : 801; }
CUresult xr_cuProfilerStop(void) { return p_cuProfilerStop ? p_cuProfilerStop() : 801; }

CUresult xr_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs) {
	void *params[32];
	if (nargs < 0 || nargs > 32) {
		return 1; // CUDA_ERROR_INVALID_VALUE
	}
	for (int i = 0; i < nargs; i++) {
		params[i] = (void *)(args + offsets[i]);
	}
	return p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

int xr_has_launch_ex(void) { return p_cuLaunchKernelEx != NULL; }

CUresult xr_launch_pdl(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs) {
	return xr_launch_ex(f, gx, gy, gz, bx, by, bz, smem, s, args, offsets, nargs, 1, 0, 0, 0);
}

CUresult xr_launch_ex(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs,
	int pdl, unsigned cx, unsigned cy, unsigned cz) {
	void *params[32];
	if (nargs < 0 || nargs > 32) {
		return 1; // CUDA_ERROR_INVALID_VALUE
	}
	if (!p_cuLaunchKernelEx) {
		return 801; // CUDA_ERROR_NOT_SUPPORTED
	}
	for (int i = 0; i < nargs; i++) {
		params[i] = (void *)(args + offsets[i]);
	}
	xr_launch_attr attrs[2];
	unsigned n = 0;
	memset(attrs, 0, sizeof attrs);
	if (pdl) {
		attrs[n].id = 6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
		attrs[n].value.programmaticStreamSerializationAllowed = 1;
		n++;
	}
	if (cx > 0) {
		attrs[n].id = 4; // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
		attrs[n].value.clusterDim.x = cx;
		attrs[n].value.clusterDim.y = cy;
		attrs[n].value.clusterDim.z = cz;
		n++;
	}
	xr_launch_config cfg = {gx, gy, gz, bx, by, bz, smem, s, attrs, n};
	return p_cuLaunchKernelEx(&cfg, f, params, NULL);
}

CUresult xr_max_active_clusters(int *n, CUfunction f, unsigned threads, unsigned smem, unsigned cz) {
	if (!p_cuOccupancyMaxActiveClusters) {
		return 801; // CUDA_ERROR_NOT_SUPPORTED
	}
	xr_launch_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.id = 4; // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
	attr.value.clusterDim.x = 1;
	attr.value.clusterDim.y = 1;
	attr.value.clusterDim.z = cz;
	xr_launch_config cfg = {1, 1, cz, threads, 1, 1, smem, NULL, &attr, 1};
	return p_cuOccupancyMaxActiveClusters(n, f, &cfg);
}

int xr_has_tensor_map(void) { return p_cuTensorMapEncodeTiled != NULL; }

CUresult xr_tensor_map_2d(unsigned char out[128], int dtype, CUdeviceptr addr, unsigned long long inner,
	unsigned long long rows, unsigned long long row_bytes, unsigned box_inner, unsigned box_rows, int swizzle, int l2promo) {
	if (!p_cuTensorMapEncodeTiled) {
		return 801; // CUDA_ERROR_NOT_SUPPORTED
	}
	xr_tensor_map m;
	unsigned long long dims[2] = {inner, rows}, strides[1] = {row_bytes};
	unsigned box[2] = {box_inner, box_rows}, estr[2] = {1, 1};
	// interleave none (0); out-of-bounds elements read as zeros (0)
	CUresult r = p_cuTensorMapEncodeTiled(&m, dtype, 2, (void *)(uintptr_t)addr, dims, strides, box, estr, 0, swizzle, l2promo, 0);
	if (r == 0) {
		memcpy(out, &m, 128);
	}
	return r;
}

CUresult xr_upload(CUdeviceptr dst, const void *src, size_t n, CUstream s, int *failed) {
	*failed = 0;
	CUresult r = p_cuMemcpyHtoDAsync(dst, src, n, s);
	if (r != 0) {
		return r;
	}
	*failed = 1;
	return p_cuStreamSynchronize(s);
}

CUresult xr_download(void *dst, CUdeviceptr src, size_t n, CUstream s, int *failed) {
	*failed = 0;
	CUresult r = p_cuMemcpyDtoHAsync(dst, src, n, s);
	if (r != 0) {
		return r;
	}
	*failed = 1;
	return p_cuStreamSynchronize(s);
}

size_t xr_cublasLtGetVersion(void) { return p_cublasLtGetVersion(); }
const char *xr_cublasLtGetStatusName(cublasStatus_t st) { return p_cublasLtGetStatusName ? p_cublasLtGetStatusName(st) : NULL; }
const char *xr_cublasLtGetStatusString(cublasStatus_t st) { return p_cublasLtGetStatusString ? p_cublasLtGetStatusString(st) : NULL; }
cublasStatus_t xr_cublasLtCreate(cublasLtHandle_t *h) { return p_cublasLtCreate(h); }
cublasStatus_t xr_cublasLtDestroy(cublasLtHandle_t h) { return p_cublasLtDestroy(h); }
cublasStatus_t xr_cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int ct, int st) { return p_cublasLtMatmulDescCreate(d, ct, st); }
cublasStatus_t xr_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return p_cublasLtMatmulDescDestroy(d); }
cublasStatus_t xr_cublasLtMatmulDescSetAttributeInt(cublasLtMatmulDesc_t d, int attr, int32_t v) {
	return p_cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v);
}
cublasStatus_t xr_cublasLtMatmulDescSetAttributePtr(cublasLtMatmulDesc_t d, int attr, CUdeviceptr p) {
	void *v = (void *)(uintptr_t)p;
	return p_cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v);
}
cublasStatus_t xr_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
	return p_cublasLtMatrixLayoutCreate(l, type, rows, cols, ld);
}
cublasStatus_t xr_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return p_cublasLtMatrixLayoutDestroy(l); }
cublasStatus_t xr_cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { return p_cublasLtMatmulPreferenceCreate(p); }
cublasStatus_t xr_cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return p_cublasLtMatmulPreferenceDestroy(p); }
cublasStatus_t xr_cublasLtMatmulPreferenceSetWorkspace(cublasLtMatmulPreference_t p, uint64_t bytes) {
	return p_cublasLtMatmulPreferenceSetAttribute(p, 1 /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES */, &bytes, sizeof bytes);
}
cublasStatus_t xr_cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
	cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
	cublasLtMatmulPreference_t p, int requested, cublasLtMatmulHeuristicResult_t *results, int *returned) {
	return p_cublasLtMatmulAlgoGetHeuristic(h, d, a, b, c, c, p, requested, results, returned);
}
cublasStatus_t xr_cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
	cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, const cublasLtMatmulAlgo_t *algo,
	cublasLtMatmulHeuristicResult_t *result) {
	return p_cublasLtMatmulAlgoCheck(h, d, a, b, c, c, algo, result);
}

static const float one = 1.0f, zero = 0.0f;

cublasStatus_t xr_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
	CUdeviceptr A, cublasLtMatrixLayout_t a, CUdeviceptr B, cublasLtMatrixLayout_t b,
	CUdeviceptr D, cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo,
	CUdeviceptr ws, size_t wsBytes, CUstream s) {
	return p_cublasLtMatmul(h, d, &one, (const void *)A, a, (const void *)B, b, &zero,
		(const void *)D, dl, (void *)D, dl, algo, (void *)ws, wsBytes, s);
}

const char *xr_nvrtcGetErrorString(nvrtcResult r) { return p_nvrtcGetErrorString(r); }
nvrtcResult xr_nvrtcVersion(int *major, int *minor) { return p_nvrtcVersion(major, minor); }
nvrtcResult xr_nvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name,
	int nheaders, const char *const *headers, const char *const *includeNames) {
	return p_nvrtcCreateProgram(p, src, name, nheaders, headers, includeNames);
}
nvrtcResult xr_nvrtcDestroyProgram(nvrtcProgram *p) { return p_nvrtcDestroyProgram(p); }
nvrtcResult xr_nvrtcCompileProgram(nvrtcProgram p, int n, const char *const *o) { return p_nvrtcCompileProgram(p, n, o); }
nvrtcResult xr_nvrtcGetProgramLogSize(nvrtcProgram p, size_t *n) { return p_nvrtcGetProgramLogSize(p, n); }
nvrtcResult xr_nvrtcGetProgramLog(nvrtcProgram p, char *log) { return p_nvrtcGetProgramLog(p, log); }
nvrtcResult xr_nvrtcGetCUBINSize(nvrtcProgram p, size_t *n) { return p_nvrtcGetCUBINSize(p, n); }
nvrtcResult xr_nvrtcGetCUBIN(nvrtcProgram p, char *c) { return p_nvrtcGetCUBIN(p, c); }

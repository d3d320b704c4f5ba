//go:build cgo && linux

// The C side of the CUDA shim. libcuda, cuBLASLt and NVRTC are opened with
// dlopen at run time, so building xrun needs no CUDA header or library: the
// few types and prototypes used are declared here by hand, and every struct
// whose layout the libraries read or write is checked against its documented
// size with _Static_assert.

#ifndef XRUN_CUDA_SHIM_H
#define XRUN_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

// ---- CUDA driver API (cuda.h) ----
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct { char bytes[16]; } CUuuid;

_Static_assert(sizeof(CUuuid) == 16, "CUuuid is 16 bytes");
_Static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr is 64-bit on x86-64 and arm64");

// ---- cuBLASLt (cublasLt.h) ----
typedef int cublasStatus_t;
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

_Static_assert(sizeof(cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t is 8 x uint64");
_Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96,
	"cublasLtMatmulHeuristicResult_t is 96 bytes (64 algo + 8 + 4 + 4 + 16)");

// ---- NVRTC (nvrtc.h) ----
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

// Load status codes returned by the xr_load_* functions.
enum {
	XR_OK = 0,
	XR_DLOPEN_FAILED = 1,   // err holds dlerror()
	XR_SYMBOL_MISSING = 2,  // err names the symbol
	XR_DRIVER_TOO_OLD = 3,  // err names what is missing
};

// The CUDA API version whose entry points are asked for; each prototype below
// is the one that version documents.
#define XR_CUDA_API_VERSION 13000

int xr_load_cuda(const char *path, char *err, size_t errlen);
int xr_load_cublaslt(const char *path, char *err, size_t errlen);
int xr_load_nvrtc(const char *path, char *err, size_t errlen);
// xr_lib_path writes the file a loaded library came from (dlinfo link map).
void xr_lib_path(int which, char *out, size_t outlen);
// xr_cuda_api_version is the API version the driver's entry points were
// resolved at: min(XR_CUDA_API_VERSION, the driver's own version).
int xr_cuda_api_version(void);

// Driver API.
CUresult xr_cuGetErrorName(CUresult e, const char **s);
CUresult xr_cuGetErrorString(CUresult e, const char **s);
CUresult xr_cuInit(unsigned flags);
CUresult xr_cuDriverGetVersion(int *v);
CUresult xr_cuDeviceGetCount(int *n);
CUresult xr_cuDeviceGet(CUdevice *d, int ordinal);
CUresult xr_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult xr_cuDeviceGetUuid(CUuuid *u, CUdevice d);
CUresult xr_cuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult xr_cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult xr_cuDeviceGetPCIBusId(char *id, int len, CUdevice d);
CUresult xr_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult xr_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult xr_cuCtxSetCurrent(CUcontext c);
CUresult xr_cuMemGetInfo(size_t *free_, size_t *total);
CUresult xr_cuMemAlloc(CUdeviceptr *p, size_t bytes);
CUresult xr_cuMemFree(CUdeviceptr p);
CUresult xr_cuMemAllocHost(void **p, size_t bytes);
CUresult xr_cuMemFreeHost(void *p);
CUresult xr_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes);
CUresult xr_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes);
CUresult xr_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
CUresult xr_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
CUresult xr_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
CUresult xr_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult xr_cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s);
CUresult xr_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s);
CUresult xr_cuStreamCreate(CUstream *s, unsigned flags);
CUresult xr_cuStreamDestroy(CUstream s);
CUresult xr_cuStreamSynchronize(CUstream s);
CUresult xr_cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags);
CUresult xr_cuStreamBeginCapture(CUstream s, int mode);
CUresult xr_cuStreamEndCapture(CUstream s, CUgraph *g);
CUresult xr_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags);
CUresult xr_cuGraphLaunch(CUgraphExec e, CUstream s);
CUresult xr_cuGraphDestroy(CUgraph g);
CUresult xr_cuGraphExecDestroy(CUgraphExec e);
CUresult xr_cuEventCreate(CUevent *e, unsigned flags);
CUresult xr_cuEventDestroy(CUevent e);
CUresult xr_cuEventRecord(CUevent e, CUstream s);
CUresult xr_cuEventSynchronize(CUevent e);
CUresult xr_cuEventElapsedTime(float *ms, CUevent start, CUevent end);
CUresult xr_cuModuleLoadData(CUmodule *m, const void *image);
CUresult xr_cuModuleUnload(CUmodule m);
CUresult xr_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult xr_cuFuncSetAttribute(CUfunction f, int attr, int v);
CUresult xr_cuFuncGetAttribute(int *v, int attr, CUfunction f);
// cuProfilerStart / cuProfilerStop bracket the iterations an outside nsys
// (-c cudaProfilerApi) or ncu (--profile-from-start off) should capture.
CUresult xr_cuProfilerStart(void);
CUresult xr_cuProfilerStop(void);
// xr_launch builds the kernel parameter array from one packed argument
// buffer and offsets, so Go never hands C an array of Go pointers.
CUresult xr_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs);
// xr_launch_pdl is xr_launch with programmatic dependent launch allowed
// (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION):
// the kernel may start while the kernel before it in the stream finishes, and
// must wait for it with griddepcontrol.wait before touching memory (every
// kernel of kernels/ does, first thing). xr_has_launch_ex says whether the
// driver has cuLaunchKernelEx at all.
int xr_has_launch_ex(void);
CUresult xr_launch_pdl(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs);
// xr_launch_ex is cuLaunchKernelEx with PDL (pdl != 0) and thread-block
// clusters of cx x cy x cz blocks (cx == 0: no cluster attribute).
CUresult xr_launch_ex(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
	const unsigned char *args, const int *offsets, int nargs,
	int pdl, unsigned cx, unsigned cy, unsigned cz);
// xr_max_active_clusters is cuOccupancyMaxActiveClusters: how many clusters
// of cz blocks (threads threads and smem bytes of dynamic shared memory
// each) of f can be resident at once, which the GPCs' sizes bound more
// tightly than the multiprocessor count.
CUresult xr_max_active_clusters(int *n, CUfunction f, unsigned threads, unsigned smem, unsigned cz);
// xr_tensor_map_2d encodes a TMA descriptor (cuTensorMapEncodeTiled) of a
// row-major rows x inner matrix at addr, row_bytes apart, read in boxes of
// box_inner x box_rows elements into out (128 bytes); dtype, swizzle and
// l2promo are cuda.h's CUtensorMapDataType, CUtensorMapSwizzle and
// CUtensorMapL2promotion values. xr_has_tensor_map says whether the
// driver has the entry point.
int xr_has_tensor_map(void);
CUresult xr_tensor_map_2d(unsigned char out[128], int dtype, CUdeviceptr addr, unsigned long long inner,
	unsigned long long rows, unsigned long long row_bytes, unsigned box_inner, unsigned box_rows, int swizzle, int l2promo);

// Synchronous copies through a stream, in one call so that no Go pointer is
// held by the driver after the call returns. *failed names the step (0 the
// copy, 1 the synchronize).
CUresult xr_upload(CUdeviceptr dst, const void *src, size_t n, CUstream s, int *failed);
CUresult xr_download(void *dst, CUdeviceptr src, size_t n, CUstream s, int *failed);

// cuBLASLt.
size_t xr_cublasLtGetVersion(void);
const char *xr_cublasLtGetStatusName(cublasStatus_t st);
const char *xr_cublasLtGetStatusString(cublasStatus_t st);
cublasStatus_t xr_cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t xr_cublasLtDestroy(cublasLtHandle_t h);
cublasStatus_t xr_cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int computeType, int scaleType);
cublasStatus_t xr_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t xr_cublasLtMatmulDescSetAttributeInt(cublasLtMatmulDesc_t d, int attr, int32_t v);
// xr_cublasLtMatmulDescSetAttributePtr sets a device-pointer attribute (the
// FP8 scale pointers).
cublasStatus_t xr_cublasLtMatmulDescSetAttributePtr(cublasLtMatmulDesc_t d, int attr, CUdeviceptr p);
cublasStatus_t xr_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, int type, uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t xr_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t xr_cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t xr_cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t xr_cublasLtMatmulPreferenceSetWorkspace(cublasLtMatmulPreference_t p, uint64_t bytes);
cublasStatus_t xr_cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
	cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
	cublasLtMatmulPreference_t p, int requested, cublasLtMatmulHeuristicResult_t *results, int *returned);
// xr_cublasLtMatmulAlgoCheck checks algo on a problem (C = D) and fills
// result's workspace size; result->algo is not written.
cublasStatus_t xr_cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
	cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, const cublasLtMatmulAlgo_t *algo,
	cublasLtMatmulHeuristicResult_t *result);
// xr_cublasLtMatmul computes D = A*B with alpha 1 and beta 0 (D also serves
// as C), the only form the engine needs.
cublasStatus_t xr_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
	CUdeviceptr A, cublasLtMatrixLayout_t a, CUdeviceptr B, cublasLtMatrixLayout_t b,
	CUdeviceptr D, cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo,
	CUdeviceptr ws, size_t wsBytes, CUstream s);

// NVRTC.
const char *xr_nvrtcGetErrorString(nvrtcResult r);
nvrtcResult xr_nvrtcVersion(int *major, int *minor);
nvrtcResult xr_nvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name,
	int nheaders, const char *const *headers, const char *const *includeNames);
nvrtcResult xr_nvrtcDestroyProgram(nvrtcProgram *p);
nvrtcResult xr_nvrtcCompileProgram(nvrtcProgram p, int nopts, const char *const *opts);
nvrtcResult xr_nvrtcGetProgramLogSize(nvrtcProgram p, size_t *n);
nvrtcResult xr_nvrtcGetProgramLog(nvrtcProgram p, char *log);
nvrtcResult xr_nvrtcGetCUBINSize(nvrtcProgram p, size_t *n);
nvrtcResult xr_nvrtcGetCUBIN(nvrtcProgram p, char *cubin);

#endif

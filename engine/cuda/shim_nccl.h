//go:build cgo && linux

// NCCL, opened with dlopen at run time like the other CUDA libraries (see
// shim.h): the handful of types and prototypes used are declared here from
// NCCL's documented API (nccl.h of 2.x), so building needs no NCCL header.

#ifndef XRUN_CUDA_SHIM_NCCL_H
#define XRUN_CUDA_SHIM_NCCL_H

#include <stddef.h>
#include "shim.h"

typedef int ncclResult_t;  // ncclSuccess = 0
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;  // NCCL_UNIQUE_ID_BYTES

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is NCCL_UNIQUE_ID_BYTES (128)");

// ncclDataType_t values used.
enum { XR_NCCL_FLOAT16 = 6, XR_NCCL_FLOAT32 = 7, XR_NCCL_BFLOAT16 = 9 };
// ncclRedOp_t ncclSum.
enum { XR_NCCL_SUM = 0 };

int xr_load_nccl(const char *path, char *err, size_t errlen);
// xr_nccl_path writes the file libnccl came from (dlinfo link map).
void xr_nccl_path(char *out, size_t outlen);

const char *xr_ncclGetErrorString(ncclResult_t r);
ncclResult_t xr_ncclGetVersion(int *v);
ncclResult_t xr_ncclGetUniqueId(ncclUniqueId *id);
// xr_ncclCommInitRank takes the id by pointer so that Go never passes a
// 128-byte struct by value through cgo.
ncclResult_t xr_ncclCommInitRank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank);
ncclResult_t xr_ncclCommDestroy(ncclComm_t comm);
ncclResult_t xr_ncclCommAbort(ncclComm_t comm);
ncclResult_t xr_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async);
ncclResult_t xr_ncclAllReduce(CUdeviceptr send, CUdeviceptr recv, size_t count, int dtype, int op,
	ncclComm_t comm, CUstream s);
ncclResult_t xr_ncclAllGather(CUdeviceptr send, CUdeviceptr recv, size_t sendcount, int dtype,
	ncclComm_t comm, CUstream s);

#endif

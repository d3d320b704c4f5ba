//go:build cgo && linux

package cuda

/*
#include <stdlib.h>
#include <string.h>
#include "shim_nccl.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// NCCL: the collectives of a model split over the GPUs of one host (tensor
// and expert parallelism). One communicator per rank, each made and used
// on its GPU's thread (the primary context current there is what NCCL's
// runtime calls pick up), the operations queued on the GPU's main stream
// like kernels, so that an iteration's collectives are captured into its
// graph with the rest (NCCL supports stream capture).

var (
	ncclOnce sync.Once
	ncclErr  error
)

// LoadNCCL opens libnccl.so.2 (ncclCandidates: XRUN_LIBNCCL, the loader's
// search, the CUDA folders, a PyTorch installation's copy) and sets
// NCCL_NVLS_ENABLE=0 unless the environment sets it. Safe to call often.
func LoadNCCL() error {
	ncclOnce.Do(func() {
		if err := setNCCLDefaults(os.LookupEnv, os.Setenv); err != nil {
			ncclErr = err
			return
		}
		ncclErr = loadNCCLFrom(ncclCandidates(os.Getenv, filepath.Glob, libSearchDirs()))
	})
	return ncclErr
}

func loadNCCLFrom(candidates []string) error {
	le := &LoadError{Library: ncclSoname, Role: "NCCL, the collectives of a cell split over GPUs (tp, ep); set " + NCCLEnv + " to its path"}
	load := callLoader(func(p, e *C.char, n C.size_t) C.int { return C.xr_load_nccl(p, e, n) })
	for _, path := range candidates {
		rc, msg := load(path)
		msg = strings.TrimPrefix(msg, path+": ")
		switch rc {
		case int(C.XR_OK):
			var v C.int
			if err := ncclErrf("ncclGetVersion", C.xr_ncclGetVersion(&v), ""); err != nil {
				return err
			}
			// Stream capture of NCCL operations arrived in 2.9.
			if major, minor, _ := NCCLVersion(int(v)); major < 2 || major == 2 && minor < 9 {
				le.Tried = append(le.Tried, Attempt{Path: path, Err: "loaded"})
				le.Reason = fmt.Sprintf("NCCL %d.%d is older than 2.9", major, minor)
				return le
			}
			return nil
		case int(C.XR_DLOPEN_FAILED):
			if !strings.Contains(path, "/") {
				path += " (loader search: LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib)"
			}
			le.Tried = append(le.Tried, Attempt{Path: path, Err: msg})
		default:
			le.Tried = append(le.Tried, Attempt{Path: path, Err: "loaded"})
			le.Reason = msg
			return le
		}
	}
	return le
}

// NCCLInfo is the loaded NCCL's version ("2.27.3") and file, for reports.
func NCCLInfo() (version, path string) {
	if LoadNCCL() != nil {
		return "", ""
	}
	var v C.int
	if C.xr_ncclGetVersion(&v) == 0 {
		ma, mi, pa := NCCLVersion(int(v))
		version = fmt.Sprintf("%d.%d.%d", ma, mi, pa)
	}
	var buf [4096]C.char
	C.xr_nccl_path(&buf[0], C.size_t(len(buf)))
	path = C.GoString(&buf[0])
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	return version, path
}

// ncclErrf turns an ncclResult_t into an *Error naming the call.
func ncclErrf(call string, r C.ncclResult_t, detail string) error {
	if r == 0 {
		return nil
	}
	name := map[int]string{1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
		4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}[int(r)]
	if name == "" {
		name = "ncclUnknownResult"
	}
	e := &Error{Call: call, Code: int(r), Name: name, Detail: detail}
	if s := C.xr_ncclGetErrorString(r); s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

// NCCLID is a communicator's unique id (ncclUniqueId), made once by
// NewNCCLID and handed to every rank.
type NCCLID [128]byte

// NewNCCLID makes a fresh id (NCCL's bootstrap: no GPU involved).
func NewNCCLID() (NCCLID, error) {
	var id NCCLID
	if err := LoadNCCL(); err != nil {
		return id, err
	}
	var cid C.ncclUniqueId
	if err := ncclErrf("ncclGetUniqueId", C.xr_ncclGetUniqueId(&cid), ""); err != nil {
		return id, err
	}
	copy(id[:], C.GoBytes(unsafe.Pointer(&cid), C.int(len(id))))
	return id, nil
}

// Comm is one rank's NCCL communicator, bound to the GPU it was made on;
// its calls run on that GPU's thread.
type Comm struct {
	// mu guards c, which Abort clears from another thread; it is not held
	// during NCCL's calls (an all-reduce may wait for its peers).
	mu         sync.Mutex
	c          C.ncclComm_t
	rank, size int
}

// comm is the communicator, nil once destroyed or aborted.
func (c *Comm) comm() (C.ncclComm_t, error) {
	if c == nil {
		return nil, fmt.Errorf("nccl: no communicator (the rank never joined its group)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil, fmt.Errorf("nccl: rank %d of %d: communicator destroyed or aborted", c.rank, c.size)
	}
	return c.c, nil
}

// take clears and returns the communicator (nil if already gone).
func (c *Comm) take() C.ncclComm_t {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.c
	c.c = nil
	return cc
}

// Rank and Size are the communicator's.
func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.size }

// NCCLInit joins rank of a group of size ranks under id. Every rank must
// call it at once, each on its own GPU's thread: it returns when all have.
func (g *GPU) NCCLInit(id NCCLID, size, rank int) (*Comm, error) {
	if err := LoadNCCL(); err != nil {
		return nil, err
	}
	var cid C.ncclUniqueId
	C.memcpy(unsafe.Pointer(&cid), unsafe.Pointer(&id[0]), C.size_t(len(id)))
	c := &Comm{rank: rank, size: size}
	if err := ncclErrf("ncclCommInitRank", C.xr_ncclCommInitRank(&c.c, C.int(size), &cid, C.int(rank)),
		fmt.Sprintf("rank %d of %d on GPU %d", rank, size, g.Info.Index)); err != nil {
		return nil, err
	}
	return c, nil
}

func ncclType(dt DType) C.int {
	if dt == BF16 {
		return C.XR_NCCL_BFLOAT16
	}
	return C.XR_NCCL_FLOAT16
}

// AllReduceSum queues buf[:n] = the sum over the ranks of buf[:n] (n
// elements of dt) on s, in place.
func (c *Comm) AllReduceSum(s *Stream, dt DType, buf Buffer, n int) error {
	if n*dt.Size() > buf.Bytes || n < 0 {
		return fmt.Errorf("nccl: all-reduce of %d elements in %d bytes", n, buf.Bytes)
	}
	if n == 0 {
		return nil
	}
	cc, err := c.comm()
	if err != nil {
		return err
	}
	return ncclErrf("ncclAllReduce", C.xr_ncclAllReduce(C.CUdeviceptr(buf.Ptr), C.CUdeviceptr(buf.Ptr), C.size_t(n),
		ncclType(dt), C.XR_NCCL_SUM, cc, s.s), fmt.Sprintf("%d elements of %s", n, dt))
}

// AllGather queues recv = the ranks' send[:n] one after the other (rank
// order), n elements of dt each, on s.
func (c *Comm) AllGather(s *Stream, dt DType, recv, send Buffer, n int) error {
	if n < 0 || n*dt.Size() > send.Bytes || c.size*n*dt.Size() > recv.Bytes {
		return fmt.Errorf("nccl: all-gather of %d elements from %d bytes into %d", n, send.Bytes, recv.Bytes)
	}
	if n == 0 {
		return nil
	}
	cc, err := c.comm()
	if err != nil {
		return err
	}
	return ncclErrf("ncclAllGather", C.xr_ncclAllGather(C.CUdeviceptr(send.Ptr), C.CUdeviceptr(recv.Ptr), C.size_t(n),
		ncclType(dt), cc, s.s), fmt.Sprintf("%d elements of %s from each of %d ranks", n, dt, c.size))
}

// AsyncError is a failure NCCL detected in the background (a peer gone, a
// network error), nil if none.
func (c *Comm) AsyncError() error {
	if c == nil {
		return nil
	}
	cc, err := c.comm()
	if err != nil {
		return nil // gone: its failure was reported when it went
	}
	var r C.ncclResult_t
	if err := ncclErrf("ncclCommGetAsyncError", C.xr_ncclCommGetAsyncError(cc, &r), ""); err != nil {
		return err
	}
	return ncclErrf("ncclCommGetAsyncError", r, fmt.Sprintf("rank %d of %d", c.rank, c.size))
}

// Destroy frees the communicator once its operations are done; run it on
// the GPU's thread.
func (c *Comm) Destroy() error {
	if c == nil {
		return nil
	}
	if cc := c.take(); cc != nil {
		return ncclErrf("ncclCommDestroy", C.xr_ncclCommDestroy(cc), "")
	}
	return nil
}

// Abort stops the communicator's operations in flight and frees it: for
// a rank whose peers will never join the operation it waits in. It may
// run on any thread, while the GPU's thread is blocked waiting for that
// operation.
func (c *Comm) Abort() error {
	if c == nil {
		return nil
	}
	if cc := c.take(); cc != nil {
		return ncclErrf("ncclCommAbort", C.xr_ncclCommAbort(cc), "")
	}
	return nil
}

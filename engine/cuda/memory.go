//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device address.
type DevicePtr uint64

// Buffer is a span of device memory. It is a plain value: slicing one makes
// no allocation, and only buffers returned by Alloc may be freed.
type Buffer struct {
	Ptr   DevicePtr
	Bytes int
}

// Slice returns bytes [off, off+n) of b; it panics when out of range, like a
// Go slice expression.
func (b Buffer) Slice(off, n int) Buffer {
	if off < 0 || n < 0 || off+n > b.Bytes {
		panic(fmt.Sprintf("cuda: Buffer.Slice(%d, %d) of %d bytes", off, n, b.Bytes))
	}
	return Buffer{Ptr: b.Ptr + DevicePtr(off), Bytes: n}
}

// Alloc allocates device memory (cuMemAlloc aligns to at least 256 bytes,
// which the kernels' 16-byte vector accesses rely on).
func (g *GPU) Alloc(bytes int) (Buffer, error) {
	if bytes <= 0 {
		return Buffer{}, fmt.Errorf("cuda: Alloc(%d bytes)", bytes)
	}
	var p C.CUdeviceptr
	if err := cuErrf("cuMemAlloc", C.xr_cuMemAlloc(&p, C.size_t(bytes)), "%d bytes on GPU %d", bytes, g.Info.Index); err != nil {
		return Buffer{}, err
	}
	return Buffer{Ptr: DevicePtr(p), Bytes: bytes}, nil
}

// Free releases a buffer returned by Alloc.
func (g *GPU) Free(b Buffer) error {
	if b.Ptr == 0 {
		return nil
	}
	return cuErr("cuMemFree", C.xr_cuMemFree(C.CUdeviceptr(b.Ptr)))
}

// HostBuffer is page-locked host memory: the only host memory an
// asynchronous copy (or a copy captured in a graph) may read or write,
// because the driver holds its address after the call returns.
type HostBuffer struct {
	p unsafe.Pointer
	n int
}

// AllocHost allocates page-locked host memory.
func (g *GPU) AllocHost(bytes int) (HostBuffer, error) {
	var p unsafe.Pointer
	if err := cuErrf("cuMemAllocHost", C.xr_cuMemAllocHost(&p, C.size_t(bytes)), "%d bytes", bytes); err != nil {
		return HostBuffer{}, err
	}
	return HostBuffer{p: p, n: bytes}, nil
}

// FreeHost releases a HostBuffer.
func (g *GPU) FreeHost(h HostBuffer) error {
	if h.p == nil {
		return nil
	}
	return cuErr("cuMemFreeHost", C.xr_cuMemFreeHost(h.p))
}

// Bytes is the buffer's memory as a Go slice (C memory; valid until FreeHost).
func (h HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Len is the buffer's size in bytes.
func (h HostBuffer) Len() int { return h.n }

// Slice is bytes n of h from off on: the same memory, freed with h (a
// slice is never passed to FreeHost).
func (h HostBuffer) Slice(off, n int) HostBuffer {
	if off < 0 || n < 0 || off+n > h.n {
		panic(fmt.Sprintf("cuda: host slice [%d, %d) of %d bytes", off, off+n, h.n))
	}
	return HostBuffer{p: unsafe.Add(h.p, off), n: n}
}

// devicePtr is the address kernels write h through: page-locked memory
// from cuMemAllocHost is mapped into every context of a GPU with unified
// addressing at the host pointer's own address (GPU.MapsHost); 0 for an
// empty h.
func (h HostBuffer) devicePtr() uint64 { return uint64(uintptr(h.p)) }

func checkSpan(call string, dst, src int) error {
	if dst != src {
		return fmt.Errorf("cuda: %s: destination holds %d bytes, source %d", call, dst, src)
	}
	return nil
}

func copyErr(call string, rc C.CUresult, failed C.int, n int) error {
	if failed == 1 {
		return cuErrf("cuStreamSynchronize", rc, "after %s of %d bytes", call, n)
	}
	return cuErrf(call, rc, "%d bytes", n)
}

// Upload copies host bytes into dst after the work already queued on s, and
// returns when the copy is done.
func (s *Stream) Upload(dst Buffer, src []byte) error {
	if err := checkSpan("Upload", dst.Bytes, len(src)); err != nil || len(src) == 0 {
		return err
	}
	var failed C.int
	rc := C.xr_upload(C.CUdeviceptr(dst.Ptr), unsafe.Pointer(&src[0]), C.size_t(len(src)), s.s, &failed)
	return copyErr("cuMemcpyHtoDAsync", rc, failed, len(src))
}

// Download copies src into host bytes once the work queued on s is done.
func (s *Stream) Download(dst []byte, src Buffer) error {
	if err := checkSpan("Download", len(dst), src.Bytes); err != nil || len(dst) == 0 {
		return err
	}
	var failed C.int
	rc := C.xr_download(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src.Ptr), C.size_t(len(dst)), s.s, &failed)
	return copyErr("cuMemcpyDtoHAsync", rc, failed, len(dst))
}

// UploadAsync queues a copy from page-locked memory; capturable in a graph.
func (s *Stream) UploadAsync(dst Buffer, src HostBuffer, n int) error {
	if n > dst.Bytes || n > src.n {
		return fmt.Errorf("cuda: UploadAsync of %d bytes into %d from %d", n, dst.Bytes, src.n)
	}
	return cuErrf("cuMemcpyHtoDAsync", C.xr_cuMemcpyHtoDAsync(C.CUdeviceptr(dst.Ptr), src.p, C.size_t(n), s.s), "%d bytes", n)
}

// DownloadAsync queues a copy into page-locked memory; capturable.
func (s *Stream) DownloadAsync(dst HostBuffer, src Buffer, n int) error {
	if n > src.Bytes || n > dst.n {
		return fmt.Errorf("cuda: DownloadAsync of %d bytes from %d into %d", n, src.Bytes, dst.n)
	}
	return cuErrf("cuMemcpyDtoHAsync", C.xr_cuMemcpyDtoHAsync(dst.p, C.CUdeviceptr(src.Ptr), C.size_t(n), s.s), "%d bytes", n)
}

// Copy queues a device-to-device copy.
func (s *Stream) Copy(dst, src Buffer) error {
	if err := checkSpan("Copy", dst.Bytes, src.Bytes); err != nil {
		return err
	}
	return cuErrf("cuMemcpyDtoDAsync", C.xr_cuMemcpyDtoDAsync(C.CUdeviceptr(dst.Ptr), C.CUdeviceptr(src.Ptr), C.size_t(src.Bytes), s.s), "%d bytes", src.Bytes)
}

// Fill16 sets every 16-bit word of dst to v (0x7E00 is an fp16 NaN, 0x7FC0
// a bf16 NaN: the checks poison outputs with them).
func (s *Stream) Fill16(dst Buffer, v uint16) error {
	return cuErrf("cuMemsetD16Async", C.xr_cuMemsetD16Async(C.CUdeviceptr(dst.Ptr), C.ushort(v), C.size_t(dst.Bytes/2), s.s), "%d bytes", dst.Bytes)
}

// Fill32 sets every 32-bit word of dst to v.
func (s *Stream) Fill32(dst Buffer, v uint32) error {
	return cuErrf("cuMemsetD32Async", C.xr_cuMemsetD32Async(C.CUdeviceptr(dst.Ptr), C.uint(v), C.size_t(dst.Bytes/4), s.s), "%d bytes", dst.Bytes)
}

// Zero clears dst.
func (s *Stream) Zero(dst Buffer) error {
	return cuErrf("cuMemsetD8Async", C.xr_cuMemsetD8Async(C.CUdeviceptr(dst.Ptr), 0, C.size_t(dst.Bytes), s.s), "%d bytes", dst.Bytes)
}

// asBytes views a slice of plain values (numbers, fp16 bit patterns) as bytes.
func asBytes[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(z)))
}

// UploadSlice copies a slice of plain values (int32, float32, uint16 fp16
// bits, ...) into dst and waits for it.
func UploadSlice[T any](s *Stream, dst Buffer, src []T) error { return s.Upload(dst, asBytes(src)) }

// DownloadSlice copies src into a slice of plain values once s's work is done.
func DownloadSlice[T any](s *Stream, dst []T, src Buffer) error {
	return s.Download(asBytes(dst), src)
}

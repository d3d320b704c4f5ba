// Package cupti collects per-kernel GPU activity through NVIDIA's CUPTI
// Activity API for a profile window: kernels (CONCURRENT_KERNEL), copies
// (MEMCPY) and memsets (MEMSET), enabled only inside the window and
// returned as engine op records with their stream, grid and block.
//
// libcupti is opened with dlopen at run time (libcupti.so.13, then .12,
// from the loader's path or the CUDA toolkit's folders), so building xrun
// needs no CUDA header or library. A small C shim registers the buffer
// callbacks CUPTI calls and queues completed buffers; Go walks the records
// after a flush. Record layouts are declared by hand, keyed on
// cuptiGetVersion, and checked by a self-test on a kernel of known name.
//
// Only one CUPTI subscriber may exist in a process. When another profiler
// holds CUPTI (nsys or ncu inject themselves through CUDA_INJECTION64_PATH,
// or cuptiSubscribe answers CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
// Open steps aside: it returns an *UnavailableError saying so, and the
// outside profiler captures the window through cuProfilerStart/Stop.
//
// The package knows nothing of the engine's model or of files: the CUDA
// backend calls Open, Begin, Start, Mark, Stop and Drain from its Profiler
// methods, and engine/profile turns the records into artifacts. Without
// cgo on Linux every call reports that CUPTI is not compiled in.
package cupti

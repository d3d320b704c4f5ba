//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("cuda: device is closed")

// Device owns one GPU: an OS thread locked to a goroutine, with the GPU's
// primary context current on it. A CUDA context is current per OS thread and
// goroutines migrate between threads, so every CUDA call for this GPU runs
// as a closure on that thread (Do).
type Device struct {
	Info DeviceInfo

	work      chan func()
	done      chan struct{}
	gpu       *GPU
	closeOnce sync.Once
	closeErr  error
}

// Option configures Open.
type Option func(*options)

type options struct {
	cacheDir     string
	sw           *model.Switches // nil: the process's environment's
	syncLaunches *bool           // nil: sw's XRUN_CUDA_SYNC
}

// WithKernelCacheDir sets where compiled kernels are cached; the default is
// os.UserCacheDir()/xrun/kernels. An empty dir disables the disk cache.
func WithKernelCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// WithSyncLaunches synchronizes after every kernel launch outside graph
// capture, so that a fault is reported against the kernel that caused it
// rather than at the next synchronization. For checks and debugging;
// without it XRUN_CUDA_SYNC=1 (WithSwitches) decides.
func WithSyncLaunches(on bool) Option { return func(o *options) { o.syncLaunches = &on } }

// WithSwitches sets the engine switches the GPU's launchers follow (PDL,
// the GEMV's rows and plan, the attention and MoE kernels' choices,
// cuBLASLt's timing and log, sync launches), as the engine parsed them.
// Without it Open parses the process's environment.
func WithSwitches(s model.Switches) Option { return func(o *options) { o.sw = &s } }

// Open starts the thread for GPU index (as the driver numbers them, after
// CUDA_VISIBLE_DEVICES), retains its primary context and creates its main
// stream. Primary contexts are what cuBLASLt's runtime uses too, so both
// share allocations and streams.
func Open(index int, opts ...Option) (*Device, error) {
	o := options{cacheDir: DefaultKernelCacheDir()}
	for _, f := range opts {
		f(&o)
	}
	if o.sw == nil {
		sw := engine.ParseSwitches(os.Getenv)
		o.sw = &sw
	}
	if o.syncLaunches == nil {
		o.syncLaunches = &o.sw.CUDASync
	}
	if err := loadDriver(); err != nil {
		return nil, err
	}
	// Buffered, so that Post returns while the GPU's thread is busy: the
	// caller queues an iteration's ops ahead of the thread issuing them.
	d := &Device{work: make(chan func(), postQueue), done: make(chan struct{})}
	started := make(chan error, 1)
	go d.loop(index, o, started)
	if err := <-started; err != nil {
		return nil, err
	}
	d.Info = d.gpu.Info
	return d, nil
}

func (d *Device) loop(index int, o options, started chan<- error) {
	// Never unlocked: when this goroutine returns, its thread exits with it,
	// so no other goroutine inherits a thread with a context current.
	runtime.LockOSThread()
	defer close(d.done)
	g, err := openGPU(index, o)
	if err != nil {
		started <- err
		return
	}
	d.gpu = g
	started <- nil
	for fn := range d.work {
		fn()
	}
	d.closeErr = g.close()
}

// Do runs fn on the GPU's thread and waits for it. Everything fn does with g
// (and with the buffers, streams, graphs and events made from it) must
// happen inside a Do: those calls need the GPU's context, which is current
// on that thread only. A panic in fn is returned as a *PanicError; fn must
// not call runtime.Goexit (testing's t.Fatal does), which would end the
// thread.
func (d *Device) Do(fn func(g *GPU) error) error {
	errc := make(chan error, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				errc <- &PanicError{GPU: d.Info.Index, Value: r, Stack: debug.Stack()}
			}
		}()
		errc <- fn(d.gpu)
	}
	select {
	case <-d.done:
		return ErrClosed
	default:
	}
	d.work <- job
	return <-errc
}

// postQueue is how many posted closures may wait for the GPU's thread.
const postQueue = 1024

// Post queues fn on the GPU's thread and returns without waiting for it:
// closures run in the order posted, before any later Do. fn reports its own
// failures; a panic in it is handed to onPanic on the GPU's thread. After
// Close, Post does nothing.
func (d *Device) Post(fn func(g *GPU), onPanic func(error)) {
	select {
	case <-d.done:
		return
	default:
	}
	d.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				onPanic(&PanicError{GPU: d.Info.Index, Value: r, Stack: debug.Stack()})
			}
		}()
		fn(d.gpu)
	}
}

// Close frees what the GPU object owns (modules, cuBLASLt, streams), releases
// the primary context and ends the thread. Buffers the caller allocated must
// be freed before; the context release frees them anyway when no one else
// holds it.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.work)
		<-d.done
	})
	return d.closeErr
}

// PanicError is a panic inside a Do closure, recovered so that the GPU's
// thread survives it.
type PanicError struct {
	GPU   int
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("cuda: panic on GPU %d's thread: %v\n%s", e.GPU, e.Value, e.Stack)
}

// GPU is the thread-bound handle Do passes to its closure.
type GPU struct {
	Info DeviceInfo
	// Stream is the main stream, created non-blocking so that it never
	// synchronizes with the legacy default stream (which cannot be captured).
	Stream *Stream

	dev          C.CUdevice
	ctx          C.CUcontext
	cacheDir     string
	syncLaunches bool
	// pdl launches every kernel with programmatic dependent launch allowed
	// (Hopper and newer, unless XRUN_CUDA_PDL=0): a kernel's blocks start
	// while the one before it drains and wait in griddepcontrol.wait, which
	// hides most of the gap between the small kernels of a decode step.
	pdl bool
	// launchEx: the driver has cuLaunchKernelEx (clusters, PDL); tma: it
	// encodes TMA descriptors (cuTensorMapEncodeTiled), which the own
	// GEMM's TMA kernels (gemm_tma.cu) read; tmaps caches those.
	launchEx, tma bool
	// uva: the GPU shares one address space with the host (unified
	// addressing), so kernels write page-locked host memory at its host
	// address (MapsHost).
	uva   bool
	tmaps map[tmapKey]*[128]byte
	// tmaSlotsSeen caches tmaSlots' counts (nil: count multiprocessors).
	tmaSlotsSeen map[tmaSlotsKey]int
	// sw are the switches the launchers follow (WithSwitches), and
	// gemvRows the largest M the own GEMM sends to the GEMV
	// (GemvRowsFor(sw)). Tests change them on the GPU's thread.
	sw       model.Switches
	gemvRows int
	// nvrtc is the NVRTC version that compiles the kernels (major * 100 +
	// minor, 1204 for 12.4; 0 where unknown): what the kernels can emit
	// depends on it (common.cuh's XR_E4M3_MMA), and so what f8MMA allows.
	nvrtc   int
	modules map[string]*module
	funcs   map[string]*Function
	blas    *BlasLt
	gemmWS  Buffer
	args    Args
}

// MapsHost reports whether kernels may write page-locked host memory
// (AllocHost) directly, as ArgmaxTo does.
func (g *GPU) MapsHost() bool { return g.uva }

func openGPU(index int, o options) (*GPU, error) {
	if err := cuErr("cuInit", C.xr_cuInit(0)); err != nil {
		return nil, err
	}
	info, err := deviceInfo(index)
	if err != nil {
		return nil, err
	}
	if info.Unusable != "" {
		return nil, fmt.Errorf("GPU %d (%s): %s", index, info.Name, info.Unusable)
	}
	g := &GPU{Info: info, cacheDir: o.cacheDir, syncLaunches: *o.syncLaunches,
		pdl:      info.Major >= 9 && o.sw.CUDAPDL && C.xr_has_launch_ex() != 0,
		launchEx: C.xr_has_launch_ex() != 0, tma: C.xr_has_tensor_map() != 0, tmaps: map[tmapKey]*[128]byte{}, tmaSlotsSeen: map[tmaSlotsKey]int{},
		sw: *o.sw, gemvRows: GemvRowsFor(*o.sw),
		modules: map[string]*module{}, funcs: map[string]*Function{}}
	if loadNVRTC() == nil {
		g.nvrtc = nvrtcVersionNum()
	}
	if err := cuErrf("cuDeviceGet", C.xr_cuDeviceGet(&g.dev, C.int(index)), "ordinal %d", index); err != nil {
		return nil, err
	}
	var uva C.int
	if C.xr_cuDeviceGetAttribute(&uva, C.int(attrUnifiedAddressing), g.dev) == 0 {
		g.uva = uva != 0
	}
	if err := cuErr("cuDevicePrimaryCtxRetain", C.xr_cuDevicePrimaryCtxRetain(&g.ctx, g.dev)); err != nil {
		return nil, err
	}
	if err := cuErr("cuCtxSetCurrent", C.xr_cuCtxSetCurrent(g.ctx)); err != nil {
		C.xr_cuDevicePrimaryCtxRelease(g.dev)
		return nil, err
	}
	s, err := g.NewStream()
	if err != nil {
		C.xr_cuDevicePrimaryCtxRelease(g.dev)
		return nil, err
	}
	g.Stream = s
	return g, nil
}

func (g *GPU) close() error {
	errs := []error{g.Stream.Sync()}
	if g.blas != nil {
		errs = append(errs, g.blas.close())
	}
	if g.gemmWS.Bytes > 0 {
		errs = append(errs, g.Free(g.gemmWS))
	}
	for _, m := range g.modules {
		errs = append(errs, cuErr("cuModuleUnload", C.xr_cuModuleUnload(m.mod)))
	}
	errs = append(errs, g.Stream.Close())
	errs = append(errs, cuErr("cuDevicePrimaryCtxRelease", C.xr_cuDevicePrimaryCtxRelease(g.dev)))
	return errors.Join(errs...)
}

// cuCtxSynchronize is left out on purpose: CUDA 13 added an incompatible
// cuCtxSynchronize_v2(CUcontext), and synchronizing the streams one uses says
// what is waited for anyway.

// MemInfo reports free and total device memory, the input to sizing the KV
// cache from the free fraction.
func (g *GPU) MemInfo() (free, total uint64, err error) {
	var f, t C.size_t
	if err := cuErr("cuMemGetInfo", C.xr_cuMemGetInfo(&f, &t)); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

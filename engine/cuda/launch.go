//go:build cgo && linux

package cuda

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

type module struct {
	mod   C.CUmodule
	cubin string // cache path, for error messages
}

// Function is a kernel of a loaded module.
type Function struct {
	f         C.CUfunction
	name      string
	family    string
	smemOptIn int // dynamic shared memory opted in to so far
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// compiledFamily is a family's cubin and where the cache keeps it.
type compiledFamily struct {
	src, path string
	cubin     []byte
}

// compileFamily compiles one family, or takes it from the cache. It
// touches no CUDA context, so families compile concurrently.
func (g *GPU) compileFamily(family string) (compiledFamily, error) {
	src, err := kernelSource(family)
	if err != nil {
		return compiledFamily{}, err
	}
	cubin, path, err := g.compileCached(family+".cu", src, kernelHeaders())
	if err != nil {
		return compiledFamily{}, err
	}
	return compiledFamily{src: src, path: path, cubin: cubin}, nil
}

// loadFamily compiles (or takes from the cache) and loads one kernel family.
func (g *GPU) loadFamily(family string) (*module, error) {
	if m, ok := g.modules[family]; ok {
		return m, nil
	}
	c, err := g.compileFamily(family)
	if err != nil {
		return nil, err
	}
	return g.loadModule(family, c)
}

// loadModule loads a compiled family into the GPU's context.
func (g *GPU) loadModule(family string, c compiledFamily) (*module, error) {
	m := &module{cubin: c.path}
	rc := C.xr_cuModuleLoadData(&m.mod, unsafe.Pointer(&c.cubin[0]))
	if rc != 0 && c.path != "" {
		// A damaged cache entry: compile afresh once.
		cubin, err := nvrtcCompile(family+".cu", c.src, kernelHeaders(), archOptions(g.Info.Arch()))
		if err != nil {
			return nil, err
		}
		_ = writeAtomic(c.path, cubin)
		rc = C.xr_cuModuleLoadData(&m.mod, unsafe.Pointer(&cubin[0]))
	}
	if err := cuErrf("cuModuleLoadData", rc, "%s.cu for %s", family, g.Info.Arch()); err != nil {
		return nil, err
	}
	g.modules[family] = m
	return m, nil
}

// LoadKernels compiles and loads every kernel family and allocates the own
// GEMM's workspace, so that nothing is compiled, loaded or allocated later
// (in the middle of a timed run or a capture). The families not loaded yet
// compile concurrently, one per CPU (NVRTC compiles distinct programs from
// several threads; a cold cache took about three minutes one at a time),
// and load in order.
func (g *GPU) LoadKernels() error {
	var todo []string
	for _, fam := range kernelFamilies() {
		if _, ok := g.modules[fam]; !ok {
			todo = append(todo, fam)
		}
	}
	done := make([]compiledFamily, len(todo))
	errs := make([]error, len(todo))
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, fam := range todo {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			done[i], errs[i] = g.compileFamily(fam)
		})
	}
	wg.Wait()
	for i, fam := range todo {
		if errs[i] != nil {
			return errs[i]
		}
		if _, err := g.loadModule(fam, done[i]); err != nil {
			return err
		}
	}
	if g.gemmWS.Bytes == 0 {
		ws, err := g.Alloc(GemmWorkspaceBytes)
		if err != nil {
			return err
		}
		g.gemmWS = ws
	}
	return nil
}

// cuFuncSetAttribute attribute: dynamic shared memory beyond the 48 KB
// default needs an explicit opt-in per kernel.
const funcAttrMaxDynamicShared = 8

// function returns a kernel, loading its family on first use.
func (g *GPU) function(family, name string) (*Function, error) {
	key := family + "/" + name
	if f, ok := g.funcs[key]; ok {
		return f, nil
	}
	m, err := g.loadFamily(family)
	if err != nil {
		return nil, err
	}
	f := &Function{name: name, family: family}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if err := cuErrf("cuModuleGetFunction", C.xr_cuModuleGetFunction(&f.f, m.mod, cname), "%s in %s.cu", name, family); err != nil {
		return nil, err
	}
	g.funcs[key] = f
	return f, nil
}

// allowShared lets f launch with bytes of dynamic shared memory, raising
// its limit once per size. It asks whatever the size, not only above the
// 48 KiB a launch gets without asking: a kernel's static shared memory
// counts against those too (attention_tc_f8's D=64 decode with 48 KiB of
// padded stages failed to launch so).
func (f *Function) allowShared(bytes int) error {
	if bytes <= f.smemOptIn {
		return nil
	}
	if err := cuErrf("cuFuncSetAttribute", C.xr_cuFuncSetAttribute(f.f, funcAttrMaxDynamicShared, C.int(bytes)),
		"%s: %d bytes of dynamic shared memory", f.name, bytes); err != nil {
		return err
	}
	f.smemOptIn = bytes
	return nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Args packs kernel arguments by value into one buffer, each at its natural
// alignment; C builds the parameter array from the offsets, so no Go pointer
// is ever handed to the driver.
type Args struct {
	buf  [512]byte
	off  [32]C.int
	n    int
	used int
}

func (a *Args) reset() *Args { a.n, a.used = 0, 0; return a }

func (a *Args) put(size int, write func([]byte)) *Args {
	a.used = (a.used + size - 1) &^ (size - 1)
	if a.n == len(a.off) || a.used+size > len(a.buf) {
		panic("cuda: too many kernel arguments")
	}
	write(a.buf[a.used : a.used+size])
	a.off[a.n] = C.int(a.used)
	a.n++
	a.used += size
	return a
}

// Blob appends 128 opaque bytes (a TMA descriptor, TensorMap), which the
// kernel takes by value at 64-byte alignment.
func (a *Args) Blob(v *[128]byte) *Args {
	return a.put(128, func(b []byte) { copy(b, v[:]) })
}

// Ptr appends a device pointer.
func (a *Args) Ptr(b Buffer) *Args { return a.U64(uint64(b.Ptr)) }

// U64 appends a 64-bit integer.
func (a *Args) U64(v uint64) *Args {
	return a.put(8, func(b []byte) { *(*uint64)(unsafe.Pointer(&b[0])) = v })
}

// I32 appends an int (checked to fit in 32 bits).
func (a *Args) I32(v int) *Args {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("cuda: kernel argument %d does not fit in int32", v))
	}
	return a.put(4, func(b []byte) { *(*int32)(unsafe.Pointer(&b[0])) = int32(v) })
}

// F32 appends a float.
func (a *Args) F32(v float32) *Args {
	return a.put(4, func(b []byte) { *(*float32)(unsafe.Pointer(&b[0])) = v })
}

// args returns the GPU's scratch argument pack; only its thread uses it.
func (g *GPU) argsPack() *Args { return g.args.reset() }

// pdlFamilies are the kernel families whose every kernel calls pdl_enter
// (kernels/common.cuh) before touching memory: only those may be launched
// with programmatic dependent launch, since a kernel that never waits could
// read its predecessor's output before it is written. A family joins the
// list once all its kernels wait.
var pdlFamilies = map[string]bool{
	"argmax": true, "attention": true, "attention_tc": true, "attention_wg": true, "attention_ws": true, "embedding": true, "fill": true, "fp8_fused": true, "gemm": true,
	"gemm_tma": true, "gemm_tma_swap": true, "gemm_tma_swap_p": true, "gemm_tma_swap2": true, "gemm_tma_p": true, "gemm_tma_swap_kp": true, "gemm_tma_swap_cl": true, "gemm_tma_cl": true, "gemm_tma_half": true, "gemm_tma_trace": true, "gemm_wgmma": true, "gemv": true, "ops": true, "prefetch": true, "rmsnorm": true,
	"rope": true, "swiglu": true,
}

// Launch queues f on s, with programmatic dependent launch where the GPU
// allows it (GPU.pdl) and f's family waits for it (pdlFamilies). With sync launches on (and outside a capture) it
// also waits, so that an asynchronous fault names the kernel.
func (s *Stream) Launch(f *Function, grid, block Dim3, smem int, a *Args) error {
	return s.launch(f, grid, block, smem, a, Dim3{X: 1, Y: 1, Z: 1})
}

// LaunchCluster is Launch with thread-block clusters of cluster's shape
// (cuLaunchKernelEx's cluster dimension; each of the grid's dimensions a
// multiple of the cluster's): the blocks of a cluster run at once on one
// GPC and may read each other's shared memory. A cluster of one block (or
// a zero Dim3) is a plain launch.
func (s *Stream) LaunchCluster(f *Function, grid, block Dim3, smem int, a *Args, cluster Dim3) error {
	c := Dim3{X: max(cluster.X, 1), Y: max(cluster.Y, 1), Z: max(cluster.Z, 1)}
	if c.X*c.Y*c.Z > 1 && (!s.g.launchEx || max(grid.X, 1)%c.X != 0 || max(grid.Y, 1)%c.Y != 0 || max(grid.Z, 1)%c.Z != 0) {
		return fmt.Errorf("cuda: %s: clusters of %dx%dx%d blocks need cuLaunchKernelEx and a grid that is a multiple (grid %dx%dx%d)",
			f.name, c.X, c.Y, c.Z, grid.X, grid.Y, grid.Z)
	}
	return s.launch(f, grid, block, smem, a, c)
}

func (s *Stream) launch(f *Function, grid, block Dim3, smem int, a *Args, cluster Dim3) error {
	gz, bz := max(grid.Z, 1), max(block.Z, 1)
	gy, by := max(grid.Y, 1), max(block.Y, 1)
	args, offs := (*C.uchar)(unsafe.Pointer(&a.buf[0])), &a.off[0]
	pdl := s.g.pdl && pdlFamilies[f.family]
	var rc C.CUresult
	switch {
	case cluster.X*cluster.Y*cluster.Z > 1:
		rc = C.xr_launch_ex(f.f, C.uint(grid.X), C.uint(gy), C.uint(gz), C.uint(block.X), C.uint(by), C.uint(bz),
			C.uint(smem), s.s, args, offs, C.int(a.n), C.int(b2i(pdl)), C.uint(cluster.X), C.uint(cluster.Y), C.uint(cluster.Z))
	case pdl:
		rc = C.xr_launch_pdl(f.f, C.uint(grid.X), C.uint(gy), C.uint(gz), C.uint(block.X), C.uint(by), C.uint(bz),
			C.uint(smem), s.s, args, offs, C.int(a.n))
	default:
		rc = C.xr_launch(f.f, C.uint(grid.X), C.uint(gy), C.uint(gz), C.uint(block.X), C.uint(by), C.uint(bz),
			C.uint(smem), s.s, args, offs, C.int(a.n))
	}
	if err := cuErrf("cuLaunchKernel", rc, "%s grid %dx%dx%d block %dx%dx%d smem %d cluster %dx%dx%d", f.name,
		grid.X, gy, gz, block.X, by, bz, smem, cluster.X, cluster.Y, cluster.Z); err != nil {
		return err
	}
	if s.g.syncLaunches && !s.capturing {
		return cuErrf("cuStreamSynchronize", C.xr_cuStreamSynchronize(s.s), "after kernel %s", f.name)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

package profile

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/engine/cuda"
)

// Device is what the diagnosis compares a pass against: the roofline's
// two ceilings and the element size the model's bytes are counted in.
type Device struct {
	// Name is the device as reported ("NVIDIA H100 80GB HBM3", "cpu").
	Name string
	// PeakBytesPerSec is the memory bandwidth ceiling, bytes read plus
	// written per second.
	PeakBytesPerSec float64
	// PeakFLOPs is the arithmetic ceiling at the compute dtype, FLOP/s.
	PeakFLOPs float64
	// PeakSource says where the ceilings come from, for the reader.
	PeakSource string
	// ElemBytes is the size of a weight and KV-cache element: 2 for
	// fp16/bf16 on a GPU, 4 on the CPU backend (float32).
	ElemBytes int
	// FP8: the cell ran dtype fp8, whose linear layers' weights are one
	// byte and whose GEMM FLOPs run at PeakFP8FLOPs (0: at PeakFLOPs).
	// KVElemBytes is the KV cache's element size (0: ElemBytes; 1 under
	// kv_cache_dtype fp8).
	FP8          bool
	PeakFP8FLOPs float64
	KVElemBytes  int
	// MXFP4Experts: the routed experts are MXFP4 (moe_weights mxfp4),
	// 4.25 bits a weight.
	MXFP4Experts bool
}

// GPUDevice returns the ceilings for a GPU by its name, those measured on
// the project's machines (cuda.KnownCeilings); ok is false for a GPU xrun
// has none for (a cell's record may then carry the ones the CUDA backend
// measured: MeasuredDevice).
func GPUDevice(name string) (d Device, ok bool) {
	d = Device{Name: name, ElemBytes: 2}
	c, kind, ok := cuda.KnownCeilings(name)
	if !ok {
		return d, false
	}
	d.PeakBytesPerSec, d.PeakFLOPs, d.PeakFP8FLOPs = c.BytesPerSec, c.FLOPs, c.FP8FLOPs
	d.PeakSource = "measured on an " + kind + ": device-to-device copy and bf16 GEMM"
	return d, true
}

var (
	cpuOnce sync.Once
	cpuDev  Device
)

// CPUDevice returns the CPU's ceilings: memory bandwidth measured once per
// process (a parallel copy of buffers larger than any cache, best of
// three, ~0.1 s), and the FLOP rate estimated from the cores, the clock
// in /proc/cpuinfo and the vector width the CPU backend's GEMM uses
// (AVX2+FMA: 32 float32 FLOP per cycle per core, AVX-512 or not). Environment variables XRUN_CPU_PEAK_BYTES_PER_SEC and
// XRUN_CPU_PEAK_FLOPS override either.
func CPUDevice() Device {
	cpuOnce.Do(func() {
		cpuDev = Device{Name: "cpu", ElemBytes: 4}
		bw, bwSrc := envFloat("XRUN_CPU_PEAK_BYTES_PER_SEC")
		if !bwSrc {
			bw = measureCopyBandwidth(64<<20, 3)
		}
		fl, flSrc := envFloat("XRUN_CPU_PEAK_FLOPS")
		if !flSrc {
			fl = estimateCPUFLOPs()
		}
		cpuDev.PeakBytesPerSec, cpuDev.PeakFLOPs = bw, fl
		cpuDev.PeakSource = fmt.Sprintf("%s bandwidth (parallel copy), %s FLOP rate (%d cores x clock x vector width)",
			pickStr(bwSrc, "configured", "measured"), pickStr(flSrc, "configured", "estimated"), runtime.GOMAXPROCS(0))
	})
	return cpuDev
}

func pickStr(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func envFloat(name string) (float64, bool) {
	v, err := strconv.ParseFloat(os.Getenv(name), 64)
	return v, err == nil && v > 0
}

// measureCopyBandwidth copies n bytes split over GOMAXPROCS goroutines and
// returns the best rate over reps, counting bytes read plus written (as
// the GPU ceiling does).
func measureCopyBandwidth(n, reps int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	p := runtime.GOMAXPROCS(0)
	chunk := (n + p - 1) / p
	best := 0.0
	for range reps + 1 { // the first pass faults the pages in
		t0 := time.Now()
		var wg sync.WaitGroup
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
		if dt := time.Since(t0).Seconds(); dt > 0 {
			best = max(best, 2*float64(n)/dt)
		}
	}
	return best
}

// estimateCPUFLOPs is cores x clock x FLOP per cycle, from /proc/cpuinfo
// where it exists (3 GHz and AVX2 assumed elsewhere).
func estimateCPUFLOPs() float64 {
	mhz, perCycle := 3000.0, 32.0
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		fma := false
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "cpu MHz":
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && x > 0 {
					mhz = x
				}
			case "flags":
				fs := " " + v + " "
				fma = strings.Contains(fs, " fma ") && strings.Contains(fs, " avx2 ")
			}
		}
		if !fma {
			perCycle = 8
		}
	}
	return float64(runtime.GOMAXPROCS(0)) * mhz * 1e6 * perCycle
}

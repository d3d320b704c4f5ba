//go:build cgo && linux

package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	_ "github.com/xrun-dev/xrun/engine/cuda/backend" // registers the "cuda" backend
	"github.com/xrun-dev/xrun/engine/profile/cupti"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/kernelname"
	"github.com/xrun-dev/xrun/results/layout"
)

// selfTest opens CUPTI (after the timed passes, as the worker would) and
// checks its record layout on a kernel of known name, on a device handle
// of its own (same GPU, same primary context).
func selfTest(t *testing.T) {
	s, err := cupti.Open()
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats().Verified {
		return
	}
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	err = dev.Do(func(g *cuda.GPU) error {
		buf, err := g.Alloc(1 << 12)
		if err != nil {
			return err
		}
		defer g.Free(buf)
		return s.SelfTest(func() error {
			if err := g.RandomFill(g.Stream, cuda.F16, buf, 1, 0, 1); err != nil {
				return err
			}
			return g.Stream.Sync()
		}, "random_fill_f16")
	})
	cupti.RecordSelfTest(err)
	if err != nil {
		t.Fatal(err)
	}
}

// TestGPUProfiledPass profiles TinyLlama-1.1B on the GPU with gemm_plugin
// auto and disable through engine.New / Run, as the runner's worker does,
// writes the artifacts (into XRUN_PROFILE_OUT when set), checks that the
// kernel table shows cuBLASLt's GEMMs for auto and the engine's own for
// disable, and measures the profiler's cost on the window's iterations. The
// backend opens CUPTI itself in the profiled pass (StartProfile).
func TestGPUProfiledPass(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cuda.Probe(ctx); err != nil {
		var ng *cuda.NoGPUError
		if errors.As(err, &ng) {
			t.Skipf("no usable GPU: %v", ng.Reason)
		}
		t.Fatal(err)
	}
	out := os.Getenv("XRUN_PROFILE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	var reqs []datasets.Request
	for i := range 128 {
		in := make([]int32, 128)
		for j := range in {
			in[j] = int32(1 + (i*131+j*17)%31000)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: in, OutputTokens: 32})
	}
	cells := map[string]results.KernelCell{}
	for _, gemm := range []string{"disable", "auto"} {
		e, err := engine.New(context.Background(), engine.Config{Model: "tinyllama-1.1b", Backend: "cuda", Dtype: "float16",
			BatchSize: 64, GemmPlugin: gemm, ProfileWindow: "40-49", Warmup: 2})
		if err != nil {
			t.Fatal(err)
		}
		e.Run(context.Background(), reqs, engine.RunOptions{}) // warm: kernels loaded, graphs captured
		timed, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		selfTest(t)
		prof, err := e.Run(context.Background(), reqs, engine.RunOptions{Profile: true})
		if err != nil {
			t.Fatal(err)
		}
		mc := e.Model()
		e.Close()
		dir := filepath.Join(out, "gemm-"+gemm)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p, _, err := WriteArtifacts(dir, prof, mc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, layout.TraceFile))
		validateTrace(t, data)
		kcsv, _ := os.ReadFile(filepath.Join(dir, layout.KernelsFile))
		checkTotals(t, kcsv, data)

		win := func(r *engine.Result) (d time.Duration) {
			for _, it := range r.Iterations {
				if it.Index >= 40 && it.Index <= 49 {
					d += it.Duration
				}
			}
			return d / 10
		}
		fmt.Printf("PROFILE gemm=%s backend=%s records=%d window_iter_us_timed=%.1f window_iter_us_profiled=%.1f window_overhead_pct=%.1f out_tok_s_timed=%.0f out_tok_s_profiled_pass=%.0f\n",
			gemm, prof.Backend, len(prof.Ops), float64(win(timed))/1e3, float64(win(prof))/1e3, 100*(float64(win(prof))/float64(win(timed))-1),
			timed.Metrics["system_output_throughput_tok_s"], prof.Metrics["system_output_throughput_tok_s"])
		fmt.Printf("== gemm_plugin=%s: top kernels (%s)\n", gemm, layout.KernelsFile)
		for _, k := range p.Kernels[:min(6, len(p.Kernels))] {
			fmt.Printf("  %5.1f%% %10d ns %5d x  %s\n", k.TimePct, k.TotalNs, k.Instances, k.Name)
		}
		fmt.Printf("== gemm_plugin=%s: diagnosis\n  %s\n", gemm, strings.Join(p.Diagnosis, "\n  "))

		stats := Summarize(prof.Ops)
		gemms := ""
		for _, st := range stats {
			if kernelname.IsGEMM(st.Name) {
				gemms += st.Name + "; "
			}
		}
		if gemms == "" {
			t.Errorf("gemm_plugin=%s: no GEMM kernel among %d kernels", gemm, len(stats))
		}
		cells[gemm] = kernelCell("gemm-"+gemm, p.Iterations, stats)
		if p.Iterations != 10 || len(prof.Ops) == 0 {
			t.Errorf("gemm_plugin=%s: %d iterations, %d ops in the window", gemm, p.Iterations, len(prof.Ops))
		}
	}
	d := results.DiffKernels(cells["disable"], cells["auto"])
	var b bytes.Buffer
	d.Render(&b, "text")
	os.WriteFile(filepath.Join(out, "diff.txt"), b.Bytes(), 0o644)
	fmt.Printf("== xrun kernels: disable (A) vs auto (B)\n%s", b.String())
	replaced := false
	for _, r := range d.Replaced {
		replaced = replaced || (r.Category == "GEMM" && len(r.Old) > 0 && len(r.New) > 0)
	}
	if !replaced {
		t.Errorf("the diff does not show GEMM kernels replaced between disable and auto: %+v", d.Replaced)
	}
}

//go:build cgo && linux

package cuda

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Probe(ctx)
	var ng *NoGPUError
	if errors.As(err, &ng) {
		// No GPU here: the explanation must say what is missing.
		if ng.Reason == "" || !strings.Contains(ng.Error(), "no usable GPU") {
			t.Errorf("unhelpful explanation: %q", ng.Error())
		}
		t.Skipf("no usable GPU: %v", ng)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GPUs) == 0 || d.CUDAVersion == "" || d.DriverVersion == "" || len(d.Libraries) != 3 {
		t.Errorf("incomplete probe: %+v", d)
	}
	for _, g := range d.GPUs {
		if g.Name == "" || !strings.HasPrefix(g.UUID, "GPU-") || g.MemoryBytes == 0 || g.SMs == 0 {
			t.Errorf("incomplete device: %+v", g)
		}
		t.Logf("GPU %d: %s %s %d MiB cc %d.%d (%s), %d SMs, L2 %d MiB; driver %s, CUDA %s",
			g.Index, g.Name, g.UUID, g.MemoryBytes>>20, g.Major, g.Minor, g.Arch(), g.SMs, g.L2Bytes>>20, d.DriverVersion, d.CUDAVersion)
	}
	for _, l := range d.Libraries {
		t.Logf("%s %s: %s", l.Name, l.Version, l.Path)
	}
}

func TestMemory(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		r := newRand(t)
		src := make([]byte, 1<<20+3)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		a, err := g.Alloc(len(src))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(a)
		b, err := g.Alloc(len(src))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(b)
		if err := g.Stream.Upload(a, src); err != nil {
			t.Fatal(err)
		}
		if err := g.Stream.Copy(b, a); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(src))
		if err := g.Stream.Download(got, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Error("upload, device copy, download did not round-trip")
		}

		// Page-locked buffers and asynchronous copies on a second stream,
		// ordered after the first by an event.
		h, err := g.AllocHost(len(src))
		if err != nil {
			t.Fatal(err)
		}
		defer g.FreeHost(h)
		if err := g.Stream.Zero(b); err != nil {
			t.Fatal(err)
		}
		s2 := forkedStream(t, g)
		copy(h.Bytes(), src)
		if err := s2.UploadAsync(b, h, len(src)); err != nil {
			t.Fatal(err)
		}
		if err := s2.Sync(); err != nil { // the copy reads h until it is done
			t.Fatal(err)
		}
		clear(h.Bytes())
		if err := s2.DownloadAsync(h, b, len(src)); err != nil {
			t.Fatal(err)
		}
		if err := s2.Sync(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(h.Bytes(), src) {
			t.Error("page-locked asynchronous copies did not round-trip")
		}
		free, total, err := g.MemInfo()
		if err != nil || free == 0 || free > total {
			t.Errorf("MemInfo: free %d total %d err %v", free, total, err)
		}
	})
}

// TestErrorsNameTheCall provokes driver, cuBLASLt and NVRTC failures and
// checks that each error names the call and the library's error name.
func TestErrorsNameTheCall(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		_, err := g.Alloc(1 << 60)
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != "cuMemAlloc" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Text == "" {
			t.Errorf("huge Alloc: %v", err)
		}
		_, _, err = nvrtcCompileLog("bad.cu", `extern "C" __global__ void k() { undeclared_thing(); }`, nil, archOptions(g.Info.Arch()))
		if !errors.As(err, &ce) || ce.Call != "nvrtcCompileProgram" || !strings.Contains(err.Error(), "undeclared_thing") {
			t.Errorf("bad kernel source: %v", err)
		}
	})
}

// TestGraph captures a small forward step (norm, GEMM, SwiGLU), replays it
// and checks that replay and eager execution agree bit for bit, then times
// replays with events.
func TestGraph(t *testing.T) {
	const dt, rows, hidden, ffn = F16, 8, 256, 704
	do(t, func(t testing.TB, g *GPU) {
		if err := g.LoadKernels(); err != nil {
			t.Fatal(err)
		}
		r := newRand(t)
		x := devUpload(t, g, dt, randVals(r, dt, rows*hidden, 1))
		nw := devUpload(t, g, dt, randVals(r, dt, hidden, 1))
		w := devUpload(t, g, dt, randVals(r, dt, 2*ffn*hidden, 0.1))
		h := devPoisoned(t, g, dt, rows*hidden)
		gu := devPoisoned(t, g, dt, rows*2*ffn)
		out := devPoisoned(t, g, dt, rows*ffn)
		step := func() error {
			if err := g.RMSNorm(g.Stream, dt, h, x, nw, rows, hidden, 1e-5); err != nil {
				return err
			}
			if err := g.Gemm(g.Stream, dt, gu, h, w, rows, 2*ffn, hidden); err != nil {
				return err
			}
			return g.SwiGLU(g.Stream, dt, out, gu, gu.Slice(ffn*dt.Size(), gu.Bytes-ffn*dt.Size()), rows, ffn, 2*ffn)
		}
		if err := step(); err != nil {
			t.Fatal(err)
		}
		eager := download(t, g, dt, out, rows*ffn)
		if err := g.Stream.Fill16(out, dt.NaNBits()); err != nil {
			t.Fatal(err)
		}
		gr, err := g.Stream.Capture(step)
		if err != nil {
			t.Fatal(err)
		}
		defer gr.Close()
		if err := gr.Launch(g.Stream); err != nil {
			t.Fatal(err)
		}
		replay := download(t, g, dt, out, rows*ffn)
		for i := range eager {
			if eager[i] != replay[i] {
				t.Fatalf("graph replay differs from eager at %d: %g vs %g", i, replay[i], eager[i])
			}
		}
		const n = 100
		d, err := g.Stream.Time(func() error {
			for range n {
				if err := gr.Launch(g.Stream); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("graph of one small step: %.2f us per replay", d.Seconds()*1e6/n)
	})
}

//go:build cgo && linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNCCLLoadError: without an NCCL the error lists every path tried and
// says how to name one; it runs on any machine.
func TestNCCLLoadError(t *testing.T) {
	err := loadNCCLFrom([]string{"/nonexistent/libnccl.so.2", "libnccl-missing.so.2"})
	var le *LoadError
	if !errors.As(err, &le) || le.Library != "libnccl.so.2" || len(le.Tried) != 2 || le.Reason != "" {
		t.Fatalf("%v; want a LoadError with both paths tried", err)
	}
	if !strings.Contains(le.Tried[0].Path, "/nonexistent/libnccl.so.2") || !strings.Contains(le.Tried[1].Path, "loader search") ||
		!strings.Contains(err.Error(), NCCLEnv) {
		t.Errorf("error %q", err)
	}
}

// TestGatherBlocks lays NCCL's all-gather output (rank after rank) out as
// the ranks' columns side by side, for widths with and without 16-byte
// moves.
func TestGatherBlocks(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		for _, c := range []struct{ rows, w, ranks int }{{5, 24, 2}, {3, 13, 4}, {1, 8, 2}, {7, 1000, 3}} {
			n := c.rows * c.w * c.ranks
			blk := make([]uint16, n)
			for i := range blk {
				blk[i] = uint16(i*7 + 1)
			}
			in := devUploadT(t, g, blk)
			out := devPoisoned(t, g, BF16, n)
			if err := g.GatherBlocks(g.Stream, BF16, out, in, c.rows, c.w, c.ranks); err != nil {
				t.Fatal(err)
			}
			got := make([]uint16, n)
			if err := DownloadSlice(g.Stream, got, out); err != nil {
				t.Fatal(err)
			}
			want := gatherBlocksRef(blk, c.rows, c.w, c.ranks)
			if !slices.Equal(got, want) {
				t.Errorf("rows %d, w %d, ranks %d: got %v, want %v", c.rows, c.w, c.ranks, got[:min(16, n)], want[:min(16, n)])
			}
		}
	})
}

func gatherBlocksRef(blk []uint16, rows, w, ranks int) []uint16 {
	out := make([]uint16, len(blk))
	for j := range ranks {
		for r := range rows {
			copy(out[(r*ranks+j)*w:(r*ranks+j+1)*w], blk[(j*rows+r)*w:(j*rows+r+1)*w])
		}
	}
	return out
}

// TestMoEShardIDs renumbers a rank's experts from 0 and sets every other
// id, padding's -1 included, to -1.
func TestMoEShardIDs(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		ids := []int32{0, 3, 4, 5, 7, -1, 2, 6, 4, 4, 1, 5}
		for _, c := range []struct {
			first, experts int
			want           []int32
		}{
			{4, 2, []int32{-1, -1, 0, 1, -1, -1, -1, -1, 0, 0, -1, 1}},
			{0, 4, []int32{0, 3, -1, -1, -1, -1, 2, -1, -1, -1, 1, -1}},
			{6, 2, []int32{-1, -1, -1, -1, 1, -1, -1, 0, -1, -1, -1, -1}},
		} {
			in := devUploadT(t, g, ids)
			out := devUploadT(t, g, make([]int32, len(ids)))
			if err := g.MoEShardIDs(g.Stream, out, in, len(ids), c.first, c.experts); err != nil {
				t.Fatal(err)
			}
			got := make([]int32, len(ids))
			if err := DownloadSlice(g.Stream, got, out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("experts %d..%d: %v, want %v", c.first, c.first+c.experts-1, got, c.want)
			}
		}
	})
}

// parallelGPUs opens n GPUs for a multi-GPU test, or skips saying how
// many are visible.
func parallelGPUs(t *testing.T, n int) []*Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Probe(ctx)
	var ng *NoGPUError
	if errors.As(err, &ng) {
		t.Skipf("no usable GPU, GPU check skipped: %v", ng.Reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	usable := 0
	for _, g := range d.GPUs {
		if g.Unusable == "" {
			usable++
		}
	}
	if usable < n {
		t.Skipf("%d usable GPU(s) visible, this check needs %d (a multi-GPU machine; CUDA_VISIBLE_DEVICES)", usable, n)
	}
	if err := LoadNCCL(); err != nil {
		if n == 1 {
			t.Skipf("no NCCL on this machine: %v", err)
		}
		t.Fatalf("%d GPUs but no NCCL: %v", usable, err)
	}
	v, path := NCCLInfo()
	t.Logf("NCCL %s from %s", v, path)
	devs := make([]*Device, n)
	for i := range devs {
		if devs[i], err = Open(i); err != nil {
			t.Fatal(err)
		}
		dev := devs[i]
		t.Cleanup(func() { dev.Close() })
	}
	return devs
}

// ncclComms makes one communicator per device, all at once (each
// ncclCommInitRank waits for the others), and destroys them at the end.
func ncclComms(t *testing.T, devs []*Device) []*Comm {
	t.Helper()
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	comms := make([]*Comm, len(devs))
	onAll(t, devs, func(i int, g *GPU) (err error) {
		comms[i], err = g.NCCLInit(id, len(devs), i)
		return err
	})
	t.Cleanup(func() {
		onAll(t, devs, func(i int, g *GPU) error { return comms[i].Destroy() })
	})
	return comms
}

// onAll runs fn on every device's thread at once and fails on any error.
func onAll(t *testing.T, devs []*Device, fn func(i int, g *GPU) error) {
	t.Helper()
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Do(func(g *GPU) error { return fn(i, g) })
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestParallelNCCLCollectives: an all-reduce (sum) and an all-gather laid
// out by GatherBlocks on 2 GPUs (and 4 where there are), fp16 and bf16,
// queued on each GPU's main stream, eagerly and captured in a graph. A
// group of one GPU (NCCL copies) checks the library's loading and calls
// on any GPU machine.
func TestParallelNCCLCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d-gpus", n), func(t *testing.T) {
			devs := parallelGPUs(t, n)
			comms := ncclComms(t, devs)
			for _, dt := range []DType{F16, BF16} {
				for _, graph := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/graph=%v", dt, graph), func(t *testing.T) { checkCollectives(t, devs, comms, dt, graph) })
				}
			}
		})
	}
}

func checkCollectives(t *testing.T, devs []*Device, comms []*Comm, dt DType, graph bool) {
	const rows, w = 5, 40
	n := len(devs)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	// Small integers: every partial sum is exact in fp16 and bf16, so the
	// all-reduce must give the exact sum whatever NCCL's order.
	vals := make([][]float32, n)
	sum := make([]float32, rows*w)
	for i := range vals {
		vals[i] = make([]float32, rows*w)
		for j := range vals[i] {
			vals[i][j] = float32(r.IntN(33) - 16)
			sum[j] += vals[i][j]
		}
	}
	red, in, stage, out := make([]Buffer, n), make([]Buffer, n), make([]Buffer, n), make([]Buffer, n)
	onAll(t, devs, func(i int, g *GPU) (err error) {
		for _, b := range []*Buffer{&red[i], &in[i]} {
			if *b, err = g.Alloc(rows * w * dt.Size()); err != nil {
				return err
			}
			if err := UploadSlice(g.Stream, *b, dt.Encode(vals[i])); err != nil {
				return err
			}
		}
		if stage[i], err = g.Alloc(n * rows * w * dt.Size()); err != nil {
			return err
		}
		if out[i], err = g.Alloc(n * rows * w * dt.Size()); err != nil {
			return err
		}
		if err := g.Stream.Fill16(out[i], dt.NaNBits()); err != nil {
			return err
		}
		// Each device frees its own buffers after the checks.
		return nil
	})
	defer onAll(t, devs, func(i int, g *GPU) error {
		return errors.Join(g.Free(red[i]), g.Free(in[i]), g.Free(stage[i]), g.Free(out[i]))
	})
	work := func(i int, g *GPU) error {
		if err := comms[i].AllReduceSum(g.Stream, dt, red[i], rows*w); err != nil {
			return err
		}
		if err := comms[i].AllGather(g.Stream, dt, stage[i], in[i], rows*w); err != nil {
			return err
		}
		return g.GatherBlocks(g.Stream, dt, out[i], stage[i], rows, w, n)
	}
	onAll(t, devs, func(i int, g *GPU) error {
		if !graph {
			return errors.Join(work(i, g), g.Stream.Sync())
		}
		gr, err := g.Stream.Capture(func() error { return work(i, g) })
		if err != nil {
			return err
		}
		defer gr.Close()
		return errors.Join(gr.Launch(g.Stream), g.Stream.Sync())
	})
	want := make([]float32, n*rows*w)
	for j := range n {
		for row := range rows {
			copy(want[(row*n+j)*w:(row*n+j+1)*w], vals[j][row*w:(row+1)*w])
		}
	}
	onAll(t, devs, func(i int, g *GPU) error {
		got := make([]uint16, rows*w)
		if err := DownloadSlice(g.Stream, got, red[i]); err != nil {
			return err
		}
		if s := dt.Decode(got); !slices.Equal(s, sum) {
			t.Errorf("rank %d: all-reduce %v..., want %v...", i, s[:8], sum[:8])
		}
		all := make([]uint16, n*rows*w)
		if err := DownloadSlice(g.Stream, all, out[i]); err != nil {
			return err
		}
		if s := dt.Decode(all); !slices.Equal(s, want) {
			t.Errorf("rank %d: all-gather %v..., want %v...", i, s[:8], want[:8])
		}
		return nil
	})
}

package datasets

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// countdownCtx is cancelled by its own n-th call to Err: a generation
// stopped part-way through, at a point that does not depend on timing.
type countdownCtx struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func newCountdown(n int64) *countdownCtx {
	ctx, cancel := context.WithCancel(context.Background())
	c := &countdownCtx{Context: ctx, cancel: cancel}
	c.n.Store(n)
	return c
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) <= 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// huge is a dataset far too large to finish by accident in a test: 3M
// requests of 128 tokens (about 1.5 GB of text).
func huge() Params {
	return Params{Dist: NormDist, NumRequests: 3_000_000, InputMean: 128, OutputMean: 128,
		Seed: DefaultSeed, VocabSize: 32000, EOSID: 2}
}

// cancellingWriter counts what it is given and cancels its context at the
// first write.
type cancellingWriter struct {
	n      int64
	cancel context.CancelFunc
}

func (w *cancellingWriter) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	if w.cancel != nil {
		w.cancel()
	}
	return len(b), nil
}

// TestWriteContextCancelled: a generation stops with ctx's error soon after
// ctx ends (within a few batches, not at the end of the dataset), on one
// CPU and on several, with and without --rand-task-id's pre-pass.
func TestWriteContextCancelled(t *testing.T) {
	lora := huge()
	lora.LoRA = &LoRAParams{Dir: "/lora", TaskID: -1, Rand: &[2]int{0, 3}}
	// A few batches of formatted ids at most (about 5 bytes each), against
	// 1.5 GB for the whole dataset.
	const bound = 16 * batchTokens * 8
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		t.Cleanup(func() { runtime.GOMAXPROCS(prev) })

		// Cancelled before it starts: nothing is written.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := &cancellingWriter{}
		if err := WriteContext(ctx, w, huge()); !errors.Is(err, context.Canceled) || w.n != 0 {
			t.Errorf("GOMAXPROCS %d, cancelled before: %v, %d bytes written; want context.Canceled and nothing", procs, err, w.n)
		}

		// Cancelled at the first chunk written.
		ctx, cancel = context.WithCancel(context.Background())
		w = &cancellingWriter{cancel: cancel}
		if err := WriteContext(ctx, w, huge()); !errors.Is(err, context.Canceled) || w.n == 0 || w.n > bound {
			t.Errorf("GOMAXPROCS %d, cancelled at the first write: %v, %d bytes written; want context.Canceled after 1 to %d bytes", procs, err, w.n, bound)
		}
		cancel()

		// Cancelled during --rand-task-id's pre-pass, which writes nothing.
		cd := newCountdown(3)
		w = &cancellingWriter{}
		if err := WriteContext(cd, w, lora); !errors.Is(err, context.Canceled) || w.n != 0 {
			t.Errorf("GOMAXPROCS %d, cancelled in the pre-pass: %v, %d bytes written; want context.Canceled and nothing", procs, err, w.n)
		}
		cd.cancel()
	}
}

// TestWriteContextComplete: a context that never ends changes nothing.
func TestWriteContextComplete(t *testing.T) {
	for _, rf := range referenceFiles {
		want, err := os.ReadFile(filepath.Join("testdata", rf.file))
		if err != nil {
			t.Fatal(err)
		}
		var got cancellingWriter
		if err := WriteContext(context.Background(), &got, rf.p); err != nil || got.n != int64(len(want)) {
			t.Errorf("%s: %v, %d bytes; want %d", rf.file, err, got.n, len(want))
		}
	}
}

// TestEnsureContextCancelled: an interrupted generation leaves nothing in
// the cache, not even the directories it created, and a later one
// generates the dataset whole.
func TestEnsureContextCancelled(t *testing.T) {
	root := t.TempDir()
	c := Cache{Dir: filepath.Join(root, "a", "b")}
	for _, n := range []int64{1, 5} {
		cd := newCountdown(n)
		_, err := c.EnsureContext(cd, huge())
		cd.cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("countdown %d: %v, want context.Canceled", n, err)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("countdown %d: an interrupted generation left %s behind", n, entries[0].Name())
		}
	}

	// Into an existing cache: the directory stays, the part does not.
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cd := newCountdown(5)
	if _, err := c.EnsureContext(cd, huge()); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	cd.cancel()
	if entries, err := os.ReadDir(c.Dir); err != nil || len(entries) != 0 {
		t.Errorf("the cache holds %v (%v), want it empty", entries, err)
	}

	rf := referenceFiles[0]
	want, _ := os.ReadFile(filepath.Join("testdata", rf.file))
	e, err := c.EnsureContext(context.Background(), rf.p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); string(got) != string(want) {
		t.Error("the dataset generated after an interrupted one differs from TensorRT-LLM's")
	}
}

//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"time"
)

// Stream is a CUDA stream of the GPU it was made on.
type Stream struct {
	s         C.CUstream
	g         *GPU
	capturing bool
}

// cuStreamCreate flag: no implicit synchronization with the legacy stream.
const streamNonBlocking = 1

// NewStream creates a non-blocking stream.
func (g *GPU) NewStream() (*Stream, error) {
	s := &Stream{g: g}
	if err := cuErr("cuStreamCreate", C.xr_cuStreamCreate(&s.s, streamNonBlocking)); err != nil {
		return nil, err
	}
	return s, nil
}

// Close destroys the stream once its work is done.
func (s *Stream) Close() error {
	if s == nil || s.s == nil {
		return nil
	}
	err := cuErr("cuStreamDestroy", C.xr_cuStreamDestroy(s.s))
	s.s = nil
	return err
}

// Sync waits for the stream's work.
func (s *Stream) Sync() error { return cuErr("cuStreamSynchronize", C.xr_cuStreamSynchronize(s.s)) }

// Wait makes later work on s wait for e (recorded on another stream).
func (s *Stream) Wait(e *Event) error {
	return cuErr("cuStreamWaitEvent", C.xr_cuStreamWaitEvent(s.s, e.e, 0))
}

// CUstreamCaptureMode: thread-local, so that a CUDA call made by another
// thread (another GPU's, or the Go runtime's) cannot invalidate the capture.
const captureThreadLocal = 1

// Graph is an instantiated CUDA graph: a captured sequence of kernels and
// copies replayed with one launch.
type Graph struct {
	graph C.CUgraph
	exec  C.CUgraphExec
}

// Capture records the work fn queues on s into a graph instead of running
// it, and instantiates it. Everything fn uses must exist before: library
// handles, loaded kernels, allocations and workspaces; fn must not allocate
// or synchronize.
func (s *Stream) Capture(fn func() error) (*Graph, error) {
	if err := cuErr("cuStreamBeginCapture", C.xr_cuStreamBeginCapture(s.s, captureThreadLocal)); err != nil {
		return nil, err
	}
	s.capturing = true
	ferr := fn()
	s.capturing = false
	gr := &Graph{}
	// End the capture even when fn failed, or the stream stays unusable.
	eerr := cuErr("cuStreamEndCapture", C.xr_cuStreamEndCapture(s.s, &gr.graph))
	if ferr != nil || eerr != nil {
		if gr.graph != nil {
			C.xr_cuGraphDestroy(gr.graph)
		}
		return nil, errors.Join(ferr, eerr)
	}
	if err := cuErr("cuGraphInstantiateWithFlags", C.xr_cuGraphInstantiateWithFlags(&gr.exec, gr.graph, 0)); err != nil {
		C.xr_cuGraphDestroy(gr.graph)
		return nil, err
	}
	return gr, nil
}

// Launch queues one replay of the graph on s.
func (gr *Graph) Launch(s *Stream) error {
	if gr == nil || gr.exec == nil {
		return errors.New("cuda: launching a destroyed graph")
	}
	return cuErr("cuGraphLaunch", C.xr_cuGraphLaunch(gr.exec, s.s))
}

// Close destroys the graph.
func (gr *Graph) Close() error {
	if gr == nil || gr.exec == nil {
		return nil
	}
	err := errors.Join(cuErr("cuGraphExecDestroy", C.xr_cuGraphExecDestroy(gr.exec)),
		cuErr("cuGraphDestroy", C.xr_cuGraphDestroy(gr.graph)))
	gr.exec, gr.graph = nil, nil
	return err
}

// Event marks a point in a stream; pairs of events time device work without
// the host's clock or a synchronization in between.
type Event struct{ e C.CUevent }

// NewEvent creates an event with timing enabled.
func (g *GPU) NewEvent() (*Event, error) {
	ev := &Event{}
	if err := cuErr("cuEventCreate", C.xr_cuEventCreate(&ev.e, 0)); err != nil {
		return nil, err
	}
	return ev, nil
}

// Record marks the point after the work queued on s so far.
func (e *Event) Record(s *Stream) error { return cuErr("cuEventRecord", C.xr_cuEventRecord(e.e, s.s)) }

// Sync waits for the event.
func (e *Event) Sync() error { return cuErr("cuEventSynchronize", C.xr_cuEventSynchronize(e.e)) }

// Close destroys the event.
func (e *Event) Close() error {
	if e == nil || e.e == nil {
		return nil
	}
	err := cuErr("cuEventDestroy", C.xr_cuEventDestroy(e.e))
	e.e = nil
	return err
}

// Elapsed is the device time between two recorded events (resolution about
// half a microsecond); it waits for end.
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := end.Sync(); err != nil {
		return 0, err
	}
	var ms C.float
	if err := cuErr("cuEventElapsedTime", C.xr_cuEventElapsedTime(&ms, start.e, end.e)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Time runs fn, which queues work on s, between two events and returns the
// device time that work took.
func (s *Stream) Time(fn func() error) (time.Duration, error) {
	a, err := s.g.NewEvent()
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b, err := s.g.NewEvent()
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if err := a.Record(s); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	if err := b.Record(s); err != nil {
		return 0, err
	}
	return Elapsed(a, b)
}

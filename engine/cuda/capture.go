//go:build cgo && linux

package cuda

/*
#include "shim.h"
*/
import "C"

import "errors"

// BeginCapture starts recording the work queued on s into a graph, for a
// capture that spans several calls (the model's ops of one iteration);
// EndCapture finishes it. Capture takes a closure instead when the work
// fits in one.
func (s *Stream) BeginCapture() error {
	if s.capturing {
		return errors.New("cuda: BeginCapture on a stream already capturing")
	}
	if err := cuErr("cuStreamBeginCapture", C.xr_cuStreamBeginCapture(s.s, captureThreadLocal)); err != nil {
		return err
	}
	s.capturing = true
	return nil
}

// Capturing reports whether s is recording a graph.
func (s *Stream) Capturing() bool { return s.capturing }

// EndCapture ends the capture BeginCapture started and instantiates the
// graph. With failed set (something queued during the capture failed) it
// only ends the capture, so the stream is usable again, and returns nil.
func (s *Stream) EndCapture(failed bool) (*Graph, error) {
	if !s.capturing {
		return nil, errors.New("cuda: EndCapture without BeginCapture")
	}
	s.capturing = false
	gr := &Graph{}
	err := cuErr("cuStreamEndCapture", C.xr_cuStreamEndCapture(s.s, &gr.graph))
	if err != nil || failed {
		if gr.graph != nil {
			C.xr_cuGraphDestroy(gr.graph)
		}
		return nil, err
	}
	if err := cuErr("cuGraphInstantiateWithFlags", C.xr_cuGraphInstantiateWithFlags(&gr.exec, gr.graph, 0)); err != nil {
		C.xr_cuGraphDestroy(gr.graph)
		return nil, err
	}
	return gr, nil
}

// ProfilerStart and ProfilerStop bracket what an outside profiler started
// with `nsys profile -c cudaProfilerApi` or `ncu --profile-from-start off`
// records.
func (g *GPU) ProfilerStart() error { return cuErr("cuProfilerStart", C.xr_cuProfilerStart()) }

// ProfilerStop ends the span ProfilerStart opened.
func (g *GPU) ProfilerStop() error { return cuErr("cuProfilerStop", C.xr_cuProfilerStop()) }

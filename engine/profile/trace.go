package profile

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// The trace's processes: the engine's host thread (iterations, windows)
// and the device (one thread per stream). Perfetto and chrome://tracing
// group tracks by pid and name them from the "M" metadata events.
const (
	hostPID = 1
	devPID  = 2

	windowTID    = 1
	iterationTID = 2
	// streamTID0 is added to a stream id so that stream 0 (the CPU's only
	// "stream") does not collide with a thread id of 0, which some viewers
	// treat as unset.
	streamTID0 = 100
)

// TraceEvent is one event of the Chrome trace event format. ts and dur are
// microseconds; json.Number keeps them exact to the nanosecond.
type TraceEvent struct {
	Name string      `json:"name"`
	Cat  string      `json:"cat,omitempty"`
	Ph   string      `json:"ph"`
	PID  int         `json:"pid"`
	TID  int         `json:"tid"`
	TS   json.Number `json:"ts"`
	Dur  json.Number `json:"dur,omitempty"`
	Args any         `json:"args,omitempty"`
}

// opArgs are an op event's args; fields in alphabetical order, as a map
// would print them.
type opArgs struct {
	Block      string `json:"block,omitempty"`
	Bytes      *int64 `json:"bytes,omitempty"`
	Copy       string `json:"copy,omitempty"`
	DurationNs int64  `json:"duration_ns"`
	Grid       string `json:"grid,omitempty"`
	Iteration  int    `json:"iteration"`
}

// Trace is a trace.json document (the JSON object form).
type Trace struct {
	TraceEvents     []TraceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData,omitempty"`
}

// micros formats a duration in microseconds with nanosecond precision.
func micros(d time.Duration) json.Number {
	var b []byte
	if d < 0 {
		b, d = append(b, '-'), -d
	}
	b = strconv.AppendInt(b, int64(d/time.Microsecond), 10)
	f := int64(d % time.Microsecond)
	b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return json.Number(b)
}

func dims(d [3]uint32) string {
	b := strconv.AppendUint(nil, uint64(d[0]), 10)
	b = strconv.AppendUint(append(b, 'x'), uint64(d[1]), 10)
	return string(strconv.AppendUint(append(b, 'x'), uint64(d[2]), 10))
}

// TraceInfo describes where a pass ran, for the process names.
type TraceInfo struct {
	// Device names the process holding the op tracks, e.g. "GPU 0: NVIDIA
	// H100 80GB HBM3" or "cpu backend".
	Device string
	// Window is the profile window as configured ("100-150").
	Window string
}

// BuildTrace lays out a profiled pass as a trace: the profile windows and
// the profiled iterations (named as the engine names its ranges, e.g.
// "iteration 120: 2 ctx reqs, 64 ctx tokens, 62 gen reqs") on the host
// process; kernels, copies and memsets on one track per stream of the
// device process, each with its grid, block and duration in args. Times
// are since the run's start, as in iterations.csv. Events are sorted by
// track, then time, so every track reads monotonically.
func BuildTrace(res *engine.Result, info TraceInfo) *Trace {
	dev := info.Device
	if dev == "" {
		dev = "device (" + res.Backend + ")"
	}
	t := &Trace{DisplayTimeUnit: "ns", OtherData: map[string]any{"backend": res.Backend}}
	if info.Window != "" {
		t.OtherData["profile_window"] = info.Window
	}
	meta := func(name string, pid, tid int, value any) {
		t.TraceEvents = append(t.TraceEvents, TraceEvent{Name: name, Ph: "M", PID: pid, TID: tid, TS: "0", Args: map[string]any{"name": value}})
	}
	meta("process_name", hostPID, 0, "xrun engine (host)")
	meta("process_name", devPID, 0, dev)
	t.TraceEvents = append(t.TraceEvents,
		TraceEvent{Name: "process_sort_index", Ph: "M", PID: hostPID, TS: "0", Args: map[string]any{"sort_index": 0}},
		TraceEvent{Name: "process_sort_index", Ph: "M", PID: devPID, TS: "0", Args: map[string]any{"sort_index": 1}})
	meta("thread_name", hostPID, windowTID, "profile window")
	meta("thread_name", hostPID, iterationTID, "iterations")

	// timed is an event with its times still as durations, for sorting.
	type timed struct {
		ev      TraceEvent
		ts, dur time.Duration
	}
	var body []timed
	add := func(ev TraceEvent, ts, dur time.Duration) {
		ev.Ph, ev.TS, ev.Dur = "X", micros(ts), micros(dur)
		body = append(body, timed{ev, ts, dur})
	}
	// Windows: each run of consecutive profiled iterations.
	iters := profiledIterations(res)
	for _, w := range windowsOf(iters) {
		first, last := iters[w[0]], iters[w[1]]
		add(TraceEvent{Name: fmt.Sprintf("profile window %d-%d", first.Index, last.Index), Cat: "window", PID: hostPID, TID: windowTID,
			Args: map[string]any{"iterations": w[1] - w[0] + 1}}, first.Start, last.Start+last.Duration-first.Start)
	}
	for _, it := range iters {
		add(TraceEvent{Name: it.Name(), Cat: "iteration", PID: hostPID, TID: iterationTID,
			Args: map[string]any{"iteration": it.Index, "ctx_requests": it.CtxRequests, "ctx_tokens": it.CtxTokens,
				"gen_requests": it.GenRequests, "duration_ns": int64(it.Duration)}}, it.Start, it.Duration)
	}
	lanes := opLanes(res.Ops)
	demangled := names{}
	tracks := map[[2]int]bool{} // stream, lane
	for i := range res.Ops {
		op := &res.Ops[i]
		tracks[[2]int{int(op.Stream), lanes[i]}] = true
		kind := op.Kind
		if kind == "" {
			kind = model.OpKernel
		}
		args := &opArgs{Iteration: op.Iteration, DurationNs: int64(op.Duration)}
		name := demangled.of(op.Name)
		if kind == model.OpKernel {
			if op.Grid != ([3]uint32{}) || op.Block != ([3]uint32{}) {
				args.Grid, args.Block = dims(op.Grid), dims(op.Block)
			}
		} else {
			args.Bytes, args.Copy = &op.Bytes, op.Copy
			if name == "" {
				name = kind
			}
		}
		add(TraceEvent{Name: name, Cat: kind, PID: devPID, TID: streamTID(op.Stream, lanes[i]), Args: args}, op.Start, op.Duration)
	}
	keys := slices.SortedFunc(maps.Keys(tracks), func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for i, k := range keys {
		name := fmt.Sprintf("stream %d", k[0])
		if strings.HasPrefix(res.Backend, "cpu") {
			name = "ops (engine goroutine)"
		}
		if k[1] > 0 {
			name += fmt.Sprintf(" (overlapping %d)", k[1])
		}
		tid := streamTID(uint32(k[0]), k[1])
		meta("thread_name", devPID, tid, name)
		if len(keys) > 1 {
			t.TraceEvents = append(t.TraceEvents, TraceEvent{Name: "thread_sort_index", Ph: "M", PID: devPID, TID: tid, TS: "0", Args: map[string]any{"sort_index": i}})
		}
	}
	slices.SortStableFunc(body, func(a, b timed) int {
		return cmp.Or(cmp.Compare(a.ev.PID, b.ev.PID), cmp.Compare(a.ev.TID, b.ev.TID),
			cmp.Compare(a.ts, b.ts), cmp.Compare(b.dur, a.dur)) // enclosing event first
	})
	for _, b := range body {
		t.TraceEvents = append(t.TraceEvents, b.ev)
	}
	t.OtherData["iterations"] = len(iters)
	return t
}

// laneTIDs separates the lanes of one stream in thread ids.
const laneTIDs = 1 << 20

func streamTID(stream uint32, lane int) int { return streamTID0 + int(stream) + lane*laneTIDs }

// opLanes gives each op a lane of its stream: 0 unless it overlaps an
// earlier op of the stream without nesting in it (kernels of one stream
// may overlap under programmatic dependent launch; a timeline viewer
// draws only properly nested slices on one track), then the first lane
// free at its start.
func opLanes(ops []model.OpRecord) []int {
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ops[a].Stream, ops[b].Stream), cmp.Compare(ops[a].Start, ops[b].Start), cmp.Compare(ops[b].Duration, ops[a].Duration))
	})
	lanes := make([]int, len(ops))
	var ends []time.Duration // per lane, the end of its last op
	for k, i := range order {
		if k == 0 || ops[i].Stream != ops[order[k-1]].Stream {
			ends = ends[:0]
		}
		op := &ops[i]
		lane := slices.IndexFunc(ends, func(e time.Duration) bool { return e <= op.Start })
		if lane < 0 {
			lane = len(ends)
			ends = append(ends, 0)
		}
		ends[lane] = op.Start + op.Duration
		lanes[i] = lane
	}
	return lanes
}

// profiledIterations are the iterations inside the profile window.
func profiledIterations(res *engine.Result) []engine.IterationRecord {
	var out []engine.IterationRecord
	for _, it := range res.Iterations {
		if it.Profiled {
			out = append(out, it)
		}
	}
	return out
}

// windowsOf splits profiled iterations into runs of consecutive indexes:
// [first, last] positions in iters.
func windowsOf(iters []engine.IterationRecord) [][2]int {
	var out [][2]int
	for i := range iters {
		if i == 0 || iters[i].Index != iters[i-1].Index+1 {
			out = append(out, [2]int{i, i})
		}
		out[len(out)-1][1] = i
	}
	return out
}

// WriteTrace writes t as trace.json: one event per line, so that the file
// diffs and greps well and still parses as one JSON object.
func WriteTrace(w io.Writer, t *Trace) error {
	var b bytes.Buffer
	b.Grow(256 * len(t.TraceEvents))
	b.WriteString("{\"displayTimeUnit\":")
	var one bytes.Buffer
	je := json.NewEncoder(&one)
	je.SetEscapeHTML(false) // C++ names keep their < and >
	enc := func(v any) error {
		one.Reset()
		if err := je.Encode(v); err != nil {
			return err
		}
		b.Write(bytes.TrimSuffix(one.Bytes(), []byte("\n")))
		return nil
	}
	if err := enc(t.DisplayTimeUnit); err != nil {
		return err
	}
	if t.OtherData != nil {
		b.WriteString(",\"otherData\":")
		if err := enc(t.OtherData); err != nil {
			return err
		}
	}
	b.WriteString(",\"traceEvents\":[")
	for i, ev := range t.TraceEvents {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		if err := enc(ev); err != nil {
			return err
		}
	}
	b.WriteString("\n]}\n")
	_, err := w.Write(b.Bytes())
	return err
}

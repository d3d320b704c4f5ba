package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/atomicfile"
	"github.com/xrun-dev/xrun/results/layout"
)

// A cell's worker records every timed repeat as soon as it is done, under
// cells/<id>/repeats/, so that a crash, a kill or Ctrl-C in the middle of a
// cell loses at most the repeat in flight: the cell's next worker (xrun run
// --resume, or Slurm requeueing the task) keeps the repeats recorded under
// the cell's fingerprint and runs only the rest.
//
//	repeats/<n>.requests.jsonl   repeat n's lines of requests.jsonl (pass n-1)
//	repeats/<n>.iterations.csv   its rows of iterations.csv (no header)
//	repeats/<n>.expert_load.csv  repeat 1 of a MoE cell: expert_load.csv
//	repeats/<n>.telemetry.csv    its rows of telemetry.csv (GPU cells)
//	repeats/<n>.json             the repeat's record, written last: the
//	                             repeat counts once this file exists
//
// Every file is written whole and renamed into place. The repeats live in a
// directory of their own, not in a cell.json with a "partial" status,
// because cell.json's existence is what says a cell is complete — to
// --resume (loadRecords), to the executors (finishedCell), to the Slurm
// executor waiting for it to show on a shared filesystem — and its status
// is a results.Status every reader of results.json knows. The repeats stay
// the worker's own until it writes cell.json and the artifacts from them,
// as a run in one go would have; they are removed once an ok cell.json
// exists (a failed cell keeps them, for --resume).

// repeatRecord is cells/<id>/repeats/<n>.json.
type repeatRecord struct {
	Cell   string `json:"cell"`
	Repeat int    `json:"repeat"` // from 1
	// Fingerprint is the cell's (see fingerprint): a repeat is kept only
	// while it is unchanged.
	Fingerprint string `json:"fingerprint"`
	// Backend is the engine's backend and GEMM path; a worker whose engine
	// reports another measures the cell again.
	Backend  string          `json:"backend"`
	Session  workerSession   `json:"session"`
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	Metrics  results.Metrics `json:"metrics"`
	// Setup is how long the worker that ran the repeat took to get ready
	// before its first pass (reading the dataset, creating the engine).
	// With the pass's own time (Finished - Started, the engine's warm-up
	// requests included) it predicts the cell's next worker under a time
	// limit (see timelimit.go); records written before it have none.
	Setup time.Duration `json:"setup_ns,omitempty"`
	// WindowShare is how much of the pass ran by the end of its profile
	// window's last iteration (0: no window, the pass never reached it, or
	// an external engine's, whose profiled pass runs whole); xrun's own
	// engine stops its profiled pass there. WindowIterationNs is the mean
	// duration of the window's iterations in this pass.
	WindowShare       float64 `json:"window_share,omitempty"`
	WindowIterationNs float64 `json:"window_iteration_ns,omitempty"`
	// FirstTimedIteration is the pass's first iteration of the timed
	// requests, after its warm-up (0: no warm-up, or an older record). The
	// warm-up runs to its end before the timed requests start, the same
	// in every pass, so a profiled pass that stopped inside its warm-up
	// learns from it where the run begins.
	FirstTimedIteration int `json:"first_timed_iteration,omitempty"`
	// ExpertLoad is repeat 1's routing summary (MoE cells).
	ExpertLoad *results.ExpertLoad `json:"expert_load,omitempty"`
	// TelemetryOrigin is when the cell's telemetry began (its first
	// worker's start): telemetry.csv's time_ms counts from it whichever
	// worker sampled a row. Telemetry summarises the samples taken from
	// the previous repeat's end to this one's.
	TelemetryOrigin time.Time          `json:"telemetry_origin,omitzero"`
	Telemetry       *results.Telemetry `json:"telemetry,omitempty"`
	// Files are the repeat's data files (layout.RequestsFile, ...) and their
	// sizes, checked before the repeat is kept.
	Files map[string]int64 `json:"files"`
}

// workerSession is one worker process that measured part of a cell.
type workerSession struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

func (s workerSession) same(o workerSession) bool {
	return s.Host == o.Host && s.PID == o.PID && s.Started.Equal(o.Started)
}

// passOrigin says which worker ran one pass of a cell.
type passOrigin struct {
	Repeat   int  `json:"repeat,omitempty"` // from 1; 0 for the profiled pass
	Profiled bool `json:"profiled,omitempty"`
	// Session indexes the record's Sessions.
	Session int `json:"session"`
	// EarlierSession marks a pass an earlier worker process measured
	// (before an interrupt, a kill or a crash) and a later one kept.
	EarlierSession bool      `json:"earlier_session,omitempty"`
	Started        time.Time `json:"started"`
	Finished       time.Time `json:"finished"`
}

func repeatsDir(dir, id string) string {
	return filepath.Join(layout.CellDir(dir, id), layout.RepeatsDir)
}

// repeatPath is repeat n's file name (layout.RequestsFile, ..., or "json" for its
// record).
func repeatPath(dir, id string, n int, name string) string {
	return filepath.Join(repeatsDir(dir, id), strconv.Itoa(n)+"."+name)
}

const repeatRecordName = "json"

// loadKeptRepeats returns the repeats earlier workers recorded for cell c
// that a worker may keep: repeats/1.json, 2.json, ... in order, each of
// the cell's fingerprint and with its data files whole, up to the first
// that is missing or is not. why says what was found and not kept ("" when
// nothing was).
func loadKeptRepeats(dir string, c *workerCell, repeats int) (kept []repeatRecord, why string) {
	for n := 1; n <= repeats; n++ {
		path := repeatPath(dir, c.ID, n, repeatRecordName)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		var r repeatRecord
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		switch {
		case err != nil:
			why = fmt.Sprintf("%s: %v", path, err)
		case r.Cell != c.ID || r.Repeat != n:
			why = fmt.Sprintf("%s: holds repeat %d of cell %q", path, r.Repeat, r.Cell)
		case r.Fingerprint != c.Fingerprint:
			why = fmt.Sprintf("repeat %d was recorded under fingerprint %s, the cell's is now %s (parameters, build, backend or device changed)", n, r.Fingerprint, c.Fingerprint)
		default:
			why = checkRepeatFiles(dir, c.ID, &r)
		}
		if why != "" {
			break
		}
		kept = append(kept, r)
	}
	if why == "" {
		// Records past a gap cannot be kept either.
		if n := len(kept) + 1; n <= repeats {
			if _, err := os.Stat(repeatPath(dir, c.ID, n+1, repeatRecordName)); err == nil {
				why = fmt.Sprintf("repeat %d is missing, so the repeats after it are not kept", n)
			}
		}
	}
	return kept, why
}

func checkRepeatFiles(dir, id string, r *repeatRecord) string {
	for _, name := range slices.Sorted(maps.Keys(r.Files)) {
		st, err := os.Stat(repeatPath(dir, id, r.Repeat, name))
		if err != nil {
			return fmt.Sprintf("repeat %d: %v", r.Repeat, err)
		}
		if st.Size() != r.Files[name] {
			return fmt.Sprintf("repeat %d: %s has %d bytes, its record says %d", r.Repeat, name, st.Size(), r.Files[name])
		}
	}
	return ""
}

// pruneRepeats removes from a cell's repeats directory everything but the
// first keep repeats' files: records of another fingerprint, repeats past
// a gap, data files whose record was never written and temporary files a
// worker killed while writing left behind. With keep 0 the directory goes.
func pruneRepeats(dir, id string, keep int) error {
	rdir := repeatsDir(dir, id)
	if keep == 0 {
		return os.RemoveAll(rdir)
	}
	entries, err := os.ReadDir(rdir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), ".")
		if n, err := strconv.Atoi(num); err == nil && n >= 1 && n <= keep && e.Type().IsRegular() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(rdir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// clearCellDir removes what an earlier attempt at a cell left in its
// directory — cell.json above all, which must not be mistaken for the next
// attempt's — except the repeats it recorded and its log, which the next
// worker keeps (or discards) as they deserve.
func clearCellDir(cdir string) error {
	entries, err := os.ReadDir(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == layout.RepeatsDir || e.Name() == layout.LogFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(cdir, e.Name())); err != nil {
			return err
		}
	}
	// An earlier worker's stop at the time limit must not be taken for the
	// next one's either.
	if err := os.Remove(filepath.Join(cdir, layout.RepeatsDir, timeLimitFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// keptMetrics are the metrics of the repeats a cell's next worker would
// keep, for results.json while the cell is incomplete.
func keptMetrics(dir string, c *workerCell, repeats int) []results.Metrics {
	kept, _ := loadKeptRepeats(dir, c, repeats)
	var out []results.Metrics
	for _, r := range kept {
		out = append(out, r.Metrics)
	}
	return out
}

// recordRepeat records timed repeat n (from 1), which started at started
// (the worker's clock; passStart is the wall clock's, for the telemetry),
// under the cell's repeats directory: its data files first, its record
// last.
func (w *cellWorker) recordRepeat(ctx context.Context, n int, res *engine.Result, started, passStart time.Time) error {
	passEnd := time.Now()
	id := w.cell.ID
	if err := os.MkdirAll(repeatsDir(w.dir, id), 0o755); err != nil {
		return err
	}
	r := repeatRecord{
		Cell: id, Repeat: n, Fingerprint: w.cell.Fingerprint, Backend: w.rec.Backend, Session: w.session,
		Started: started, Finished: w.clock().UTC(), Setup: w.setup, Metrics: maps.Clone(results.Metrics(res.Metrics)),
		TelemetryOrigin: w.telOrigin, Files: map[string]int64{}, FirstTimedIteration: firstTimedIteration(res.Iterations),
	}
	if spans, _ := engine.ParseProfileWindow(w.cell.Engine.ProfileWindow); len(spans) > 0 && w.external == nil {
		// Only xrun's own engine stops its profiled pass at the window.
		r.WindowShare, r.WindowIterationNs = windowTiming(res, spans)
	}
	write := func(name string, fn func(io.Writer) error) error {
		path := repeatPath(w.dir, id, n, name)
		if err := atomicfile.Write(path, fn); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		r.Files[name] = st.Size()
		return nil
	}
	pass := n - 1
	if err := write(layout.RequestsFile, func(out io.Writer) error { return writePassRequests(out, pass, false, res) }); err != nil {
		return err
	}
	if err := write(layout.IterationsFile, func(out io.Writer) error { return writePassIterations(out, pass, false, res) }); err != nil {
		return err
	}
	if n == 1 && res.ExpertLoad != nil {
		// Routing is seeded: every repeat routes alike, so the first one
		// stands for all.
		r.ExpertLoad = expertLoad(res.ExpertLoad)
		if err := write(layout.ExpertLoadFile, func(out io.Writer) error { return writeExpertLoad(out, res.ExpertLoad) }); err != nil {
			return err
		}
	}
	if seg := w.cutTelemetry(true); len(seg.rows) > 0 {
		// The segment's rows all go to telemetry.csv; the summary is the
		// timed part's only.
		from, to := timedWindow(res, passStart.Sub(seg.start), passEnd.Sub(seg.start))
		r.Telemetry = telemetryRecord(profile.SummarizeTelemetry(profile.TimedSamples(seg.samples, from, to),
			profile.SummaryOptions{Period: seg.period, Threshold: w.plan.ThrottleThreshold}))
		// Energy needs the timed window: a pass without request records
		// (an external engine's report) would charge its start-up and
		// warm-up to the tokens, so it gets none.
		if len(res.Requests) > 0 {
			if j, ok := profile.TimedEnergy(seg.samples, from, to); ok {
				results.AddEnergyMetrics(r.Metrics, j)
			}
		}
		if err := write(layout.TelemetryFile, func(out io.Writer) error { _, err := out.Write(seg.rows); return err }); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(&r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	kill := faultAt(w.fault, "write-r"+strconv.Itoa(n))
	path := repeatPath(w.dir, id, n, repeatRecordName)
	err = atomicfile.Write(path, func(out io.Writer) error {
		if kill != "" {
			// A worker killed here leaves half a temporary file, never
			// half a record.
			if _, err := out.Write(b[:len(b)/2]); err != nil {
				return err
			}
			if err := injectFault(ctx, kill); err != nil {
				return err
			}
		}
		_, err := out.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w.done = append(w.done, r)
	return nil
}

// writePassRequests writes one pass's lines of requests.jsonl.
func writePassRequests(out io.Writer, pass int, profiled bool, res *engine.Result) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	for _, r := range res.Requests {
		if err := enc.Encode(requestLine{Pass: pass, Profiled: profiled, RequestRecord: r}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writePassIterations writes one pass's rows of iterations.csv, without
// the header.
func writePassIterations(out io.Writer, pass int, profiled bool, res *engine.Result) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	var b []byte
	for _, it := range res.Iterations {
		b = strconv.AppendInt(b[:0], int64(pass), 10)
		b = append(b, ',')
		b = strconv.AppendBool(b, profiled)
		for _, v := range []int64{int64(it.Index), int64(it.CtxRequests), int64(it.CtxTokens), int64(it.GenRequests), int64(it.Start), int64(it.Duration)} {
			b = append(b, ',')
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, ',')
		b = strconv.AppendBool(b, it.Warmup)
		b = append(b, ',')
		b = strconv.AppendBool(b, it.Profiled)
		b = append(b, '\n')
		bw.Write(b)
	}
	return bw.Flush()
}

// copyRepeatFiles appends file name of every recorded repeat that has one
// to out, in repeat order.
func (w *cellWorker) copyRepeatFiles(out io.Writer, name string) error {
	for _, r := range w.done {
		if _, ok := r.Files[name]; !ok {
			continue
		}
		f, err := os.Open(repeatPath(w.dir, w.cell.ID, r.Repeat, name))
		if err != nil {
			return err
		}
		_, err = io.Copy(out, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// timedWindow is when a pass's timed requests ran, from the first one's
// submission (after the engine's warm-up) to the last one's end, as times
// of a telemetry segment in which the pass ran from passStart to passEnd.
// The requests' times count from the pass's start; an external engine's
// that fall outside the pass are clamped to it.
func timedWindow(res *engine.Result, passStart, passEnd time.Duration) (from, to time.Duration) {
	if len(res.Requests) == 0 {
		return passStart, passEnd
	}
	first, last := res.Requests[0].Start, res.Requests[0].End
	for _, q := range res.Requests {
		first, last = min(first, q.Start), max(last, q.End)
	}
	from = min(max(passStart+first, passStart), passEnd)
	to = min(max(passStart+last, from), passEnd)
	return from, to
}

// telemetrySegment is the telemetry from one cut to the next.
type telemetrySegment struct {
	// rows are its rows of telemetry.csv, time_ms from the cell's
	// telemetry origin.
	rows []byte
	// samples are as sampled: times since start.
	samples []profile.Sample
	start   time.Time
	period  time.Duration
}

// cutTelemetry ends the telemetry segment in progress and returns it; with
// restart, a new segment begins. It is empty when nothing was sampled (the
// cpu backend, no NVML).
func (w *cellWorker) cutTelemetry(restart bool) telemetrySegment {
	if w.tel == nil || w.tel.Reason() != "" {
		return telemetrySegment{}
	}
	seg := telemetrySegment{samples: w.tel.Stop(), start: w.telStart, period: w.tel.Period()}
	if restart {
		w.tel, w.telStart = profile.StartTelemetry(0), time.Now()
	}
	if len(seg.samples) == 0 {
		return telemetrySegment{}
	}
	shifted := slices.Clone(seg.samples)
	off := seg.start.Sub(w.telOrigin)
	for i := range shifted {
		shifted[i].T += off
	}
	var b bytes.Buffer
	if err := profile.WriteTelemetryCSV(&b, shifted); err != nil {
		return telemetrySegment{}
	}
	seg.rows = b.Bytes()
	if i := bytes.IndexByte(seg.rows, '\n'); i >= 0 {
		seg.rows = seg.rows[i+1:] // the header is written once, in telemetry.csv
	}
	return seg
}

// telemetryRecord is a repeat's telemetry summary as results.json records
// it. The two types have the same fields: a field added to one alone
// stops the build here.
func telemetryRecord(t *profile.TelemetrySummary) *results.Telemetry {
	if t == nil {
		return nil
	}
	r := results.Telemetry(*t)
	return &r
}

// mergeTelemetry sums up the summaries of the timed repeats as one: means
// weighted by their samples, maxima, minima, energy and power-capped time
// summed, the throttle reasons of all. The throttle rule is judged again
// over the parts judged at threshold (the plan's; 0: the default), their
// judged samples pooled: a part summarised at another threshold (a
// resumed cell's run with another --throttle-threshold) or before the rule
// existed adds no judged samples. Where no part was judged at threshold,
// the cell is throttled as the records of earlier builds say (by the
// reasons), and has no rule's figures. nil when no part has samples.
func mergeTelemetry(parts []*results.Telemetry, threshold float64) *results.Telemetry {
	if threshold <= 0 {
		threshold = profile.DefaultThrottleThreshold
	}
	var out *results.Telemetry
	var judged int
	var below float64
	ruled, byReasons := false, false
	for _, p := range parts {
		if p == nil || p.Samples <= 0 {
			continue
		}
		switch p.ThrottleThreshold {
		case threshold:
			ruled = true
			if p.BelowThresholdShare != nil {
				judged += p.ClockSamples
				below += *p.BelowThresholdShare * float64(p.ClockSamples)
			}
		case 0:
			byReasons = byReasons || p.Throttled
		}
		if out == nil {
			c := *p
			c.ThrottleReasons = slices.Clone(p.ThrottleReasons)
			out = &c
			continue
		}
		wa, wb := float64(out.Samples), float64(p.Samples)
		mean := func(a, b float64) float64 { return (a*wa + b*wb) / (wa + wb) }
		out.SMClockMHzMean = mean(out.SMClockMHzMean, p.SMClockMHzMean)
		out.MemClockMHzMean = mean(out.MemClockMHzMean, p.MemClockMHzMean)
		out.PowerWMean = mean(out.PowerWMean, p.PowerWMean)
		out.GPUUtilPctMean = mean(out.GPUUtilPctMean, p.GPUUtilPctMean)
		out.MemUtilPctMean = mean(out.MemUtilPctMean, p.MemUtilPctMean)
		out.SMClockMHzMax = max(out.SMClockMHzMax, p.SMClockMHzMax)
		out.MemClockMHzMax = max(out.MemClockMHzMax, p.MemClockMHzMax)
		out.PowerWMax = max(out.PowerWMax, p.PowerWMax)
		out.TempCMax = max(out.TempCMax, p.TempCMax)
		out.MemUsedBytesMax = max(out.MemUsedBytesMax, p.MemUsedBytesMax)
		out.MaxSMClockMHz = max(out.MaxSMClockMHz, p.MaxSMClockMHz)
		if p.SMClockMHzMin > 0 && (out.SMClockMHzMin == 0 || p.SMClockMHzMin < out.SMClockMHzMin) {
			out.SMClockMHzMin = p.SMClockMHzMin // 0: a record of an earlier build, which has none
		}
		out.EnergyJ += p.EnergyJ
		out.PowerCappedS += p.PowerCappedS
		for _, r := range p.ThrottleReasons {
			if !slices.Contains(out.ThrottleReasons, r) {
				out.ThrottleReasons = append(out.ThrottleReasons, r)
			}
		}
		slices.Sort(out.ThrottleReasons)
		out.Samples += p.Samples
	}
	if out == nil {
		return nil
	}
	out.ThrottleThreshold, out.ClockSamples, out.BelowThresholdShare, out.Throttled = 0, 0, nil, byReasons
	if ruled {
		out.ThrottleThreshold, out.ClockSamples, out.Throttled = threshold, judged, false
		if judged > 0 {
			share := below / float64(judged)
			out.BelowThresholdShare, out.Throttled = &share, profile.Throttled(share)
		}
	}
	return out
}

// origins lists the workers that measured the cell and which ran each
// pass, for cell.json; this worker, which records the cell, comes last.
func (w *cellWorker) origins() ([]workerSession, []passOrigin) {
	var sessions []workerSession
	index := func(s workerSession) int {
		for i := range sessions {
			if sessions[i].same(s) {
				return i
			}
		}
		sessions = append(sessions, s)
		return len(sessions) - 1
	}
	var passes []passOrigin
	for _, r := range w.done {
		passes = append(passes, passOrigin{Repeat: r.Repeat, Session: index(r.Session), Started: r.Started, Finished: r.Finished})
	}
	cur := index(w.session)
	if w.profiledPass != nil {
		passes = append(passes, passOrigin{Profiled: true, Session: cur, Started: w.profiledStarted, Finished: w.profiledFinished})
	}
	for i := range passes {
		passes[i].EarlierSession = passes[i].Session != cur
	}
	return sessions, passes
}

// windowTiming is how much of a pass had run when its profile window
// ended (the end of its last iteration in a span over the end of its last
// iteration; 0 if it reached none) and the mean duration of its
// iterations in the spans.
func windowTiming(res *engine.Result, spans []engine.Span) (share, meanNs float64) {
	var sum, end, last time.Duration
	n := 0
	for _, it := range res.Iterations {
		last = max(last, it.Start+it.Duration)
		for _, s := range spans {
			if it.Index >= s.First && it.Index <= s.Last {
				end = max(end, it.Start+it.Duration)
				sum += it.Duration
				n++
				break
			}
		}
	}
	if n == 0 || last <= 0 {
		return 0, 0
	}
	return float64(end) / float64(last), float64(sum) / float64(n)
}

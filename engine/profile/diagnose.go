package profile

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/results/kernelname"
	"github.com/xrun-dev/xrun/results/numfmt"
)

// Pattern names, as performance engineers name what a profile shows.
const (
	PatternLowUtilization = "low GPU utilization"
	PatternLaunchOverhead = "kernel-launch overhead"
	PatternMemoryBound    = "memory-bandwidth bound"
	PatternComputeBound   = "compute bound"
	PatternGEMM           = "GEMM path"
	PatternTopKernel      = "top kernel"
	PatternMoE            = "MoE layer"
)

// Thresholds of the diagnosis.
const (
	// lowBusy: below this share of the window with a kernel or copy
	// running, the device waits on the host more than it works.
	lowBusy = 0.6
	// launchGapShare: gaps between consecutive kernels of an iteration
	// taking this share of the window mean launches, not kernels, set the
	// pace (eager launches cost ~2.5 us each on an H200, bench/GPU.md).
	launchGapShare = 0.15
	// overlapShare: kernels overlapping their predecessors on a stream
	// for this share of kernel time get a note (overlapNote).
	overlapShare = 0.05
)

// Finding is one pattern the numbers show, with the figures that
// triggered it.
type Finding struct {
	Pattern string
	Text    string
	Figures map[string]float64
}

func (f Finding) String() string { return f.Pattern + ": " + f.Text }

// Diagnosis is what a profiled pass's numbers say.
type Diagnosis struct {
	Device     Device
	Iterations int
	// Window is the profiled time: from the first profiled iteration's
	// start to the last one's end, summed over windows.
	Window time.Duration
	// Busy is the time with at least one op (kernel, copy, memset)
	// running inside the window.
	Busy time.Duration
	// Gaps is the idle time between consecutive ops of an iteration,
	// GapCount how many such gaps there were.
	Gaps     time.Duration
	GapCount int
	Kernels  int
	// KernelTime is the summed duration of the kernels.
	KernelTime time.Duration
	// Work is the roofline's work of the profiled iterations.
	Work     Work
	Findings []Finding
	// Notes are caveats (no records, CUPTI stepped aside, dropped
	// records).
	Notes []string
}

// Diagnose computes the diagnosis of a profiled pass. mc is the model the
// pass ran (for the roofline's bytes and FLOPs), dev the device's
// ceilings (zero ceilings skip the roofline).
func Diagnose(res *engine.Result, mc engine.ModelConfig, dev Device) *Diagnosis {
	return DiagnoseSplit(res, mc, dev, Split{})
}

// DiagnoseSplit is Diagnose of a pass split over GPUs as sp says: the
// profile is rank 0's, so its roofline is rank 0's share of the work
// against one GPU's ceilings.
func DiagnoseSplit(res *engine.Result, mc engine.ModelConfig, dev Device, sp Split) *Diagnosis {
	d := &Diagnosis{Device: dev}
	iters := profiledIterations(res)
	d.Iterations = len(iters)
	if len(iters) == 0 {
		d.Notes = append(d.Notes, "no iteration ran inside the profile window (is the window beyond the run's last iteration?)")
		return d
	}
	var spans [][2]time.Duration
	for _, w := range windowsOf(iters) {
		a, b := iters[w[0]].Start, iters[w[1]].Start+iters[w[1]].Duration
		spans = append(spans, [2]time.Duration{a, b})
		d.Window += b - a
	}
	gen := meanGenContext(res)
	// On MoE models the router's own loads say which experts' weights
	// each iteration read.
	touched := TouchedExperts(res.ExpertLoad)
	// Weights and KV cache at the widths the pass stored them in (dev's
	// formats), as the cell's roofline counts them.
	s, p := rankShape(mc, sp), precisionOf(dev)
	for _, it := range iters {
		n, ok := touched[it.Index]
		if !ok {
			n = -1
		}
		d.Work = d.Work.Add(s.work(it, gen, p, float64(n)))
	}
	d.splitNote(mc, sp)
	if len(res.Ops) == 0 {
		d.Notes = append(d.Notes, "no kernel records in the window")
		return d
	}
	d.measure(res.Ops, spans)
	d.findings(res.Ops)
	d.overlapNote(res.Ops)
	d.streamsNote(res.Ops)
	return d
}

// streamsNote says how much kernel time ran on streams other than the
// busiest one (the CUDA backend's L2 prefetch of the gate_up weights runs
// on a side stream, beside the decode kernels): kernel time and the
// summary's shares add such kernels' time to the busiest stream's, so
// their share is of work that mostly ran at the same time, not after it.
func (d *Diagnosis) streamsNote(ops []model.OpRecord) {
	byStream := map[uint32][]*model.OpRecord{}
	total := map[uint32]time.Duration{}
	for i := range ops {
		if op := &ops[i]; isKernel(op) {
			byStream[op.Stream] = append(byStream[op.Stream], op)
			total[op.Stream] += op.Duration
		}
	}
	if len(byStream) < 2 || d.KernelTime <= 0 {
		return
	}
	streams := slices.Sorted(maps.Keys(total))
	main := streams[0]
	for _, s := range streams[1:] {
		if total[s] > total[main] {
			main = s
		}
	}
	// The busiest stream's kernels as merged intervals, by start.
	ks := byStream[main]
	slices.SortFunc(ks, func(a, b *model.OpRecord) int { return cmp.Compare(a.Start, b.Start) })
	var busy [][2]time.Duration
	for _, k := range ks {
		a, b := k.Start, k.Start+k.Duration
		if n := len(busy); n > 0 && a <= busy[n-1][1] {
			busy[n-1][1] = max(busy[n-1][1], b)
			continue
		}
		busy = append(busy, [2]time.Duration{a, b})
	}
	n, side, beside := 0, time.Duration(0), time.Duration(0)
	byName := map[string]time.Duration{}
	for s, sks := range byStream {
		if s == main {
			continue
		}
		for _, k := range sks {
			n++
			side += k.Duration
			byName[KernelName(k.Name)] += k.Duration
			a, b := k.Start, k.Start+k.Duration
			i, _ := slices.BinarySearchFunc(busy, a, func(iv [2]time.Duration, t time.Duration) int { return cmp.Compare(iv[1], t) })
			for ; i < len(busy) && busy[i][0] < b; i++ {
				beside += max(0, min(b, busy[i][1])-max(a, busy[i][0]))
			}
		}
	}
	if float64(side) < overlapShare*float64(d.KernelTime) {
		return
	}
	names := slices.Collect(maps.Keys(byName))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(byName[y], byName[x]), cmp.Compare(x, y)) })
	d.Notes = append(d.Notes, fmt.Sprintf("%d kernel%s ran on %d stream%s beside the busiest one (%s): %s of the %s of kernel time (%.1f%%), "+
		"%s of it while that stream ran kernels too; kernel time and the kernel summary's shares add it to the busiest stream's, the busy time counts it once",
		n, plural(n), len(byStream)-1, plural(len(byStream)-1), strings.Join(shorten(names, 3), ", "), fmtDur(float64(side)), fmtDur(float64(d.KernelTime)),
		100*float64(side)/float64(d.KernelTime), fmtDur(float64(beside))))
}

// overlapNote says how much kernel time is a kernel overlapping the one
// before it on its stream. With programmatic dependent launch (the CUDA
// backend's default on Hopper) a kernel's blocks start while its
// predecessor drains and wait on the GPU for it; the profiler times them
// from their start, so the wait counts twice: in the predecessor's time
// and in the waiting kernel's, and the kernel summary's per-kernel times
// and shares overstate the kernels that wait (a 3 µs SwiGLU behind a
// 20 µs GEMM shows 20 µs). Its exclusive time (KernelStat.ExclusiveNs)
// and the busy time, a union, count it once.
func (d *Diagnosis) overlapNote(ops []model.OpRecord) {
	byStream := map[uint32][]*model.OpRecord{}
	for i := range ops {
		if op := &ops[i]; isKernel(op) {
			byStream[op.Stream] = append(byStream[op.Stream], op)
		}
	}
	n, over := 0, time.Duration(0)
	for _, ks := range byStream {
		slices.SortFunc(ks, func(a, b *model.OpRecord) int { return cmp.Compare(a.Start, b.Start) })
		end := ks[0].Start + ks[0].Duration
		for _, k := range ks[1:] {
			if k.Start < end {
				n++
				over += min(end, k.Start+k.Duration) - k.Start
			}
			end = max(end, k.Start+k.Duration)
		}
	}
	if d.KernelTime <= 0 || float64(over) < overlapShare*float64(d.KernelTime) {
		return
	}
	d.Notes = append(d.Notes, fmt.Sprintf("%d of %d kernels started before the kernel before them on their stream had ended "+
		"(programmatic dependent launch: their blocks wait on the GPU): %s of the %s of kernel time (%.1f%%) is that overlap, "+
		"counted in both kernels, so the kernel summary's times and shares overstate the waiting kernels; its Exclusive Time column and the busy time count it once",
		n, d.Kernels, fmtDur(float64(over)), fmtDur(float64(d.KernelTime)), 100*float64(over)/float64(d.KernelTime)))
}

// measure computes busy time (the union of op intervals, clipped to the
// windows) and the gaps between consecutive ops of each iteration.
func (d *Diagnosis) measure(ops []model.OpRecord, spans [][2]time.Duration) {
	type iv struct{ a, b time.Duration }
	all := make([]iv, 0, len(ops))
	byIter := map[int][]iv{}
	for i := range ops {
		op := &ops[i]
		v := iv{op.Start, op.Start + op.Duration}
		all = append(all, v)
		byIter[op.Iteration] = append(byIter[op.Iteration], v)
		if isKernel(op) {
			d.Kernels++
			d.KernelTime += op.Duration
		}
	}
	order := func(x, y iv) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b)) }
	slices.SortFunc(all, order)
	// Merge, then clip each merged interval to the windows.
	var cur iv
	flush := func() {
		for _, s := range spans {
			if a, b := max(cur.a, s[0]), min(cur.b, s[1]); b > a {
				d.Busy += b - a
			}
		}
	}
	for i, v := range all {
		switch {
		case i == 0:
			cur = v
		case v.a <= cur.b:
			cur.b = max(cur.b, v.b)
		default:
			flush()
			cur = v
		}
	}
	flush()
	for _, vs := range byIter {
		slices.SortFunc(vs, order)
		end := vs[0].b
		for _, v := range vs[1:] {
			if v.a > end {
				d.Gaps += v.a - end
			}
			d.GapCount++
			end = max(end, v.b)
		}
	}
}

func (d *Diagnosis) deviceWord() string {
	if d.Device.Name == "cpu" {
		return "the CPU backend"
	}
	return "the GPU"
}

func (d *Diagnosis) findings(ops []model.OpRecord) {
	win := d.Window.Seconds()
	if win <= 0 {
		return
	}
	busy := d.Busy.Seconds() / win
	perIter := float64(d.Kernels) / float64(d.Iterations)
	meanGap, meanKernel := 0.0, 0.0
	if d.GapCount > 0 {
		meanGap = float64(d.Gaps) / float64(d.GapCount)
	}
	if d.Kernels > 0 {
		meanKernel = float64(d.KernelTime) / float64(d.Kernels)
	}
	gapShare := d.Gaps.Seconds() / win
	outside := max(0, d.Window-d.Busy-d.Gaps)

	if busy < lowBusy {
		d.add(PatternLowUtilization, fmt.Sprintf("%s ran kernels or copies %.1f%% of the %s window; idle %s between and around iterations (host scheduling, synchronisation) and %s in gaps between kernels",
			d.deviceWord(), 100*busy, fmtDur(float64(d.Window)), fmtDur(float64(outside)), fmtDur(float64(d.Gaps))),
			map[string]float64{"busy_fraction": busy, "window_ns": float64(d.Window), "idle_outside_kernels_ns": float64(outside), "gap_ns": float64(d.Gaps)})
	}
	if gapShare >= launchGapShare {
		d.add(PatternLaunchOverhead, fmt.Sprintf("gaps between consecutive kernels take %.1f%% of the window: %.1f kernels per iteration, mean gap %s after kernels of mean %s; fewer, fused kernels (and CUDA graphs, where launches are eager) would remove most of it; the profiler itself adds to each gap",
			100*gapShare, perIter, fmtDur(meanGap), fmtDur(meanKernel)),
			map[string]float64{"gap_share": gapShare, "kernels_per_iteration": perIter, "mean_gap_ns": meanGap, "mean_kernel_ns": meanKernel})
	}
	d.roofline()
	d.gemmAndTop(ops)
}

// roofline names the side of the ridge point the pass is on and how close
// it gets to that ceiling.
func (d *Diagnosis) roofline() {
	dev, w := d.Device, d.Work
	if dev.PeakBytesPerSec <= 0 || dev.PeakFLOPs <= 0 || w.Bytes <= 0 || w.FLOPs <= 0 {
		if dev.PeakBytesPerSec <= 0 || dev.PeakFLOPs <= 0 {
			d.Notes = append(d.Notes, "no roofline: xrun has no measured ceilings for "+cmp.Or(dev.Name, "this device"))
		}
		return
	}
	win := d.Window.Seconds()
	// Under FP8 the FLOPs run at two ceilings: the arithmetic ceiling is
	// their blend, the rate that does them all in the time the two take.
	peak := dev.flopCeiling(w)
	intensity, ridge := w.FLOPs/w.Bytes, peak/dev.PeakBytesPerSec
	bw, fl := w.Bytes/win, w.FLOPs/win
	floor, _ := dev.Time(w)
	perIter := func(s float64) string { return fmtDur(s * 1e9 / float64(d.Iterations)) }
	figs := map[string]float64{"arithmetic_intensity_flop_per_byte": intensity, "ridge_point_flop_per_byte": ridge,
		"achieved_bytes_per_s": bw, "achieved_flop_per_s": fl, "peak_bytes_per_s": dev.PeakBytesPerSec, "peak_flop_per_s": peak,
		"bytes_per_iteration": w.Bytes / float64(d.Iterations), "flop_per_iteration": w.FLOPs / float64(d.Iterations),
		"roofline_fraction": floor / win}
	floorText := fmt.Sprintf("roofline floor %s per iteration, measured %s (%.1f%% of the roofline)", perIter(floor), perIter(win), 100*floor/win)
	if intensity < ridge {
		d.add(PatternMemoryBound, fmt.Sprintf("%s FLOP/byte is below the ridge point (%s FLOP/byte), so memory traffic sets the floor; achieved %s = %.1f%% of the %s ceiling; %s",
			sig3(intensity), sig3(ridge), fmtRate(bw, "B/s"), 100*bw/dev.PeakBytesPerSec, fmtRate(dev.PeakBytesPerSec, "B/s"), floorText), figs)
		return
	}
	ceiling := fmtRate(peak, "FLOP/s")
	if peak != dev.PeakFLOPs {
		ceiling += fmt.Sprintf(" (%.0f%% of the FLOPs in FP8 at %s, the rest at %s)",
			100*w.FP8FLOPs/w.FLOPs, fmtRate(dev.PeakFP8FLOPs, "FLOP/s"), fmtRate(dev.PeakFLOPs, "FLOP/s"))
	}
	d.add(PatternComputeBound, fmt.Sprintf("%s FLOP/byte is above the ridge point (%s FLOP/byte), so arithmetic sets the floor; achieved %s = %.1f%% of the %s ceiling; %s",
		sig3(intensity), sig3(ridge), fmtRate(fl, "FLOP/s"), 100*fl/peak, ceiling, floorText), figs)
}

// flopCeiling is the arithmetic ceiling w's FLOPs meet on d: PeakFLOPs,
// or, with FP8 FLOPs and an FP8 ceiling, the rate that does all of w's
// FLOPs in the time its FP8 and other FLOPs take at their own ceilings.
func (d Device) flopCeiling(w Work) float64 {
	if w.FP8FLOPs <= 0 || d.PeakFP8FLOPs <= 0 || w.FLOPs <= 0 {
		return d.PeakFLOPs
	}
	return w.FLOPs / ((w.FLOPs-w.FP8FLOPs)/d.PeakFLOPs + w.FP8FLOPs/d.PeakFP8FLOPs)
}

// MoE stages, in the order a MoE layer runs them.
const (
	MoERouter   = "router"
	MoEGrouping = "grouping"
	MoEExperts  = "expert GEMM"
	MoECombine  = "combine"
)

var moeStages = []struct {
	stage string
	re    *regexp.Regexp
}{
	{MoERouter, regexp.MustCompile(`(?i)moe_route|router|topk`)},
	{MoEGrouping, regexp.MustCompile(`(?i)moe_group|moe_gather|moe_permut`)},
	{MoEExperts, regexp.MustCompile(`(?i)moe_gate_up|moe_down|moe_expert|cpu_moe_experts`)},
	{MoECombine, regexp.MustCompile(`(?i)moe_combine`)},
}

// MoEStage names the stage of a MoE layer a kernel belongs to, or "" for a
// kernel outside MoE. cuBLASLt expert GEMMs (gemm_plugin auto in eager
// iterations) carry cuBLASLt's own names and count as dense GEMMs.
func MoEStage(name string) string {
	for _, st := range moeStages {
		if st.re.MatchString(name) {
			return st.stage
		}
	}
	return ""
}

// moeBreakdown splits the MoE layers' kernel time into router, grouping,
// expert GEMM and combine, so a routing study sees which stage imbalance
// (or balance) moved.
func (d *Diagnosis) moeBreakdown(stats []KernelStat) {
	byStage := map[string]int64{}
	var moeNs int64
	for _, s := range stats {
		if st := MoEStage(s.Name); st != "" {
			byStage[st] += s.TotalNs
			moeNs += s.TotalNs
		}
	}
	if moeNs == 0 || d.KernelTime <= 0 {
		return
	}
	figs := map[string]float64{"moe_share": float64(moeNs) / float64(d.KernelTime)}
	var parts []string
	for _, st := range moeStages {
		share := float64(byStage[st.stage]) / float64(moeNs)
		figs["moe_"+strings.ReplaceAll(st.stage, " ", "_")+"_share"] = share
		parts = append(parts, fmt.Sprintf("%s %.1f%%", st.stage, 100*share))
	}
	d.add(PatternMoE, fmt.Sprintf("MoE kernels take %.1f%% of kernel time (%s per iteration): %s",
		100*figs["moe_share"], fmtDur(float64(moeNs)/float64(max(d.Iterations, 1))), strings.Join(parts, ", ")), figs)
}

// gemmAndTop adds the kernel summary's findings: the collectives' share
// (a split model's; rank 0's kernels, which are the profile's), the GEMMs',
// the MoE stages' and the top kernel.
func (d *Diagnosis) gemmAndTop(ops []model.OpRecord) {
	stats := Summarize(ops)
	d.communication(stats)
	if slices.ContainsFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternCommunication }) {
		whose := "rank 0's kernels (the cell's first GPU)"
		if d.Device.Name == "cpu" {
			whose = "rank 0's ops"
		}
		d.Notes = append(d.Notes, "a split cell's profile holds its "+whose+"; every rank runs the same ones, and a collective's time includes waiting for the slowest rank")
	}
	d.gemmAndTopStats(stats)
}

func (d *Diagnosis) gemmAndTopStats(stats []KernelStat) {
	if len(stats) == 0 || d.KernelTime <= 0 || d.Iterations == 0 {
		return
	}
	var gemm []string
	var gemmNs int64
	for _, s := range stats {
		if kernelname.IsGEMM(s.Name) {
			gemm = append(gemm, s.Name)
			gemmNs += s.TotalNs
		}
	}
	if len(gemm) > 0 {
		share := float64(gemmNs) / float64(d.KernelTime)
		d.add(PatternGEMM, fmt.Sprintf("GEMMs take %.1f%% of kernel time (%s per iteration) in %d kernel%s: %s",
			100*share, fmtDur(float64(gemmNs)/float64(d.Iterations)), len(gemm), plural(len(gemm)), strings.Join(shorten(gemm, 3), ", ")),
			map[string]float64{"gemm_share": share, "gemm_ns_per_iteration": float64(gemmNs) / float64(d.Iterations), "gemm_kernels": float64(len(gemm))})
	}
	d.moeBreakdown(stats)
	top := stats[0]
	d.add(PatternTopKernel, fmt.Sprintf("%s: %.1f%% of kernel time, %s per iteration in %s launches of mean %s",
		kernelname.Short(top.Name), top.TimePct, fmtDur(float64(top.TotalNs)/float64(d.Iterations)), sig3(float64(top.Instances)/float64(d.Iterations)), fmtDur(top.AvgNs)),
		map[string]float64{"time_pct": top.TimePct, "ns_per_iteration": float64(top.TotalNs) / float64(d.Iterations)})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// shorten keeps the first n names, each shortened (kernelname.Short) and cut to
// 60 characters, and says how many more there were.
func shorten(names []string, n int) []string {
	var out []string
	for i, s := range names {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		s = kernelname.Short(s)
		if r := []rune(s); len(r) > 60 {
			s = string(r[:57]) + "..."
		}
		out = append(out, s)
	}
	return out
}

func (d *Diagnosis) add(pattern, text string, figs map[string]float64) {
	d.Findings = append(d.Findings, Finding{Pattern: pattern, Text: text, Figures: figs})
}

// Lines renders the diagnosis, findings first, then notes, one line each:
// what results.json and results.md carry.
func (d *Diagnosis) Lines() []string {
	var out []string
	for _, f := range d.Findings {
		out = append(out, f.String())
	}
	for _, n := range d.Notes {
		out = append(out, "note: "+n)
	}
	return out
}

// Stats are the diagnosis's headline figures, keyed for results.json.
func (d *Diagnosis) Stats() map[string]float64 {
	m := map[string]float64{"iterations": float64(d.Iterations), "window_ns": float64(d.Window), "kernels": float64(d.Kernels)}
	if d.Window > 0 {
		m["busy_fraction"] = d.Busy.Seconds() / d.Window.Seconds()
	}
	if d.Iterations > 0 {
		m["kernels_per_iteration"] = float64(d.Kernels) / float64(d.Iterations)
		m["bytes_per_iteration"] = d.Work.Bytes / float64(d.Iterations)
		m["flop_per_iteration"] = d.Work.FLOPs / float64(d.Iterations)
	}
	if d.GapCount > 0 {
		m["mean_gap_ns"] = float64(d.Gaps) / float64(d.GapCount)
	}
	for _, f := range d.Findings {
		if f.Pattern == PatternCommunication {
			m["communication_share"] = f.Figures["communication_share"]
		}
		if f.Pattern == PatternMemoryBound || f.Pattern == PatternComputeBound {
			m["achieved_bytes_per_s"] = f.Figures["achieved_bytes_per_s"]
			m["achieved_flop_per_s"] = f.Figures["achieved_flop_per_s"]
			m["roofline_fraction"] = f.Figures["roofline_fraction"]
		}
	}
	return m
}

// fmtDur prints nanoseconds with three significant digits in the unit
// that fits.
func fmtDur(ns float64) string {
	switch a := math.Abs(ns); {
	case a >= 1e9:
		return sig3(ns/1e9) + " s"
	case a >= 1e6:
		return sig3(ns/1e6) + " ms"
	case a >= 1e3:
		return sig3(ns/1e3) + " µs"
	}
	return sig3(ns) + " ns"
}

// sig3 prints x with three significant digits and never an exponent
// (999.9 prints as 1000, not 1e+03).
func sig3(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	dec := max(0, 2-int(math.Floor(math.Log10(math.Abs(x)))))
	return strconv.FormatFloat(x, 'f', dec, 64)
}

// fmtRate prints a rate with an SI prefix and three significant digits,
// as results.md's roofline note does.
func fmtRate(v float64, unit string) string { return numfmt.Rate(v, unit, 3) }

// splitNote says, on a split pass, that the roofline is one GPU's share.
func (d *Diagnosis) splitNote(mc engine.ModelConfig, sp Split) {
	if desc := sp.Describe(mc); desc != "" {
		d.Notes = append(d.Notes, "roofline "+desc)
	}
}

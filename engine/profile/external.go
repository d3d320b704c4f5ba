package profile

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/kernelname"
)

// PatternCommunication names the share of a window's kernel time that is
// collective communication (NCCL) rather than compute.
const PatternCommunication = "communication"

// IsCommunication reports whether a kernel is a collective (NCCL, or a
// custom all-reduce): kernelname.IsComm, the rule the kernel tables share.
func IsCommunication(name string) bool { return kernelname.IsComm(name) }

// DiagnoseSummary is Diagnose for a pass that has a kernel summary but no
// per-kernel records (an external engine profiled by Nsight Systems): the
// window's time comes from the iterations the engine logged inside it,
// and what needs kernel timings (busy time, gaps between kernels) is
// estimated from the summed kernel time or left out.
func DiagnoseSummary(stats []KernelStat, res *engine.Result, mc engine.ModelConfig, dev Device) *Diagnosis {
	return DiagnoseSummarySplit(stats, res, mc, dev, Split{})
}

// DiagnoseSummarySplit is DiagnoseSummary of a pass split over GPUs as sp
// says: its roofline is one GPU's share of the work.
func DiagnoseSummarySplit(stats []KernelStat, res *engine.Result, mc engine.ModelConfig, dev Device, sp Split) *Diagnosis {
	d := &Diagnosis{Device: dev}
	for _, s := range stats {
		d.Kernels += int(s.Instances)
		d.KernelTime += time.Duration(s.TotalNs)
	}
	iters := profiledIterations(res)
	d.Iterations = len(iters)
	if len(iters) == 0 {
		d.Notes = append(d.Notes, "the engine logged no iteration inside the profile window: no figures per iteration and no roofline")
		d.windowShares(stats)
		return d
	}
	for _, it := range iters {
		d.Window += it.Duration
	}
	gen := meanGenContext(res)
	s, p := rankShape(mc, sp), precisionOf(dev)
	for _, it := range iters {
		d.Work = d.Work.Add(s.work(it, gen, p, -1))
	}
	d.splitNote(mc, sp)
	if len(stats) == 0 {
		d.Notes = append(d.Notes, "no kernel records in the window")
		return d
	}
	if win := d.Window.Seconds(); win > 0 {
		if share := d.KernelTime.Seconds() / win; share < lowBusy {
			d.add(PatternLowUtilization, fmt.Sprintf("kernels ran %.1f%% of the %s the engine's profiled iterations took (summed kernel time; kernels on concurrent streams count twice, so the GPU was idle at least the rest)",
				100*share, fmtDur(float64(d.Window))),
				map[string]float64{"kernel_time_fraction": share, "window_ns": float64(d.Window)})
		}
	}
	d.roofline()
	d.communication(stats)
	d.gemmAndTopStats(stats)
	return d
}

// windowShares says, for a window without iterations, what share of its
// kernel time went to GEMMs, collectives and the top kernel.
func (d *Diagnosis) windowShares(stats []KernelStat) {
	if len(stats) == 0 || d.KernelTime <= 0 {
		return
	}
	var gemm, comm int64
	var names []string
	for _, s := range stats {
		switch {
		case kernelname.IsGEMM(s.Name):
			gemm += s.TotalNs
			names = append(names, s.Name)
		case IsCommunication(s.Name):
			comm += s.TotalNs
		}
	}
	all := float64(d.KernelTime)
	if gemm > 0 {
		d.add(PatternGEMM, fmt.Sprintf("GEMMs take %.1f%% of kernel time in the window (%s) in %d kernel%s: %s",
			100*float64(gemm)/all, fmtDur(float64(gemm)), len(names), plural(len(names)), strings.Join(shorten(names, 3), ", ")),
			map[string]float64{"gemm_share": float64(gemm) / all, "gemm_kernels": float64(len(names))})
	}
	if comm > 0 {
		d.add(PatternCommunication, fmt.Sprintf("collectives take %.1f%% of kernel time in the window (%s)", 100*float64(comm)/all, fmtDur(float64(comm))),
			map[string]float64{"communication_share": float64(comm) / all})
	}
	top := stats[0]
	d.add(PatternTopKernel, fmt.Sprintf("%s: %.1f%% of kernel time, %s launches of mean %s",
		kernelname.Short(top.Name), top.TimePct, sig3(float64(top.Instances)), fmtDur(top.AvgNs)),
		map[string]float64{"time_pct": top.TimePct})
}

// communication reports the collectives' share of kernel time.
func (d *Diagnosis) communication(stats []KernelStat) {
	var comm int64
	for _, s := range stats {
		if IsCommunication(s.Name) {
			comm += s.TotalNs
		}
	}
	if comm == 0 || d.KernelTime <= 0 {
		return
	}
	share := float64(comm) / float64(d.KernelTime)
	d.add(PatternCommunication, fmt.Sprintf("collectives take %.1f%% of kernel time (%s per iteration); the rest is compute",
		100*share, fmtDur(float64(comm)/float64(max(d.Iterations, 1)))),
		map[string]float64{"communication_share": share, "communication_ns_per_iteration": float64(comm) / float64(max(d.Iterations, 1))})
}

// SummaryArtifacts is WriteArtifacts for an external engine's profiled
// pass: its kernel summary (res.KernelSummary, a kernels.csv the driver
// wrote into the cell's directory) and the files its tools left there
// become the cell's profile, with DiagnoseSummary's diagnosis and the
// driver's notes.
func SummaryArtifacts(res *engine.Result, mc engine.ModelConfig, o Options) (*PassSummary, []string, error) {
	if o.Device == (Device{}) {
		o.Device = DeviceFor(res.Backend)
	}
	o.Device = o.Device.WithFormats(o.Formats)
	if o.Top <= 0 {
		o.Top = DefaultTopKernels
	}
	var stats []KernelStat
	files := append([]string(nil), res.Files...)
	if res.KernelSummary != "" {
		f, err := os.Open(res.KernelSummary)
		if err != nil {
			return nil, nil, err
		}
		stats, err = ReadKernelsCSV(f, res.KernelSummary)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	diag := DiagnoseSummarySplit(stats, res, mc, o.Device, o.Split)
	diag.Notes = append(diag.Notes, res.Notes...)
	diag.Notes = append(diag.Notes, o.Notes...)
	window := o.Window
	if window == "" {
		window = FormatWindows(res.Windows)
	}
	return passSummary(window, diag, stats, o.Top), dedupe(files), nil
}

func dedupe(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if !seen[f] && strings.TrimSpace(f) != "" {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

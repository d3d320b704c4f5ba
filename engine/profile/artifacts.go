package profile

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile/cupti"
	"github.com/xrun-dev/xrun/results/atomicfile"
	"github.com/xrun-dev/xrun/results/layout"
)

// DefaultTopKernels is how many kernels results.json keeps per cell.
const DefaultTopKernels = 10

// PassSummary is what a profiled pass leaves for the cell's record: the
// window, how many iterations it covered, the top kernels (all of them
// with Options.Top at math.MaxInt), the diagnosis's lines and its
// figures. The runner turns it into results.json's profile; this package
// does not know that schema.
type PassSummary struct {
	// Window is the profiled iteration span, "A-B" (FormatWindows).
	Window string
	// Iterations is how many engine iterations the window covered.
	Iterations int
	// Kernels are the top kernels by total time, largest first.
	Kernels []KernelStat
	// Diagnosis holds one line per finding and note (Diagnosis.Lines).
	Diagnosis []string
	// Stats are the diagnosis's figures, all finite (Diagnosis.Stats).
	Stats map[string]float64
}

// passSummary is the summary of a diagnosed window whose kernels are
// stats, keeping the top ones.
func passSummary(window string, diag *Diagnosis, stats []KernelStat, top int) *PassSummary {
	return &PassSummary{Window: window, Iterations: diag.Iterations, Kernels: stats[:min(top, len(stats))],
		Diagnosis: diag.Lines(), Stats: finite(diag.Stats())}
}

// Options adjust WriteArtifacts.
type Options struct {
	// Device holds the roofline's ceilings; zero means DeviceFor(the
	// pass's backend).
	Device Device
	// TraceDevice names the device process in trace.json; default the
	// device's name.
	TraceDevice string
	// Window is the profile window as configured; default the pass's
	// windows.
	Window string
	// Split is how the pass's model was split over GPUs: the diagnosis's
	// roofline is then one GPU's share of the work (zero: one GPU).
	Split Split
	// Formats are how the pass stored its weights and KV cache; the
	// diagnosis's roofline counts them so (Device.WithFormats).
	Formats Formats
	// Top is how many kernels the summary keeps (DefaultTopKernels when 0).
	Top int
	// Notes are caveats added to the diagnosis. For a GPU backend,
	// cupti.Notes() (CUPTI stepped aside for nsys, records dropped, layout
	// not verified) and an NVTX tool that failed to attach are added
	// first.
	Notes []string
}

// DeviceFor picks the ceilings for a backend name as engine.Result.Backend
// gives it: the CPU's measured ones for "cpu/...", otherwise the visible
// GPU's (by its NVML name).
func DeviceFor(backend string) Device {
	if strings.HasPrefix(backend, "cpu") {
		return CPUDevice()
	}
	name := VisibleGPUName()
	d, _ := GPUDevice(name)
	return d
}

// WriteArtifacts is what the runner's worker calls after a cell's
// profiled pass: it writes cellDir/kernels.csv and cellDir/trace.json
// (both rendered before either is written; each replaced atomically) and
// returns the pass's summary and the artifacts' names relative to
// cellDir. mc is the model the pass ran, for the roofline.
func WriteArtifacts(cellDir string, res *engine.Result, mc engine.ModelConfig, o Options) (*PassSummary, []string, error) {
	if res == nil {
		return nil, nil, fmt.Errorf("profile: no result")
	}
	if o.Device == (Device{}) {
		o.Device = DeviceFor(res.Backend)
	}
	o.Device = o.Device.WithFormats(o.Formats)
	if o.Window == "" {
		o.Window = FormatWindows(res.Windows)
	}
	if o.Top <= 0 {
		o.Top = DefaultTopKernels
	}
	if o.TraceDevice == "" {
		o.TraceDevice = o.Device.Name
		if o.Device.Name == "cpu" {
			o.TraceDevice = "cpu backend (" + res.Backend + ")"
		}
	}
	stats := Summarize(res.Ops)
	var kcsv, trace bytes.Buffer
	if err := WriteKernelsCSV(&kcsv, stats); err != nil {
		return nil, nil, err
	}
	if err := WriteTrace(&trace, BuildTrace(res, TraceInfo{Device: o.TraceDevice, Window: o.Window})); err != nil {
		return nil, nil, err
	}
	diag := DiagnoseSplit(res, mc, o.Device, o.Split)
	if !strings.HasPrefix(res.Backend, "cpu") {
		diag.Notes = append(diag.Notes, cupti.Notes()...)
		diag.Notes = append(diag.Notes, nvtxNotes()...)
	}
	diag.Notes = append(diag.Notes, o.Notes...)

	if err := atomicfile.WriteBytes(filepath.Join(cellDir, layout.KernelsFile), kcsv.Bytes()); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.WriteBytes(filepath.Join(cellDir, layout.TraceFile), trace.Bytes()); err != nil {
		return nil, nil, err
	}
	return passSummary(o.Window, diag, stats, o.Top), []string{layout.KernelsFile, layout.TraceFile}, nil
}

// finite drops figures results.json cannot store (JSON has no NaN or
// infinity).
func finite(m map[string]float64) map[string]float64 {
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
	return m
}

// FormatWindows writes spans as profile_window does: "100-150,200";
// an open end (a pass profiled without a window) as "0-".
func FormatWindows(spans []engine.Span) string {
	var parts []string
	for _, s := range spans {
		switch {
		case s.Last >= math.MaxInt32:
			parts = append(parts, fmt.Sprintf("%d-", s.First))
		case s.First == s.Last:
			parts = append(parts, fmt.Sprint(s.First))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", s.First, s.Last))
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, ",")
}

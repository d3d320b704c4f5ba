package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
)

type devicesOptions struct {
	json    bool
	timeout time.Duration
}

func newDevicesCommand(a *app) *cobra.Command {
	opts := &devicesOptions{}
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the GPUs xrun can run on, or say exactly why none is usable",
		Long: `List the NVIDIA GPUs the CUDA backend can use: index, name, UUID, memory,
compute capability and kernel architecture, with the driver and CUDA versions
and the libraries loaded (libcuda, cuBLASLt, NVRTC, all opened at run time),
and the ceilings each GPU's rooflines divide by: those measured for its kind
on the project's H100 and H200, or those the CUDA backend measured on it and
kept in the kernel cache (a GPU of another kind gets them when a cell first
runs on it).

It says which NCCL (libnccl.so.2, its version and file) cells split over
GPUs (tp, ep) would load, or why none loads: XRUN_LIBNCCL, the loader's
search, the CUDA folders and a PyTorch installation's copy are tried.

When no GPU is usable it says why: no NVIDIA driver (libcuda.so.1 not found,
with every path tried), a CUDA library not found, the driver too old, or the
error cuInit returned.

The probe runs in a child process (this program re-executed) that is
abandoned after --timeout, because a broken driver can hang in cuInit.

Last it lists the engine switches: the environment variables that change how
the built-in engine runs (ablations and debugging aids), each with its
default, its value in effect in this environment, whether a run records it
(in every cell where it is not at its default) and what it does.

Exits 0 when at least one GPU is usable and 1 when none is, so a script can
ask "xrun devices >/dev/null && echo gpu".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDevices(cmd.Context(), a, opts) },
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the probe as JSON")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", cuda.DefaultProbeTimeout, "give up on a probe that does not answer (a hung driver)")
	return cmd
}

// errNoUsableGPU is what devices returns after printing why: exit status 1.
var errNoUsableGPU = errors.New("no usable GPU")

func runDevices(ctx context.Context, a *app, opts *devicesOptions) error {
	d, err := cuda.ProbeWith(ctx, cuda.ProbeOptions{Executable: a.gs.Executable, Env: a.gs.Environ(), Timeout: opts.timeout})
	var ng *cuda.NoGPUError
	if err != nil && !errors.As(err, &ng) {
		return err // the probe itself failed, or the context was canceled
	}
	w := a.gs.Stdout
	nccl := probeNCCL()
	if opts.json {
		out := struct {
			Usable   bool             `json:"usable"`
			Devices  cuda.Devices     `json:"devices"`
			Error    *cuda.NoGPUError `json:"error,omitempty"`
			NCCL     *ncclStatus      `json:"nccl,omitempty"`
			Switches []switchValue    `json:"switches"`
		}{ng == nil, d, ng, nccl, switchValues(a.gs.Getenv)}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printDevices(w, d, ng, cuda.DefaultKernelCacheDir())
		fmt.Fprintln(w)
		if printNCCL(w, nccl) {
			fmt.Fprintln(w)
		}
		printSwitches(w, a.gs.Getenv)
	}
	if ng != nil {
		return errNoUsableGPU
	}
	return nil
}

// printDevices writes the listing; cacheDir is the kernel cache, where the
// CUDA backend keeps the roofline ceilings it measured (cuda.KeptCeilings).
func printDevices(w interface{ Write([]byte) (int, error) }, d cuda.Devices, ng *cuda.NoGPUError, cacheDir string) {
	if d.DriverVersion != "" || d.CUDAVersion != "" {
		fmt.Fprintf(w, "driver %s, CUDA %s (entry points at API %s)\n", d.DriverVersion, d.CUDAVersion, d.APIVersion)
	}
	if len(d.Libraries) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, l := range d.Libraries {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Name, l.Version, l.Path)
		}
		tw.Flush()
	}
	if len(d.GPUs) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GPU\tNAME\tUUID\tMEMORY\tCC\tSMS\tARCH\tNOTE\tROOFLINE CEILINGS")
		for _, g := range d.GPUs {
			note := g.Unusable
			if note == "" {
				note = "usable"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f GiB\t%d.%d\t%d\t%s\t%s\t%s\n", g.Index, g.Name, g.UUID,
				float64(g.MemoryBytes)/(1<<30), g.Major, g.Minor, g.SMs, g.Arch(), note, ceilingsNote(g, cacheDir))
		}
		tw.Flush()
	}
	if ng != nil {
		if len(d.GPUs) > 0 || len(d.Libraries) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, ng.Error())
	}
}

// ncclStatus is the NCCL a cell split over GPUs (tp, ep) would load on
// engine cuda: its version and file, or why none loads.
type ncclStatus struct {
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Error   string `json:"error,omitempty"`
}

// printNCCL writes the NCCL line (nil, without the CUDA backend: nothing)
// and reports whether it wrote one.
func printNCCL(w io.Writer, n *ncclStatus) bool {
	switch {
	case n == nil:
		return false
	case n.Error != "":
		fmt.Fprintf(w, "NCCL: %s\n", n.Error)
	default:
		fmt.Fprintf(w, "NCCL %s  %s  (the collectives of cells split over GPUs: tp, ep)\n", n.Version, n.Path)
	}
	return true
}

// ceilingsNote says which ceilings the roofline of a cell on g divides by:
// the ones measured on the project's machines for its kind, the ones the
// CUDA backend measured on it and kept, or that they will be measured.
func ceilingsNote(g cuda.DeviceInfo, cacheDir string) string {
	rate := func(c cuda.Ceilings) string {
		return fmt.Sprintf("%.2f TB/s, %.0f TFLOP/s", c.BytesPerSec/1e12, c.FLOPs/1e12)
	}
	var kept []cuda.Measured
	if cacheDir != "" {
		kept = cuda.KeptCeilings(cacheDir, g.UUID)
	}
	if c, kind, ok := cuda.KnownCeilings(g.Name); ok {
		note := rate(c) + " (measured on an " + kind + ")"
		if len(kept) > 0 {
			note += "; XRUN_MEASURE_CEILINGS=1 measured " + rate(kept[0].Ceilings)
		}
		return note
	}
	if len(kept) == 0 {
		return "none known: measured when a cell first runs here"
	}
	var parts []string
	for _, m := range kept {
		parts = append(parts, fmt.Sprintf("%s (%s, measured here %s)", rate(m.Ceilings), m.DType, m.Measured.Format(time.DateOnly)))
	}
	return strings.Join(parts, "; ")
}

// switchValue is one engine switch as devices lists it.
type switchValue struct {
	Name    string `json:"name"`
	Default string `json:"default"`
	// Value is the value in effect; Set is the variable's text when it is
	// set to another spelling of it, or to a value the engine ignores.
	Value    string `json:"value"`
	Set      string `json:"set,omitempty"`
	Recorded bool   `json:"recorded"`
	Meaning  string `json:"meaning"`
}

// switchValues are engine.Switches with their values in getenv's
// environment, in the table's order.
func switchValues(getenv func(string) string) []switchValue {
	var out []switchValue
	for _, s := range engine.Switches.All() {
		v := switchValue{Name: s.Name, Default: s.Default, Value: s.Value(getenv), Recorded: s.Recorded,
			Meaning: strings.ReplaceAll(s.Meaning, "`", "")}
		if raw := getenv(s.Name); raw != "" && raw != v.Value {
			v.Set = raw
		}
		out = append(out, v)
	}
	return out
}

// printSwitches writes the table of engine switches with their values in
// getenv's environment.
func printSwitches(w io.Writer, getenv func(string) string) {
	fmt.Fprintln(w, "engine switches (a run records in every cell each recorded one that is not at its default):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SWITCH\tDEFAULT\tVALUE\tRECORDED\tWHAT IT DOES")
	for _, v := range switchValues(getenv) {
		value := v.Value
		if v.Set != "" {
			value += fmt.Sprintf(" (set to %q)", v.Set)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Default, value, map[bool]string{true: "yes", false: "no"}[v.Recorded], v.Meaning)
	}
	tw.Flush()
}

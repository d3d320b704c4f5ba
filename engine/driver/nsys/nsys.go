// Package nsys drives Nsight Systems for the engine drivers' profiled
// passes: the nsys profile prefix that records the cudaProfilerStart/Stop
// range an engine opens for its profile window (TensorRT-LLM does for
// TLLM_PROFILE_START_STOP), and nsys stats, whose CUDA GPU Kernel Summary
// becomes the cell's kernels.csv. It parses the summary as every nsys
// release since the report was named cuda_gpu_kern_sum prints it (and the
// older gpukernsum's columns), with or without the lines nsys prints
// before the CSV.
package nsys

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results/atomicfile"
	"github.com/xrun-dev/xrun/results/layout"
)

// Report names of the kernel summary: the current one, then the name
// releases before 2023 used.
const (
	KernelReport    = "cuda_gpu_kern_sum"
	OldKernelReport = "gpukernsum"
)

// ProfileArgs is the nsys profile prefix of a profiled pass writing
// out+".nsys-rep": CUDA and NVTX traced, capture limited to the
// cudaProfilerStart/Stop range, kernels inside CUDA graphs traced one by
// one, and child processes (trtllm-bench's MPI workers) followed.
func ProfileArgs(nsysPath, out string) []string {
	return []string{nsysPath, "profile", "--output", out, "--force-overwrite", "true",
		"--trace", "cuda,nvtx", "--capture-range", "cudaProfilerApi", "--capture-range-end", "stop",
		"--cuda-graph-trace", "node", "--trace-fork-before-exec", "true"}
}

// StatsCommand is the nsys stats command writing the kernel summary of
// report as prefix+"_cuda_gpu_kern_sum.csv".
func StatsCommand(nsysPath, report, prefix string) driver.Command {
	return driver.Command{Stage: driver.StageStats, Argv: []string{nsysPath, "stats", "--report", KernelReport,
		"--format", "csv", "--force-export", "true", "--output", prefix, report}}
}

// CollectOptions say where a profiled pass's report is and where its
// results go.
type CollectOptions struct {
	// Report is the .nsys-rep the profiled pass wrote.
	Report string
	// CellDir receives profile.nsys-rep and kernels.csv.
	CellDir string
	// Stats is StatsCommand's command for Report.
	Stats driver.Command
	Env   []string
	Audit *driver.Audit
}

// Profile is what Collect made of a report.
type Profile struct {
	// KernelSummary is the kernels.csv written (absolute); "" when the
	// capture held no kernels.
	KernelSummary string
	// Files are the cell directory's new files, by name.
	Files []string
	Notes []string
}

// Collect moves a profiled pass's report into the cell's directory, runs
// nsys stats on it and writes the kernel summary as kernels.csv.
func Collect(ctx context.Context, o CollectOptions) (*Profile, error) {
	if _, err := os.Stat(o.Report); err != nil {
		return nil, fmt.Errorf("nsys wrote no report %s (did the engine open a cudaProfilerStart/Stop range? the profile window may lie beyond its last iteration): %w", o.Report, err)
	}
	p := &Profile{}
	rep := filepath.Join(o.CellDir, layout.NsysReportFile)
	if err := os.Rename(o.Report, rep); err != nil {
		return nil, err
	}
	p.Files = append(p.Files, layout.NsysReportFile)
	st := o.Stats
	st.Argv = slices.Clone(st.Argv)
	st.Argv[len(st.Argv)-1] = rep
	prefix := st.Argv[len(st.Argv)-2]
	var out bytes.Buffer
	logPath := prefix + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	report := KernelReport
	err = driver.Exec(ctx, st, driver.ExecOptions{Env: o.Env, Log: logf, LogPath: logPath, Stdout: &out, Audit: o.Audit, Pass: -1})
	var te *driver.ToolError
	if errors.As(err, &te) && te.Reason != "stopped" && te.Reason != "not found" {
		// Releases before 2023 name the summary gpukernsum.
		old := st
		old.Argv = slices.Clone(st.Argv)
		old.Argv[slices.Index(old.Argv, KernelReport)] = OldKernelReport
		out.Reset()
		if oerr := driver.Exec(ctx, old, driver.ExecOptions{Env: o.Env, Log: logf, LogPath: logPath, Stdout: &out, Audit: o.Audit, Pass: -1}); oerr == nil {
			err, report = nil, OldKernelReport
		}
	}
	if err != nil {
		return nil, err
	}
	csvPath := prefix + "_" + report + ".csv"
	data, err := os.ReadFile(csvPath)
	if errors.Is(err, os.ErrNotExist) {
		// Some releases print the report instead of writing it.
		data, err = out.Bytes(), nil
	}
	if err != nil {
		return nil, err
	}
	stats, err := ParseKernelSummary(bytes.NewReader(data), csvPath)
	if errors.Is(err, ErrNoKernels) {
		p.Notes = append(p.Notes, "the Nsight Systems capture holds no CUDA kernels (is the profile window beyond the run's last iteration?)")
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(o.CellDir, layout.KernelsFile)
	if err := writeKernels(dst, stats); err != nil {
		return nil, err
	}
	p.KernelSummary = dst
	p.Files = append(p.Files, layout.KernelsFile)
	return p, nil
}

func writeKernels(path string, stats []profile.KernelStat) error {
	return atomicfile.Write(path, func(w io.Writer) error { return profile.WriteKernelsCSV(w, stats) })
}

// ConvertKernelSummary reads a kernel summary in Nsight's CSV form (a
// program's own, written to {kernels}) and writes it as kernels.csv.
func ConvertKernelSummary(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	stats, err := ParseKernelSummary(f, src)
	if err != nil {
		return err
	}
	return writeKernels(dst, stats)
}

// ErrNoKernels is a summary of a capture without kernels.
var ErrNoKernels = errors.New("no CUDA kernel data")

// columns of the summary by what they hold, with the names nsys releases
// have used for them.
var columns = []struct {
	field string
	names []string
}{
	{"pct", []string{"Time (%)", "Time(%)"}},
	{"total", []string{"Total Time (ns)", "Total Time"}},
	{"instances", []string{"Instances", "Calls"}},
	{"avg", []string{"Avg (ns)", "Average (ns)", "Average"}},
	{"med", []string{"Med (ns)", "Median (ns)", "Median"}},
	{"min", []string{"Min (ns)", "Minimum (ns)", "Minimum"}},
	{"max", []string{"Max (ns)", "Maximum (ns)", "Maximum"}},
	{"stddev", []string{"StdDev (ns)", "StdDev"}},
	{"name", []string{"Name"}},
}

// ParseKernelSummary reads nsys stats' CUDA GPU Kernel Summary as CSV.
// Lines before the header (nsys's "Processing [...]" notes) are skipped;
// numbers may carry thousands separators; the median and standard
// deviation may be missing (older releases), and are then left 0. file
// names the input in errors.
func ParseKernelSummary(r io.Reader, file string) ([]profile.KernelStat, error) {
	data, err := io.ReadAll(io.LimitReader(r, 256<<20))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.Contains(l, "Total Time") && strings.Contains(l, "Name") {
			start = i
			break
		}
		if strings.HasPrefix(strings.TrimSpace(l), "SKIPPED:") && strings.Contains(l, "does not contain CUDA kernel data") {
			return nil, ErrNoKernels
		}
	}
	bad := func(line int, format string, args ...any) error {
		return &profile.FormatError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if start < 0 {
		return nil, bad(0, "no kernel summary: expected a CSV header with \"Total Time (ns)\" and \"Name\" (nsys stats --report %s --format csv)", KernelReport)
	}
	cr := csv.NewReader(strings.NewReader(strings.Join(lines[start:], "\n")))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, bad(start+1, "%v", err)
	}
	col := map[string]int{}
	for _, c := range columns {
		for _, n := range c.names {
			if i := slices.Index(header, n); i >= 0 {
				col[c.field] = i
				break
			}
		}
	}
	for _, must := range []string{"total", "instances", "name"} {
		if _, ok := col[must]; !ok {
			return nil, bad(start+1, "header %q lacks a %s column", strings.Join(header, ","), must)
		}
	}
	var out []profile.KernelStat
	var all int64
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, bad(pe.Line+start, "%v", pe.Err)
			}
			return nil, bad(0, "%v", err)
		}
		line, _ := cr.FieldPos(0)
		line += start
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, bad(line, "%d fields; the header has %d", len(rec), len(header))
		}
		var ferr error
		num := func(field string) float64 {
			i, ok := col[field]
			if !ok || ferr != nil {
				return 0
			}
			s := strings.ReplaceAll(strings.TrimSpace(rec[i]), ",", "")
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				ferr = bad(line, "column %q: %q is not a non-negative number", header[i], rec[i])
			}
			return v
		}
		k := profile.KernelStat{Name: rec[col["name"]], TotalNs: int64(num("total")), Instances: int64(num("instances")),
			AvgNs: num("avg"), MedNs: num("med"), MinNs: int64(num("min")), MaxNs: int64(num("max")), StdDevNs: num("stddev"), TimePct: num("pct")}
		if ferr != nil {
			return nil, ferr
		}
		if k.Name == "" {
			return nil, bad(line, "a kernel without a name")
		}
		if k.Instances > 0 && k.AvgNs == 0 {
			k.AvgNs = float64(k.TotalNs) / float64(k.Instances)
		}
		all += k.TotalNs
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, ErrNoKernels
	}
	// Shares from the times themselves: they are the same as nsys's to
	// its rounding, and present where an older release had none.
	for i := range out {
		if all > 0 {
			out[i].TimePct = 100 * float64(out[i].TotalNs) / float64(all)
		}
	}
	slices.SortStableFunc(out, func(a, b profile.KernelStat) int {
		if a.TotalNs != b.TotalNs {
			if a.TotalNs > b.TotalNs {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

package profile

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/xrun-dev/xrun/engine/model"
)

// KernelStat is one row of the kernel summary: Nsight Systems' "CUDA GPU
// Kernel Summary" (nsys stats --report cuda_gpu_kern_sum), per demangled
// kernel name. It has the fields of results.json's kernel rows, in their
// order, so that the runner and xrun kernels convert one to the other by
// a type conversion: a field added to one alone stops the build.
type KernelStat struct {
	Name      string
	TimePct   float64 // share of all kernel time in the window, in %
	TotalNs   int64
	Instances int64
	AvgNs     float64
	MedNs     float64 // the mean of the two middle values for an even count
	MinNs     int64
	MaxNs     int64
	StdDevNs  float64 // sample standard deviation (n-1); 0 for one instance
	// ExclusiveNs is the time the kernel's instances had their stream to
	// themselves: each from the later of its start and the end of the
	// kernels before it on its stream. Under programmatic dependent
	// launch a kernel starts while its predecessor drains and waits on
	// the GPU, and TotalNs counts that wait as Nsight does (a 3 us SwiGLU
	// behind a 20 us GEMM shows 20 us); this counts it once, in the
	// predecessor. TotalNs where nothing overlaps; 0 where unknown (an
	// outside profiler's summary).
	ExclusiveNs int64
}

// KernelName is the name a kernel is summarised under: C++ names
// demangled (CUPTI reports them mangled), others as they are.
func KernelName(name string) string {
	if strings.HasPrefix(name, "_Z") {
		return demangle.Filter(name)
	}
	return name
}

// names demangles each distinct name once: a window holds hundreds of
// thousands of records of a few dozen kernels.
type names map[string]string

func (n names) of(raw string) string {
	s, ok := n[raw]
	if !ok {
		s = KernelName(raw)
		n[raw] = s
	}
	return s
}

// isKernel reports whether an op is a kernel rather than a copy or a
// memset (which Nsight summarises in other reports).
func isKernel(op *model.OpRecord) bool { return op.Kind == "" || op.Kind == model.OpKernel }

// Summarize builds the kernel summary of ops: kernels only, grouped by
// demangled name, sorted by total time (largest first), then name.
func Summarize(ops []model.OpRecord) []KernelStat {
	byName := map[string][]int64{}
	excl := map[string]int64{}
	demangled := names{}
	var all int64
	exclusive := exclusiveTimes(ops)
	for i := range ops {
		op := &ops[i]
		if !isKernel(op) {
			continue
		}
		n := demangled.of(op.Name)
		byName[n] = append(byName[n], int64(op.Duration))
		excl[n] += exclusive[i]
		all += int64(op.Duration)
	}
	out := make([]KernelStat, 0, len(byName))
	for name, d := range byName {
		s := statOf(name, d, all)
		s.ExclusiveNs = excl[name]
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b KernelStat) int {
		if c := cmp.Compare(b.TotalNs, a.TotalNs); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// exclusiveTimes is each kernel op's exclusive time (KernelStat.ExclusiveNs):
// from the later of its start and the end of the kernels that started
// before it on its stream, to its end; 0 for other ops.
func exclusiveTimes(ops []model.OpRecord) []int64 {
	out := make([]int64, len(ops))
	byStream := map[uint32][]int{}
	for i := range ops {
		if isKernel(&ops[i]) {
			byStream[ops[i].Stream] = append(byStream[ops[i].Stream], i)
		}
	}
	for _, idx := range byStream {
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ops[a].Start, ops[b].Start) })
		var end int64
		for k, i := range idx {
			s, e := int64(ops[i].Start), int64(ops[i].Start+ops[i].Duration)
			if k > 0 {
				s = max(s, end)
			}
			out[i] = max(e-s, 0)
			end = max(end, e)
		}
	}
	return out
}

func statOf(name string, d []int64, all int64) KernelStat {
	slices.Sort(d)
	s := KernelStat{Name: name, Instances: int64(len(d)), MinNs: d[0], MaxNs: d[len(d)-1]}
	for _, v := range d {
		s.TotalNs += v
	}
	n := float64(len(d))
	s.AvgNs = float64(s.TotalNs) / n
	if m := len(d) / 2; len(d)%2 == 1 {
		s.MedNs = float64(d[m])
	} else {
		s.MedNs = (float64(d[m-1]) + float64(d[m])) / 2
	}
	if len(d) > 1 {
		var ss float64
		for _, v := range d {
			x := float64(v) - s.AvgNs
			ss += x * x
		}
		s.StdDevNs = math.Sqrt(ss / (n - 1))
	}
	if all > 0 {
		s.TimePct = 100 * float64(s.TotalNs) / float64(all)
	}
	return s
}

// kernelsHeader is Nsight Systems' CSV header for cuda_gpu_kern_sum;
// exclusiveHeader the column xrun adds after it (KernelStat.ExclusiveNs).
var kernelsHeader = []string{"Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Name"}

const exclusiveHeader = "Exclusive Time (ns)"

// columnName is kernels.csv's column col.
func columnName(col int) string {
	if col < len(kernelsHeader) {
		return kernelsHeader[col]
	}
	return exclusiveHeader
}

// WriteKernelsCSV writes the summary as kernels.csv: Nsight's columns,
// times in integer nanoseconds, averages to 0.1 ns, shares to 0.1 %, and,
// where any kernel has one, the exclusive time after them (a last column,
// so that Nsight's stay where its readers expect them).
func WriteKernelsCSV(w io.Writer, stats []KernelStat) error {
	cw := csv.NewWriter(w)
	exclusive := slices.ContainsFunc(stats, func(s KernelStat) bool { return s.ExclusiveNs > 0 })
	header := kernelsHeader
	if exclusive {
		header = append(slices.Clone(kernelsHeader), exclusiveHeader)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, s := range stats {
		rec := []string{f1(s.TimePct), i(s.TotalNs), i(s.Instances), f1(s.AvgNs), f1(s.MedNs), i(s.MinNs), i(s.MaxNs), f1(s.StdDevNs), s.Name}
		if exclusive {
			rec = append(rec, i(s.ExclusiveNs))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// FormatError is a malformed kernels.csv (or other profile file): it
// names the file and line, and blames the input.
type FormatError struct {
	File string
	Line int
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// BadInput marks the error as the user's input (exit status 2).
func (e *FormatError) BadInput() bool { return true }

// ReadKernelsCSV reads a kernels.csv written by WriteKernelsCSV (or
// exported from Nsight Systems with its columns, without the exclusive
// time). file names the input in errors.
func ReadKernelsCSV(r io.Reader, file string) ([]KernelStat, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // the header's, for every row
	cr.ReuseRecord = true
	exclusive := false
	bad := func(line int, format string, args ...any) error {
		return &FormatError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var out []KernelStat
	for row := 0; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			if row == 0 {
				return nil, bad(0, "empty; expected the header %q", strings.Join(kernelsHeader, ","))
			}
			return out, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, bad(pe.Line, "%v", pe.Err)
			}
			return nil, &FormatError{File: file, Msg: err.Error()}
		}
		line, _ := cr.FieldPos(0)
		if row == 0 {
			exclusive = len(rec) == len(kernelsHeader)+1 && rec[len(kernelsHeader)] == exclusiveHeader
			if !slices.Equal(rec[:min(len(rec), len(kernelsHeader))], kernelsHeader) || len(rec) > len(kernelsHeader) && !exclusive {
				return nil, bad(line, "header %q; expected %q, optionally with %q after it", strings.Join(rec, ","), strings.Join(kernelsHeader, ","), exclusiveHeader)
			}
			continue
		}
		var s KernelStat
		var ferr error
		float := func(col int) float64 {
			v, err := strconv.ParseFloat(rec[col], 64)
			if ferr == nil && (err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
				ferr = bad(line, "column %q: %q is not a non-negative number", columnName(col), rec[col])
			}
			return v
		}
		integer := func(col int) int64 {
			v, err := strconv.ParseInt(rec[col], 10, 64)
			if ferr == nil && (err != nil || v < 0) {
				ferr = bad(line, "column %q: %q is not a non-negative integer", columnName(col), rec[col])
			}
			return v
		}
		s.TimePct, s.TotalNs, s.Instances = float(0), integer(1), integer(2)
		s.AvgNs, s.MedNs, s.MinNs, s.MaxNs, s.StdDevNs = float(3), float(4), integer(5), integer(6), float(7)
		s.Name = strings.Clone(rec[8])
		if exclusive {
			s.ExclusiveNs = integer(9)
		}
		if ferr != nil {
			return nil, ferr
		}
		switch {
		case s.Name == "":
			return nil, bad(line, "column \"Name\" is empty")
		case s.Instances == 0:
			return nil, bad(line, "kernel %q: 0 instances", s.Name)
		case s.MinNs > s.MaxNs:
			return nil, bad(line, "kernel %q: Min (ns) %d is above Max (ns) %d", s.Name, s.MinNs, s.MaxNs)
		case s.ExclusiveNs > s.TotalNs:
			return nil, bad(line, "kernel %q: %s %d is above Total Time (ns) %d", s.Name, exclusiveHeader, s.ExclusiveNs, s.TotalNs)
		}
		out = append(out, s)
	}
}

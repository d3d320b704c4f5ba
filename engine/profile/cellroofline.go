package profile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/layout"
)

// RooflineCell is what CellRoofline needs to know of a cell besides the
// records in its directory: what results.json and the cell's record
// (cell.json) say of it. The runner, which owns both, reads them and
// decides which cells ran on a GPU; this package knows neither file.
type RooflineCell struct {
	// Model is the cell's model parameter, and Layers its layers parameter
	// (0: all of them; see engine.WithLayers).
	Model  string
	Layers int
	// GPU is the name (as NVML gives it) of the GPU the cell ran on.
	GPU string
	// Backend is the backend its record names ("cuda/cublaslt"); "" when
	// unknown.
	Backend string
	// Ceilings are those the CUDA backend measured and the cell's record
	// keeps; nil when it keeps none.
	Ceilings *engine.Ceilings
	// FP8 and KVFP8: the cell ran dtype fp8 (E4M3 linear layers) and
	// kv_cache_dtype fp8.
	FP8, KVFP8 bool
	// MoEWeights is the cell's moe_weights ("" or auto: as the CUDA
	// backend resolves it, engine.ResolveMoEWeights); mxfp4 counts the
	// routed experts' weights at 4.25 bits.
	MoEWeights string
	// Split is how the cell's model was split over GPUs (tp, ep); the
	// roofline is then one GPU's share of the work against one GPU's
	// ceilings, the GPUs running at once.
	Split Split
	// FirstRepeat is the first timed repeat's metrics (num_requests,
	// total_input_tokens, total_output_tokens are read); nil when the
	// cell has no timed repeat.
	FirstRepeat map[string]float64
}

// Roofline is a cell's roofline: the floor of its first timed repeat's
// iterations against the device's ceilings, the output throughput at that
// floor, and which records the work was computed from.
type Roofline struct {
	Floor
	Device     Device
	OutputTokS float64
	Basis      string
}

// CellRoofline computes the roofline of a cell that ran on a GPU from its
// directory: the first timed repeat's iterations (iterations.csv: pass 0,
// warm-up left out), on MoE models the experts each iteration's tokens
// reached (expert_load.csv: an expert with at least one token in a layer
// was read), the model's shapes (c.Model) and the ceilings (cellDevice).
// A benchmark program's cell (backend "command/...") has no iterations
// and gets nil and no error.
func CellRoofline(dir string, c RooflineCell) (*Roofline, error) {
	dev, err := cellDevice(c)
	if err != nil {
		return nil, err
	}
	if c.Model == "" {
		return nil, errors.New("the cell has no model parameter")
	}
	mc, err := engine.LookupModel(c.Model)
	if err != nil {
		return nil, err
	}
	if mc, err = engine.WithLayers(mc, c.Layers); err != nil {
		return nil, err
	}
	dtype := ""
	if c.FP8 {
		dtype = "fp8"
	}
	// A value the engine refused never ran: no roofline counts it.
	mx, _ := engine.ResolveMoEWeights("cuda", mc, dtype, c.MoEWeights)
	dev = dev.WithFormats(Formats{FP8: c.FP8, KVFP8: c.KVFP8, MXFP4Experts: mx})
	m := c.FirstRepeat
	if m == nil {
		return nil, errors.New("no timed repeat")
	}
	n, in, out := m["num_requests"], m["total_input_tokens"], m["total_output_tokens"]
	if n <= 0 || out <= 0 {
		return nil, errors.New("the first repeat lacks num_requests or total_output_tokens")
	}
	// The mean cached length a decoding request attends to: its prompt
	// plus half its output (as the profile's diagnosis takes it).
	genContext := (in + out/2) / n

	iters, err := readTimedIterations(filepath.Join(dir, layout.IterationsFile))
	if err != nil {
		return nil, err
	}
	if len(iters) == 0 {
		if strings.HasPrefix(c.Backend, "command/") {
			// A benchmark program's records have no iterations to
			// schedule the work by; the cell simply has no roofline.
			return nil, nil
		}
		return nil, fmt.Errorf("%s: no timed iteration in pass 0", filepath.Join(dir, layout.IterationsFile))
	}
	basis := layout.IterationsFile + " (first repeat, warm-up left out)"
	var touched map[int]int
	if mc.MoE() {
		path := filepath.Join(dir, layout.ExpertLoadFile)
		touched, err = readTouchedExperts(path, mc.Layers, mc.Experts)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			basis += "; experts reached estimated (no " + layout.ExpertLoadFile + ")"
		case err != nil:
			return nil, err
		default:
			basis += "; experts reached from " + layout.ExpertLoadFile
		}
	}
	if desc := c.Split.Describe(mc); desc != "" {
		basis += "; " + desc
	}
	switch {
	case dev.FP8 && dev.PeakFP8FLOPs <= 0:
		// The floor is then too high: say so rather than pass it off.
		basis += "; FP8 GEMMs counted at the compute dtype's GEMM ceiling (no FP8 ceiling known for this GPU)"
	case dev.FP8:
		// The results' ceilings name the compute dtype's GEMM only.
		basis += "; FP8 linear layers at a byte a weight, their GEMMs at " + fmtRate(dev.PeakFP8FLOPs, "FLOP/s")
	}
	f := RunFloorSplit(mc, c.Split, iters, touched, genContext, dev)
	if f.Seconds <= 0 {
		return nil, errors.New("the timed iterations hold no work")
	}
	return &Roofline{Floor: f, Device: dev, OutputTokS: out / f.Seconds, Basis: basis}, nil
}

// cellDevice is the ceilings for a cell: those the CUDA backend measured
// and its record keeps (on a GPU xrun knows none for, or with
// XRUN_MEASURE_CEILINGS=1), under the GPU's name, else those measured on
// the project's machines for its GPU (GPUDevice).
func cellDevice(c RooflineCell) (Device, error) {
	if m := c.Ceilings; m != nil && m.BytesPerSec > 0 && m.FLOPs > 0 {
		d := MeasuredDevice(m)
		d.Name = c.GPU
		return d, nil
	}
	if d, ok := GPUDevice(c.GPU); ok {
		return d, nil
	}
	return Device{}, fmt.Errorf("xrun has no measured ceilings for %s, and the cell's record has none", c.GPU)
}

// MeasuredDevice is the Device of ceilings the CUDA backend measured; the
// zero Device (the caller's default) for nil. Without a measured FP8 rate
// FP8 GEMMs run at the measured GEMM's, unless the GPU is one whose FP8
// ratio xrun knows.
func MeasuredDevice(c *engine.Ceilings) Device {
	if c == nil {
		return Device{}
	}
	d := Device{Name: c.Device, PeakBytesPerSec: c.BytesPerSec, PeakFLOPs: c.FLOPs, PeakFP8FLOPs: c.FP8FLOPs, PeakSource: c.Source, ElemBytes: 2}
	if k, ok := GPUDevice(c.Device); ok && d.PeakFP8FLOPs <= 0 && k.PeakFP8FLOPs > 0 {
		// The backend measures its compute dtype's GEMM only; on a GPU
		// whose FP8 ceiling xrun knows relative to bf16's (a known GPU
		// measured again, XRUN_MEASURE_CEILINGS=1), keep that ratio.
		d.PeakFP8FLOPs = d.PeakFLOPs * k.PeakFP8FLOPs / k.PeakFLOPs
		d.PeakSource += "; FP8 GEMMs at " + sig3(k.PeakFP8FLOPs/k.PeakFLOPs) + "x that GEMM, the ratio xrun takes for this GPU"
	}
	return d
}

// csvLines calls fn with each line of a CSV file of plain fields (no
// quoting: the runner writes numbers and booleans only) after the header,
// split at commas, with its 1-based line number. The header's column
// positions go to cols first.
func csvLines(path string, r io.Reader, cols func(header []string) error, fn func(line int, f [][]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	var fields [][]byte
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			if err := cols(strings.Split(strings.TrimSpace(string(b)), ",")); err != nil {
				return fmt.Errorf("%s:1: %w", path, err)
			}
			continue
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		fields = fields[:0]
		for {
			i := bytes.IndexByte(b, ',')
			if i < 0 {
				fields = append(fields, bytes.TrimSpace(b))
				break
			}
			fields = append(fields, b[:i])
			b = b[i+1:]
		}
		if err := fn(line, fields); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	if line == 0 {
		return fmt.Errorf("%s: empty; expected a header line", path)
	}
	return nil
}

// columnIndex finds the named columns in a header.
func columnIndex(header []string, names ...string) ([]int, error) {
	idx := make([]int, len(names))
	for i, n := range names {
		idx[i] = slices.Index(header, n)
		if idx[i] < 0 {
			return nil, fmt.Errorf("header has no %s column (expected %s)", n, strings.Join(names, ", "))
		}
	}
	return idx, nil
}

// intField and boolField parse field i of a row, named name in errors.
func intField(f [][]byte, i int, name string) (int, error) {
	if i >= len(f) {
		return 0, fmt.Errorf("%s: missing; the row has %d fields", name, len(f))
	}
	v, err := strconv.Atoi(string(f[i]))
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: %q; expected a non-negative integer", name, f[i])
	}
	return v, nil
}

func boolField(f [][]byte, i int, name string) (bool, error) {
	if i >= len(f) {
		return false, fmt.Errorf("%s: missing; the row has %d fields", name, len(f))
	}
	v, err := strconv.ParseBool(string(f[i]))
	if err != nil {
		return false, fmt.Errorf("%s: %q; expected true or false", name, f[i])
	}
	return v, nil
}

// readTimedIterations reads the first timed repeat's iterations (pass 0,
// not the profiled pass, warm-up left out) from a cell's iterations.csv.
func readTimedIterations(path string) ([]engine.IterationRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTimedIterations(path, f)
}

func parseTimedIterations(path string, r io.Reader) ([]engine.IterationRecord, error) {
	names := []string{"pass", "profiled", "iteration", "ctx_requests", "ctx_tokens", "gen_requests", "warmup", "duration_ns"}
	var idx []int
	var out []engine.IterationRecord
	err := csvLines(path, r, func(h []string) (err error) {
		idx, err = columnIndex(h, names...)
		return err
	}, func(_ int, f [][]byte) error {
		var v [5]int
		for k, c := range []int{0, 2, 3, 4, 5} {
			var err error
			if v[k], err = intField(f, idx[c], names[c]); err != nil {
				return err
			}
		}
		profiled, err := boolField(f, idx[1], names[1])
		if err != nil {
			return err
		}
		warm, err := boolField(f, idx[6], names[6])
		if err != nil {
			return err
		}
		if v[0] != 0 || profiled || warm {
			return nil
		}
		d, err := intField(f, idx[7], names[7])
		if err != nil {
			return err
		}
		out = append(out, engine.IterationRecord{Index: v[1], CtxRequests: v[2], CtxTokens: v[3], GenRequests: v[4], Duration: time.Duration(d)})
		return nil
	})
	return out, err
}

// readTouchedExperts reads a cell's expert_load.csv and counts, per
// iteration, the experts with at least one token, summed over layers.
func readTouchedExperts(path string, layers, experts int) (map[int]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTouchedExperts(path, f, layers, experts)
}

func parseTouchedExperts(path string, r io.Reader, layers, experts int) (map[int]int, error) {
	var idx []int
	first := 0 // the column of expert_0
	out := map[int]int{}
	err := csvLines(path, r, func(h []string) (err error) {
		if idx, err = columnIndex(h, "iteration", "layer", "expert_0"); err != nil {
			return err
		}
		first = idx[2]
		if n := len(h) - first; n != experts {
			return fmt.Errorf("%d expert columns; the model has %d experts", n, experts)
		}
		return nil
	}, func(_ int, f [][]byte) error {
		iter, err := intField(f, idx[0], "iteration")
		if err != nil {
			return err
		}
		layer, err := intField(f, idx[1], "layer")
		if err != nil {
			return err
		}
		if layer >= layers {
			return fmt.Errorf("layer: %d; the model has %d layers", layer, layers)
		}
		if len(f) != first+experts {
			return fmt.Errorf("%d fields; expected %d", len(f), first+experts)
		}
		n := 0
		for e := range experts {
			c := f[first+e]
			if len(c) == 1 && c[0] == '0' {
				continue
			}
			if _, err := intField(f, first+e, "expert_"+strconv.Itoa(e)); err != nil {
				return err
			}
			n++
		}
		out[iter] += n
		return nil
	})
	return out, err
}

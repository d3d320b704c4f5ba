package htmlreport

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// maxTelemetryPoints bounds each telemetry line: a cell sampled every
// 50 ms for ten minutes has 12,000 samples, more than a chart can show;
// beyond it samples are averaged in equal runs.
const maxTelemetryPoints = 400

// Span is a stretch of a cell's telemetry time, in seconds since its
// sampling began.
type Span struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Label string  `json:"label"`
}

// TelemetryGPU is one GPU's samples as [seconds, value] pairs; a value the
// GPU did not report is left out.
type TelemetryGPU struct {
	GPU        int          `json:"gpu"`
	SMClockMHz [][2]float64 `json:"sm_clock_mhz"`
	PowerW     [][2]float64 `json:"power_w"`
	TempC      [][2]float64 `json:"temp_c"`
}

// TelemetryChart is a cell's GPU telemetry over time: SM clock, power and
// temperature, with the timed repeats and the profile window shaded and
// the throttle rule's threshold and verdict.
type TelemetryChart struct {
	Name  string         `json:"name"`
	Cell  string         `json:"cell"`
	Label string         `json:"label"`
	GPUs  []TelemetryGPU `json:"gpus"`
	// Repeats are the timed repeats' passes (each with the engine's
	// warm-up requests), from cell.json; Profiled is the profiled pass
	// and Window its profile window (from iterations.csv), where known.
	Repeats  []Span `json:"repeats,omitempty"`
	Profiled *Span  `json:"profiled,omitempty"`
	Window   *Span  `json:"window,omitempty"`
	// ThresholdMHz is the throttle rule's clock: the threshold fraction
	// of the GPU's maximum SM clock; 0 where not known.
	ThresholdMHz float64 `json:"threshold_mhz,omitempty"`
	Throttled    bool    `json:"throttled"`
	Verdict      string  `json:"verdict"`
	// Samples is how many rows telemetry.csv has; Averaged says the
	// lines average runs of them.
	Samples  int      `json:"samples"`
	Averaged bool     `json:"averaged,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// ThrottleVerdict says in words what the throttle rule found for a cell,
// and never "not throttled" where nothing was judged.
func ThrottleVerdict(t *results.Telemetry) string {
	if t == nil {
		return "no GPU telemetry: nothing judged"
	}
	var b strings.Builder
	switch {
	case t.ThrottleThreshold > 0 && t.BelowThresholdShare != nil:
		fmt.Fprintf(&b, "%s: %s%% of %d timed samples ran below %s%% of the maximum SM clock (%s MHz; the rule flags more than 5%%); SM clock mean %s MHz, min %s MHz",
			pick(t.Throttled, "throttled", "not throttled"), results.FormatSig(100**t.BelowThresholdShare, 3), t.ClockSamples,
			strconv.FormatFloat(100*t.ThrottleThreshold, 'g', 4, 64), mhz(t.MaxSMClockMHz), mhz(t.SMClockMHzMean), mhz(t.SMClockMHzMin))
	case t.ThrottleThreshold > 0:
		b.WriteString("not judged: no timed sample had an SM clock to judge")
	case t.Throttled:
		b.WriteString("marked throttled by a file written before xrun judged throttling by the SM clock (a throttle reason other than idle was seen); whether the clock dropped is not known")
	default:
		b.WriteString("not judged by the clock rule (no maximum SM clock known, or a file written before the rule)")
	}
	if t.PowerCappedS > 0 {
		fmt.Fprintf(&b, "; power-capped %s s", results.FormatSig(t.PowerCappedS, 3))
	}
	if len(t.ThrottleReasons) > 0 {
		b.WriteString("; NVML reasons: " + strings.Join(t.ThrottleReasons, ", "))
	}
	return b.String()
}

// CellTelemetry reads a cell's telemetry.csv and cell.json from the
// results directory dir and lays them out for the chart. A file missing
// or malformed is a note, not an error: the page still shows the rest.
func CellTelemetry(dir string, c *results.Cell, label string) TelemetryChart {
	ch := TelemetryChart{Name: "telemetry-" + c.ID, Cell: c.ID, Label: label, Verdict: ThrottleVerdict(c.Telemetry)}
	if t := c.Telemetry; t != nil {
		ch.Throttled = t.Throttled
		if t.ThrottleThreshold > 0 && t.MaxSMClockMHz > 0 {
			ch.ThresholdMHz = round6(t.ThrottleThreshold * t.MaxSMClockMHz)
		}
	}
	gpus, n, err := readTelemetry(dir, layout.CellArtifact(c.ID, layout.TelemetryFile))
	if err != nil {
		ch.Notes = append(ch.Notes, err.Error())
		return ch
	}
	ch.Samples = n
	for i := range gpus {
		g := &gpus[i]
		for _, s := range []*[][2]float64{&g.SMClockMHz, &g.PowerW, &g.TempC} {
			if len(*s) > maxTelemetryPoints {
				*s = averageRuns(*s, maxTelemetryPoints)
				ch.Averaged = true
			}
		}
	}
	ch.GPUs = gpus
	rec, err := readCellRecord(dir, layout.CellArtifact(c.ID, layout.CellFile))
	if err != nil {
		ch.Notes = append(ch.Notes, err.Error()+": the timed repeats are not shaded")
		return ch
	}
	origin := rec.Started
	if len(rec.Sessions) > 0 {
		origin = rec.Sessions[0].Started // the cell's telemetry clock starts with its first worker
	}
	since := func(t time.Time) float64 { return round6(t.Sub(origin).Seconds()) }
	for _, p := range rec.Passes {
		if p.Started.IsZero() || p.Finished.Before(p.Started) {
			continue
		}
		sp := Span{From: since(p.Started), To: since(p.Finished)}
		if p.Profiled {
			sp.Label = "profiled pass"
			ch.Profiled = &sp
			continue
		}
		sp.Label = fmt.Sprintf("repeat %d", p.Repeat)
		ch.Repeats = append(ch.Repeats, sp)
	}
	if ch.Profiled != nil {
		from, to, ok, err := profileWindow(dir, layout.CellArtifact(c.ID, layout.IterationsFile))
		switch {
		case err != nil:
			ch.Notes = append(ch.Notes, err.Error()+": the profile window is not shaded")
		case ok:
			ch.Window = &Span{From: round6(ch.Profiled.From + from), To: round6(ch.Profiled.From + to), Label: "profile window"}
		}
	}
	return ch
}

// readTelemetry reads telemetry.csv by its header's column names (so
// that a column added later does not break old readers): time_ms and gpu,
// and whichever of sm_clock_mhz, power_w and temp_c it has.
func readTelemetry(dir, path string) ([]TelemetryGPU, int, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return nil, 0, openError(path, err)
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReader(f))
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: no header: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, need := range []string{"time_ms", "gpu"} {
		if _, ok := col[need]; !ok {
			return nil, 0, fmt.Errorf("%s: no %s column", path, need)
		}
	}
	var gpus []TelemetryGPU
	n := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %v", path, err)
		}
		n++
		line, _ := cr.FieldPos(0)
		t, err := strconv.ParseFloat(rec[col["time_ms"]], 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, 0, fmt.Errorf("%s:%d: time_ms: %q is not a number", path, line, rec[col["time_ms"]])
		}
		g, err := strconv.Atoi(rec[col["gpu"]])
		if err != nil || g < 0 {
			return nil, 0, fmt.Errorf("%s:%d: gpu: %q is not a GPU index", path, line, rec[col["gpu"]])
		}
		i := slices.IndexFunc(gpus, func(x TelemetryGPU) bool { return x.GPU == g })
		if i < 0 {
			i = len(gpus)
			gpus = append(gpus, TelemetryGPU{GPU: g})
		}
		x := t / 1e3
		add := func(name string, to *[][2]float64) error {
			j, ok := col[name]
			if !ok || rec[j] == "" {
				return nil
			}
			v, err := strconv.ParseFloat(rec[j], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s:%d: %s: %q is not a number", path, line, name, rec[j])
			}
			*to = append(*to, [2]float64{x, v})
			return nil
		}
		for _, e := range []error{add("sm_clock_mhz", &gpus[i].SMClockMHz), add("power_w", &gpus[i].PowerW), add("temp_c", &gpus[i].TempC)} {
			if e != nil {
				return nil, 0, e
			}
		}
	}
	slices.SortFunc(gpus, func(a, b TelemetryGPU) int { return a.GPU - b.GPU })
	return gpus, n, nil
}

// averageRuns shortens a line to at most n points, each the mean of an
// equal run of consecutive samples (samples come at a fixed period).
func averageRuns(pts [][2]float64, n int) [][2]float64 {
	run := (len(pts) + n - 1) / n
	out := make([][2]float64, 0, n)
	for i := 0; i < len(pts); i += run {
		end := min(i+run, len(pts))
		var sx, sy float64
		for _, p := range pts[i:end] {
			sx += p[0]
			sy += p[1]
		}
		k := float64(end - i)
		out = append(out, [2]float64{round6(sx / k), round6(sy / k)})
	}
	return out
}

// cellRecord is what the charts read of cells/<id>/cell.json: when each
// pass ran.
type cellRecord struct {
	Started  time.Time `json:"started"`
	Sessions []struct {
		Started time.Time `json:"started"`
	} `json:"sessions"`
	Passes []struct {
		Repeat   int       `json:"repeat"`
		Profiled bool      `json:"profiled"`
		Started  time.Time `json:"started"`
		Finished time.Time `json:"finished"`
	} `json:"passes"`
}

func readCellRecord(dir, path string) (*cellRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return nil, openError(path, err)
	}
	var rec cellRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &rec, nil
}

// profileWindow finds the profiled pass's window in iterations.csv: from
// the first in-window iteration's start to the last one's end, in seconds
// since the pass began; ok is false when no row is in the window.
func profileWindow(dir, path string) (from, to float64, ok bool, err error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return 0, 0, false, openError(path, err)
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReader(f))
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: no header: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, need := range []string{"profiled", "start_ns", "duration_ns", "in_window"} {
		if _, ok := col[need]; !ok {
			return 0, 0, false, fmt.Errorf("%s: no %s column", path, need)
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("%s: %v", path, err)
		}
		if rec[col["profiled"]] != "true" || rec[col["in_window"]] != "true" {
			continue
		}
		line, _ := cr.FieldPos(0)
		s, err1 := strconv.ParseInt(rec[col["start_ns"]], 10, 64)
		d, err2 := strconv.ParseInt(rec[col["duration_ns"]], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false, fmt.Errorf("%s:%d: start_ns and duration_ns must be integers", path, line)
		}
		lo, hi = min(lo, float64(s)), max(hi, float64(s+d))
	}
	if math.IsInf(lo, 1) {
		return 0, 0, false, nil
	}
	return lo / 1e9, hi / 1e9, true, nil
}

// LayerLoad is a MoE layer's imbalance over the timed iterations: the
// mean and the largest per-iteration max/mean.
type LayerLoad struct {
	Layer int     `json:"layer"`
	Mean  float64 `json:"mean"`
	Max   float64 `json:"max"`
}

// ExpertChart is a MoE cell's expert loads: the tokens each expert
// received (results.json's histogram) and, from expert_load.csv where
// the results directory has it, the imbalance per layer.
type ExpertChart struct {
	Name             string      `json:"name"`
	Cell             string      `json:"cell"`
	Label            string      `json:"label"`
	Histogram        []int64     `json:"histogram"`
	MaxOverMean      float64     `json:"max_over_mean"`
	TotalMaxOverMean float64     `json:"total_max_over_mean,omitempty"`
	Layers           []LayerLoad `json:"layers,omitempty"`
	Notes            []string    `json:"notes,omitempty"`
}

// CellExperts lays out a MoE cell's expert loads; dir "" reads no file.
func CellExperts(dir string, c *results.Cell, label string) ExpertChart {
	l := c.ExpertLoad
	ch := ExpertChart{Name: "expert-load-" + c.ID, Cell: c.ID, Label: label, Histogram: l.Histogram, MaxOverMean: l.MaxOverMean, TotalMaxOverMean: l.TotalMaxOverMean}
	if dir == "" {
		return ch
	}
	layers, err := readLayerLoads(dir, layout.CellArtifact(c.ID, layout.ExpertLoadFile))
	if err != nil {
		ch.Notes = append(ch.Notes, err.Error())
	}
	ch.Layers = layers
	return ch
}

// readLayerLoads reads the first columns of expert_load.csv (iteration,
// warmup, layer, max_over_mean, then one per expert): only those, since
// a line holds every expert's count.
func readLayerLoads(dir, path string) ([]LayerLoad, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return nil, openError(path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	type acc struct {
		mean, max float64
		n         int
	}
	by := map[int]*acc{}
	line := 0
	for sc.Scan() {
		line++
		fields := strings.SplitN(sc.Text(), ",", 5)
		if line == 1 {
			if len(fields) < 4 || fields[1] != "warmup" || fields[2] != "layer" || fields[3] != "max_over_mean" {
				return nil, fmt.Errorf("%s:1: expected the header iteration,warmup,layer,max_over_mean,...", path)
			}
			continue
		}
		if len(fields) < 4 {
			return nil, fmt.Errorf("%s:%d: expected at least 4 fields", path, line)
		}
		if fields[1] == "true" {
			continue
		}
		layer, err1 := strconv.Atoi(fields[2])
		v, err2 := strconv.ParseFloat(fields[3], 64)
		if err1 != nil || err2 != nil || layer < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s:%d: layer and max_over_mean must be numbers", path, line)
		}
		a := by[layer]
		if a == nil {
			a = &acc{}
			by[layer] = a
		}
		// A running mean: a sum of huge ratios would overflow.
		a.n++
		a.mean += (v - a.mean) / float64(a.n)
		a.max = max(a.max, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var out []LayerLoad
	for layer, a := range by {
		out = append(out, LayerLoad{Layer: layer, Mean: round6(a.mean), Max: round6(a.max)})
	}
	slices.SortFunc(out, func(a, b LayerLoad) int { return a.Layer - b.Layer })
	return out, nil
}

// Command is the command that measures a cell again.
type Command struct {
	Cell    string `json:"cell"`
	Label   string `json:"label"`
	Status  string `json:"status"`
	Command string `json:"command"`
}

// specPlaceholder stands for the spec file where results.json does not
// record it.
const specPlaceholder = "SPEC"

// ReproduceCommands are the commands that run each cell again: the spec
// file (results.json's spec_file, else SPEC), its --set arguments, and
// --only id=<cell>.
func ReproduceCommands(r *results.Results) []Command {
	s := newStudy(r)
	base := "xrun run " + shellQuote(pick(r.SpecFile != "", r.SpecFile, specPlaceholder))
	for _, set := range r.SpecSets {
		base += " --set " + shellQuote(set)
	}
	var out []Command
	for _, c := range s.cells {
		out = append(out, Command{Cell: c.ID, Label: s.labels[c.ID], Status: string(c.Status), Command: base + " --only " + shellQuote("id="+c.ID)})
	}
	return out
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// openError names the file and says why it could not be read, without
// repeating the path an *fs.PathError carries.
func openError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

func mhz(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

package results

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the results.json version this package writes and the
// only one it reads. Adding an optional field keeps the version; renaming,
// removing or changing the meaning of one bumps it.
const SchemaVersion = 1

// Results is one results.json: what a study ran, where, and what every
// cell measured. The runner fills it and hands it to WriteDir or WriteFile;
// the writer sorts, rounds and summarises, so callers need not.
type Results struct {
	SchemaVersion int    `json:"schema_version"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	// Spec is the resolved study spec as a JSON object. This package never
	// looks inside it; the writer only re-encodes it with sorted keys.
	Spec json.RawMessage `json:"spec"`
	// SpecFile is the spec file as xrun run was given it, and SpecSets its
	// --set arguments in order, so that a report can print the command
	// that reproduces a cell. Optional (older files lack them).
	SpecFile    string      `json:"spec_file,omitempty"`
	SpecSets    []string    `json:"spec_sets,omitempty"`
	Environment Environment `json:"environment"`
	// Axes lists the matrix axes with their values in the spec's order.
	// Optional: when empty, axes are derived from the parameters that vary
	// between cells, values sorted. The order decides pivot columns and
	// the default baseline (the first value).
	Axes []Axis `json:"axes,omitempty"`
	// Compare holds the spec's compare entries. Axes with exactly two
	// values are compared as well, baseline first, without being listed.
	Compare []CompareSpec `json:"compare,omitempty"`
	// Started and Finished are the only wall-clock times in the file.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// OrderSeed is the seed the last run shuffled the order of running
	// its cells with (xrun run --order-seed repeats it); absent when they
	// ran in the plan's order.
	OrderSeed int64 `json:"order_seed,omitempty"`
	// SLO is the spec's latency target, from which the cells' goodput
	// was computed; Search its SLO search, with the frontier found.
	// Optional (studies without them, older files).
	SLO    *SLO    `json:"slo,omitempty"`
	Search *Search `json:"search,omitempty"`
	// Reference is the spec's published table to measure against
	// (reference.go). Optional.
	Reference *Reference `json:"reference,omitempty"`
	Cells     []Cell     `json:"cells"`
}

// Axis is one matrix axis: a dotted parameter key and its values.
type Axis struct {
	Name   string `json:"name"`
	Values []any  `json:"values"`
}

// CompareSpec asks for every value of Axis to be compared with Baseline,
// the other parameters held equal.
type CompareSpec struct {
	Axis     string `json:"axis"`
	Baseline any    `json:"baseline"`
}

// Environment is the fingerprint of the machine and software a study ran
// on. xrun diff reports every field that differs between two files.
type Environment struct {
	Xrun        Build  `json:"xrun"`
	Host        string `json:"host"`
	OS          string `json:"os"`     // GOOS/GOARCH, e.g. "linux/amd64"
	Kernel      string `json:"kernel"` // uname release
	CPUModel    string `json:"cpu_model"`
	CPUCount    int    `json:"cpu_count"`
	MemoryBytes uint64 `json:"memory_bytes"`
	GPUs        []GPU  `json:"gpus"`
	// Repo is the git state of the repository holding the study file;
	// nil when it is not in one.
	Repo *Repo `json:"repo,omitempty"`
	// Engines are the external engines' tools the study ran (engine
	// trtllm, engine command), with the versions they reported.
	Engines []EngineTool `json:"engines,omitempty"`
	// Switches are the engine switches (XRUN_CUDA_GRAPHS, ...) the run
	// had set to other than their defaults, name -> value in effect.
	Switches map[string]string `json:"switches,omitempty"`
}

// EngineTool is an external engine's tool as the run found it.
type EngineTool struct {
	Engine  string `json:"engine"`            // the engine parameter: trtllm, command
	Tool    string `json:"tool"`              // TensorRT-LLM, or the command's program
	Version string `json:"version,omitempty"` // as the tool reported it
	// Error says why the tool could not be asked (not installed, ...).
	Error string `json:"error,omitempty"`
}

// Build identifies the xrun binary that produced the file.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

// GPU describes one device as found when the run started.
type GPU struct {
	Index             int     `json:"index"`
	Name              string  `json:"name"`
	UUID              string  `json:"uuid"`
	Driver            string  `json:"driver"`
	CUDAVersion       string  `json:"cuda_version"`
	MemoryBytes       uint64  `json:"memory_bytes"`
	ComputeCapability string  `json:"compute_capability"` // "9.0"
	SMClockMHz        int     `json:"sm_clock_mhz"`       // at start
	MemClockMHz       int     `json:"mem_clock_mhz"`      // at start
	PowerLimitW       float64 `json:"power_limit_w"`
	// MaxSMClockMHz and MaxMemClockMHz are the most the clocks can run at
	// (NVML's max clocks): facts of the GPU, unlike the clocks at start,
	// which are whatever an idle GPU ran at then. Optional (NVML only,
	// and older files lack them).
	MaxSMClockMHz  int `json:"max_sm_clock_mhz,omitempty"`
	MaxMemClockMHz int `json:"max_mem_clock_mhz,omitempty"`
}

// Repo is the experiment repository's git state.
type Repo struct {
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
}

// Status is a cell's outcome.
type Status string

const (
	StatusOK      Status = "ok"
	StatusFailed  Status = "failed"
	StatusSkipped Status = "skipped"
)

// Params are a cell's resolved parameters flattened to dotted keys
// ("dataset.input_mean"). Values are JSON scalars: string, bool, nil or a
// number. Any Go integer or float type may be stored; ReadFile returns
// int64 for integral numbers and float64 otherwise.
type Params map[string]any

// Metrics is one repeat's measurements, keyed as in the metric registry
// (see Metrics()). Unknown keys are kept and shown by their key.
type Metrics map[string]float64

// Cell is one point of the matrix and everything measured for it. Nothing
// in a cell depends on when it ran, so an unchanged cell diffs clean.
type Cell struct {
	ID     string `json:"id"`
	Params Params `json:"params"`
	Status Status `json:"status"`
	Error  string `json:"error,omitempty"`
	// Repeats holds every timed repeat's metrics, in the order run.
	Repeats []Metrics `json:"repeats"`
	// Summary is computed by the writer from Repeats (median and 95 %
	// confidence interval per metric); callers leave it nil.
	Summary map[string]Summary `json:"summary"`

	// Optional sections, filled by later stages when they ran.
	Profile    *Profile    `json:"profile,omitempty"`
	Telemetry  *Telemetry  `json:"telemetry,omitempty"`
	ExpertLoad *ExpertLoad `json:"expert_load,omitempty"`
	// Roofline is the timed run against the roofline model; set for cells
	// that ran on a GPU with known ceilings, when results are assembled.
	Roofline *Roofline `json:"roofline,omitempty"`
	// Artifacts are paths relative to the results directory
	// ("cells/<id>/requests.jsonl"), sorted by the writer.
	Artifacts []string `json:"artifacts,omitempty"`
}

// Summary is a metric's median over repeats with its 95 % confidence
// interval (golang.org/x/perf/benchmath, no distributional assumption).
// CILow and CIHigh are nil when n is too small for a finite interval
// (fewer than 6 repeats at 95 %).
type Summary struct {
	Median float64  `json:"median"`
	CILow  *float64 `json:"ci_low"`
	CIHigh *float64 `json:"ci_high"`
	N      int      `json:"n"`
}

// Profile is the summary of a cell's profiled pass.
type Profile struct {
	// Window is the profiled iteration span, "A-B".
	Window string `json:"window"`
	// Kernels are the top kernels by total time, as in Nsight Systems'
	// "CUDA GPU Kernel Summary".
	Kernels []Kernel `json:"kernels,omitempty"`
	// Diagnosis holds one-line findings ("GEMMs ran on cuBLASLt").
	Diagnosis []string `json:"diagnosis,omitempty"`
	// Iterations is how many engine iterations the window covered, so
	// kernel times can be compared per iteration between cells.
	Iterations int `json:"iterations,omitempty"`
	// DistinctKernels is how many kernels the window ran, and
	// OtherKernels the ones below Kernels' top list, so that a kernel
	// diff between two cells (results.md's comparisons, xrun diff) knows
	// every kernel each ran. Optional: files written before they existed
	// have neither, and a kernel missing from their top list may still
	// have run.
	DistinctKernels int          `json:"distinct_kernels,omitempty"`
	OtherKernels    []KernelTime `json:"other_kernels,omitempty"`
	// Stats are the diagnosis's figures (busy_fraction,
	// kernels_per_iteration, mean_gap_ns, achieved_bytes_per_s, ...).
	Stats map[string]float64 `json:"stats,omitempty"`
	// PassMetrics are the profiled pass's own metrics, where it ran to its
	// end (older files; external engines). The pass runs after the timed
	// repeats and never joins them; set beside their summary it shows what
	// profiling cost. Optional.
	PassMetrics Metrics `json:"pass_metrics,omitempty"`
	// WindowIterationNs is the mean duration of the window's iterations
	// in the profiled pass, and TimedWindowIterationNs the median over the
	// timed repeats of the same iterations' mean: what profiling cost
	// where it profiled, for a profiled pass that stopped after its window
	// (xrun's own engine). Optional (older files lack them).
	WindowIterationNs      float64 `json:"window_iteration_ns,omitempty"`
	TimedWindowIterationNs float64 `json:"timed_window_iteration_ns,omitempty"`
	// WarmupIterations is how many of the window's iterations ran the
	// warm-up requests (warm-up iterations count, as in TensorRT-LLM), and
	// FirstTimedIteration the first iteration of the timed requests (absent
	// where the profiled pass stopped inside the warm-up and no timed
	// repeat recorded it): a window in the warm-up profiles a batch of
	// warm-up requests, not the run. Optional (absent: none did, or an
	// older file).
	WarmupIterations    int `json:"warmup_iterations,omitempty"`
	FirstTimedIteration int `json:"first_timed_iteration,omitempty"`
}

// Kernel is one row of a kernel summary.
type Kernel struct {
	Name      string  `json:"name"`
	TimePct   float64 `json:"time_pct"`
	TotalNs   int64   `json:"total_ns"`
	Instances int64   `json:"instances"`
	AvgNs     float64 `json:"avg_ns"`
	MedNs     float64 `json:"med_ns"`
	MinNs     int64   `json:"min_ns"`
	MaxNs     int64   `json:"max_ns"`
	StdDevNs  float64 `json:"stddev_ns"`
	// ExclusiveNs is the time the kernel had its stream to itself (a
	// kernel that started under programmatic dependent launch while its
	// predecessor drained counts from that one's end); 0: unknown (an
	// outside profiler's summary, or an older file).
	ExclusiveNs int64 `json:"exclusive_ns,omitempty"`
}

// KernelTime is a kernel below a profile's top list: enough to compare
// it between cells.
type KernelTime struct {
	Name        string `json:"name"`
	TotalNs     int64  `json:"total_ns"`
	Instances   int64  `json:"instances"`
	ExclusiveNs int64  `json:"exclusive_ns,omitempty"` // Kernel.ExclusiveNs
}

// Telemetry summarises GPU telemetry sampled during the cell's timed
// repeats: from the first request's submission to the last one's end of
// each, without the engine's creation, its warm-up or the profiled pass
// (files written before the throttle rule summarise the whole cell).
type Telemetry struct {
	SMClockMHzMean  float64 `json:"sm_clock_mhz_mean"`
	SMClockMHzMax   float64 `json:"sm_clock_mhz_max"`
	MemClockMHzMean float64 `json:"mem_clock_mhz_mean"`
	MemClockMHzMax  float64 `json:"mem_clock_mhz_max"`
	PowerWMean      float64 `json:"power_w_mean"`
	PowerWMax       float64 `json:"power_w_max"`
	// Throttled is the throttle rule's verdict: more than 5 % of the
	// judged samples (ClockSamples) ran below ThrottleThreshold times the
	// GPU's maximum SM clock; the cell's numbers may not be comparable
	// with an unthrottled run's. In files without ThrottleThreshold
	// (written before the rule) it is true when any sample saw a throttle
	// reason other than idle, whatever the clock.
	Throttled bool `json:"throttled"`
	// ThrottleReasons are NVML's clock event reasons seen in any sample,
	// but gpu_idle: facts, which decide nothing by themselves.
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
	// Optional since the NVML sampler (profile.StartTelemetry): utilization
	// in %, temperature, energy over the cell, memory used and how many
	// samples the summary is over.
	GPUUtilPctMean  float64 `json:"gpu_util_pct_mean,omitempty"`
	MemUtilPctMean  float64 `json:"mem_util_pct_mean,omitempty"`
	TempCMax        float64 `json:"temp_c_max,omitempty"`
	EnergyJ         float64 `json:"energy_j,omitempty"`
	MemUsedBytesMax uint64  `json:"mem_used_bytes_max,omitempty"`
	Samples         int     `json:"samples,omitempty"`
	// Optional since the throttle rule, and only where NVML told the
	// GPU's maximum SM clock: the least SM clock sampled; MaxSMClockMHz,
	// that maximum (the highest of the cell's GPUs'), which the rule
	// judges against; ThrottleThreshold, the rule's fraction of it (xrun
	// run --throttle-threshold, nvbench's default 0.75); ClockSamples, how
	// many samples the rule judged (those with a clock and without the
	// gpu_idle reason); BelowThresholdShare, the share of them below
	// (absent when none was judged). PowerCappedS is the time some GPU
	// reported sw_power_cap, hw_slowdown or hw_power_brake_slowdown
	// (samples times the sampling period; absent when none did).
	SMClockMHzMin       float64  `json:"sm_clock_mhz_min,omitempty"`
	MaxSMClockMHz       float64  `json:"max_sm_clock_mhz,omitempty"`
	ThrottleThreshold   float64  `json:"throttle_threshold,omitempty"`
	ClockSamples        int      `json:"clock_samples,omitempty"`
	BelowThresholdShare *float64 `json:"below_threshold_share,omitempty"`
	PowerCappedS        float64  `json:"power_capped_s,omitempty"`
}

// ExpertLoad describes how evenly a MoE router spread tokens.
type ExpertLoad struct {
	// MaxOverMean is the busiest expert's token count over the mean
	// (1 = perfectly balanced).
	MaxOverMean float64 `json:"max_over_mean"`
	// TotalMaxOverMean is the same ratio on each layer's tokens summed over
	// the timed iterations, averaged over layers: imbalance that persists
	// rather than per-step noise.
	TotalMaxOverMean float64 `json:"total_max_over_mean,omitempty"`
	// Histogram counts the tokens routed to each expert (index = expert),
	// summed over layers.
	Histogram []int64 `json:"histogram"`
}

// Roofline sets a cell's timed run against the roofline model of
// bench/GPU.md ("Rooflines"), computed from the cell's own
// records (engine/profile.CellRoofline): each timed iteration of the
// first repeat must at least read every matmul weight once (on MoE models
// only the experts its tokens reached), read and write its KV cache and
// do its FLOPs, so it takes at least max(bytes / bandwidth, FLOPs / peak),
// and the run at least the sum over its iterations.
type Roofline struct {
	// FloorS is that sum: the least time the timed run could take.
	FloorS float64 `json:"floor_s"`
	// OutputTokS is the output throughput at the floor: the run's output
	// tokens over FloorS.
	OutputTokS float64 `json:"output_tok_s"`
	// Fraction is the median measured output throughput over OutputTokS,
	// the share of the roofline reached (equally FloorS over the measured
	// duration). The writer computes it from the repeats; callers leave it
	// 0.
	Fraction float64 `json:"fraction"`
	// MemoryBoundS is the part of FloorS from iterations whose bytes, not
	// FLOPs, set their floor.
	MemoryBoundS float64 `json:"memory_bound_s"`
	// MeasuredS is the same iterations' recorded spans summed (each from
	// when the device could start it to when its tokens were on the host),
	// MemoryBoundMeasuredS the part of it from the memory-bound ones and
	// MemoryBoundIterations their count: the floor and the time split by
	// which kind of iteration (decode steps, prompt chunks) lost the time.
	// Absent from results written before they existed.
	MeasuredS             float64 `json:"measured_s,omitempty"`
	MemoryBoundMeasuredS  float64 `json:"memory_bound_measured_s,omitempty"`
	MemoryBoundIterations int     `json:"memory_bound_iterations,omitempty"`
	// Iterations, Bytes and FLOPs are the timed iterations and their work.
	Iterations int     `json:"iterations"`
	Bytes      float64 `json:"bytes"`
	FLOPs      float64 `json:"flops"`
	// Device names the GPU whose ceilings were used: memory bandwidth
	// (bytes read plus written per second) and arithmetic rate at the
	// compute dtype, and PeakSource where they come from.
	Device        string  `json:"device"`
	PeakBytesPerS float64 `json:"peak_bytes_per_s"`
	PeakFLOPS     float64 `json:"peak_flop_per_s"`
	// PeakFP8FLOPS is the rate the FP8 linear layers' GEMMs were counted
	// at, for a model with FP8 weights (dtype fp8) only: their FLOPs are
	// part of FLOPs, at this rate rather than PeakFLOPS.
	PeakFP8FLOPS float64 `json:"peak_fp8_flop_per_s,omitempty"`
	PeakSource   string  `json:"peak_source"`
	// Basis says which records the work was computed from.
	Basis string `json:"basis"`
}

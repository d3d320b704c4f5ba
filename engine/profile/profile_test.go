package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/results/layout"
)

func renderKernels(t *testing.T, ops []model.OpRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteKernelsCSV(&b, Summarize(ops)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func renderTrace(t *testing.T, res *engine.Result, info TraceInfo) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteTrace(&b, BuildTrace(res, info)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func renderDiagnosis(d *Diagnosis) []byte {
	return []byte(strings.Join(d.Lines(), "\n") + "\n")
}

// checkProducts renders the kernel summary, the trace and the diagnosis
// of a pass, compares them with testdata/<prefix>-*, validates the trace
// and checks that the summary's totals are the trace's.
func checkProducts(t *testing.T, prefix string, res *engine.Result, mc engine.ModelConfig, dev Device, info TraceInfo) []byte {
	t.Helper()
	kcsv := renderKernels(t, res.Ops)
	trace := renderTrace(t, res, info)
	golden(t, prefix+"-kernels.csv", kcsv)
	golden(t, prefix+"-trace.json", trace)
	golden(t, prefix+"-diagnosis.txt", renderDiagnosis(Diagnose(res, mc, dev)))
	validateTrace(t, trace)
	checkTotals(t, kcsv, trace)
	return kcsv
}

// TestCPUProfileGolden profiles a real run of tiny-llama on the CPU
// backend and checks the three products against golden files.
func TestCPUProfileGolden(t *testing.T) {
	res, mc := profiledRun(t, "auto")
	if len(res.Ops) == 0 {
		t.Fatal("the profiled pass recorded no ops")
	}
	checkProducts(t, "cpu", res, mc, testDevice, TraceInfo{Device: "cpu backend (test)", Window: "3-5,8"})
}

// TestGPUProfileGolden runs synthetic CUDA records (mangled names, grid
// and block, copies and a memset on two streams) through the same path.
func TestGPUProfileGolden(t *testing.T) {
	mc, _ := engine.ZooModel("tiny-dense")
	h100, ok := GPUDevice("NVIDIA H100 80GB HBM3")
	if !ok {
		t.Fatal("no ceilings for the H100")
	}
	kcsv := checkProducts(t, "gpu", gpuResult(), mc, h100, TraceInfo{Device: "GPU 0: NVIDIA H100 80GB HBM3", Window: "7-8"})
	if !bytes.Contains(kcsv, []byte("void gemm_f16_tile<128, 64>(__half const*, __half const*, __half*, int, int, int)")) {
		t.Errorf("kernel names are not demangled:\n%s", kcsv)
	}
}

// validateTrace checks trace.json against the Chrome trace event format:
// an object with traceEvents; every event with a name, a known phase,
// integer pid and tid, non-negative ts (and dur for complete events);
// metadata naming every process and thread that has events; on each
// track, timestamps in order and complete events properly nested (what
// Perfetto needs to draw them as slices).
func validateTrace(t *testing.T, data []byte) {
	t.Helper()
	var doc struct {
		TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
		DisplayTimeUnit string                       `json:"displayTimeUnit"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("trace.json is not a JSON object: %v", err)
	}
	if doc.TraceEvents == nil {
		t.Fatal("trace.json has no traceEvents array")
	}
	if doc.DisplayTimeUnit != "ns" && doc.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q; want ns or ms", doc.DisplayTimeUnit)
	}
	type track struct{ pid, tid int64 }
	procNamed, threadNamed := map[int64]bool{}, map[track]bool{}
	used := map[track]bool{}
	last := map[track]int64{}
	stacks := map[track][]int64{} // end times of open enclosing slices
	num := func(i int, ev map[string]json.RawMessage, key string, need bool) (int64, bool) {
		raw, ok := ev[key]
		if !ok {
			if need {
				t.Errorf("event %d: no %q", i, key)
			}
			return 0, false
		}
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Errorf("event %d: %s %s is not a number", i, key, raw)
			return 0, false
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsNaN(f) {
			t.Errorf("event %d: %s %s is not a number", i, key, raw)
			return 0, false
		}
		if key == "pid" || key == "tid" {
			if f != math.Trunc(f) {
				t.Errorf("event %d: %s %s is not an integer", i, key, raw)
			}
			return int64(f), true
		}
		return int64(math.Round(f * 1000)), true // µs -> ns
	}
	for i, ev := range doc.TraceEvents {
		var name, ph string
		if json.Unmarshal(ev["name"], &name) != nil || name == "" {
			t.Errorf("event %d: no name", i)
		}
		if json.Unmarshal(ev["ph"], &ph) != nil {
			t.Errorf("event %d: no ph", i)
		}
		pid, _ := num(i, ev, "pid", true)
		tid, _ := num(i, ev, "tid", true)
		tr := track{pid, tid}
		switch ph {
		case "M":
			var args struct {
				Name      *string `json:"name"`
				SortIndex *int    `json:"sort_index"`
			}
			if err := json.Unmarshal(ev["args"], &args); err != nil {
				t.Errorf("event %d: metadata without args: %v", i, err)
			}
			switch name {
			case "process_name":
				procNamed[pid] = args.Name != nil && *args.Name != ""
			case "thread_name":
				threadNamed[tr] = args.Name != nil && *args.Name != ""
			case "process_sort_index", "thread_sort_index":
				if args.SortIndex == nil {
					t.Errorf("event %d: %s without sort_index", i, name)
				}
			default:
				t.Errorf("event %d: unknown metadata %q", i, name)
			}
		case "X", "B", "E", "i", "I", "C":
			ts, ok := num(i, ev, "ts", true)
			if ok && ts < 0 {
				t.Errorf("event %d (%s): negative ts", i, name)
			}
			if ts < last[tr] {
				t.Errorf("event %d (%s): ts %d ns before the previous event on its track (%d ns)", i, name, ts, last[tr])
			}
			last[tr] = ts
			used[tr] = true
			if ph != "X" {
				continue
			}
			dur, ok := num(i, ev, "dur", true)
			if ok && dur < 0 {
				t.Errorf("event %d (%s): negative dur", i, name)
			}
			st := stacks[tr]
			for len(st) > 0 && st[len(st)-1] <= ts {
				st = st[:len(st)-1]
			}
			if len(st) > 0 && ts+dur > st[len(st)-1] {
				t.Errorf("event %d (%s): overlaps the enclosing slice on its track without nesting", i, name)
			}
			stacks[tr] = append(st, ts+dur)
		default:
			t.Errorf("event %d (%s): unknown phase %q", i, name, ph)
		}
	}
	for tr := range used {
		if !procNamed[tr.pid] {
			t.Errorf("pid %d has events but no process_name", tr.pid)
		}
		if !threadNamed[tr] {
			t.Errorf("pid %d tid %d has events but no thread_name", tr.pid, tr.tid)
		}
	}
}

// checkTotals checks that the kernel summary's totals and instance counts
// are those of the kernel events in the trace.
func checkTotals(t *testing.T, kcsv, trace []byte) {
	t.Helper()
	stats, err := ReadKernelsCSV(bytes.NewReader(kcsv), "kernels.csv")
	if err != nil {
		t.Fatal(err)
	}
	var doc Trace
	dec := json.NewDecoder(bytes.NewReader(trace))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	total, count := map[string]int64{}, map[string]int64{}
	for _, ev := range doc.TraceEvents {
		if ev.Cat != model.OpKernel {
			continue
		}
		f, _ := strconv.ParseFloat(string(ev.Dur), 64)
		total[ev.Name] += int64(math.Round(f * 1000))
		count[ev.Name]++
	}
	if len(total) != len(stats) {
		t.Errorf("trace has %d kernel names, kernels.csv %d", len(total), len(stats))
	}
	var pct float64
	for _, s := range stats {
		if total[s.Name] != s.TotalNs || count[s.Name] != s.Instances {
			t.Errorf("%s: kernels.csv says %d ns in %d instances, the trace %d ns in %d", s.Name, s.TotalNs, s.Instances, total[s.Name], count[s.Name])
		}
		pct += s.TimePct
	}
	if math.Abs(pct-100) > 0.05*float64(len(stats)) {
		t.Errorf("Time (%%) sums to %.2f", pct)
	}
}

func TestSummarizeStatistics(t *testing.T) {
	ops := []model.OpRecord{
		{Name: "a", Duration: 10}, {Name: "a", Duration: 20}, {Name: "a", Duration: 30}, {Name: "a", Duration: 40},
		{Name: "b", Duration: 100},
		{Name: "copy", Duration: 1000, Kind: model.OpMemcpy}, // not a kernel
	}
	got := Summarize(ops)
	want := []KernelStat{ // equal totals: by name
		{Name: "a", TimePct: 50, TotalNs: 100, Instances: 4, AvgNs: 25, MedNs: 25, MinNs: 10, MaxNs: 40, StdDevNs: math.Sqrt(500.0 / 3)},
		{Name: "b", TimePct: 50, TotalNs: 100, Instances: 1, AvgNs: 100, MedNs: 100, MinNs: 100, MaxNs: 100},
	}
	if !slices.EqualFunc(got, want, func(a, b KernelStat) bool {
		return a.Name == b.Name && a.TotalNs == b.TotalNs && a.Instances == b.Instances && a.MinNs == b.MinNs && a.MaxNs == b.MaxNs &&
			math.Abs(a.TimePct-b.TimePct) < 1e-9 && math.Abs(a.AvgNs-b.AvgNs) < 1e-9 && math.Abs(a.MedNs-b.MedNs) < 1e-9 && math.Abs(a.StdDevNs-b.StdDevNs) < 1e-9
	}) {
		t.Errorf("Summarize:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadKernelsCSV(t *testing.T) {
	header := strings.Join(kernelsHeader, ",") + "\n"
	xheader := strings.Join(kernelsHeader, ",") + ",Exclusive Time (ns)\n"
	good := header + "60.0,600,2,300.0,300.0,200,400,141.4,\"void k<int>(int, float)\"\n40.0,400,1,400.0,400.0,400,400,0.0,b\n"
	stats, err := ReadKernelsCSV(strings.NewReader(good), "k.csv")
	if err != nil || len(stats) != 2 || stats[0].Name != "void k<int>(int, float)" || stats[1].TotalNs != 400 {
		t.Fatalf("ReadKernelsCSV = %+v, %v", stats, err)
	}
	var b bytes.Buffer
	if err := WriteKernelsCSV(&b, stats); err != nil || b.String() != good {
		t.Errorf("round trip:\n%s\nwant\n%s (%v)", b.String(), good, err)
	}
	// xrun's own, with the exclusive time last.
	own := xheader + "60.0,600,2,300.0,300.0,200,400,141.4,a,450\n40.0,400,1,400.0,400.0,400,400,0.0,b,400\n"
	stats, err = ReadKernelsCSV(strings.NewReader(own), "k.csv")
	if err != nil || len(stats) != 2 || stats[0].ExclusiveNs != 450 || stats[1].ExclusiveNs != 400 {
		t.Fatalf("ReadKernelsCSV with the exclusive time = %+v, %v", stats, err)
	}
	b.Reset()
	if err := WriteKernelsCSV(&b, stats); err != nil || b.String() != own {
		t.Errorf("round trip with the exclusive time:\n%s\nwant\n%s (%v)", b.String(), own, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "k.csv: empty; expected the header"},
		{"header", "Time,Total\n", "k.csv:1: "},
		{"fields", header + "1,2,3\n", "k.csv:2: wrong number of fields"},
		{"number", header + "x,600,2,300.0,300.0,200,400,1,k\n", `k.csv:2: column "Time (%)": "x" is not a non-negative number`},
		{"negative", header + "1,-5,2,300.0,300.0,200,400,1,k\n", `k.csv:2: column "Total Time (ns)": "-5" is not a non-negative integer`},
		{"name", header + "1,5,2,3,3,2,4,1,\n", `k.csv:2: column "Name" is empty`},
		{"instances", header + "1,5,0,3,3,2,4,1,k\n", `k.csv:2: kernel "k": 0 instances`},
		{"minmax", header + "1,5,2,3,3,5,4,1,k\n", `k.csv:2: kernel "k": Min (ns) 5 is above Max (ns) 4`},
		{"quote", header + "1,5,2,3,3,2,4,1,\"k\n", "k.csv:2: extraneous or missing \" in quoted-field"},
		{"column", strings.TrimSuffix(header, "\n") + ",Other\n", "k.csv:1: header"},
		{"exclusive", xheader + "1,5,2,3,3,2,4,1,k,6\n", `k.csv:2: kernel "k": Exclusive Time (ns) 6 is above Total Time (ns) 5`},
		{"exclusive number", xheader + "1,5,2,3,3,2,4,1,k,x\n", `k.csv:2: column "Exclusive Time (ns)": "x" is not a non-negative integer`},
		{"exclusive fields", xheader + "1,5,2,3,3,2,4,1,k\n", "k.csv:2: wrong number of fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadKernelsCSV(strings.NewReader(tc.in), "k.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want it to contain %q", err, tc.want)
			}
			if fe, ok := err.(*FormatError); !ok || !fe.BadInput() {
				t.Errorf("error %T is not a bad-input FormatError", err)
			}
		})
	}
}

func FuzzReadKernelsCSV(f *testing.F) {
	header := strings.Join(kernelsHeader, ",") + "\n"
	f.Add(header + "60.0,600,2,300.0,300.0,200,400,141.4,\"void k<int>(int, float)\"\n")
	f.Add(strings.TrimSuffix(header, "\n") + ",Exclusive Time (ns)\n60.0,600,2,300.0,300.0,200,400,141.4,k,450\n")
	f.Add(header)
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		stats, err := ReadKernelsCSV(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// Whatever it accepts, it writes and reads back the same.
		var b bytes.Buffer
		if err := WriteKernelsCSV(&b, stats); err != nil {
			t.Fatal(err)
		}
		again, err := ReadKernelsCSV(&b, "again.csv")
		if err != nil || len(again) != len(stats) {
			t.Fatalf("re-read: %v (%d vs %d rows)", err, len(again), len(stats))
		}
		for i := range stats {
			if again[i].Name != stats[i].Name || again[i].TotalNs != stats[i].TotalNs || again[i].Instances != stats[i].Instances ||
				again[i].ExclusiveNs != stats[i].ExclusiveNs {
				t.Fatalf("row %d changed: %+v -> %+v", i, stats[i], again[i])
			}
		}
	})
}

func TestWriteArtifacts(t *testing.T) {
	res, mc := profiledRun(t, "auto")
	dir := t.TempDir()
	p, files, err := WriteArtifacts(dir, res, mc, Options{Device: testDevice, Top: 3, Notes: []string{"3 records dropped"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, []string{layout.KernelsFile, layout.TraceFile}) {
		t.Errorf("artifacts %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(data) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the cell directory holds %d entries, want only the 2 artifacts (no temporary files)", len(entries))
	}
	if p.Window != "3-5,8" || p.Iterations != 4 || len(p.Kernels) != 3 || p.Stats["kernels_per_iteration"] <= 0 {
		t.Errorf("profile summary %+v", p)
	}
	if last := p.Diagnosis[len(p.Diagnosis)-1]; last != "note: 3 records dropped" {
		t.Errorf("last diagnosis line %q; want the note", last)
	}
	if _, _, err := WriteArtifacts(filepath.Join(dir, "missing", "dir"), res, mc, Options{Device: testDevice}); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestFormatWindows(t *testing.T) {
	for _, tc := range []struct {
		in   []engine.Span
		want string
	}{
		{nil, "all"},
		{[]engine.Span{{First: 100, Last: 150}}, "100-150"},
		{[]engine.Span{{First: 1, Last: 2}, {First: 4, Last: 4}}, "1-2,4"},
		{[]engine.Span{{First: 0, Last: math.MaxInt}}, "0-"},
	} {
		if got := FormatWindows(tc.in); got != tc.want {
			t.Errorf("FormatWindows(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRoofline checks the roofline's work against bench/GPU.md ("Rooflines"):
// a TinyLlama decode step at batch 1 reads 2.07 GB of fp16 weights and
// does 2.07 GFLOP per token, plus 22,528 bytes of KV per cached position.
func TestRoofline(t *testing.T) {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	w := IterationWork(mc, engine.IterationRecord{GenRequests: 1}, 0, 2)
	if math.Abs(w.Bytes-2.07e9) > 0.01e9 || math.Abs(w.FLOPs-2.07e9) > 0.01e9 {
		t.Errorf("B=1 decode: %.4g bytes, %.4g FLOP; want ~2.07e9 each", w.Bytes, w.FLOPs)
	}
	w2 := IterationWork(mc, engine.IterationRecord{GenRequests: 1}, 1000, 2)
	if kv := w2.Bytes - w.Bytes; math.Abs(kv-22528*1000) > 1 {
		t.Errorf("KV traffic for 1000 positions: %g bytes; want %d", kv, 22528*1000)
	}
	moe, _ := engine.ZooModel("mixtral-8x7b")
	one := IterationWork(moe, engine.IterationRecord{GenRequests: 1}, 0, 2)
	many := IterationWork(moe, engine.IterationRecord{GenRequests: 256}, 0, 2)
	if one.Bytes >= many.Bytes || many.Bytes > 2*float64(moe.Params())*1.01 {
		t.Errorf("MoE bytes: batch 1 %.3g, batch 256 %.3g (all weights %.3g)", one.Bytes, many.Bytes, 2*float64(moe.Params()))
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{fmtDur(999999), "1000 µs"}, {fmtDur(1234567), "1.23 ms"}, {fmtDur(12), "12.0 ns"}, {fmtDur(2.5e9), "2.50 s"},
		{fmtRate(3e12, "B/s"), "3.00 TB/s"}, {fmtRate(798e12, "FLOP/s"), "798 TFLOP/s"}, {fmtRate(12, "B/s"), "12.0 B/s"},
		{sig3(0), "0"}, {sig3(0.01234), "0.0123"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func ExampleSummarize() {
	ops := []model.OpRecord{
		{Name: "_Z7rmsnormPfS_i", Duration: 3000},
		{Name: "_Z7rmsnormPfS_i", Duration: 5000},
		{Name: "nvjet_hsh_128x256", Duration: 12000},
	}
	for _, s := range Summarize(ops) {
		fmt.Printf("%.1f%% %d ns %d x %s\n", s.TimePct, s.TotalNs, s.Instances, s.Name)
	}
	// Output:
	// 60.0% 12000 ns 1 x nvjet_hsh_128x256
	// 40.0% 8000 ns 2 x rmsnorm(float*, float*, int)
}

func TestDiagnosePatterns(t *testing.T) {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	h100, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	ms := time.Millisecond
	prefill := &engine.Result{Backend: "cuda",
		Iterations: []engine.IterationRecord{{Index: 0, CtxRequests: 8, CtxTokens: 8192, Start: 0, Duration: 40 * ms, Profiled: true}},
		Ops:        []model.OpRecord{{Name: "nvjet_hsh_256x128", Start: ms, Duration: 38 * ms}}}
	patterns := func(d *Diagnosis) []string {
		var p []string
		for _, f := range d.Findings {
			p = append(p, f.Pattern)
		}
		return p
	}
	d := Diagnose(prefill, mc, h100)
	if got := patterns(d); !slices.Equal(got, []string{PatternComputeBound, PatternGEMM, PatternTopKernel}) {
		t.Errorf("prefill: patterns %v; diagnosis:\n%s", got, strings.Join(d.Lines(), "\n"))
	}
	if f := d.Findings[0].Figures; f["arithmetic_intensity_flop_per_byte"] < f["ridge_point_flop_per_byte"] || f["roofline_fraction"] <= 0 || f["roofline_fraction"] > 1 {
		t.Errorf("compute-bound figures %v", f)
	}
	// A busy, launch-free decode near the bandwidth ceiling: only the roofline.
	decode := &engine.Result{Backend: "cuda",
		Iterations: []engine.IterationRecord{{Index: 0, GenRequests: 1, Start: 0, Duration: 800 * time.Microsecond, Profiled: true}},
		Ops:        []model.OpRecord{{Name: "gemv", Start: 0, Duration: 790 * time.Microsecond}}}
	d = Diagnose(decode, mc, h100)
	if got := patterns(d); !slices.Equal(got, []string{PatternMemoryBound, PatternGEMM, PatternTopKernel}) ||
		d.Findings[0].Figures["roofline_fraction"] < 0.8 {
		t.Errorf("decode: patterns %v; diagnosis:\n%s", got, strings.Join(d.Lines(), "\n"))
	}
	for _, tc := range []struct {
		name string
		res  *engine.Result
		dev  Device
		note string
	}{
		{"no window", &engine.Result{Iterations: []engine.IterationRecord{{Index: 0}}}, h100, "no iteration ran inside the profile window"},
		{"no records", &engine.Result{Iterations: prefill.Iterations}, h100, "no kernel records in the window"},
		{"unknown GPU", prefill, Device{Name: "NVIDIA A10"}, "no roofline: xrun has no measured ceilings for NVIDIA A10"},
	} {
		d := Diagnose(tc.res, mc, tc.dev)
		if !slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
			t.Errorf("%s: notes %q; want %q", tc.name, d.Notes, tc.note)
		}
	}
}

func TestDiagnoseMoEStages(t *testing.T) {
	mc, _ := engine.ZooModel("mixtral-8x7b")
	h200, _ := GPUDevice("NVIDIA H200")
	us := time.Microsecond
	// One decode iteration of a MoE layer on the engine's own kernels,
	// with a dense attention GEMM beside it: 10+20+60+10 us of MoE.
	res := &engine.Result{Backend: "cuda",
		Iterations: []engine.IterationRecord{{Index: 0, GenRequests: 64, Start: 0, Duration: 200 * us, Profiled: true}},
		Ops: []model.OpRecord{
			{Name: "nvjet_hsh_64x8", Start: 0, Duration: 90 * us},
			{Name: "moe_route_softmax_topk_renorm_bf16", Start: 90 * us, Duration: 10 * us},
			{Name: "moe_group", Start: 100 * us, Duration: 10 * us},
			{Name: "moe_gather_bf16", Start: 110 * us, Duration: 10 * us},
			{Name: "moe_gate_up_s_bf16", Start: 120 * us, Duration: 40 * us},
			{Name: "moe_down_s_bf16", Start: 160 * us, Duration: 20 * us},
			{Name: "moe_combine_bf16", Start: 180 * us, Duration: 10 * us},
		}}
	d := Diagnose(res, mc, h200)
	var moe *Finding
	for i := range d.Findings {
		if d.Findings[i].Pattern == PatternMoE {
			moe = &d.Findings[i]
		}
	}
	if moe == nil {
		t.Fatalf("no MoE finding; diagnosis:\n%s", strings.Join(d.Lines(), "\n"))
	}
	want := map[string]float64{"moe_share": 100.0 / 190, "moe_router_share": 0.1, "moe_grouping_share": 0.2,
		"moe_expert_GEMM_share": 0.6, "moe_combine_share": 0.1}
	for k, v := range want {
		if math.Abs(moe.Figures[k]-v) > 1e-9 {
			t.Errorf("%s = %v, want %v (finding %q)", k, moe.Figures[k], v, moe.Text)
		}
	}
	// A dense model's profile has no MoE finding.
	dense := Diagnose(&engine.Result{Backend: "cuda", Iterations: res.Iterations, Ops: res.Ops[:1]}, mc, h200)
	if slices.ContainsFunc(dense.Findings, func(f Finding) bool { return f.Pattern == PatternMoE }) {
		t.Error("MoE finding on a profile without MoE kernels")
	}
}

// TestSummarizeExclusive: a kernel that starts while the one before it on
// its stream still runs (programmatic dependent launch) has its exclusive
// time counted from that one's end; kernels on another stream, or after a
// gap, keep theirs whole; copies are not kernels.
func TestSummarizeExclusive(t *testing.T) {
	us := time.Microsecond
	ops := []model.OpRecord{
		{Name: "gemm", Start: 0, Duration: 20 * us, Stream: 7},
		{Name: "swiglu", Start: 2 * us, Duration: 21 * us, Stream: 7}, // waits 18 us in the GEMM's time
		{Name: "copy", Kind: model.OpMemcpy, Start: 5 * us, Duration: 50 * us, Stream: 7},
		{Name: "gemm", Start: 30 * us, Duration: 20 * us, Stream: 7},   // after a gap
		{Name: "swiglu", Start: 35 * us, Duration: 10 * us, Stream: 7}, // wholly inside the GEMM
		{Name: "norm", Start: 1 * us, Duration: 4 * us, Stream: 9},     // another stream
	}
	got := map[string][2]int64{}
	for _, s := range Summarize(ops) {
		got[s.Name] = [2]int64{s.TotalNs, s.ExclusiveNs}
	}
	want := map[string][2]int64{"gemm": {40000, 40000}, "swiglu": {31000, 3000}, "norm": {4000, 4000}}
	if !maps.Equal(got, want) {
		t.Errorf("Summarize total and exclusive ns = %v, want %v", got, want)
	}
}

package results_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// The runner's side: fill Results as cells finish and write the directory.
// The writer sorts, rounds and summarises; the runner only records.
func ExampleWriteDir() {
	spec, _ := json.Marshal(map[string]any{"name": "gemm-plugin", "repeats": 6})
	r := &results.Results{
		Name:        "gemm-plugin",
		Spec:        spec,
		Environment: results.Environment{Xrun: results.Build{Version: "v0.1.0"}, Host: "gpu-node-7", OS: "linux/amd64"},
		Compare:     []results.CompareSpec{{Axis: "gemm_plugin", Baseline: "disable"}},
		Started:     time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC),
		Finished:    time.Date(2026, 3, 1, 2, 10, 0, 0, time.UTC),
	}
	for _, plugin := range []string{"auto", "disable"} {
		c := results.Cell{
			ID:     "bs64-" + plugin + "-0000abcd",
			Params: results.Params{"batch_size": 64, "gemm_plugin": plugin, "dataset.input_mean": 128},
			Status: results.StatusOK,
		}
		for i := range 6 {
			rate := 143.7 - float64(i)*0.1
			if plugin == "auto" {
				rate -= 2.4
			}
			c.Repeats = append(c.Repeats, results.Metrics{"request_throughput_req_s": rate})
		}
		c.Artifacts = []string{"cells/" + c.ID + "/requests.jsonl"}
		r.Cells = append(r.Cells, c)
	}
	dir, _ := os.MkdirTemp("", "xrun-example")
	defer os.RemoveAll(dir)
	if err := results.WriteDir(dir, r); err != nil {
		fmt.Println(err)
		return
	}
	back, _ := results.ReadFile(filepath.Join(dir, layout.JSONFile))
	s := back.Cells[0].Summary["request_throughput_req_s"]
	fmt.Printf("%s: median %v, 95%% CI [%v, %v], n=%d\n", back.Cells[0].ID, s.Median, *s.CILow, *s.CIHigh, s.N)
	// Output:
	// bs64-auto-0000abcd: median 141.05, 95% CI [140.8, 141.3], n=6
}

// Comparing two samples of one metric: the verdict knows that higher
// throughput is better.
func ExampleCompareSamples() {
	disable := []float64{143.7, 143.5, 143.9, 143.6, 143.8, 143.4}
	auto := []float64{141.3, 141.1, 141.5, 141.2, 141.4, 141.0}
	c := results.CompareSamples("request_throughput_req_s", disable, auto)
	fmt.Printf("%s %.3fx p=%.3f\n", c.Verdict, c.Ratio, c.P)
	// Output:
	// slower 0.983x p=0.002
}

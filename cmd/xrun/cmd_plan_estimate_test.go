package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// xrun plan estimates run times: on an H100 unless told, from a results
// directory when given one, in the text and in the JSON.
func TestPlanEstimates(t *testing.T) {
	const spec = "../../runner/testdata/plan/estimate.yaml"
	r := runCLI(t, nil, "plan", spec)
	if r.code != 0 || !strings.Contains(r.stdout, "estimated time on an H100 (--gpu):") || !strings.Contains(r.stdout, "TIME   FROM") {
		t.Fatalf("exit %d, stderr %q; the plan lacks its estimate:\n%s", r.code, r.stderr, r.stdout)
	}
	r = runCLI(t, nil, "plan", spec, "--gpu", "H200", "--gpus", "2", "--efficiency", "0.4",
		"--results", "../../runner/testdata/plan/estimate-results")
	for _, want := range []string{"estimated time on an H200", "on 2 GPUs (--gpus)", "at 40 % of it", "measured", "similar",
		"results (--results): ../../runner/testdata/plan/estimate-results, study estimate on NVIDIA H100 80GB HBM3"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, stderr %q; the plan lacks %q:\n%s", r.code, r.stderr, want, r.stdout)
		}
	}
	r = runCLI(t, nil, "plan", "--json", spec, "--gpus", "3")
	var p struct {
		Estimate struct {
			GPU        string  `json:"gpu"`
			GPUs       int     `json:"gpus"`
			Efficiency float64 `json:"efficiency"`
		} `json:"estimate"`
		Cells []struct {
			Estimate struct{ Basis string } `json:"estimate"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 {
		t.Fatalf("--json: exit %d, %v", r.code, err)
	}
	if p.Estimate.GPU != "H100" || p.Estimate.GPUs != 3 || p.Estimate.Efficiency != 0.5 || len(p.Cells) == 0 || p.Cells[0].Estimate.Basis != "roofline" {
		t.Errorf("--json estimate: %+v, first cell %+v", p.Estimate, p.Cells)
	}
}

// The estimate's flags are checked like every other: exit 2, nothing on
// stdout, the flag named.
func TestPlanEstimateFlagErrors(t *testing.T) {
	const spec = "../../experiments/quickstart.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--efficiency", "0"}, "xrun: --efficiency: expected a share of the roofline in (0, 1], e.g. 0.5; got 0\n"},
		{[]string{"--efficiency", "1.2"}, "xrun: --efficiency: expected a share of the roofline in (0, 1], e.g. 0.5; got 1.2\n"},
		{[]string{"--gpus", "0"}, "xrun: --gpus: expected a number of GPUs >= 1, got 0\n"},
		{[]string{"--gpu", "A100"}, "xrun: --gpu: \"A100\": no known ceilings for it; expected one of H100, H200, or a GPU name containing one\n"},
		{[]string{"--results", "no-such-dir"}, "xrun: no-such-dir: cannot read: no such file or directory\n"},
		{[]string{"--commands", "--gpu", "H200"}, "xrun: --gpu has no effect with --commands (it is for the plan's time estimates)\n"},
		{[]string{"--commands", "--results", "x"}, "xrun: --results has no effect with --commands (it is for the plan's time estimates)\n"},
	} {
		r := runCLI(t, nil, append([]string{"plan", spec}, tc.args...)...)
		if r.code != exitBadInput || r.stdout != "" || r.stderr != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

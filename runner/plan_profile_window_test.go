package runner

import (
	"strings"
	"testing"
)

// A window that starts after a cell's last iteration (warm-up's included)
// is noted by the estimate: 2 warm-up requests and 64 of 128 output
// tokens at batch 64 run about 128 + 130 iterations, so 1000-1010 holds
// none; 200-210 does.
func TestEstimateWindowPastTheEnd(t *testing.T) {
	s := mustParse(t, `params: {model: tinyllama-1.1b, engine: cuda, batch_size: 64, dataset: {num_requests: 64, input_mean: 128, output_mean: 128}}
matrix:
  profile_window: ["200-210", "1000-1010"]
`)
	if err := s.Plan.EstimateTime(EstimateOptions{GPU: "H100"}); err != nil {
		t.Fatal(err)
	}
	note := strings.Join(s.Plan.Estimate.Notes, "\n")
	if !strings.Contains(note, "profile_window starts after the last iteration of 1 cell") || !strings.Contains(note, "window 1000-1010, about") {
		t.Errorf("notes %q: want the window 1000-1010 noted, alone", s.Plan.Estimate.Notes)
	}
	if strings.Contains(note, "window 200-210") {
		t.Errorf("notes %q: the window 200-210 is inside the run", s.Plan.Estimate.Notes)
	}
	for _, ce := range s.Plan.Estimate.Cells {
		if ce.iterations < 200 || ce.iterations > 300 {
			t.Errorf("%d iterations simulated, want about 258", ce.iterations)
		}
	}
}

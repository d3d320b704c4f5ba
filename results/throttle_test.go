package results

import (
	"slices"
	"strings"
	"testing"
)

// TestThrottleNotes: the note under the summary table names the cells the
// throttle rule flagged, with its figures; NVML's reasons alone (a loaded
// GPU at full clock under sw_power_cap) flag nothing; the cells of a file
// from before the rule are named once, as such.
func TestThrottleNotes(t *testing.T) {
	share := func(v float64) *float64 { return &v }
	judged := func(mean, min, below float64, throttled bool, reasons ...string) *Telemetry {
		return &Telemetry{SMClockMHzMean: mean, SMClockMHzMax: 1980, SMClockMHzMin: min, MaxSMClockMHz: 1980, ThrottleThreshold: 0.75,
			ClockSamples: 200, BelowThresholdShare: share(below), Throttled: throttled, ThrottleReasons: reasons, PowerCappedS: 9.5, Samples: 210}
	}
	cell := func(id string, tel *Telemetry) Cell {
		return Cell{ID: id, Params: Params{"batch_size": int64(len(id))}, Status: StatusOK, Repeats: []Metrics{{"request_throughput_req_s": 1}}, Telemetry: tel}
	}
	for _, tc := range []struct {
		name  string
		cells []Cell
		want  []string
	}{
		{"full clock under the power cap", []Cell{cell("a", judged(1965, 1620, 0, false, "sw_power_cap"))}, nil},
		{"throttled by the rule", []Cell{cell("a", judged(1965, 1620, 0, false, "sw_power_cap")), cell("bb", judged(1683.4, 990, 0.3, true, "hw_slowdown", "sw_power_cap"))},
			[]string{"cell bb: GPU throttled: 30.0% of its timed samples ran below 75% of the maximum SM clock (1980 MHz); SM clock mean 1683 MHz, min 990 MHz; power-capped 9.50 s; NVML reasons: hw_slowdown, sw_power_cap; its numbers may not be comparable"}},
		{"threshold as given", []Cell{cell("a", func() *Telemetry {
			x := judged(1836, 1620, 0.4, true)
			x.ThrottleThreshold, x.PowerCappedS = 0.9, 0
			return x
		}())},
			[]string{"cell a: GPU throttled: 40.0% of its timed samples ran below 90% of the maximum SM clock (1980 MHz); SM clock mean 1836 MHz, min 1620 MHz; its numbers may not be comparable"}},
		{"written before the rule", []Cell{
			cell("a", &Telemetry{SMClockMHzMean: 1975, Throttled: true, ThrottleReasons: []string{"sw_power_cap"}}),
			cell("bb", &Telemetry{SMClockMHzMean: 1890}),
			cell("ccc", &Telemetry{SMClockMHzMean: 1960, Throttled: true, ThrottleReasons: []string{"hw_slowdown", "sw_power_cap"}}),
		}, []string{"cells a, ccc: the GPU reported throttle reasons (hw_slowdown, sw_power_cap); this file was written before xrun judged throttling by the SM clock, so whether the clock dropped is not known (the table shows the mean SM clock)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := BuildReport(&Results{Name: "t", Cells: tc.cells}, RenderOptions{})
			var got []string
			for _, n := range rep.Summary.Notes {
				if strings.Contains(n, "throttl") {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("notes %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestClockColumn: the summary table shows each GPU cell's mean SM clock
// when any cell has telemetry; cells without show "-", and a study without
// GPU cells has no such column.
func TestClockColumn(t *testing.T) {
	cell := func(bs int64, status Status, tel *Telemetry) Cell {
		c := Cell{ID: "c" + string(rune('0'+bs)), Params: Params{"batch_size": bs, "engine": "cuda"}, Status: status, Telemetry: tel}
		if status == StatusOK {
			c.Repeats = []Metrics{{"request_throughput_req_s": 1}}
		}
		return c
	}
	clockOf := func(r *Results) []string {
		tab := BuildReport(r, RenderOptions{}).Summary
		i := slices.IndexFunc(tab.Columns, func(c Column) bool { return c.Name == clockColumn })
		if i < 0 {
			return nil
		}
		var out []string
		for _, row := range tab.Rows {
			out = append(out, row[i])
		}
		return out
	}
	gpu := &Results{Cells: []Cell{
		cell(1, StatusOK, &Telemetry{SMClockMHzMean: 1975.4}),
		cell(2, StatusOK, nil), // the cpu backend, or no NVML
		cell(3, StatusFailed, &Telemetry{SMClockMHzMean: 1980}),
		cell(4, StatusOK, &Telemetry{SMClockMHzMean: 1602.5}),
	}}
	if got, want := clockOf(gpu), []string{"1975", "-", "-", "1602"}; !slices.Equal(got, want) {
		t.Errorf("clock column %q, want %q", got, want)
	}
	cpu := &Results{Cells: []Cell{cell(1, StatusOK, nil), cell(2, StatusOK, nil)}}
	if got := clockOf(cpu); got != nil {
		t.Errorf("a study without telemetry has a clock column: %q", got)
	}
}

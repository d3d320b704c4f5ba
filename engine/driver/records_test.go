package driver

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
)

func testReqs() []datasets.Request {
	return []datasets.Request{
		{TaskID: 0, InputIDs: []int32{5, 6, 7}, OutputTokens: 4},
		{TaskID: 1, InputIDs: []int32{8, 9}, OutputTokens: 2},
		{TaskID: 2, InputIDs: []int32{1}, OutputTokens: 3},
	}
}

func TestParseRecords(t *testing.T) {
	// Out of order, absolute perf_counter-like times, one profiled line.
	in := `{"task_id":2,"start_ns":1000000100,"first_token_ns":1000000200,"end_ns":1000000500,"input_tokens":1,"output_tokens":3}
{"pass":0,"profiled":true,"task_id":0,"start_ns":0,"first_token_ns":0,"end_ns":0,"input_tokens":3,"output_tokens":4}
{"task_id":0,"start_ns":1000000000,"first_token_ns":1000000100,"end_ns":1000000400,"input_tokens":3,"output_tokens":4,"output_ids":[1,2,3,4]}

{"task_id":1,"start_ns":1000000000,"first_token_ns":1000000050,"end_ns":1000000300,"input_tokens":2,"output_tokens":2}
`
	r, err := ParseRecords(strings.NewReader(in), "records.jsonl", testReqs())
	if err != nil {
		t.Fatal(err)
	}
	if !r.FirstToken || len(r.Requests) != 3 {
		t.Fatalf("got %+v", r)
	}
	want := []engine.RequestRecord{
		{TaskID: 0, Start: 0, FirstToken: 100, End: 400, InputTokens: 3, OutputTokens: 4, OutputIDs: []int32{1, 2, 3, 4}},
		{TaskID: 1, Start: 0, FirstToken: 50, End: 300, InputTokens: 2, OutputTokens: 2},
		{TaskID: 2, Start: 100, FirstToken: 200, End: 500, InputTokens: 1, OutputTokens: 3},
	}
	for i, w := range want {
		g := r.Requests[i]
		if g.TaskID != w.TaskID || g.Start != w.Start || g.FirstToken != w.FirstToken || g.End != w.End || g.InputTokens != w.InputTokens || g.OutputTokens != w.OutputTokens || len(g.OutputIDs) != len(w.OutputIDs) {
			t.Errorf("record %d: got %+v, want %+v", i, g, w)
		}
	}
	m := r.Metrics(1)
	if m["num_requests"] != 3 || m["total_output_tokens"] != 9 || m["total_latency_ms"] != 0.0005 {
		t.Errorf("metrics %v", m)
	}
	if _, ok := m["ttft_avg_ms"]; !ok {
		t.Error("streaming metrics missing although first-token times were given")
	}
}

// TestParseRecordsSent: sent_ns, where a record has one, moves with the
// other times; a record without it was sent at its start (Sent zero), and
// the achieved rate is of the sends.
func TestParseRecordsSent(t *testing.T) {
	in := `{"task_id":0,"start_ns":1000,"sent_ns":1000,"first_token_ns":1100,"end_ns":1400,"input_tokens":3,"output_tokens":4}
{"task_id":1,"start_ns":1200,"sent_ns":1700,"first_token_ns":1800,"end_ns":1900,"input_tokens":2,"output_tokens":2}
{"task_id":2,"start_ns":1400,"first_token_ns":1500,"end_ns":1600,"input_tokens":1,"output_tokens":3}
`
	r, err := ParseRecords(strings.NewReader(in), "records.jsonl", testReqs())
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct{ start, sent time.Duration }{{0, 0}, {200, 700}, {400, 0}} {
		if g := r.Requests[i]; g.Start != w.start || g.Sent != w.sent {
			t.Errorf("record %d: start %v sent %v, want %v and %v", i, g.Start, g.Sent, w.start, w.sent)
		}
	}
	// Sends at 0, 700 and 400 ns: two gaps over 700 ns.
	if got, want := engine.ServingMetrics(r.Requests, nil)[engine.AchievedRateKey], 2/700e-9; math.Abs(got/want-1) > 1e-9 {
		t.Errorf("achieved rate %v, want %v", got, want)
	}
}

func TestParseRecordsWithoutFirstToken(t *testing.T) {
	in := `{"task_id":0,"start_ns":0,"end_ns":40,"input_tokens":3,"output_tokens":4}
{"task_id":1,"start_ns":0,"end_ns":30,"input_tokens":2,"output_tokens":2}
{"task_id":2,"start_ns":10,"end_ns":50,"input_tokens":1,"output_tokens":3}`
	r, err := ParseRecords(strings.NewReader(in), "records.jsonl", testReqs())
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics(1)
	for _, k := range streamingMetrics {
		if _, ok := m[k]; ok {
			t.Errorf("%s reported without first-token times", k)
		}
	}
	if m["request_throughput_req_s"] <= 0 {
		t.Errorf("metrics %v", m)
	}
}

func TestParseRecordsErrors(t *testing.T) {
	line := func(task, in, out int, extra string) string {
		return `{"task_id":` + itoa(task) + `,"start_ns":0,"end_ns":10,"input_tokens":` + itoa(in) + `,"output_tokens":` + itoa(out) + extra + "}\n"
	}
	good := line(0, 3, 4, "") + line(1, 2, 2, "") + line(2, 1, 3, "")
	for _, tc := range []struct{ name, in, want string }{
		{"not json", "nope\n", "records.jsonl:1: not a request record"},
		{"unknown field", `{"task_id":0,"start":0}` + "\n", `records.jsonl:1: not a request record (json: unknown field "start")`},
		{"missing end", `{"task_id":0,"start_ns":0,"input_tokens":3,"output_tokens":4}` + "\n", "records.jsonl:1: end_ns: missing"},
		{"unknown task", line(9, 3, 4, ""), "records.jsonl:1: task_id 9 is not in the dataset"},
		{"twice", line(0, 3, 4, "") + line(0, 3, 4, ""), "records.jsonl:2: task_id 0: a second record for the same request"},
		{"wrong prompt", line(0, 5, 4, ""), "records.jsonl:1: task_id 0: input_tokens 5, but the dataset's prompt has 3 tokens"},
		{"stopped at eos", line(0, 3, 1, ""), "records.jsonl:1: task_id 0: output_tokens 1, but the dataset asks for 4 (the program must ignore EOS"},
		{"first token late", line(0, 3, 4, `,"first_token_ns":11`), "records.jsonl:1: task_id 0: first_token_ns 11 is outside [start_ns, end_ns] = [0, 10]"},
		{"missing request", line(0, 3, 4, "") + line(2, 1, 3, ""), "records.jsonl: 2 records for the dataset's 3 requests (none for task_id 1)"},
		{"mixed first token", line(0, 3, 4, `,"first_token_ns":1`) + line(1, 2, 2, "") + line(2, 1, 3, ""), "records.jsonl: first-token times in 1 of 3 records"},
		{"end before start", `{"task_id":0,"start_ns":10,"end_ns":5,"input_tokens":3,"output_tokens":4}` + "\n", "expected 0 <= start_ns <= end_ns"},
		{"sent before start", `{"task_id":0,"start_ns":5,"sent_ns":4,"end_ns":10,"input_tokens":3,"output_tokens":4}` + "\n", "records.jsonl:1: task_id 0: sent_ns 4 is outside [start_ns, end_ns] = [5, 10]"},
		{"sent after end", line(0, 3, 4, "") + line(1, 2, 2, `,"sent_ns":11`), "records.jsonl:2: task_id 1: sent_ns 11 is outside [start_ns, end_ns] = [0, 10]"},
		{"sent not a number", line(0, 3, 4, `,"sent_ns":"3"`), "records.jsonl:1: not a request record"},
		{"two values", line(0, 3, 4, "")[:len(line(0, 3, 4, ""))-1] + " {}\n", "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecords(strings.NewReader(tc.in), "records.jsonl", testReqs())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseRecords(strings.NewReader(good), "records.jsonl", testReqs()); err != nil {
		t.Errorf("good records: %v", err)
	}
}

// TestCheckRecordsByOrder matches records to requests by position, as
// for trtllm-bench's records, which carry request ids, not task ids.
func TestCheckRecordsByOrder(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	ip := func(v int) *int { return &v }
	raws := []RawRecord{
		{Index: 0, Start: i64(5), FirstToken: i64(-1), End: i64(9), InputTokens: ip(3), OutputTokens: ip(4)},
		{Index: 1, Start: i64(5), FirstToken: i64(-1), End: i64(8), InputTokens: ip(2), OutputTokens: ip(2)},
		{Index: 2, Start: i64(6), FirstToken: i64(-1), End: i64(9), InputTokens: ip(1), OutputTokens: ip(3)},
	}
	r, err := CheckRecords("requests.json", raws, testReqs(), true)
	if err != nil {
		t.Fatal(err)
	}
	if r.FirstToken || r.Requests[2].TaskID != 2 || r.Requests[2].Start != 1 {
		t.Errorf("got %+v", r)
	}
	raws[1].InputTokens = ip(7)
	if _, err := CheckRecords("requests.json", raws, testReqs(), true); err == nil || !strings.Contains(err.Error(), "requests.json: record [1]: task_id 1: input_tokens 7") {
		t.Errorf("got %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func FuzzParseRecords(f *testing.F) {
	f.Add(`{"task_id":0,"start_ns":0,"end_ns":40,"input_tokens":3,"output_tokens":4}`)
	f.Add(`{"task_id":1,"start_ns":0,"first_token_ns":3,"end_ns":30,"input_tokens":2,"output_tokens":2,"output_ids":[1,2]}`)
	f.Add(`{"task_id":2,"start_ns":5,"sent_ns":9,"first_token_ns":12,"end_ns":30,"input_tokens":1,"output_tokens":3}`)
	f.Add("{}\n[]\n")
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseRecords(strings.NewReader(in), "f", testReqs())
		if err != nil {
			return
		}
		for _, q := range r.Requests {
			if q.Start < 0 || q.End < q.Start || q.FirstToken < q.Start || q.FirstToken > q.End || q.Sent != 0 && (q.Sent < q.Start || q.Sent > q.End) {
				t.Fatalf("accepted an impossible record %+v", q)
			}
		}
	})
}

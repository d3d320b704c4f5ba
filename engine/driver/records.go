package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
)

// maxRecordLine bounds one line of a records file (a request's generated
// token ids may be long).
const maxRecordLine = 64 << 20

// FormatError is a tool's output that is not what xrun expected: it
// names the file, the line when there is one, and what was expected.
type FormatError = profile.FormatError

// recordLine is one line of a records file: the fields of xrun's own
// requests.jsonl. pass, profiled and output_ids may be left out;
// first_token_ns too, when the program does not stream (then TTFT, TPOT
// and the output speed are not reported); sent_ns too, when the request
// was sent at its start_ns.
type recordLine struct {
	Pass         *int    `json:"pass"`
	Profiled     *bool   `json:"profiled"`
	TaskID       *int    `json:"task_id"`
	Start        *int64  `json:"start_ns"`
	Sent         *int64  `json:"sent_ns"`
	FirstToken   *int64  `json:"first_token_ns"`
	End          *int64  `json:"end_ns"`
	InputTokens  *int    `json:"input_tokens"`
	OutputTokens *int    `json:"output_tokens"`
	OutputIDs    []int32 `json:"output_ids"`
	TokenTimes   []int64 `json:"token_times_ns"`
}

// Records are a pass's per-request records read from a tool's output.
type Records struct {
	Requests []engine.RequestRecord
	// FirstToken is false when the records have no first-token times.
	FirstToken bool
}

// ReadRecords reads a records file in xrun's requests.jsonl format and
// checks it against the dataset the pass served: one record per request
// (matched by task_id, or by order when the dataset's task ids repeat),
// each with the request's input length and exactly its output_tokens, and
// times that make sense (start <= first token <= end). The records come
// back in dataset order, their times moved so that the first request
// starts at 0. A record's sent_ns, when it has one, is when a load
// generator that held the request back past its start (its scheduled
// arrival) sent it: start_ns <= sent_ns <= end_ns.
func ReadRecords(path string, reqs []datasets.Request) (*Records, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FormatError{File: path, Msg: "no records: " + errText(err)}
	}
	defer f.Close()
	return ParseRecords(f, path, reqs)
}

func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// ParseRecords is ReadRecords on a reader; file names it in errors.
func ParseRecords(r io.Reader, file string, reqs []datasets.Request) (*Records, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxRecordLine)
	var raws []RawRecord
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l recordLine
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, &FormatError{File: file, Line: line, Msg: fmt.Sprintf("not a request record (%v); expected one JSON object per line with task_id, start_ns, end_ns, input_tokens, output_tokens and optionally first_token_ns", err)}
		}
		if dec.More() {
			return nil, &FormatError{File: file, Line: line, Msg: "more than one JSON value on the line"}
		}
		if l.Profiled != nil && *l.Profiled {
			continue // a profiled pass's records are not timed ones
		}
		raws = append(raws, RawRecord{Line: line, TaskID: l.TaskID, Start: l.Start, Sent: l.Sent, FirstToken: l.FirstToken, End: l.End,
			InputTokens: l.InputTokens, OutputTokens: l.OutputTokens, OutputIDs: l.OutputIDs, TokenTimes: l.TokenTimes})
	}
	if err := sc.Err(); err != nil {
		return nil, &FormatError{File: file, Line: line + 1, Msg: err.Error()}
	}
	return CheckRecords(file, raws, reqs, false)
}

// RawRecord is one request's record as a tool wrote it, before it is
// checked: Line (or Index, 0-based, for an array) locates it in its file.
// Fields a tool did not give are nil.
type RawRecord struct {
	Line, Index  int
	TaskID       *int
	Start        *int64
	Sent         *int64 // nil: sent at Start (see engine.RequestRecord.Sent)
	FirstToken   *int64 // nil, or negative: not measured
	End          *int64
	InputTokens  *int
	OutputTokens *int
	OutputIDs    []int32
	// TokenTimes are when each streamed token (or chunk of tokens)
	// arrived, optional; on the clock of Start.
	TokenTimes []int64
}

func (r *RawRecord) where(file string) *FormatError {
	if r.Line > 0 {
		return &FormatError{File: file, Line: r.Line}
	}
	return &FormatError{File: fmt.Sprintf("%s: record [%d]", file, r.Index)}
}

// CheckRecords checks a pass's records against the dataset it served and
// returns them in dataset order (see ReadRecords). byOrder matches the
// records to the requests by position, for tools whose records carry no
// task_id (they must then come in submission order); otherwise they are
// matched by task_id, or by position when the dataset's task ids repeat.
func CheckRecords(file string, raws []RawRecord, reqs []datasets.Request, byOrder bool) (*Records, error) {
	byTask := map[int]int{}
	unique := !byOrder
	for i, q := range reqs {
		if _, dup := byTask[q.TaskID]; dup {
			unique = false
		}
		byTask[q.TaskID] = i
	}
	out := make([]engine.RequestRecord, len(reqs))
	seen := make([]bool, len(reqs))
	n, withFirst := 0, 0
	hasSent := make([]bool, len(reqs))
	for ri := range raws {
		l := &raws[ri]
		bad := func(format string, args ...any) error {
			e := l.where(file)
			e.Msg = fmt.Sprintf(format, args...)
			return e
		}
		for _, f := range []struct {
			name string
			ok   bool
		}{{"task_id", l.TaskID != nil || byOrder}, {"start_ns", l.Start != nil}, {"end_ns", l.End != nil}, {"input_tokens", l.InputTokens != nil}, {"output_tokens", l.OutputTokens != nil}} {
			if !f.ok {
				return nil, bad("%s: missing", f.name)
			}
		}
		i := n
		if unique {
			var ok bool
			if i, ok = byTask[*l.TaskID]; !ok {
				return nil, bad("task_id %d is not in the dataset", *l.TaskID)
			}
		} else if i >= len(reqs) {
			return nil, bad("more records than the dataset's %d requests", len(reqs))
		}
		q := reqs[i]
		if seen[i] {
			return nil, bad("task_id %d: a second record for the same request", q.TaskID)
		}
		first := l.FirstToken
		if first != nil && *first < 0 {
			first = nil
		}
		switch {
		case l.TaskID != nil && *l.TaskID != q.TaskID:
			return nil, bad("task_id %d: expected %d (the dataset's request %d; its task ids repeat, so records must come in dataset order)", *l.TaskID, q.TaskID, i)
		case *l.Start < 0 || *l.End < *l.Start:
			return nil, bad("task_id %d: start_ns %d and end_ns %d: expected 0 <= start_ns <= end_ns", q.TaskID, *l.Start, *l.End)
		case l.Sent != nil && (*l.Sent < *l.Start || *l.Sent > *l.End):
			return nil, bad("task_id %d: sent_ns %d is outside [start_ns, end_ns] = [%d, %d]", q.TaskID, *l.Sent, *l.Start, *l.End)
		case first != nil && (*first < *l.Start || *first > *l.End):
			return nil, bad("task_id %d: first_token_ns %d is outside [start_ns, end_ns] = [%d, %d]", q.TaskID, *first, *l.Start, *l.End)
		case *l.InputTokens != len(q.InputIDs):
			return nil, bad("task_id %d: input_tokens %d, but the dataset's prompt has %d tokens (did the program read another dataset?)", q.TaskID, *l.InputTokens, len(q.InputIDs))
		case *l.OutputTokens != q.OutputTokens:
			return nil, bad("task_id %d: output_tokens %d, but the dataset asks for %d (the program must ignore EOS and generate exactly output_tokens, as trtllm-bench does)", q.TaskID, *l.OutputTokens, q.OutputTokens)
		case len(l.OutputIDs) > 0 && len(l.OutputIDs) != *l.OutputTokens:
			return nil, bad("task_id %d: %d output_ids for %d output_tokens", q.TaskID, len(l.OutputIDs), *l.OutputTokens)
		case len(l.TokenTimes) > *l.OutputTokens:
			return nil, bad("task_id %d: %d token_times_ns for %d output_tokens (one per token, or per streamed chunk of tokens)", q.TaskID, len(l.TokenTimes), *l.OutputTokens)
		}
		for j, tt := range l.TokenTimes {
			if tt < *l.Start || tt > *l.End || j > 0 && tt < l.TokenTimes[j-1] {
				return nil, bad("task_id %d: token_times_ns[%d] = %d: expected non-decreasing times within [start_ns, end_ns] = [%d, %d]", q.TaskID, j, tt, *l.Start, *l.End)
			}
		}
		rec := engine.RequestRecord{TaskID: q.TaskID, Start: time.Duration(*l.Start), End: time.Duration(*l.End),
			InputTokens: *l.InputTokens, OutputTokens: *l.OutputTokens, OutputIDs: l.OutputIDs}
		if l.Sent != nil {
			rec.Sent, hasSent[i] = time.Duration(*l.Sent), true
		}
		if first != nil {
			rec.FirstToken = time.Duration(*first)
			withFirst++
		}
		if len(l.TokenTimes) > 0 {
			rec.TokenTimes = make([]time.Duration, len(l.TokenTimes))
			for j, tt := range l.TokenTimes {
				rec.TokenTimes[j] = time.Duration(tt)
			}
		}
		out[i], seen[i] = rec, true
		n++
	}
	if n < len(reqs) {
		missing := slices.Index(seen, false)
		return nil, &FormatError{File: file, Msg: fmt.Sprintf("%d records for the dataset's %d requests (none for task_id %d)", n, len(reqs), reqs[missing].TaskID)}
	}
	if withFirst != 0 && withFirst != n {
		return nil, &FormatError{File: file, Msg: fmt.Sprintf("first-token times in %d of %d records; give them in every record or in none", withFirst, n)}
	}
	if n == 0 {
		return &Records{}, nil
	}
	t0 := out[0].Start
	for _, r := range out {
		t0 = min(t0, r.Start)
	}
	for i := range out {
		out[i].Start -= t0
		out[i].End -= t0
		if hasSent[i] {
			out[i].Sent -= t0
		}
		for j := range out[i].TokenTimes {
			out[i].TokenTimes[j] -= t0
		}
		if withFirst > 0 {
			out[i].FirstToken -= t0
		} else {
			out[i].FirstToken = out[i].End
		}
	}
	return &Records{Requests: out, FirstToken: withFirst > 0}, nil
}

// streamingMetrics are the metrics that need first-token times.
var streamingMetrics = []string{
	"per_user_output_speed_tok_s",
	"ttft_avg_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p95_ms", "ttft_p99_ms", "ttft_min_ms", "ttft_max_ms",
	"tpot_avg_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p95_ms", "tpot_p99_ms", "tpot_min_ms", "tpot_max_ms",
}

// Metrics computes the trtllm-bench metrics from the records, as the
// built-in engine does; without first-token times, the metrics that need
// them are left out rather than reported as 0.
func (r *Records) Metrics(numGPUs int) map[string]float64 {
	m := engine.ComputeMetrics(r.Requests, numGPUs)
	if !r.FirstToken {
		for _, k := range streamingMetrics {
			delete(m, k)
		}
	}
	return m
}

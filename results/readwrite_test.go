package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results/layout"
)

// TestWriteTwiceIdentical: the same data gives the same bytes, whatever
// the order of cells, the zone of the times or the spec's encoding.
func TestWriteTwiceIdentical(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := WriteFile(a, gemmStudy().build()); err != nil {
		t.Fatal(err)
	}
	r := gemmStudy().build()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(r.Cells), func(i, j int) { r.Cells[i], r.Cells[j] = r.Cells[j], r.Cells[i] })
	r.Started = r.Started.In(time.FixedZone("CET", 3600)).Add(400 * time.Millisecond)
	r.Spec = json.RawMessage(`{ "repeats": 6,   "name": "gemm-plugin" }`)
	r.Cells[0].Params["batch_size"] = float64(r.Cells[0].Params["batch_size"].(int)) // 16.0 is 16
	if err := WriteFile(b, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, a), readFile(t, b)) {
		t.Error("two writes of the same results differ")
	}
	if !bytes.HasSuffix(readFile(t, a), []byte("}\n")) {
		t.Error("results.json does not end with a newline")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// TestRoundTrip: reading a written file and writing it again changes no
// byte, and the reader returns canonical parameters.
func TestRoundTrip(t *testing.T) {
	for name := range fixtures {
		path := filepath.Join("testdata", name, layout.JSONFile)
		r, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, readFile(t, path)) {
			t.Errorf("%s: read and rewritten, it changes", path)
		}
		for _, c := range r.Cells {
			if _, ok := c.Params["batch_size"].(int64); !ok {
				t.Errorf("%s: batch_size read as %T, want int64", c.ID, c.Params["batch_size"])
			}
		}
	}
}

func TestRoundValue(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{141.30000001, 141.3}, {18086.1234, 18086.1}, {0.000123456789, 0.000123457}, {123456789.4, 123456789},
		{math.Copysign(0, -1), 0}, {-2.0000004, -2}, {999999.7, 1e6},
	} {
		if got := roundValue(c.in); got != c.want || math.Signbit(got) != math.Signbit(c.want) {
			t.Errorf("roundValue(%v) = %v, want %v", c.in, got, c.want)
		}
		if roundValue(roundValue(c.in)) != roundValue(c.in) {
			t.Errorf("roundValue is not idempotent at %v", c.in)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Results)
		want string
	}{
		{"nan", func(r *Results) { r.Cells[0].Repeats[0]["total_latency_ms"] = math.NaN() }, "must be finite"},
		{"nested param", func(r *Results) { r.Cells[0].Params["dataset"] = map[string]any{"x": 1} }, "not a JSON scalar"},
		{"duplicate", func(r *Results) { r.Cells[1].ID = r.Cells[0].ID }, "duplicate id"},
		{"status", func(r *Results) { r.Cells[0].Status = "done" }, `status "done"`},
		{"empty id", func(r *Results) { r.Cells[0].ID = "" }, "empty id"},
		{"artifact", func(r *Results) { r.Cells[0].Artifacts = []string{"../x"} }, "relative"},
		{"spec", func(r *Results) { r.Spec = json.RawMessage(`[1]`) }, "must be a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := gemmStudy().build()
			c.edit(r)
			dir := t.TempDir()
			err := WriteDir(dir, r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("rejected results left files: %v", entries)
			}
		})
	}
}

// TestParseErrors: every kind of bad input names file, line, column and
// field, and blames the input.
func TestParseErrors(t *testing.T) {
	valid := string(readFile(t, "testdata/moe/results.json"))
	for _, c := range []struct {
		name string
		data string
		want string
	}{
		{"empty", "", "bad.json:1:1: malformed JSON: unexpected end of JSON input"},
		{"syntax", "{\n  \"schema_version\": 1,\n  \"name\": tru\n}", "bad.json:3:14: malformed JSON: invalid character '\\n' in literal true (expecting 'e')"},
		{"array", "[1, 2]", "bad.json:1:1: expected an object, got an array"},
		{"no version", `{"name": "x"}`, `bad.json:1:1: schema_version: missing; this is not an xrun results file`},
		{"future version", "{\n  \"schema_version\": 2,\n  \"newfield\": true\n}", "bad.json:2:21: schema_version: version 2 is not supported: this xrun reads version 1; it was written by a newer xrun"},
		{"string version", `{"schema_version": "1"}`, `bad.json:1:20: schema_version: expected an integer, got the string "1"`},
		{"unknown field", strings.Replace(valid, `"description"`, `"descripton"`, 1), `bad.json:4:3: descripton: unknown field; did you mean "description"?`},
		{"wrong type", strings.Replace(valid, `"cpu_count": 96`, `"cpu_count": "96"`, 1), `environment.cpu_count: expected an integer, got the string "96"`},
		{"bad status", strings.Replace(valid, `"status": "ok"`, `"status": "done"`, 1), `cells[0].status: "done" is not a status; expected ok, failed or skipped`},
		{"bad time", strings.Replace(valid, `"started": "2026-03-01T02:00:00Z"`, `"started": "yesterday"`, 1), `started: "yesterday" is not an RFC 3339 time`},
		{"duplicate key", strings.Replace(valid, `"name": "moe-routing",`, `"name": "moe-routing", "name": "x",`, 1), `name: duplicate key`},
		{"nested param", strings.Replace(valid, `"batch_size": 16,`, `"batch_size": {"a": 1},`, 1), `cells[0].params.batch_size: expected a string, number, bool or null`},
		{"metric string", strings.Replace(valid, `"num_requests": 3000,`, `"num_requests": "3000",`, 1), `.num_requests: expected a number, got the string "3000"`},
		{"huge number", strings.Replace(valid, `"num_requests": 3000,`, `"num_requests": 1e999,`, 1), `.num_requests: 1e999: number out of range`},
		{"trailing", valid + "{}", "malformed JSON: invalid character '{' after top-level value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.data), "bad.json")
			var fe *FileError
			if !errors.As(err, &fe) || !fe.BadInput() {
				t.Fatalf("err = %v (%T), want a *FileError", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nlacks\n  %s", err, c.want)
			}
			if fe.Line == 0 {
				t.Errorf("no position in %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	if _, path, err := Load("testdata/gemm"); err != nil || path != filepath.Join("testdata", "gemm", "results.json") {
		t.Errorf("Load(dir) = %q, %v", path, err)
	}
	if _, _, err := Load("testdata/gemm/results.json"); err != nil {
		t.Errorf("Load(file): %v", err)
	}
	for _, p := range []string{"testdata/no-such", "testdata"} {
		_, _, err := Load(p)
		var fe *FileError
		if !errors.As(err, &fe) || !fe.BadInput() {
			t.Errorf("Load(%q) = %v, want a bad-input FileError", p, err)
		}
	}
}

// FuzzReadResults: the reader never panics, and whatever it accepts
// writes out canonically: written once more it does not change.
func FuzzReadResults(f *testing.F) {
	// Small seeds: Go's fuzzer stalls on inputs as large as the fixtures.
	small := moeStudy().build()
	small.Cells = small.Cells[2:]
	for i := range small.Cells {
		for j, rep := range small.Cells[i].Repeats {
			small.Cells[i].Repeats[j] = Metrics{"request_throughput_req_s": rep["request_throughput_req_s"], "num_requests": 3000}
		}
	}
	small.Cells[0].Profile = &Profile{Window: "100-150", Kernels: []Kernel{{Name: "gemm", TimePct: 61.5, TotalNs: 123456, Instances: 3}}, Diagnosis: []string{"GEMMs ran on cuBLASLt"}}
	seed, err := Marshal(small)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"schema_version": 1, "cells": [{"id": "a", "status": "ok", "params": {"x": 1.5e300}, "repeats": [{"m": 1}]}]}`))
	f.Add([]byte(`{"schema_version": 1, "spec": {"a": [1, {"b": null}]}, "axes": [{"name": "x", "values": [1, "a", null]}]}`))
	f.Add([]byte(`{"schema_version": 2}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data, "fuzz.json")
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is %T, not a *FileError", err, err)
			}
			return
		}
		once, err := Marshal(r)
		if err != nil {
			return // e.g. an artifact path the writer refuses
		}
		r2, err := Parse(once, "once.json")
		if err != nil {
			t.Fatalf("the reader rejects what the writer wrote: %v\n%s", err, once)
		}
		twice, err := Marshal(r2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("not canonical:\n%s\n---\n%s", once, twice)
		}
	})
}

package datasets

import (
	"bytes"
	"io"
	"runtime"
	"testing"
)

// Speed targets (issue 3), on the project's 2-core build machine:
// BenchmarkNorm3000x128 <= 20 ms/op, Benchmark30kNorm1000 <= 0.5 s/op with
// <= 64 MB peak memory. The peak RSS of the whole CLI is measured by
// cmd/xrun's BenchmarkDatasetCLIPeakRSS; here "sys-MB" reports the Go
// runtime's total memory from the OS after the run.

func benchWrite(b *testing.B, p Params) {
	b.ReportAllocs()
	var n countingWriter
	for b.Loop() {
		n = 0
		if err := Write(&n, p); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(n))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MB")
}

// countingWriter discards what it is given and counts it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func BenchmarkNorm3000x128(b *testing.B) {
	benchWrite(b, Params{Dist: NormDist, NumRequests: 3000, InputMean: 128, OutputMean: 128,
		Seed: DefaultSeed, VocabSize: 32000, EOSID: 2})
}

func Benchmark30kNorm1000(b *testing.B) {
	benchWrite(b, Params{Dist: NormDist, NumRequests: 30000, InputMean: 1000, InputStdev: 100,
		OutputMean: 1000, OutputStdev: 100, Seed: DefaultSeed, VocabSize: 128000, EOSID: 128001, FullVocabSize: 128256})
}

// BenchmarkRead30kNorm1000 reads back the 30k x ~1000 dataset (about
// 200 MB of JSON lines) with the streaming reader.
func BenchmarkRead30kNorm1000(b *testing.B) {
	p := Params{Dist: NormDist, NumRequests: 30000, InputMean: 1000, InputStdev: 100,
		OutputMean: 1000, OutputStdev: 100, Seed: DefaultSeed, VocabSize: 128000, EOSID: 2}
	var buf bytes.Buffer
	if err := Write(&buf, p); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench")
		var req Request
		for {
			err := r.Next(&req)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

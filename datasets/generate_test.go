package datasets

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// referenceFiles are outputs of TensorRT-LLM's own prepare_dataset.py
// (--stdout); the file names give the parameters.
var referenceFiles = []struct {
	file string
	p    Params
}{
	{"norm_n5_in100sd30_out50sd10_seed420_vocab32000_eos2.jsonl", Params{
		Dist: NormDist, NumRequests: 5, InputMean: 100, InputStdev: 30, OutputMean: 50, OutputStdev: 10,
		Seed: 420, VocabSize: 32000, EOSID: 2}},
	{"norm_n12_in30sd0_out4sd0_seed11_vocab50_eos0.jsonl", Params{
		Dist: NormDist, NumRequests: 12, InputMean: 30, InputStdev: 0, OutputMean: 4, OutputStdev: 0,
		Seed: 11, VocabSize: 50, EOSID: 0}},
	{"unif_n4_in10-20_out5-9_seed7_vocab1000_eos2.jsonl", Params{
		Dist: UnifDist, NumRequests: 4, InputMin: 10, InputMax: 20, OutputMin: 5, OutputMax: 9,
		Seed: 7, VocabSize: 1000, EOSID: 2}},
}

func TestReferenceFilesByteForByte(t *testing.T) {
	for _, rf := range referenceFiles {
		t.Run(rf.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", rf.file))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := Write(&got, rf.p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				gotFile := filepath.Join("testdata", rf.file+".got")
				_ = os.WriteFile(gotFile, got.Bytes(), 0o644)
				t.Fatalf("output differs from TensorRT-LLM's; wrote %s", gotFile)
			}
		})
	}
}

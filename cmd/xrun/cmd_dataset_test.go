package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
)

// The reference files are TensorRT-LLM's own prepare_dataset.py output,
// kept by the datasets package.
var datasetReferenceCLI = []struct {
	file string
	args []string
}{
	{"norm_n5_in100sd30_out50sd10_seed420_vocab32000_eos2.jsonl", []string{"token-norm-dist", "--num-requests", "5",
		"--input-mean", "100", "--input-stdev", "30", "--output-mean", "50", "--output-stdev", "10",
		"--random-seed", "420", "--vocab-size", "32000", "--eos-id", "2"}},
	{"norm_n12_in30sd0_out4sd0_seed11_vocab50_eos0.jsonl", []string{"token-norm-dist", "--num-requests", "12",
		"--input-mean", "30", "--input-stdev", "0", "--output-mean", "4", "--output-stdev", "0",
		"--random-seed", "11", "--vocab-size", "50", "--eos-id", "0"}},
	{"unif_n4_in10-20_out5-9_seed7_vocab1000_eos2.jsonl", []string{"token-unif-dist", "--num-requests", "4",
		"--input-min", "10", "--input-max", "20", "--output-min", "5", "--output-max", "9",
		"--random-seed", "7", "--vocab-size", "1000", "--eos-id", "2"}},
}

func readDatasetRef(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "datasets", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDatasetReferenceFiles(t *testing.T) {
	for _, c := range datasetReferenceCLI {
		t.Run(c.file, func(t *testing.T) {
			want := readDatasetRef(t, c.file)
			r := runCLI(t, nil, append([]string{"dataset"}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if r.stdout != string(want) {
				t.Fatalf("stdout differs from TensorRT-LLM's %s:\n%s", c.file, r.stdout)
			}
			// The same bytes through --output, with nothing else left.
			dir := t.TempDir()
			out := filepath.Join(dir, "d.jsonl")
			r = runCLI(t, nil, append([]string{"dataset"}, append(c.args, "--output", out)...)...)
			if r.code != 0 || r.stdout != "" {
				t.Fatalf("--output: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
				t.Fatal("--output file differs")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("files left in the output directory: %v", entries)
			}
		})
	}
}

func TestDatasetModelDefaults(t *testing.T) {
	args := datasetReferenceCLI[0].args
	// tinyllama-1.1b: vocabulary 32000, EOS 2, the reference file's values.
	withModel := slices.Concat([]string{"dataset"}, args[:len(args)-4], []string{"--model", "tinyllama-1.1b"})
	r := runCLI(t, nil, withModel...)
	if r.code != 0 || r.stdout != string(readDatasetRef(t, datasetReferenceCLI[0].file)) {
		t.Fatalf("--model tinyllama-1.1b: exit %d, stderr %q", r.code, r.stderr)
	}
	// Explicit flags win over the model's values.
	r2 := runCLI(t, nil, append(withModel, "--vocab-size", "1000")...)
	if r2.code != 0 || r2.stdout == r.stdout {
		t.Fatalf("--vocab-size did not override --model: exit %d, stderr %q", r2.code, r2.stderr)
	}
	// Llama-3's EOS (128001) lies beyond its 128000 base ids: valid.
	r3 := runCLI(t, nil, "dataset", "token-norm-dist", "--model", "llama-3.1-8b", "--num-requests", "2",
		"--input-mean", "10", "--input-stdev", "0", "--output-mean", "5", "--output-stdev", "0")
	if r3.code != 0 || strings.Count(r3.stdout, "\n") != 2 {
		t.Fatalf("llama-3.1-8b: exit %d, stderr %q", r3.code, r3.stderr)
	}
}

// Llama-3's tokenizer pair (--vocab-size 128000 --eos-id 128001), which
// TensorRT-LLM's generator takes: the EOS is never drawn, so the scrub never
// fires and the output is the generator's, the same as --model gives.
func TestDatasetEOSBeyondVocab(t *testing.T) {
	lengths := []string{"--num-requests", "20", "--input-mean", "64", "--input-stdev", "8", "--output-mean", "5", "--output-stdev", "1"}
	r := runCLI(t, nil, slices.Concat([]string{"dataset", "token-norm-dist"}, lengths, []string{"--vocab-size", "128000", "--eos-id", "128001"})...)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var want bytes.Buffer
	p := datasets.Params{Dist: datasets.NormDist, NumRequests: 20, InputMean: 64, InputStdev: 8, OutputMean: 5, OutputStdev: 1,
		Seed: datasets.DefaultSeed, VocabSize: 128000, EOSID: 128001}
	if err := datasets.Write(&want, p); err != nil {
		t.Fatal(err)
	}
	if r.stdout != want.String() {
		t.Error("output differs from the generator's")
	}
	withModel := runCLI(t, nil, slices.Concat([]string{"dataset", "token-norm-dist"}, lengths, []string{"--model", "llama-3.1-8b"})...)
	if withModel.code != 0 || withModel.stdout != r.stdout {
		t.Errorf("--model llama-3.1-8b (the same pair) gave other bytes: exit %d, stderr %q", withModel.code, withModel.stderr)
	}
	// On a TensorRT-LLM reference file whose draws hold neither the EOS 2
	// nor its replacement 3, an EOS past the vocabulary gives its bytes.
	ref := datasetReferenceCLI[0]
	args := slices.Concat([]string{"dataset"}, ref.args[:len(ref.args)-2], []string{"--eos-id", "32001"})
	if r := runCLI(t, nil, args...); r.code != 0 || r.stdout != string(readDatasetRef(t, ref.file)) {
		t.Errorf("--vocab-size 32000 --eos-id 32001: exit %d, stderr %q, output differs from %s", r.code, r.stderr, ref.file)
	}
	// A model's tokenizer still bounds the EOS: tinyllama has no id 32000.
	r = runCLI(t, nil, slices.Concat([]string{"dataset", "token-norm-dist"}, lengths, []string{"--model", "tinyllama-1.1b", "--eos-id", "32000"})...)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "--eos-id: must be a token id in [0, 32000)") {
		t.Errorf("--model tinyllama-1.1b --eos-id 32000: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestDatasetLoRA(t *testing.T) {
	args := append([]string{"dataset"}, datasetReferenceCLI[0].args...)
	r := runCLI(t, nil, append(args, "--rand-task-id", "0,2", "--lora-dir", "loras")...)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// Task ids computed with CPython from the same stream (see datasets).
	for i, id := range []int{1, 1, 2, 0, 0} {
		line := strings.Split(r.stdout, "\n")[i]
		want := `"lora_request":{"lora_name":"lora_` + strconv.Itoa(id) + `","lora_int_id":` + strconv.Itoa(id) +
			`,"lora_path":"loras/` + strconv.Itoa(id) + `"}}`
		if !strings.HasSuffix(line, want) {
			t.Errorf("line %d ends %q, want %q", i, line[max(0, len(line)-len(want)):], want)
		}
	}
	// Without --lora-dir the output is unchanged, as in prepare_dataset.py.
	r = runCLI(t, nil, append(args, "--rand-task-id", "0,2")...)
	if r.code != 0 || r.stdout != string(readDatasetRef(t, datasetReferenceCLI[0].file)) {
		t.Fatalf("--rand-task-id without --lora-dir changed the output (exit %d)", r.code)
	}
}

func TestDatasetBadInput(t *testing.T) {
	norm := func(mod ...string) []string {
		args := []string{"dataset", "token-norm-dist", "--num-requests", "3", "--input-mean", "10", "--input-stdev", "2",
			"--output-mean", "5", "--output-stdev", "1", "--vocab-size", "100", "--eos-id", "2"}
		return append(args, mod...)
	}
	unif := func(mod ...string) []string {
		args := []string{"dataset", "token-unif-dist", "--num-requests", "3", "--input-min", "10", "--input-max", "20",
			"--output-min", "5", "--output-max", "9", "--vocab-size", "100", "--eos-id", "2"}
		return append(args, mod...)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"zero requests", norm("--num-requests", "0"), "--num-requests: must be at least 1, got 0"},
		{"negative requests", unif("--num-requests", "-4"), "--num-requests: must be at least 1"},
		{"negative input stdev", norm("--input-stdev", "-1"), "--input-stdev: must not be negative"},
		{"negative output stdev", norm("--output-stdev", "-3"), "--output-stdev: must not be negative"},
		{"input min > max", unif("--input-min", "21"), "--input-min: 21 is greater than input_max 20"},
		{"output min > max", unif("--output-min", "10"), "--output-min: 10 is greater than output_max 9"},
		{"zero vocab", norm("--vocab-size", "0"), "--vocab-size: must be in [1,"},
		{"eos beyond int32", norm("--eos-id", "2147483648"), "--eos-id: must be a token id in [0, 2147483647], got 2147483648"},
		{"negative eos", norm("--eos-id", "-1"), "--eos-id: must be a token id"},
		{"eos outside model vocab", norm("--model", "tinyllama-1.1b", "--eos-id", "32000"), "--eos-id: must be a token id in [0, 32000)"},
		{"unknown model", norm("--model", "no-such-model"), `--model: model "no-such-model" is neither a zoo model`},
		{"no vocab", []string{"dataset", "token-norm-dist", "--num-requests", "3", "--input-mean", "10", "--input-stdev", "2",
			"--output-mean", "5", "--output-stdev", "1"}, "--vocab-size: required unless --model gives it"},
		{"missing flag", []string{"dataset", "token-norm-dist", "--num-requests", "3", "--vocab-size", "9", "--eos-id", "1"}, "--input-mean: required"},
		{"non-integer flag", norm("--input-mean", "1.5"), `invalid argument "1.5" for "--input-mean" flag: want an integer`},
		{"bad vocab text", norm("--vocab-size", "lots"), `want an integer, got "lots"`},
		{"seed too large", norm("--random-seed", "4294967296"), "--random-seed: must be in [0, 4294967295]"},
		{"bad rand task id", norm("--rand-task-id", "3"), `--rand-task-id: want MIN,MAX (two integers), got "3"`},
		{"rand task id min > max", norm("--rand-task-id", "3,1", "--lora-dir", "l"), "--rand-task-id: MIN 3 is greater than MAX 1"},
		{"output dir missing", norm("--output", "/no/such/dir/d.jsonl"), "--output: directory /no/such/dir does not exist"},
		{"positional argument", norm("extra"), "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, nil, c.args...)
			if r.code != exitBadInput {
				t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q\n  want it to contain %q", r.stderr, c.want)
			}
			if r.stdout != "" {
				t.Errorf("wrote to stdout: %q", r.stdout)
			}
		})
	}
}

func TestDatasetBadInputLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.jsonl")
	r := runCLI(t, nil, "dataset", "token-unif-dist", "--num-requests", "3", "--input-min", "30", "--input-max", "20",
		"--output-min", "5", "--output-max", "9", "--vocab-size", "100", "--eos-id", "2", "--output", out)
	if r.code != exitBadInput {
		t.Fatalf("exit %d", r.code)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("bad input left files: %v", entries)
	}
	// An existing file stays as it was.
	if err := os.WriteFile(out, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "dataset", "token-norm-dist", "--num-requests", "0", "--input-mean", "1", "--input-stdev", "0",
		"--output-mean", "1", "--output-stdev", "0", "--vocab-size", "100", "--eos-id", "2", "--output", out)
	if got, _ := os.ReadFile(out); r.code != exitBadInput || string(got) != "keep\n" {
		t.Fatalf("exit %d, file now %q", r.code, got)
	}
}

func TestDatasetHelp(t *testing.T) {
	r := runCLI(t, nil, "dataset", "token-norm-dist", "--help")
	for _, want := range []string{"--num-requests", "--input-stdev", "--random-seed", "--model", "--rand-task-id", "EXIT STATUS"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// BenchmarkDatasetCLIPeakRSS runs the built xrun binary under
// /usr/bin/time -v for the large case (30,000 requests,
// norm(1000, 100) in and out, vocabulary 128000) written to a file, and
// reports the child's peak resident memory next to its wall time.
func BenchmarkDatasetCLIPeakRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("needs GNU time")
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		b.Skip("needs /usr/bin/time")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "xrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	rssRe := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`)
	var rss []float64
	for b.Loop() {
		cmd := exec.Command("/usr/bin/time", "-v", bin, "dataset", "token-norm-dist", "--num-requests", "30000",
			"--input-mean", "1000", "--input-stdev", "100", "--output-mean", "1000", "--output-stdev", "100",
			"--vocab-size", "128000", "--eos-id", "128001", "--model", "llama-3.1-8b",
			"--output", filepath.Join(dir, "d.jsonl"), "--log-level", "error")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%v: %s", err, stderr.String())
		}
		_ = time.Since(start)
		m := rssRe.FindStringSubmatch(stderr.String())
		if m == nil {
			b.Fatalf("no peak RSS in %q", stderr.String())
		}
		kb, _ := strconv.ParseFloat(m[1], 64)
		rss = append(rss, kb/1024)
	}
	slices.Sort(rss)
	b.ReportMetric(rss[len(rss)/2], "peak-RSS-MB")
}

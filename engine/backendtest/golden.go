package backendtest

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/engine/safetensors"
)

// Golden is one prompt of a Hugging Face reference
// (testdata/hf/<model>/reference.safetensors, computed by transformers in
// float32): its input ids, the logits of every prompt position
// ([len(Input), vocab], row-major) and the greedy continuation.
type Golden struct {
	Input  []int32
	Logits []float32
	Greedy []int32
}

// ReadGolden reads the cases of dir/reference.safetensors, failing t on any
// problem: the CPU and CUDA backends' whole-model checks share one reader.
func ReadGolden(t testing.TB, dir string) []Golden {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ints := func(name string) []int32 {
		info, b, err := f.Read(name)
		if err != nil || info.DType != "I64" {
			t.Fatalf("%s: %v %s", name, err, info.DType)
		}
		v := make([]int32, len(b)/8)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return v
	}
	var out []Golden
	for _, c := range []string{"case0", "case1"} {
		info, b, err := f.Read(c + ".logits")
		if err != nil || info.DType != "F32" {
			t.Fatalf("%s.logits: %v %s", c, err, info.DType)
		}
		l := make([]float32, len(b)/4)
		for i := range l {
			l[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		out = append(out, Golden{Input: ints(c + ".input_ids"), Logits: l, Greedy: ints(c + ".greedy_ids")})
	}
	return out
}

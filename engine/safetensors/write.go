package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"sort"

	"github.com/xrun-dev/xrun/engine/model"
)

// WriteFile writes tensors as a safetensors file (tensors sorted by name,
// header padded with spaces to 8 bytes), for tests and tools.
func WriteFile(path string, tensors map[string]model.HostTensor) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var data []byte
	for _, n := range names {
		t := tensors[n]
		header[n] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": []int{len(data), len(data) + len(t.Data)}}
		data = append(data, t.Data...)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

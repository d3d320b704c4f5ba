//go:build cgo && linux

package backend

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// An FP8 (E4M3) KV cache (kv_cache_dtype fp8; model.FP8KV), as the CPU
// backend keeps one: a byte a value, E4M3(v / scale) with a scale per
// layer for K and one for V (KVConfig.KScale, VScale; 1 where not given),
// written by KVWriteFP8 (after Rope where RoPE is not folded into the
// attention) and by the _rope_f8 decode kernels, read by
// attention_tc_f8.cu's kernels. Half the bytes of a bf16 cache a decode
// step streams, and twice the requests in the same memory.
//
// The tensor-core attention only: head dimension 64 or 128, not GPT-OSS's
// ring (its sinks kernel), not MLA (mla.go).

var _ model.FP8KV = (*Backend)(nil)

// FP8KVCache marks the backend's caches as able to hold E4M3 (model.FP8KV);
// NewKVCache refuses the ones it cannot keep (checkFP8KV).
func (b *Backend) FP8KVCache() {}

// checkFP8KV refuses an FP8 cache this backend cannot keep.
func (b *Backend) checkFP8KV(c model.KVConfig) error {
	const what = "an FP8 KV cache"
	switch {
	case !c.FP8:
		return nil
	case c.Ring:
		return errNoFP8("KV cache", what+" for GPT-OSS's attention (sinks, sliding window)")
	case c.HeadDim != 64 && c.HeadDim != 128:
		return errNoFP8("KV cache", fmt.Sprintf("%s for head dimension %d (its attention runs on the tensor cores at 64 and 128 only)", what, c.HeadDim))
	}
	return nil
}

// fp8 is layer's scales for the kernels; the zero value for a cache in the
// compute type.
func (c *kvCache) fp8(layer int) cuda.KVFP8 {
	if !c.c.FP8 {
		return cuda.KVFP8{}
	}
	q := cuda.KVFP8{On: true, K: 1, V: 1}
	if layer < len(c.c.KScale) && c.c.KScale[layer] > 0 {
		q.K = c.c.KScale[layer]
	}
	if layer < len(c.c.VScale) && c.c.VScale[layer] > 0 {
		q.V = c.c.VScale[layer]
	}
	return q
}

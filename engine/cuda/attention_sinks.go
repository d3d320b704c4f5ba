//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
)

// SinkAttn is one layer's GPT-OSS attention (kernels/attention_sinks.cu):
// attention sinks and a window over a ring KV cache.
type SinkAttn struct {
	Out, QKV Buffer
	// K and V are the layer's ring: [slots+1][kv heads][LCap][head dim].
	K, V Buffer
	// Sinks holds one logit per query head; Ptr 0: no sinks.
	Sinks Buffer
	// The batch layout's attention items (first row, tokens, slot,
	// position of the first row; int4 each): decode ones, then prefill.
	ItemsS, ItemsL Buffer
	NS, NL         int
	Shape          AttnShape
	// LCap is the positions the layer's ring holds; Window the positions
	// a token attends to (0: all).
	LCap, Window int
}

// sinkThreads is the attention block: one warp per token of an item.
const sinkThreads = 128

// AttentionSinks queues GPT-OSS's attention of every item's tokens: each
// token at position p attends to max(0, p-Window+1)..p of its sequence,
// positions before the sequence's first new one read from the ring, the
// rest from the QKV rows, with softmax scale 1/sqrt(head dim) and the
// sinks in its denominator. The ring is not written (KVRingWrite, after).
func (g *GPU) AttentionSinks(s *Stream, dt DType, a SinkAttn) error {
	sh, es := a.Shape, dt.Size()
	D, W := sh.HeadDim, sh.Width()
	switch {
	case D%8 != 0 || D > 256:
		return fmt.Errorf("cuda: sink attention needs a head dimension that is a multiple of 8 up to 256, got %d", D)
	case sh.KVHeads <= 0 || sh.Heads%sh.KVHeads != 0:
		return fmt.Errorf("cuda: sink attention: %d heads over %d KV heads", sh.Heads, sh.KVHeads)
	case a.LCap <= 0 || a.Window < 0:
		return fmt.Errorf("cuda: sink attention: ring of %d positions, window %d", a.LCap, a.Window)
	case a.K.Bytes < sh.KVHeads*a.LCap*D*es || a.V.Bytes < a.K.Bytes:
		return fmt.Errorf("cuda: sink attention: ring smaller than one slot")
	case a.Sinks.Ptr != 0 && a.Sinks.Bytes < sh.Heads*es:
		return fmt.Errorf("cuda: sink attention: %d bytes of sinks for %d heads", a.Sinks.Bytes, sh.Heads)
	case a.ItemsS.Bytes < a.NS*16 || a.ItemsL.Bytes < a.NL*16:
		return fmt.Errorf("cuda: sink attention: item buffers too small")
	}
	f, err := g.function("attention_sinks", "attn_sinks_"+dt.suffix())
	if err != nil {
		return err
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	// Decode and prefill items go in two launches, so neither list needs
	// the other's count (a prefill item looks over the items beside it
	// for its sequence's first new position).
	for _, l := range []struct {
		items  Buffer
		ns, nl int
	}{{a.ItemsS, a.NS, 0}, {a.ItemsL, 0, a.NL}} {
		if l.ns+l.nl == 0 {
			continue
		}
		args := g.argsPack().Ptr(a.Out).Ptr(a.QKV).Ptr(a.K).Ptr(a.V).Ptr(a.Sinks).Ptr(l.items).I32(l.ns).Ptr(l.items).I32(l.nl).
			I32(sh.Heads).I32(sh.KVHeads).I32(D).I32(W).I32(a.LCap).I32(a.Window).F32(scale)
		if err := s.Launch(f, Dim3{X: l.ns + l.nl, Y: sh.Heads}, Dim3{X: sinkThreads}, 0, args); err != nil {
			return err
		}
	}
	return nil
}

// KVRingWrite queues the copy of rows tokens' keys and values from the
// fused QKV rows into a layer's ring, at (slot, kv head, position mod
// lcap).
func (g *GPU) KVRingWrite(s *Stream, dt DType, k, v, qkv, pos, slot Buffer, rows int, sh AttnShape, lcap int) error {
	switch {
	case sh.HeadDim%8 != 0:
		return fmt.Errorf("cuda: KVRingWrite needs a head dimension that is a multiple of 8, got %d", sh.HeadDim)
	case rows == 0:
		return nil
	case lcap <= 0 || pos.Bytes < rows*4 || slot.Bytes < rows*4 || qkv.Bytes < rows*sh.Width()*dt.Size():
		return fmt.Errorf("cuda: KVRingWrite: %d rows, ring of %d positions", rows, lcap)
	}
	f, err := g.function("attention_sinks", "kv_ring_write_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(k).Ptr(v).Ptr(qkv).Ptr(pos).Ptr(slot).I32(sh.Heads).I32(sh.KVHeads).I32(sh.HeadDim).
		I32(sh.Width()).I32(lcap)
	return s.Launch(f, Dim3{X: rows}, Dim3{X: min(256, roundUp(2*sh.KVHeads*sh.HeadDim/8, 32))}, 0, a)
}

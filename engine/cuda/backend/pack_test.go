package backend

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/model"
)

// testShape is a cache of 4 slots of 64 positions, 4 query heads per KV
// head of 64 dimensions (prefill items of 16 tokens), graphs on with
// activations of 16 rows, and two picks to feed from.
var testShape = packShape{kv: true, slots: 4, capacity: 64, groups: 4, headDim: 64, largeTokens: 16,
	smallRows: 16, tinyRows: 8, graphs: true, minRows: 16, picks: 2}

type seq struct {
	slot, past int
	toks       []int32
}

func batchOf(seqs ...seq) *model.Batch {
	b := &model.Batch{}
	for _, s := range seqs {
		b.Add(s.slot, s.past, s.toks, true)
	}
	return b
}

func seqRange(first, n int32) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = first + int32(i)
	}
	return v
}

func repeat(v int32, n int) []int32 { return slices.Repeat([]int32{v}, n) }

// TestPackBatch: the layout SetBatch uploads, per kind of iteration.
func TestPackBatch(t *testing.T) {
	noGraphs := testShape
	noGraphs.graphs = false
	noCache := packShape{smallRows: 16, tinyRows: 8, graphs: true, minRows: 16}
	narrow := noGraphs
	narrow.headDim = 16
	capped := testShape
	capped.minRows = 6
	fed := batchOf(seq{0, 3, []int32{0}}, seq{1, 5, []int32{0}})
	fed.Fed = []model.Fed{{Row: 0, Pick: 1}, {Row: 1, Pick: 0}}
	for _, c := range []struct {
		name string
		bt   *model.Batch
		sh   packShape
		want packedBatch
	}{
		{
			name: "prefill of two prompts: two decode-sized items, unpadded",
			bt:   batchOf(seq{0, 0, []int32{5, 6, 7}}, seq{2, 0, []int32{8, 9}}),
			sh:   testShape,
			want: packedBatch{rows: 5, nLogit: 2, offS: 20, nS: 2, offL: 28, rowsS: 16, ints: slices.Concat(
				[]int32{5, 6, 7, 8, 9}, []int32{0, 1, 2, 0, 1}, []int32{0, 0, 0, 2, 2}, []int32{2, 4}, repeat(0, 3),
				[]int32{0, 3, 0, 0, 3, 2, 2, 0})},
		},
		{
			name: "decode of 3, padded to the bucket of 4 on the scratch slot",
			bt:   batchOf(seq{1, 10, []int32{11}}, seq{0, 4, []int32{12}}, seq{3, 7, []int32{13}}),
			sh:   testShape,
			want: packedBatch{rows: 4, nLogit: 4, pad: true, offS: 16, nS: 4, offL: 32, rowsS: 8, ints: slices.Concat(
				[]int32{11, 12, 13, 0}, []int32{10, 4, 7, 0}, []int32{1, 0, 3, 4}, []int32{0, 1, 2, 3},
				[]int32{0, 1, 1, 10, 1, 1, 0, 4, 2, 1, 3, 7, 3, 1, 4, 0})},
		},
		{
			name: "decode of 3 without graphs: not padded",
			bt:   batchOf(seq{1, 10, []int32{11}}, seq{0, 4, []int32{12}}, seq{3, 7, []int32{13}}),
			sh:   noGraphs,
			want: packedBatch{rows: 3, nLogit: 3, offS: 12, nS: 3, offL: 24, rowsS: 8, ints: slices.Concat(
				[]int32{11, 12, 13}, []int32{10, 4, 7}, []int32{1, 0, 3}, []int32{0, 1, 2},
				[]int32{0, 1, 1, 10, 1, 1, 0, 4, 2, 1, 3, 7})},
		},
		{
			name: "decode of 5: the bucket of 8 capped at the activations' 6 rows",
			bt:   batchOf(seq{0, 1, []int32{1}}, seq{1, 1, []int32{2}}, seq{2, 1, []int32{3}}, seq{3, 1, []int32{4}}, seq{0, 9, []int32{5}}),
			sh:   capped,
			want: packedBatch{rows: 6, nLogit: 6, pad: true, offS: 24, nS: 6, offL: 48, rowsS: 8, ints: slices.Concat(
				[]int32{1, 2, 3, 4, 5, 0}, []int32{1, 1, 1, 1, 9, 0}, []int32{0, 1, 2, 3, 0, 4}, []int32{0, 1, 2, 3, 4, 5},
				[]int32{0, 1, 0, 1, 1, 1, 1, 1, 2, 1, 2, 1, 3, 1, 3, 1, 4, 1, 0, 9, 5, 1, 4, 0})},
		},
		{
			name: "a chunk of 40 tokens after 5: prefill items of 16 tokens",
			bt:   batchOf(seq{1, 5, seqRange(100, 40)}),
			sh:   testShape,
			want: packedBatch{rows: 40, nLogit: 1, offS: 124, nS: 0, offL: 124, nL: 3, rowsS: 8, ints: slices.Concat(
				seqRange(100, 40), seqRange(5, 40), repeat(1, 40), []int32{39}, repeat(0, 3),
				[]int32{32, 8, 1, 37, 16, 16, 1, 21, 0, 16, 1, 5})}, // last first
		},
		{
			name: "fed tokens read picks on the device",
			bt:   fed,
			sh:   noGraphs,
			want: packedBatch{rows: 2, nLogit: 2, offS: 8, nS: 2, offL: 16, rowsS: 8, ints: slices.Concat(
				[]int32{-2, -1}, []int32{3, 5}, []int32{0, 1}, []int32{0, 1}, []int32{0, 1, 0, 3, 1, 1, 1, 5})},
		},
		{
			name: "no KV cache: no items, no padding",
			bt:   batchOf(seq{7, 0, []int32{11}}, seq{9, 0, []int32{12}}, seq{8, 0, []int32{13}}),
			sh:   noCache,
			want: packedBatch{rows: 3, nLogit: 3, offS: 12, offL: 12, rowsS: 16, ints: slices.Concat(
				[]int32{11, 12, 13}, []int32{0, 0, 0}, []int32{7, 9, 8}, []int32{0, 1, 2})},
		},
		{
			name: "head dimension 16: decode items on the small kernel",
			bt:   batchOf(seq{0, 2, []int32{3}}),
			sh:   narrow,
			want: packedBatch{rows: 1, nLogit: 1, offS: 4, nS: 1, offL: 8, rowsS: 16, ints: []int32{3, 2, 0, 0, 0, 1, 0, 2}},
		},
		{
			name: "an unsampled prompt: no logit rows",
			bt:   &model.Batch{Tokens: []int32{4, 5}, Positions: []int32{0, 1}, Seqs: []model.Seq{{Slot: 3, Len: 2}}},
			sh:   testShape,
			want: packedBatch{rows: 2, nLogit: 0, offS: 8, nS: 1, offL: 12, rowsS: 8, ints: []int32{4, 5, 0, 1, 3, 3, 0, 0, 0, 2, 3, 0}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := packBatch(nil, c.bt, c.sh)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.ints, c.want.ints) {
				t.Errorf("ints\n got %v\nwant %v", got.ints, c.want.ints)
			}
			// SetBatch sizes the layout buffer for at least rows rows.
			if n := layoutInts(got.rows); len(got.ints) > n {
				t.Errorf("%d ints, the layout buffer of %d rows holds %d", len(got.ints), got.rows, n)
			}
			got.ints, c.want.ints = nil, nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("layout %+v, want %+v", got, c.want)
			}
			if got.offS%4 != 0 || got.offL != got.offS+4*got.nS {
				t.Errorf("items at %d (%d) and %d: not 16-byte aligned or not adjacent", got.offS, got.nS, got.offL)
			}
		})
	}
}

// TestPackBatchItemsChain: a prompt's large items are adjacent in the list,
// last chunk first, each starting where the one after it ends, in rows and
// in positions, and together they cover the prompt. GPT-OSS's attention
// (attn_sinks) finds a chunk's first new position by walking these
// neighbours; the other attention kernels start the longest blocks first
// by this order.
func TestPackBatchItemsChain(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	sh := testShape
	sh.slots, sh.capacity = 8, 256
	for range 200 {
		var seqs []seq
		for slot := range 1 + r.IntN(sh.slots) {
			n := 1 + r.IntN(80)
			seqs = append(seqs, seq{slot, r.IntN(sh.capacity - n + 1), make([]int32, n)})
		}
		bt := batchOf(seqs...)
		got, err := packBatch(nil, bt, sh)
		if err != nil {
			t.Fatal(err)
		}
		items := got.ints[got.offL : got.offL+4*got.nL]
		next := 0 // the first item not yet claimed by a prompt
		for _, s := range bt.Seqs {
			if int(s.Len)*sh.groups <= sh.smallRows {
				continue
			}
			end, past := s.Start+s.Len, s.Past+s.Len
			for end > s.Start {
				if next >= got.nL {
					t.Fatalf("prompt at row %d: no item for rows up to %d (items %v)", s.Start, end, items)
				}
				it := items[4*next : 4*next+4]
				if it[0]+it[1] != end || it[3]+it[1] != past || it[2] != s.Slot || it[1] <= 0 {
					t.Fatalf("prompt at row %d (slot %d, past %d, %d tokens): item %d is %v, want one ending at row %d, position %d",
						s.Start, s.Slot, s.Past, s.Len, next, it, end, past)
				}
				end, past = it[0], it[3]
				next++
			}
		}
		if next != got.nL {
			t.Fatalf("%d large items, %d claimed by prompts", got.nL, next)
		}
	}
}

// TestPackBatchReusesMemory: packing into the last iteration's slice
// allocates nothing once it is large enough.
func TestPackBatchReusesMemory(t *testing.T) {
	dst := make([]int32, 0, 256)
	bt := batchOf(seq{0, 0, []int32{1, 2, 3}})
	got, err := packBatch(dst, bt, testShape)
	if err != nil {
		t.Fatal(err)
	}
	if &got.ints[:1][0] != &dst[:1][0] {
		t.Error("packBatch did not pack into dst's memory")
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = packBatch(dst, bt, noItems(testShape)) }); allocs != 0 {
		t.Errorf("%v allocations per batch without attention items", allocs)
	}
}

func noItems(sh packShape) packShape { sh.kv = false; return sh }

// TestPackBatchErrors: a batch SetBatch cannot upload is refused, saying
// why.
func TestPackBatchErrors(t *testing.T) {
	noPicks := testShape
	noPicks.picks, noPicks.pickErr = 0, errors.New("no ArgmaxStart before it")
	fed := func(row, pick int32) *model.Batch {
		b := batchOf(seq{0, 0, []int32{0}}, seq{1, 0, []int32{0}})
		b.Fed = []model.Fed{{Row: row, Pick: pick}}
		return b
	}
	for _, c := range []struct {
		name string
		bt   *model.Batch
		sh   packShape
		want string
	}{
		{"positions", &model.Batch{Tokens: []int32{1, 2}, Positions: []int32{0}, Seqs: []model.Seq{{Len: 2}}}, testShape,
			"batch: 2 tokens, 1 positions"},
		{"gap", &model.Batch{Tokens: []int32{1, 2}, Positions: []int32{0, 1}, Seqs: []model.Seq{{Start: 1, Len: 1}}}, testShape,
			"sequences must cover the tokens in order (sequence at 1 of 1 tokens, expected 0)"},
		{"empty sequence", &model.Batch{Tokens: []int32{1}, Positions: []int32{0}, Seqs: []model.Seq{{Len: 0}}}, testShape,
			"sequences must cover the tokens in order (sequence at 0 of 0 tokens, expected 0)"},
		{"uncovered", &model.Batch{Tokens: []int32{1, 2}, Positions: []int32{0, 1}, Seqs: []model.Seq{{Len: 1}}}, testShape,
			"batch: sequences cover 1 of 2 tokens"},
		{"negative slot", batchOf(seq{-1, 0, []int32{1}}), testShape, "batch: slot -1, positions 0..0: negative"},
		{"slot outside the cache", batchOf(seq{4, 0, []int32{1}}), testShape,
			"batch: slot 4, positions 0..0 outside the KV cache (4 slots x 64)"},
		{"positions outside the cache", batchOf(seq{0, 63, []int32{1, 2}}), testShape,
			"batch: slot 0, positions 63..64 outside the KV cache (4 slots x 64)"},
		{"logit row", &model.Batch{Tokens: []int32{1}, Positions: []int32{0}, Seqs: []model.Seq{{Len: 1}}, LogitRows: []int32{1}}, testShape,
			"batch: logit row 1 of 1 tokens"},
		{"token id", batchOf(seq{0, 0, []int32{3, -4}}), testShape, "batch: token id -4 at row 1"},
		{"fed without picks", fed(0, 0), noPicks, "batch: 1 fed tokens: no ArgmaxStart before it"},
		{"fed pick", fed(1, 2), testShape, "batch: fed token at row 1 from pick 2 (2 tokens, 2 picks)"},
		{"fed row", fed(2, 0), testShape, "batch: fed token at row 2 from pick 0 (2 tokens, 2 picks)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := packBatch(nil, c.bt, c.sh)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	// Without a KV cache slots and positions are not checked against one.
	if _, err := packBatch(nil, batchOf(seq{40, 500, []int32{1}}), noItems(testShape)); err != nil {
		t.Errorf("no cache: %v", err)
	}
}

// TestPrefillKeys checks the mean keys of a batch's prefill sequences
// (prefillKeys): the decode rows and chunks small enough for decode items
// are left out, a chunk counts its cached tokens and its own; and those of
// its decode items (decodeKeys).
func TestPrefillKeys(t *testing.T) {
	var b model.Batch
	if got := prefillKeys(&b, 4, 16); got != 0 {
		t.Errorf("empty batch: %d keys, want 0", got)
	}
	b.Add(0, 100, make([]int32, 1), true)      // decode: 4 rows
	b.Add(1, 0, make([]int32, 4), true)        // 16 rows: a decode item still
	b.Add(2, 12288, make([]int32, 8192), true) // 20,480 keys
	b.Add(3, 0, make([]int32, 2048), true)     // 2,048 keys
	if got, want := prefillKeys(&b, 4, 16), (20480+2048)/2; got != want {
		t.Errorf("prefillKeys = %d, want %d", got, want)
	}
	// decodeKeys takes the other two: the decode row's 101 keys and the
	// 4-token chunk's 4.
	if got, want := decodeKeys(&b, 4, 16), (101+4)/2; got != want {
		t.Errorf("decodeKeys = %d, want %d", got, want)
	}
	var p model.Batch
	p.Add(0, 0, make([]int32, 2048), true)
	if got := decodeKeys(&p, 4, 16); got != 0 {
		t.Errorf("decodeKeys of a prompt alone = %d, want 0", got)
	}
}

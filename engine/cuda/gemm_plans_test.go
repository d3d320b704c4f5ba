//go:build cgo && linux

package cuda

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

var updatePlans = flag.Bool("update", false, "rewrite testdata/tma_plans.golden")

// h100PlanGPU is a GPU for the planner alone (no device): an H100's 132
// multiprocessors and its driver's places for clusters (h100Slots), the
// TMA kernels on and the switches at their defaults.
func h100PlanGPU() *GPU {
	sw := model.Switches{CUDAWgmma: true, CUDAWgmmaFP8: true, CUDAWgmmaTile: "auto", CUDAGemmTMA: "auto", CUDAGemmPersist: true, CUDAGemmMulticast: true}
	g := &GPU{Info: DeviceInfo{Name: "NVIDIA H100 80GB HBM3", Major: 9, SMs: 132}, tma: true, launchEx: true, sw: sw, tmaSlotsSeen: map[tmaSlotsKey]int{}}
	for _, c := range tmaConfigs {
		for s := 2; s <= tmaMaxCluster; s++ {
			for _, fp8 := range []bool{false, true} {
				g.tmaSlotsSeen[tmaSlotsKey{c.name, fp8, s}] = h100Slots(c, s)
			}
		}
	}
	return g
}

// TestTMAPlansGolden pins the own GEMM's plan for every full-size zoo GEMM
// at decode and prefill sizes on an H100's 132 multiprocessors (the
// switches at their defaults, the places of clusters as an H100's or H200's
// driver counts them, h100Slots: uniform places had hidden a split of
// Qwen3-30B-A3B's qkv that those GPUs took at M = 192): the tile, the split
// of K, persistent blocks, and whether the TMA kernels run it, for 16-bit
// values and E4M3 codes. A change to the planner or its costs shows in
// review as a diff of testdata/tma_plans.golden, shape by shape (go test
// -run TestTMAPlansGolden -update rewrites it), so that the GEMMs it moves
// are the ones a GPU then times (BenchmarkGemm names them model-gemm).
func TestTMAPlansGolden(t *testing.T) {
	g := h100PlanGPU()
	plan := func(m, n, k int, fp8 bool) string {
		p, ok := g.tmaPlanFor(m, n, k, fp8)
		s := p.String()
		if !ok {
			s += " cp.async"
		}
		return s
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "# shape N K: at each M, the 16-bit plan | the E4M3 plan")
	fmt.Fprintln(&b, "# on an H100's 132 multiprocessors, its driver's places for clusters of 2-8 (h100Slots)")
	fmt.Fprintln(&b, "# tile (tmaConfigs), /S: K split S ways, xB: B persistent blocks, mc: W multicast to pairs of row tiles,")
	fmt.Fprintln(&b, "# cp.async: not on the TMA kernels")
	ms := []int{17, 33, 64, 65, 96, 128, 136, 144, 160, 176, 192, 208, 224, 256, 300, 384, 512, 768, 1024, 2048, 8192}
	for _, sh := range zooGemmShapes {
		if strings.HasPrefix(sh.name, "tiny-") {
			continue
		}
		fmt.Fprintf(&b, "%s N=%d K=%d\n", sh.name, sh.n, sh.k)
		for _, m := range ms {
			fmt.Fprintf(&b, "  M=%-5d %-16s | %s\n", m, plan(m, sh.n, sh.k, false), plan(m, sh.n, sh.k, true))
		}
	}
	path := filepath.Join("testdata", "tma_plans.golden")
	if *updatePlans {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestTMAPlansGolden -update writes it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d: got %q, want %q", i+1, g, w)
			}
		}
		t.Log("a deliberate planner change: go test -run TestTMAPlansGolden -update")
	}
}

// TestNarrowCluster: a 64 x 96 plan (wg1m or p1m) unsplit in two or four
// row tiles over at least tmaClusterMinKTiles k-tiles runs in clusters of
// its column tiles' row tiles, in four row tiles first in clusters of two
// column tiles too, where they fit one round (whole clusters); no other
// plan, split, row count or shorter K moves.
func TestNarrowCluster(t *testing.T) {
	// places: the places for clusters of up to four blocks, places8 for
	// clusters of eight.
	slots := func(places, places8 int) func(tmaConfig, int) int {
		return func(_ tmaConfig, s int) int {
			if s == 8 {
				return places8
			}
			return places
		}
	}
	plan := func(name string, s, kt int) tmaPlan { return tmaPlan{cfg: tmaConfigs[name], splits: s, kps: kt} }
	for _, c := range []struct {
		p               tmaPlan
		m, n            int
		places, places8 int
		want            string // "": p stays
		comment         string
	}{
		{plan("wg1m", 1, 64), 128, 6144, 132, 0, "p1mc21", "Llama-3.1-8B's qkv at 128"},
		{plan("wg1m", 1, 64), 65, 6144, 132, 0, "p1mc21", "two row tiles, the second of one row"},
		{plan("p1m", 1, 45), 112, 5120, 132, 0, "p1mc21", "GPT-OSS-20B's qkv (K 2,880)"},
		{plan("wg1m", 1, 64), 256, 2880, 120, 120, "p1mc42", "GPT-OSS-20B's o at 256: 120 blocks, 120 places in eights"},
		{plan("wg1m", 1, 64), 256, 2880, 120, 112, "p1mc41", "eights do not fit one round, fours do"},
		{plan("wg1m", 1, 64), 256, 2976, 124, 124, "p1mc41", "31 column tiles: eights launch 128 blocks, fours 124"},
		{plan("wg1m", 1, 64), 256, 2880, 116, 112, "", "its clusters do not fit one round"},
		{plan("p1m", 1, 32), 128, 5120, 132, 132, "p1mc21", "Qwen3-30B-A3B's qkv at 128: two row tiles from 32 k-tiles"},
		{plan("wg1m", 1, 31), 128, 6144, 132, 132, "", "31 k-tiles"},
		{plan("wg1m", 1, 32), 256, 2048, 132, 132, "", "four row tiles of 32 k-tiles"},
		{plan("wg1m", 1, 64), 160, 2880, 132, 132, "", "three row tiles"},
		{plan("wg1m", 1, 64), 64, 2880, 132, 132, "", "one row tile"},
		{plan("p1m", 2, 32), 128, 2880, 132, 132, "", "K split"},
		{plan("wg1n", 1, 64), 128, 2560, 132, 132, "", "64 x 80"},
		{plan("wg2", 1, 64), 256, 2880, 132, 132, "", "128-row tiles"},
	} {
		q, ok := narrowCluster(c.p, c.m, c.n, slots(c.places, c.places8))
		got := ""
		if ok {
			got = q.cfg.name
			if q.splits != 1 || q.kps != c.p.kps {
				t.Errorf("%s: %+v, want K unsplit over %d k-tiles", c.comment, q, c.p.kps)
			}
		}
		if got != c.want {
			t.Errorf("%s: narrowCluster(%s, M=%d, N=%d) = %q, want %q", c.comment, c.p, c.m, c.n, got, c.want)
		}
	}
}

// TestKPWide: at 129-256 rows a 16-bit plan on a one-consumer narrow tile
// (wg1n, wg1m) unsplit, or on 128-row tiles splitting K, moves to 64 x 96
// on alternating consumers unsplit where its tiles make one round and
// each block streams at most tmaKPWideMaxKTiles; nothing else moves.
func TestKPWide(t *testing.T) {
	slots := func(places int) func(tmaConfig, int) int {
		return func(tmaConfig, int) int { return places }
	}
	plan := func(name string, s, kt int) tmaPlan { return tmaPlan{cfg: tmaConfigs[name], splits: s, kps: kt} }
	for _, c := range []struct {
		p       tmaPlan
		m, n, k int
		places  int
		move    bool
		comment string
	}{
		{plan("wg1n", 1, 32), 256, 2560, 2048, 132, true, "TinyLlama's qkv at 256: 108 tiles"},
		{plan("wg1m", 1, 32), 256, 3072, 2048, 132, true, "Llama-3.2-1B's qkv at 256: 128 tiles"},
		{plan("wg1n", 1, 32), 160, 3072, 2048, 132, true, "Llama-3.2-1B's qkv at 160: 96 tiles"},
		{plan("wg2", 3, 22), 256, 2048, 4096, 132, true, "Qwen3-30B-A3B's o at 256, 128 x 128 split three ways"},
		{plan("wg2", 3, 30), 256, 2048, 5632, 132, false, "TinyLlama's down: 88 k-tiles a block"},
		{plan("wg2", 2, 32), 256, 4096, 4096, 132, false, "Llama-3.1-8B's o: 172 tiles, two rounds"},
		{plan("wg1n", 1, 32), 256, 2560, 2048, 100, false, "108 tiles, 100 places"},
		{plan("wg1n", 1, 32), 128, 2560, 2048, 132, false, "two row tiles (kpPlan's)"},
		{plan("wg1n", 1, 32), 320, 2560, 2048, 132, false, "past tmaSmallRows"},
		{plan("wg1s", 1, 32), 256, 2048, 2048, 132, false, "64 x 64 (h1s)"},
		{plan("wg1n", 2, 16), 256, 2560, 2048, 132, false, "a narrow tile splitting K"},
		{plan("wg2", 1, 32), 256, 2560, 2048, 132, false, "128-row tiles unsplit"},
		{plan("s2x48", 2, 16), 192, 2048, 2048, 132, false, "swapped tiles"},
	} {
		q, ok := kpWide(c.p, c.m, c.n, c.k, slots(c.places))
		if ok != c.move {
			t.Errorf("%s: kpWide(%s, M=%d, N=%d, K=%d) moves %v, want %v", c.comment, c.p, c.m, c.n, c.k, ok, c.move)
		}
		if ok && (q.cfg.name != "p1m" || q.splits != 1 || q.kps != ceilDiv(c.k, 64)) {
			t.Errorf("%s: %+v, want p1m unsplit over %d k-tiles", c.comment, q, ceilDiv(c.k, 64))
		}
	}
}

// TestKPCodes: an E4M3 plan of 33-256 rows that splits K on unswapped
// tiles moves to 64 x 64 on alternating consumers, split two ways where
// that stays one round, where its blocks fill at least tmaKPCodesFill of
// the round and stream at most tmaKPCodesMaxKTiles k-tiles each; no
// 16-bit plan, unsplit plan, swapped tile, or row count outside moves.
func TestKPCodes(t *testing.T) {
	plan := func(name string, s, kt int) tmaPlan { return tmaPlan{cfg: tmaConfigs[name], splits: s, kps: kt} }
	for _, c := range []struct {
		p       tmaPlan
		m, n, k int
		fp8     bool
		splits  int // 0: no move
		comment string
	}{
		{plan("wg2", 6, 8), 128, 2048, 5632, true, 2, "TinyLlama's down at 128: 128 blocks of 22 k-tiles"},
		{plan("wg2", 3, 15), 256, 2048, 5632, true, 1, "TinyLlama's down at 256: 128 blocks of 44 unsplit"},
		{plan("wg2", 3, 22), 256, 2048, 8192, true, 1, "Llama-3.2-1B's down at 256: 64 k-tiles a block"},
		{plan("wg1d", 4, 8), 64, 2880, 4096, true, 2, "GPT-OSS-20B's o at 64: 90 blocks"},
		{plan("wg1d", 6, 6), 64, 2048, 5632, true, 2, "TinyLlama's down at 64: 64 blocks, 0.48 of the round"},
		{plan("wg1d", 3, 38), 48, 4096, 14336, true, 2, "Llama-3.1-8B's down at 48: 128 blocks of 56"},
		{plan("wg2", 3, 38), 128, 4096, 14336, true, 0, "Llama-3.1-8B's down at 128: 112 k-tiles a block"},
		{plan("wg2", 2, 16), 256, 4096, 4096, true, 0, "Llama-3.1-8B's o at 256: 256 tiles, two rounds"},
		{plan("wg1d", 6, 6), 64, 1024, 5632, true, 0, "32 blocks: a quarter of the round"},
		{plan("wg1d", 6, 6), 32, 2048, 5632, true, 0, "32 rows"},
		{plan("wg2", 3, 15), 320, 2048, 5632, true, 0, "past tmaSmallRows"},
		{plan("wg2", 6, 8), 128, 2048, 5632, false, 0, "16-bit values (kpPlan's)"},
		{plan("wg2", 1, 44), 256, 2048, 5632, true, 0, "K unsplit"},
		{plan("s2x48", 2, 22), 192, 2048, 5632, true, 0, "swapped tiles"},
	} {
		split := func(cfg tmaConfig) tmaPlan { return splitGemmTMA(cfg, c.m, c.n, c.k, 132, h100Slots, true, 0) }
		q, ok := kpCodes(c.p, c.m, c.n, c.fp8, split, h100Slots)
		if ok != (c.splits > 0) {
			t.Errorf("%s: kpCodes(%s, M=%d, N=%d, K=%d) moves %v", c.comment, c.p, c.m, c.n, c.k, ok)
			continue
		}
		if kt := ceilDiv(c.k, 128); ok && (q.cfg.name != "p1s" || q.splits != c.splits || q.kps != ceilDiv(kt, c.splits)) {
			t.Errorf("%s: %s, want p1s split %d ways", c.comment, q, c.splits)
		}
	}
}

// TestWidePlan: a GEMM of 193-208 rows, 16-bit or E4M3, goes on 128 rows
// of W by all of X's (s2x208), K unsplit, where its tiles fill a round of
// places at least tmaWideFill or outnumber them, then on persistent blocks;
// else 16-bit values on 192 rows of W by 104 of X (s3x104) where its
// blocks make one round at least tmaWideSplitFill full; planGemmTMA takes
// it unless XRUN_CUDA_GEMM_WAVES sets the splits.
func TestWidePlan(t *testing.T) {
	checkPastRowsRule(t, "widePlan", widePlan, []pastRowsCase{
		{208, 128256, 4096, "s2x208", "s2x208", true, "Llama-3.1-8B's LM head: 1,002 tiles"},
		{193, 32000, 2048, "s2x200", "s2x200", true, "TinyLlama's LM head: 250 tiles, one row tile of 200"},
		{200, 28672, 4096, "s2x200", "s2x200", true, "Llama-3.1-8B's gate_up: 224 tiles"},
		{201, 28672, 4096, "s2x208", "s2x208", true, "Llama-3.1-8B's gate_up past 200 rows"},
		{200, 16384, 2048, "s2x200", "", false, "Llama-3.2-1B's gate_up at 200"},
		{208, 16384, 2048, "s2x208", "", false, "Llama-3.2-1B's gate_up: 128 tiles, 0.97 of the round; E4M3 codes only persistent"},
		{208, 11264, 2048, "s3x104", "", false, "TinyLlama's gate_up: 88 tiles of s2x208, 118 blocks of s3x104"},
		{208, 6144, 4096, "", "", false, "Llama-3.1-8B's qkv: 48 tiles, 64 blocks"},
		{192, 128256, 4096, "", "", false, "one row tile of 192 (wg3's)"},
		{209, 128256, 4096, "s2x224", "s2x224", true, "Llama-3.1-8B's LM head at 209: one row tile of 224"},
		{224, 16384, 2048, "s2x224", "", false, "Llama-3.2-1B's gate_up at 224: 128 tiles"},
		{216, 11264, 2048, "", "", false, "TinyLlama's gate_up at 216: s3x104 up to 208 rows"},
		{225, 128256, 4096, "", "", false, "two row tiles of s2x224"},
	})
}

// TestThirdsPlan: at 193-216 rows, where widePlan takes none, 16-bit
// values go on s2x72 unsplit where its tiles make one round at least
// tmaPairFill full, else on p1x72 unsplit where its blocks make one round
// at least tmaRoundFillRagged full over 33-64 k-tiles; E4M3 codes on
// persistent s2x72 where its tiles fill at most two rounds at least
// tmaWideFill. XRUN_CUDA_GEMM_WAVES keeps the split plans.
func TestThirdsPlan(t *testing.T) {
	thirds := func(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool) {
		_, wide := widePlan(m, n, k, fp8, slots)
		q, ok := thirdsPlan(m, n, k, fp8, slots)
		return q, ok && !wide
	}
	checkPastRowsRule(t, "thirdsPlan where widePlan takes none", thirds, []pastRowsCase{
		{200, 5120, 2880, "s2x72", "", false, "GPT-OSS-20B's qkv: 120 tiles"},
		{216, 5120, 2048, "s2x72", "", false, "Qwen3-30B-A3B's qkv at 216: three row tiles"},
		{193, 2048, 4096, "p1x72", "", false, "Qwen3-30B-A3B's o: 96 blocks of 64 k-tiles"},
		{208, 11264, 2048, "", "s2x72", true, "TinyLlama's gate_up: 264 tiles, two rounds (16-bit: s3x104, widePlan)"},
		{208, 16384, 2048, "", "", false, "Llama-3.2-1B's gate_up: 384 tiles, 2.9 rounds (16-bit: s2x208, widePlan)"},
		{216, 128256, 4096, "", "", false, "Llama-3.1-8B's LM head at 216: 23 rounds"},
		{208, 2880, 4096, "", "", false, "GPT-OSS-20B's o: 135 blocks of p1x72, two rounds"},
		{208, 2048, 2048, "", "", false, "TinyLlama's o: 32 k-tiles"},
		{208, 2048, 5632, "", "", false, "TinyLlama's down: 88 k-tiles"},
		{208, 6144, 4096, "", "", false, "Llama-3.1-8B's qkv: 144 tiles"},
		{192, 5120, 2880, "", "", false, "one row tile of 192 (wg3's)"},
		{217, 5120, 2880, "", "", false, "four row tiles of 72"},
	})
}

// TestTwoRowsPlan: at 193-224 rows the 16-bit plans of 64 x 96 in
// clusters (narrowCluster's) go to p1x112c21 where its clusters fill one
// round at least tmaRoundFillRagged; nothing else does.
func TestTwoRowsPlan(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		want    string
		comment string
	}{
		{193, 2880, 4096, "p1x112c21", "GPT-OSS-20B's o: 90 blocks"},
		{208, 2880, 4096, "p1x112c21", "GPT-OSS-20B's o at 208"},
		{224, 2880, 4096, "p1x112c21", "GPT-OSS-20B's o at 224"},
		{224, 2048, 4096, "p1mc42", "Qwen3-30B-A3B's o at 224: 64 blocks, under tmaRoundFillRagged"},
		{232, 2880, 4096, "p1mc42", "GPT-OSS-20B's o at 232: three row tiles of 112"},
		{192, 2880, 4096, "wg3", "GPT-OSS-20B's o at 192: one row tile of 192"},
		{208, 4096, 4096, "w2x64", "Llama-3.1-8B's o: pairPlan's"},
	} {
		p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), false, "auto", 0)
		if p.cfg.name != c.want || p.splits != 1 && c.want != "wg3" {
			t.Errorf("%s: planned %s, want %s", c.comment, p, c.want)
		}
		if f := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), true, "auto", 0); f.cfg.name == "p1x112c21" {
			t.Errorf("%s, E4M3: planned %s", c.comment, f)
		}
	}
	q := tmaPlan{cfg: tmaConfigs["p1mc42"], splits: 1, kps: 64}
	if p, ok := twoRowsPlan(q, 216, 2880, h100Slots); !ok || p.cfg.name != "p1x112c21" || p.kps != 64 || p.splits != 1 {
		t.Errorf("twoRowsPlan(p1mc42, 216 x 2880) = %s, %v", p, ok)
	}
	for _, name := range []string{"p1m", "wg1m", "w2x64"} {
		if p, ok := twoRowsPlan(tmaPlan{cfg: tmaConfigs[name], splits: 1, kps: 64}, 216, 2880, h100Slots); ok {
			t.Errorf("twoRowsPlan(%s) = %s, want none: not narrowCluster's", name, p)
		}
	}
}

// unsplitCase is a GEMM of m x n over k and the tile the planner takes
// for it, K unsplit, for 16-bit values (want) and E4M3 codes (f8).
type unsplitCase struct {
	m, n, k  int
	want, f8 string
	comment  string
}

// checkUnsplitPlans checks each case's plans on an H100's places, then
// hands each plan to also, where it is not nil.
func checkUnsplitPlans(t *testing.T, cases []unsplitCase, also func(c unsplitCase, p tmaPlan, fp8 bool)) {
	t.Helper()
	for _, c := range cases {
		for _, fp8 := range []bool{false, true} {
			want := c.want
			if fp8 {
				want = c.f8
			}
			p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), fp8, "auto", 0)
			if p.cfg.name != want || p.splits != 1 {
				t.Errorf("%s, fp8 %v: planned %s, want %s unsplit", c.comment, fp8, p, want)
			}
			if also != nil {
				also(c, p, fp8)
			}
		}
	}
}

// TestRoundPlan: above tmaSmallRows up to tmaRoundRows, the planner takes
// the tile of 128 rows of X whose unsplit tiles make one round of places
// at the least cost, for both dtypes, and leaves plans that split K only
// where no such tile costs less (NOTES v71's sweep at M = 384-1,024).
func TestRoundPlan(t *testing.T) {
	checkUnsplitPlans(t, []unsplitCase{
		{512, 2048, 2048, "w2x64", "w2x64", "TinyLlama's o: 128 tiles, where 128 x 128 split two ways"},
		{512, 2560, 2048, "w2x80", "w2x80", "TinyLlama's qkv: 128 tiles"},
		{384, 2560, 2048, "w2x64", "w2x64", "TinyLlama's qkv at 384: three row tiles, 120"},
		{512, 2880, 4096, "w2x96", "w2x96", "GPT-OSS-20B's o: 120 tiles"},
		{512, 6144, 4096, "wg2m", "wg2m", "Llama-3.1-8B's qkv: 128 tiles of 128 x 192, E4M3 codes in place of 128 x 128's two rounds"},
		{512, 5120, 2048, "wg2f", "wg2f", "Qwen3-30B-A3B's qkv: 120 tiles of 128 x 176"},
		{768, 2880, 4096, "wg2f", "wg2f", "GPT-OSS-20B's o at 768: 102 tiles of 128 x 176"},
		{1024, 4096, 14336, "wg2w", "wg2w", "Llama-3.1-8B's down at 1,024: 128 tiles of 128 x 256"},
		{512, 4096, 4096, "wg2", "wg2", "Llama-3.1-8B's o: 128 x 128 already one round unsplit"},
		{1024, 5120, 2880, "wg2m", "wg2", "GPT-OSS-20B's qkv at 1,024: no tile in one round"},
		{256, 2048, 2048, "h1s", "wg1s", "TinyLlama's o at 256: a decode batch, the rules below"},
		{2048, 2048, 2048, "wg2w", "wg2", "TinyLlama's o at 2,048: above tmaRoundRows"},
	}, func(c unsplitCase, p tmaPlan, fp8 bool) {
		if q, ok := roundPlan(p, c.m, c.n, c.k, fp8, h100Slots); ok {
			t.Errorf("%s, fp8 %v: roundPlan moves the plan %s again, to %s", c.comment, fp8, p, q)
		}
	})
	// A plan that splits K moves; one that costs less than every tile in
	// one round does not.
	split := tmaPlan{cfg: tmaConfigs["wg2"], splits: 2, kps: 16}
	if p, ok := roundPlan(split, 512, 2048, 2048, false, h100Slots); !ok || p.cfg.name != "w2x64" || p.splits != 1 || p.kps != 32 {
		t.Errorf("roundPlan(wg2/2, 512 x 2048) = %s, %v; want w2x64 over 32 k-tiles", p, ok)
	}
	if p, ok := roundPlan(tmaPlan{cfg: tmaConfigs["w2x64"], splits: 1, kps: 32}, 512, 2048, 2048, false, h100Slots); ok {
		t.Errorf("roundPlan(w2x64, 512 x 2048) moved to %s", p)
	}
}

// TestRows160Plan: at 257-320 rows, two row tiles of s2x160 in place of
// three of 128 where those run on persistent blocks or cost more; the
// plans of one round keep theirs (NOTES v71's sweep at M = 272 and 300).
func TestRows160Plan(t *testing.T) {
	checkUnsplitPlans(t, []unsplitCase{
		{300, 32000, 2048, "s2x160", "s2x160", "TinyLlama's LM head: 128 x 256 persistent"},
		{257, 128256, 4096, "s2x160", "s2x160", "Llama-3.1-8B's LM head at 257"},
		{320, 16384, 2048, "s2x160", "s2x160", "Llama-3.2-1B's gate_up at 320: two full row tiles"},
		{300, 6144, 4096, "s2x160", "s2x160", "Llama-3.1-8B's qkv: 96 tiles cost less than 128 x 176's 105"},
		{300, 11264, 2048, "wg2w", "wg2w", "TinyLlama's gate_up: one round of 128 x 256"},
		{300, 2048, 2048, "w2x64", "w2x64", "TinyLlama's o: one round of 128 x 64"},
		{321, 32000, 2048, "wg2w", "wg2w", "TinyLlama's LM head at 321: three row tiles of 160"},
		{256, 32000, 2048, "wg2w", "wg2w", "TinyLlama's LM head at 256: two row tiles of 128 already"},
	}, nil)
	if p, ok := rows160Plan(tmaPlan{cfg: tmaConfigs["s2x72"], splits: 1, kps: 32}, 300, 32000, 2048, false, h100Slots); ok {
		t.Errorf("rows160Plan moved a swapped plan to %s", p)
	}
}

// pastRowsCase is a GEMM of m x n over k and the tile a rule of
// pastRowsPlan takes for it, 16-bit (want) and E4M3 (f8), "" for none;
// persisted: planned on persistent blocks.
type pastRowsCase struct {
	m, n, k   int
	want, f8  string
	persisted bool
	comment   string
}

// checkPastRowsRule checks rule on each case, that planGemmTMA takes its
// tile unsplit, persistent or not as the case says, and that with
// XRUN_CUDA_GEMM_WAVES set it does not.
func checkPastRowsRule(t *testing.T, name string, rule func(m, n, k int, fp8 bool, slots func(tmaConfig, int) int) (tmaPlan, bool), cases []pastRowsCase) {
	t.Helper()
	for _, c := range cases {
		for _, fp8 := range []bool{false, true} {
			want := c.want
			if fp8 {
				want = c.f8
			}
			q, ok := rule(c.m, c.n, c.k, fp8, h100Slots)
			if ok != (want != "") || ok && (q.cfg.name != want || q.splits != 1 || q.kps != ceilDiv(c.k, tmaKTile(fp8))) {
				t.Errorf("%s, fp8 %v: %s(M=%d, N=%d, K=%d) = %s, %v; want %q unsplit", c.comment, fp8, name, c.m, c.n, c.k, q, ok, want)
			}
			if !ok {
				continue
			}
			p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), fp8, "auto", 0)
			if p = p.persist(c.m, c.n, h100Slots(p.cfg, 1)); p.cfg.name != want || (p.blocks > 0) != c.persisted {
				t.Errorf("%s, fp8 %v: planned %s, want %s, persistent %v", c.comment, fp8, p, want, c.persisted)
			}
			if p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), fp8, "auto", 1); p.cfg.name == want && p.splits == 1 {
				t.Errorf("%s, fp8 %v, waves 1: planned %s", c.comment, fp8, p)
			}
		}
	}
}

// TestWideSplit: at 193-208 rows a 16-bit plan that splits K on a 128-row
// tile goes onto s2x104 at its own split; E4M3 codes, unsplit plans,
// swapped ones and other rows stay, and planGemmTMA moves the downs
// unless XRUN_CUDA_GEMM_WAVES sets the splits.
func TestWideSplit(t *testing.T) {
	d := h100Device(h100Slots)
	for _, c := range []struct {
		m, n, k int
		move    bool
		comment string
	}{
		{208, 2048, 5632, true, "TinyLlama's down"},
		{193, 2048, 8192, true, "Llama-3.2-1B's down"},
		{200, 4096, 14336, true, "Llama-3.1-8B's down"},
		{192, 2048, 5632, false, "one row tile of 192"},
		{209, 2048, 5632, false, "past s2x208's rows"},
	} {
		split := func(cfg tmaConfig) tmaPlan { return splitGemmTMA(cfg, c.m, c.n, c.k, d.sms, h100Slots, false, 0) }
		p := split(tmaConfigs["wg2"])
		if p.splits == 1 {
			t.Fatalf("%s: wg2 unsplit at M=%d", c.comment, c.m)
		}
		q := wideSplit(p, c.m, false, split)
		if moved := q.cfg.name == "s2x104"; moved != c.move || moved && q.splits < 2 {
			t.Errorf("%s: wideSplit(%s, M=%d) = %s, want moved %v, split", c.comment, p, c.m, q, c.move)
		}
		if q := wideSplit(p, c.m, true, split); q != p {
			t.Errorf("%s, E4M3: wideSplit moved %s to %s", c.comment, p, q)
		}
		if q := wideSplit(split(tmaConfigs["s2x48"]), c.m, false, split); q.cfg.name != "s2x48" {
			t.Errorf("%s: a swapped plan moved to %s", c.comment, q)
		}
		if c.move {
			if got := planGemmTMA(c.m, c.n, c.k, d, false, "auto", 0); got.cfg.name != "s2x104" {
				t.Errorf("%s: planned %s, want s2x104", c.comment, got)
			}
			if got := planGemmTMA(c.m, c.n, c.k, d, false, "auto", 1); got.cfg.name == "s2x104" {
				t.Errorf("%s, waves 1: planned %s", c.comment, got)
			}
		}
	}
	unsplit := tmaPlan{cfg: tmaConfigs["wg2"], splits: 1, kps: 32}
	if q := wideSplit(unsplit, 208, false, func(tmaConfig) tmaPlan { return tmaPlan{} }); q != unsplit {
		t.Errorf("an unsplit plan moved to %s", q)
	}
}

// TestPairPlan: a GEMM of 193-256 rows, 16-bit or E4M3, over K of at most
// tmaPairMaxK goes on 128 rows of X by 64 of W where those tiles make one
// round of places, else by 96 where those do, K unsplit, the round at
// least tmaPairFill full; planGemmTMA takes it, W not multicast, unless
// XRUN_CUDA_GEMM_WAVES sets the splits.
func TestPairPlan(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		want    string // "": no move
		comment string
	}{
		{256, 4096, 4096, "w2x64", "Llama-3.1-8B's o at 256: 128 tiles"},
		{256, 6144, 4096, "w2x96", "Llama-3.1-8B's qkv at 256: 128 tiles (w2x64 192)"},
		{240, 5120, 2880, "w2x96", "GPT-OSS-20B's qkv at 240: 108 tiles (w2x64 160)"},
		{224, 5120, 2048, "w2x96", "Qwen3-30B-A3B's qkv at 224"},
		{256, 2880, 4096, "", "GPT-OSS-20B's o: 90 tiles of w2x64, 0.68 of the round"},
		{256, 2048, 5632, "", "TinyLlama's down: K past tmaPairMaxK"},
		{256, 4096, 14336, "", "Llama-3.1-8B's down: K past tmaPairMaxK"},
		{256, 28672, 4096, "", "Llama-3.1-8B's gate_up: no round"},
		{192, 4096, 4096, "", "one row tile of 192 (wg3's)"},
		{320, 4096, 4096, "", "past tmaSmallRows"},
	} {
		for _, fp8 := range []bool{false, true} {
			q, ok := pairPlan(c.m, c.n, c.k, fp8, h100Slots)
			if ok != (c.want != "") || ok && (q.cfg.name != c.want || q.splits != 1 || q.kps != ceilDiv(c.k, tmaKTile(fp8))) {
				t.Errorf("%s, fp8 %v: pairPlan(M=%d, N=%d, K=%d) = %s, %v; want %q unsplit", c.comment, fp8, c.m, c.n, c.k, q, ok, c.want)
			}
			if !ok {
				continue
			}
			p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), fp8, "auto", 0)
			if p = p.withMulticast(c.m, h100Slots(p.cfg, 2), fp8); p.cfg.name != c.want || p.mc {
				t.Errorf("%s, fp8 %v: planned %s, want %s without multicast", c.comment, fp8, p, c.want)
			}
			// XRUN_CUDA_GEMM_WAVES sets the splits: not the unsplit pair.
			if p := planGemmTMA(c.m, c.n, c.k, h100Device(h100Slots), fp8, "auto", 1); p.cfg.name == c.want && p.splits == 1 {
				t.Errorf("%s, fp8 %v, waves 1: planned %s", c.comment, fp8, p)
			}
		}
	}
}

// TestTMAPlanInvariants: at every M from 1 to 2,048 (and prefill chunks
// of 3,000-8,192) on every zoo shape,
// both dtypes, the plan that runs on the TMA kernels (an H100's places) is
// a tile of tmaConfigs, splits K into non-empty shares a cluster can hold,
// fits a multiprocessor's shared memory, runs persistent only where the
// tile has persistent kernels and K is unsplit, and makes a grid of whole
// clusters: the rules planGemmTMA layers by M range meet at their edges
// without a plan the GPU would refuse.
func TestTMAPlanInvariants(t *testing.T) {
	g := h100PlanGPU()
	var ms []int
	for m := 1; m <= 2048; m++ {
		ms = append(ms, m)
	}
	ms = append(ms, 3000, 4096, 8191, 8192)
	for _, sh := range zooGemmShapes {
		for _, fp8 := range []bool{false, true} {
			kt := ceilDiv(sh.k, tmaKTile(fp8))
			bad := 0
			for _, m := range ms {
				if bad >= 3 {
					break
				}
				p, on := g.tmaPlanFor(m, sh.n, sh.k, fp8)
				if !on {
					continue // wg1's split on the cp.async kernels
				}
				fail := func(format string, args ...any) {
					bad++
					t.Errorf("%s fp8 %v M=%d, plan %s: %s", sh.name, fp8, m, p, fmt.Sprintf(format, args...))
				}
				if c, ok := tmaConfigs[p.cfg.name]; !ok || c != p.cfg {
					fail("not a tile of tmaConfigs")
					continue
				}
				if p.splits < 1 || p.splits > tmaMaxCluster || p.kps < 1 || p.kps*p.splits < kt || p.kps*(p.splits-1) >= kt {
					fail("%d splits of %d k-tiles do not share %d k-tiles, none empty, in a cluster of at most %d", p.splits, p.kps, kt, tmaMaxCluster)
				}
				if sm := p.smem() * p.cfg.perSM; sm > 227<<10 {
					fail("%d blocks of %d bytes of shared memory", p.cfg.perSM, p.smem())
				}
				if p.blocks > 0 && (!tmaPersist[p.cfg.name] || p.splits != 1 || p.blocks > p.cfg.tiles(m, sh.n)) {
					fail("%d persistent blocks", p.blocks)
				}
				grid, err := p.grid(m, sh.n, p.cfg.bn)
				cl := p.cluster()
				switch {
				case err != nil:
					fail("grid: %v", err)
				case grid.X%cl.X != 0 || grid.Y%cl.Y != 0 || grid.Z%cl.Z != 0:
					fail("grid %+v is not whole clusters of %+v", grid, cl)
				case p.blocks == 0 && grid.X*grid.Y < p.cfg.tiles(m, sh.n):
					fail("grid %+v does not cover %d tiles", grid, p.cfg.tiles(m, sh.n))
				}
			}
		}
	}
}

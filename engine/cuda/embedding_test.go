//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
)

// refEmbedding is the float32 reference of kernels/embedding.cu (the CPU
// backend's Embed is the same gather, with no reference function of its own).
func refEmbedding(table []float32, ids []int32, hidden int) []float32 {
	out := make([]float32, 0, len(ids)*hidden)
	for _, id := range ids {
		out = append(out, table[int(id)*hidden:(int(id)+1)*hidden]...)
	}
	return out
}

func TestEmbedding(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct{ tokens, hidden, vocab int }{{1, 64, 512}, {7, 2048, 32000}, {300, 256, 2048}} {
			t.Run(fmt.Sprintf("%s/T%d_H%d_V%d", dt, c.tokens, c.hidden, c.vocab), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					table := randVals(r, dt, c.vocab*c.hidden, 1)
					ids := make([]int32, c.tokens)
					for i := range ids {
						ids[i] = int32(r.IntN(c.vocab))
					}
					out := devPoisoned(t, g, dt, c.tokens*c.hidden)
					if err := g.Embedding(g.Stream, dt, out, devUpload(t, g, dt, table), devUploadT(t, g, ids), c.tokens, c.hidden, c.vocab); err != nil {
						t.Fatal(err)
					}
					got := download(t, g, dt, out, c.tokens*c.hidden)
					if e := cpu.RelErr(got, refEmbedding(table, ids, c.hidden)); e != 0 {
						t.Errorf("a gather must be exact; relative error %g", e)
					}

					// The same ids with every other one fed from a device
					// array of picks (-1 - j stands for picks[j]).
					picks := make([]int32, 0, c.tokens)
					coded := append([]int32(nil), ids...)
					for i := 0; i < c.tokens; i += 2 {
						coded[i] = -1 - int32(len(picks))
						picks = append(picks, ids[i])
					}
					picks = append(picks, 0) // one pick more than fed: unused
					out = devPoisoned(t, g, dt, c.tokens*c.hidden)
					if err := g.EmbeddingFed(g.Stream, dt, out, devUpload(t, g, dt, table), devUploadT(t, g, coded), devUploadT(t, g, picks), c.tokens, c.hidden, c.vocab); err != nil {
						t.Fatal(err)
					}
					if e := cpu.RelErr(download(t, g, dt, out, c.tokens*c.hidden), refEmbedding(table, ids, c.hidden)); e != 0 {
						t.Errorf("fed ids: a gather must be exact; relative error %g", e)
					}
				})
			})
		}
	}
}

//go:build cgo && linux

package cuda

import (
	"bytes"
	"testing"
)

// TestPrefetchL2 runs the prefetch on a side stream over ranges that end
// in a partial 16 KiB chunk, one of them empty, and checks that it leaves
// the data as it was and that misaligned ranges are refused.
func TestPrefetchL2(t *testing.T) {
	do(t, func(t testing.TB, g *GPU) {
		r := newRand(t)
		data := make([]byte, 3<<20+4112)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		buf := devUploadT(t, g, data)
		side := forkedStream(t, g)
		half := len(data) / 2 &^ 15
		for _, c := range [][2]Buffer{
			{buf.Slice(0, half), buf.Slice(half, len(data)-half)},
			{{}, buf.Slice(16, 16<<10+48)},
			{buf, {}},
		} {
			if err := g.PrefetchL2(side, c[0], c[1]); err != nil {
				t.Fatalf("prefetch of %d and %d bytes: %v", c[0].Bytes, c[1].Bytes, err)
			}
		}
		if err := side.Sync(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if err := DownloadSlice(g.Stream, got, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Error("the prefetch changed the data")
		}
		for _, bad := range [][2]Buffer{{buf.Slice(8, 4096), {}}, {{}, buf.Slice(0, 4100)}} {
			if err := g.PrefetchL2(side, bad[0], bad[1]); err == nil {
				t.Errorf("prefetch of %d bytes at %#x and %d bytes at %#x: no error", bad[0].Bytes, bad[0].Ptr, bad[1].Bytes, bad[1].Ptr)
			}
		}
	})
}

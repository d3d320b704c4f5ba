package results

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// fixtures are the synthetic results directories under testdata/, which
// cmd/xrun's tests and `make benchstat-check` read too.
var fixtures = map[string]func() *Results{
	"gemm":         func() *Results { return gemmStudy().build() },
	"moe":          func() *Results { return moeStudy().build() },
	"nightly-base": func() *Results { return nightly(1, 0).build() },
	"nightly-slow": func() *Results { return nightlySlow().build() },
	"nightly-same": func() *Results { return nightly(3, 0).build() },
	// gemm-profiled-new is the same study after a change to the attention
	// kernel, one cell throttled: xrun diff reports the kernels that
	// changed.
	"gemm-profiled":     func() *Results { return gemmProfiledStudy(420, false) },
	"gemm-profiled-new": func() *Results { return gemmProfiledStudy(421, true) },
	"roofline":          rooflineStudy,
	// roofline-new is the roofline study after a change: xrun diff shows
	// the share of the roofline reached, old and new.
	"roofline-new": rooflineNewStudy,
}

// TestFixtures keeps testdata/<fixture>/results.{json,md} in step with
// the generators, and so also checks WriteDir's bytes.
func TestFixtures(t *testing.T) {
	for name, build := range fixtures {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteDir(dir, build()); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{layout.JSONFile, layout.MarkdownFile} {
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join(name, f), got)
			}
		})
	}
}

func loadFixture(t *testing.T, name string) *Results {
	t.Helper()
	r, _, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package htmlreport

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// largeStudy is gpu-study grown to a nightly's size: its 4 cells at 30
// batch sizes each (120 cells), every one with its cells/<id>/ files.
func largeStudy(b *testing.B) (*results.Results, string) {
	b.Helper()
	src := loadStudy(b, gpuStudyDir)
	dir := b.TempDir()
	r := *src
	r.Cells = nil
	r.Axes = []results.Axis{{Name: "batch_size"}, src.Axes[1]}
	for k := range 30 {
		bs := 16 * (k + 1)
		r.Axes[0].Values = append(r.Axes[0].Values, bs)
		for _, c := range src.Cells {
			n := c
			n.ID = fmt.Sprintf("%s-bs%d", c.ID, bs)
			n.Params = results.Params{}
			for key, v := range c.Params {
				n.Params[key] = v
			}
			n.Params["batch_size"] = bs
			n.Artifacts = nil
			for _, f := range []string{layout.CellFile, layout.TelemetryFile, layout.IterationsFile, layout.ExpertLoadFile} {
				data, err := os.ReadFile(filepath.Join(layout.CellDir(gpuStudyDir, c.ID), f))
				if err != nil {
					b.Fatal(err)
				}
				if err := os.MkdirAll(layout.CellDir(dir, n.ID), 0o755); err != nil {
					b.Fatal(err)
				}
				os.WriteFile(filepath.Join(layout.CellDir(dir, n.ID), f), data, 0o644)
				n.Artifacts = append(n.Artifacts, layout.CellArtifact(n.ID, f))
			}
			r.Cells = append(r.Cells, n)
		}
	}
	return &r, dir
}

// BenchmarkWriteLargeStudy is report.html of a 120-cell study, as the
// runner writes it after every cell.
func BenchmarkWriteLargeStudy(b *testing.B) {
	r, dir := largeStudy(b)
	o := studyOptions(dir)
	for b.Loop() {
		if err := Write(io.Discard, r, o); err != nil {
			b.Fatal(err)
		}
	}
}

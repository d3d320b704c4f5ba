package profile

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
)

// kernelCell is a kernel summary as the results package's kernel diff
// reads it, built as xrun kernels builds it from a cell's kernels.csv:
// complete, since the file lists every kernel of the window. (Only this
// test reads results: the package itself stays below it, see
// TestProfileImports.)
func kernelCell(id string, iterations int, stats []KernelStat) results.KernelCell {
	k := make([]results.Kernel, len(stats))
	for i, s := range stats {
		k[i] = results.Kernel(s)
	}
	return results.KernelCell{ID: id, Iterations: iterations, Kernels: k, Complete: true}
}

// TestDiffGemmPlugin profiles gemm_plugin auto and disable and checks the
// kernel diff (text and Markdown): the plain GEMM replaced by the blocked
// one, the other kernels side by side.
func TestDiffGemmPlugin(t *testing.T) {
	resA, _ := profiledRun(t, "disable")
	resB, _ := profiledRun(t, "auto")
	d := results.DiffKernels(kernelCell("gemm-disable", len(profiledIterations(resA)), Summarize(resA.Ops)),
		kernelCell("gemm-auto", len(profiledIterations(resB)), Summarize(resB.Ops)))
	for _, f := range []string{"text", "markdown"} {
		var b bytes.Buffer
		if err := d.Render(&b, f); err != nil {
			t.Fatal(err)
		}
		golden(t, "diff-gemm."+f, b.Bytes())
	}
	if len(d.Replaced) != 1 || d.Replaced[0].Category != "GEMM" || !slices.Equal(d.Replaced[0].Old, []string{"cpu_gemm_plain"}) ||
		!slices.Equal(d.Replaced[0].New, []string{"cpu_gemm_blocked_6x16"}) {
		t.Errorf("replacements %+v; want the plain GEMM replaced by the blocked one", d.Replaced)
	}
	// Without iteration counts the diff compares totals and says so.
	d = results.DiffKernels(kernelCell("a", 0, Summarize(resA.Ops)), kernelCell("b", 3, Summarize(resB.Ops)))
	var b bytes.Buffer
	if err := d.Render(&b, "text"); err != nil || !strings.Contains(b.String(), "times are window totals") {
		t.Errorf("diff without iteration counts:\n%s (%v)", b.String(), err)
	}
	if err := d.Render(&b, "html"); err == nil {
		t.Error("unknown format accepted")
	}
}

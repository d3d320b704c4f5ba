package profile

import "github.com/xrun-dev/xrun/results"

// CellKernels is one cell's whole kernel summary (its kernels.csv) and how
// many iterations it covers (0 when unknown: times are then compared as
// totals).
type CellKernels struct {
	ID         string
	Iterations int
	Stats      []KernelStat
}

// DiffKernels compares the kernel summaries of two cells with the results
// package's kernel diff, the one results.md and xrun diff use. A summary
// holds every kernel of the window, so a kernel missing from one cell did
// not run there.
func DiffKernels(a, b CellKernels) *results.KernelDiff {
	return results.DiffKernels(a.KernelCell(), b.KernelCell())
}

// KernelCell is the summary as the results package's kernel diff reads
// it: complete, since a kernels.csv lists every kernel of the window.
func (c CellKernels) KernelCell() results.KernelCell {
	k := make([]results.Kernel, len(c.Stats))
	for i, s := range c.Stats {
		k[i] = results.Kernel(s)
	}
	return results.KernelCell{ID: c.ID, Iterations: c.Iterations, Kernels: k, Complete: true}
}

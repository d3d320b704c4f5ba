package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/runner"
)

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print xrun's version, commit, Go version and compiled-in backends",
		Long:  "Print xrun's version, the commit it was built from, the Go version, and whether\nthe CUDA backend is compiled in (it needs cgo on Linux; CUDA itself is loaded at run time).",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runVersion(a) },
	}
}

func runVersion(a *app) error {
	b := runner.Build()
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	if b.Modified {
		commit += " (modified)"
	}
	cudaState := "not compiled in (built without cgo on linux)"
	if cuda.Compiled {
		cudaState = "compiled in (libcuda, cuBLASLt, NVRTC loaded at run time)"
	}
	w := a.gs.Stdout
	fmt.Fprintf(w, "xrun %s\n", b.Version)
	fmt.Fprintf(w, "commit:   %s\n", commit)
	fmt.Fprintf(w, "go:       %s %s/%s\n", b.GoVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "cuda:     %s\n", cudaState)
	fmt.Fprintf(w, "backends: cpu%s\n", map[bool]string{true: ", cuda", false: ""}[cuda.Compiled])
	return nil
}

package cuda

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

// The kernels are CUDA C, embedded in the binary and compiled at run time by
// NVRTC for the GPU at hand: one family per file, each with its Go launcher
// (<family>.go) and its float32 reference in <family>_test.go.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// kernelSource returns kernels/<family>.cu.
func kernelSource(family string) (string, error) {
	b, err := kernelFS.ReadFile("kernels/" + family + ".cu")
	if err != nil {
		return "", fmt.Errorf("cuda: no kernel family %q: %w", family, err)
	}
	return string(b), nil
}

// kernelHeaders are the .cuh files, given to NVRTC by name.
func kernelHeaders() map[string]string {
	ents, _ := kernelFS.ReadDir("kernels")
	h := map[string]string{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cuh") {
			b, _ := kernelFS.ReadFile("kernels/" + e.Name())
			h[e.Name()] = string(b)
		}
	}
	return h
}

// kernelFamilies lists the embedded families, sorted.
func kernelFamilies() []string {
	ents, _ := kernelFS.ReadDir("kernels")
	var fams []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".cu"); ok {
			fams = append(fams, n)
		}
	}
	sort.Strings(fams)
	return fams
}

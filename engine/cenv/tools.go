package cenv

import (
	"os"
	"slices"
	"strings"
)

// launcherLibs are parts of the names of the libraries the Nsight tools'
// launcher (ncu; Nsight Compute 2025.3 with CUDA 13.0) preloads into the
// processes it follows. It follows a child by hooking libc's fork and
// posix_spawn, which Go's os/exec does not call (it makes the system calls
// itself): a child xrun starts with os/exec (a worker running a cell)
// comes up outside the profiler. On an H100 under `ncu --target-processes
// all`, a child made by os/exec did not connect to ncu, with the
// launcher's libraries in its LD_PRELOAD or without, nor did one made by
// a shell so started; one made by posix_spawn did.
var launcherLibs = []string{"libTreeLauncherTargetInjection", "libTreeLauncherTargetUpdatePreloadInjection"}

// toolLibs are the libraries whose presence says an Nsight tool is
// attached: the launcher's, and the CUDA injection nsys loads.
var toolLibs = append(append([]string(nil), launcherLibs...), "libToolsInjection")

// SelfMaps is the text of /proc/self/maps, "" where it cannot be read.
func SelfMaps() string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	return string(b)
}

// mapped returns the paths of the libraries in maps (/proc/self/maps's
// text) whose file names contain one of parts, each once, in the order
// they are first mapped.
func mapped(maps string, parts []string) []string {
	var out []string
	for line := range strings.SplitSeq(maps, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[len(f)-1], "/") {
			continue
		}
		p := f[len(f)-1]
		base := p[strings.LastIndexByte(p, '/')+1:]
		for _, part := range parts {
			if strings.Contains(base, part) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// ToolLibs returns the Nsight tools' libraries mapped per maps: non-empty
// when the process runs under one of them.
func ToolLibs(maps string) []string { return mapped(maps, toolLibs) }

// UnderLauncher reports whether this process runs under the Nsight
// tools' launcher (per maps): then a child it starts is followed by the
// tool only if libc makes it (Spawn).
func UnderLauncher(maps string) bool { return len(mapped(maps, launcherLibs)) > 0 }

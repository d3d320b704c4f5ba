package cuda

import (
	"path/filepath"
	"sort"
)

// NCCLEnv names a libnccl.so.2 to load before any other.
const NCCLEnv = "XRUN_LIBNCCL"

// ncclSoname is the library NCCL 2.x installs.
const ncclSoname = "libnccl.so.2"

// ncclPythonGlobs are where a PyTorch installation keeps its own NCCL (the
// nvidia-nccl-cu12/cu13 wheel): GPU machines without a system NCCL usually
// have one there.
var ncclPythonGlobs = []string{
	"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/" + ncclSoname,
	"/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/" + ncclSoname,
	"/usr/lib/python3*/dist-packages/nvidia/nccl/lib/" + ncclSoname,
	"/usr/lib/python3*/site-packages/nvidia/nccl/lib/" + ncclSoname,
	"/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/" + ncclSoname,
}

// ncclCandidates lists the paths to try for NCCL, in order: the file
// XRUN_LIBNCCL names, the soname through the loader's search, the soname
// in each of dirs (libSearchDirs on Linux), then the copies inside Python
// installations (newest Python first). getenv and glob are os.Getenv and
// filepath.Glob outside tests.
func ncclCandidates(getenv func(string) string, glob func(string) ([]string, error), dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	add(getenv(NCCLEnv))
	add(ncclSoname)
	for _, d := range dirs {
		add(filepath.Join(d, ncclSoname))
	}
	for _, pat := range ncclPythonGlobs {
		m, _ := glob(pat) // the patterns are well formed; no match is no error
		// python3.12 before python3.10: the newest installation is the one
		// most likely to match the driver.
		sort.Slice(m, func(i, j int) bool { return pythonVersionLess(m[j], m[i]) })
		for _, p := range m {
			add(p)
		}
	}
	return out
}

// pythonVersionLess orders paths by the python3.N folder they contain,
// numerically (3.9 < 3.10), then as strings.
func pythonVersionLess(a, b string) bool {
	va, vb := pythonMinor(a), pythonMinor(b)
	if va != vb {
		return va < vb
	}
	return a < b
}

// pythonMinor is N of the first "python3.N" in p, -1 if none.
func pythonMinor(p string) int {
	const key = "python3."
	for i := 0; i+len(key) <= len(p); i++ {
		if p[i:i+len(key)] != key {
			continue
		}
		n, j := 0, i+len(key)
		if j >= len(p) || p[j] < '0' || p[j] > '9' {
			continue
		}
		for ; j < len(p) && p[j] >= '0' && p[j] <= '9'; j++ {
			n = n*10 + int(p[j]-'0')
		}
		return n
	}
	return -1
}

// NCCLVersion splits ncclGetVersion's code: major*10000 + minor*100 +
// patch from 2.9 on, major*1000 + minor*100 + patch before.
func NCCLVersion(code int) (major, minor, patch int) {
	if code >= 20900 {
		return code / 10000, code / 100 % 100, code % 100
	}
	return code / 1000, code / 100 % 10, code % 100
}

// ncclDefaults are environment settings xrun gives NCCL unless the user
// set them. NVLink multicast (NVLS) stays off, as on the machines the
// studies run on, where it needs a fabric manager set-up that is not
// there (KINDS.md); a user who wants it sets NCCL_NVLS_ENABLE=1. The
// connections between ranks are made when a communicator is (NCCL 2.22 on
// makes them at a collective's first use otherwise): their buffers are
// then taken before the KV cache is sized from the memory left free, and
// no connection is made while an iteration is captured into a graph.
var ncclDefaults = [][2]string{{"NCCL_NVLS_ENABLE", "0"}, {"NCCL_RUNTIME_CONNECT", "0"}}

// setNCCLDefaults applies ncclDefaults through setenv where lookup finds
// nothing set, before NCCL reads its environment (its first call).
func setNCCLDefaults(lookup func(string) (string, bool), setenv func(k, v string) error) error {
	for _, kv := range ncclDefaults {
		if _, ok := lookup(kv[0]); !ok {
			if err := setenv(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

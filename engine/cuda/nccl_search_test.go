package cuda

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNCCLCandidates: XRUN_LIBNCCL first, then the loader's search, the
// CUDA folders, and the copies inside Python installations, newest Python
// first, each path once.
func TestNCCLCandidates(t *testing.T) {
	py := map[string][]string{
		ncclPythonGlobs[0]: {
			"/usr/local/lib/python3.9/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
		},
		ncclPythonGlobs[2]: {"/usr/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"},
	}
	glob := func(pat string) ([]string, error) { return slices.Clone(py[pat]), nil }
	dirs := []string{"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"}
	for _, tc := range []struct {
		name string
		env  string
		want []string
	}{
		{"default", "", []string{
			"libnccl.so.2",
			"/usr/local/cuda/lib64/libnccl.so.2",
			"/usr/lib/x86_64-linux-gnu/libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.9/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2",
		}},
		{"XRUN_LIBNCCL first", "/opt/nccl/lib/libnccl.so.2.27.3", []string{
			"/opt/nccl/lib/libnccl.so.2.27.3",
			"libnccl.so.2",
			"/usr/local/cuda/lib64/libnccl.so.2",
			"/usr/lib/x86_64-linux-gnu/libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.9/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2",
		}},
		{"XRUN_LIBNCCL repeating a default", "/usr/local/cuda/lib64/libnccl.so.2", []string{
			"/usr/local/cuda/lib64/libnccl.so.2",
			"libnccl.so.2",
			"/usr/lib/x86_64-linux-gnu/libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.9/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == NCCLEnv {
					return tc.env
				}
				return ""
			}
			if got := ncclCandidates(getenv, glob, dirs); !slices.Equal(got, tc.want) {
				t.Errorf("candidates\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestNCCLPythonGlobs: every pattern is well formed, names the soname, and
// covers dist-packages and site-packages under /usr/local/lib and /usr/lib.
func TestNCCLPythonGlobs(t *testing.T) {
	for _, want := range []string{"/usr/local/lib/python3*/dist-packages/", "/usr/local/lib/python3*/site-packages/",
		"/usr/lib/python3*/dist-packages/", "/usr/lib/python3*/site-packages/"} {
		if !slices.ContainsFunc(ncclPythonGlobs, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no pattern under %s", want)
		}
	}
	for _, p := range ncclPythonGlobs {
		if _, err := filepath.Match(p, "x"); err != nil || filepath.Base(p) != ncclSoname {
			t.Errorf("pattern %q: %v", p, err)
		}
	}
}

func TestPythonMinor(t *testing.T) {
	for p, want := range map[string]int{
		"/usr/lib/python3.9/dist-packages": 9, "/usr/local/lib/python3.12/site-packages/x": 12,
		"/usr/lib/python3/dist-packages": -1, "/opt/python3.x/lib": -1, "": -1,
	} {
		if got := pythonMinor(p); got != want {
			t.Errorf("pythonMinor(%q) = %d, want %d", p, got, want)
		}
	}
}

func TestNCCLVersion(t *testing.T) {
	for code, want := range map[int][3]int{22703: {2, 27, 3}, 21805: {2, 18, 5}, 20906: {2, 9, 6}, 2804: {2, 8, 4}, 2708: {2, 7, 8}} {
		if a, b, c := NCCLVersion(code); [3]int{a, b, c} != want {
			t.Errorf("NCCLVersion(%d) = %d.%d.%d, want %v", code, a, b, c, want)
		}
	}
}

// TestNCCLDefaults: NVLink multicast is turned off and connections are
// made at initialisation, each unless the user set the variable, whatever
// its value; a failing setenv is reported.
func TestNCCLDefaults(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want map[string]string
	}{
		{map[string]string{}, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_RUNTIME_CONNECT": "0"}},
		{map[string]string{"NCCL_NVLS_ENABLE": "1"}, map[string]string{"NCCL_NVLS_ENABLE": "1", "NCCL_RUNTIME_CONNECT": "0"}},
		{map[string]string{"NCCL_NVLS_ENABLE": "", "NCCL_RUNTIME_CONNECT": "1"}, map[string]string{"NCCL_NVLS_ENABLE": "", "NCCL_RUNTIME_CONNECT": "1"}},
	} {
		env := map[string]string{}
		for k, v := range tc.env {
			env[k] = v
		}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		setenv := func(k, v string) error { env[k] = v; return nil }
		if err := setNCCLDefaults(lookup, setenv); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if env[k] != v {
				t.Errorf("from %v: %s=%q, want %q", tc.env, k, env[k], v)
			}
		}
	}
	fail := errors.New("setenv: invalid argument")
	err := setNCCLDefaults(func(string) (string, bool) { return "", false }, func(string, string) error { return fail })
	if !errors.Is(err, fail) {
		t.Errorf("failing setenv: %v", err)
	}
}

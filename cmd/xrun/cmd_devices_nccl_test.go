package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cuda"
)

// TestPrintNCCL: devices names the NCCL split cells would load, with its
// version and file, or why none loads; without the CUDA backend nothing.
func TestPrintNCCL(t *testing.T) {
	for _, c := range []struct {
		n    *ncclStatus
		want string
	}{
		{&ncclStatus{Version: "2.27.3", Path: "/usr/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"},
			"NCCL 2.27.3  /usr/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2  (the collectives of cells split over GPUs: tp, ep)\n"},
		{&ncclStatus{Error: "libnccl.so.2 (NCCL, ...) was not found\n  tried libnccl.so.2: no such file"},
			"NCCL: libnccl.so.2 (NCCL, ...) was not found\n  tried libnccl.so.2: no such file\n"},
		{nil, ""},
	} {
		var b strings.Builder
		if wrote := printNCCL(&b, c.n); b.String() != c.want || wrote != (c.want != "") {
			t.Errorf("%+v: wrote %v %q, want %q", c.n, wrote, b.String(), c.want)
		}
	}
}

// TestDevicesNCCL: xrun devices looks for NCCL wherever the CUDA backend is
// compiled in, in the listing and in --json; this machine's answer is
// either a version and file or the paths tried.
func TestDevicesNCCL(t *testing.T) {
	r := runDevicesCLI(t)
	if !cuda.Compiled {
		if strings.Contains(r.stdout, "NCCL") {
			t.Errorf("NCCL without the CUDA backend:\n%s", r.stdout)
		}
		return
	}
	if !strings.Contains(r.stdout, "\nNCCL ") && !strings.Contains(r.stdout, "\nNCCL: libnccl.so.2") {
		t.Errorf("listing lacks NCCL:\n%s", r.stdout)
	}
	r = runDevicesCLI(t, "--json")
	var out struct {
		NCCL *ncclStatus `json:"nccl"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if n := out.NCCL; n == nil || (n.Version == "") == (n.Error == "") {
		t.Errorf("--json nccl %+v, want a version or an error", n)
	}
}

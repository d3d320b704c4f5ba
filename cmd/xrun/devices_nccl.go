//go:build cgo && linux

package main

import "github.com/xrun-dev/xrun/engine/cuda"

// probeNCCL finds NCCL as a split cell's run would (cuda.LoadNCCL): in
// this process, as loading a library touches no GPU.
func probeNCCL() *ncclStatus {
	if err := cuda.LoadNCCL(); err != nil {
		return &ncclStatus{Error: err.Error()}
	}
	v, path := cuda.NCCLInfo()
	return &ncclStatus{Version: v, Path: path}
}

//go:build !(cgo && linux)

package main

// probeNCCL: without the CUDA backend there is no NCCL to look for.
func probeNCCL() *ncclStatus { return nil }

package main

// The CUDA backend registers itself with the engine as "cuda" (without cgo
// on Linux it reports that it was not compiled in).
import _ "github.com/xrun-dev/xrun/engine/cuda/backend"

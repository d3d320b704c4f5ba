#!/usr/bin/env bash
# Cross-builds, on the build machine (no GPU, no CUDA), everything a GPU
# check needs into .gpu/: the xrun binary and the engine/cuda test binary
# (kernels, cuBLASLt and graph checks plus the GEMM benchmark). CUDA itself
# is loaded at run time, so nothing here needs CUDA headers or libraries.
#
# Then, on a GPU machine with the repository and .gpu/ beside it, run
#   bash bench/gpu-run.sh
# which writes logs under $OUT (or .gpu/out) and prints a short table last.
# With the workplace's device tool: run(command="bash bench/gpu-run.sh",
# carry=[".gpu"]).
set -euo pipefail
cd "$(dirname "$0")/.."

go vet ./engine/cuda ./cmd/xrun
mkdir -p .gpu
CGO_ENABLED=1 go build -o .gpu/xrun ./cmd/xrun
CGO_ENABLED=1 go test -c -o .gpu/cuda.test ./engine/cuda
# Compile every kernel here too when some NVRTC is at hand (XRUN_LIBNVRTC
# may name one), so a kernel that does not compile never costs GPU time.
CGO_ENABLED=1 go test -run TestKernelsCompile ./engine/cuda
ls -l .gpu/xrun .gpu/cuda.test

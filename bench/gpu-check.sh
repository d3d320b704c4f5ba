#!/usr/bin/env bash
# Cross-builds, on the build machine (no GPU, no CUDA), everything a GPU
# check needs into .gpu/: the xrun binary, the engine/cuda and
# engine/cuda/backend test binaries (kernels, cuBLASLt, graphs; the whole
# model against Hugging Face and the CPU backend) and xrunbench (engine.New
# + Engine.Run over generated datasets, the runner's path). CUDA itself is
# loaded at run time, so nothing here needs CUDA headers or libraries.
#
# Then, on a GPU machine with the repository and .gpu/ beside it, run
#   bash bench/gpu-run.sh
# which writes logs under $OUT (or .gpu/out) and prints a short table last.
# With the workplace's device tool: run(command="bash bench/gpu-run.sh",
# carry=[".gpu"]).
set -euo pipefail
cd "$(dirname "$0")/.."

go vet ./engine/cuda/... ./bench/...
CGO_ENABLED=0 go build ./...
mkdir -p .gpu
flags=(-trimpath -ldflags='-s -w')
CGO_ENABLED=1 go build "${flags[@]}" -o .gpu/xrun ./cmd/xrun
CGO_ENABLED=1 go build "${flags[@]}" -o .gpu/xrunbench ./bench/xrunbench
CGO_ENABLED=1 go test -c "${flags[@]}" -o .gpu/cuda.test ./engine/cuda
CGO_ENABLED=1 go test -c "${flags[@]}" -o .gpu/backend.test ./engine/cuda/backend
# Compile every kernel here too when some NVRTC is at hand (XRUN_LIBNVRTC
# may name one; Debian's CUDA 11.8 NVRTC checks sm_80), so a kernel that
# does not compile never costs GPU time.
if [ -z "${XRUN_LIBNVRTC:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2 ]; then
	export XRUN_LIBNVRTC=/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2
fi
CGO_ENABLED=1 go test -count=1 -run TestKernelsCompile ./engine/cuda
ls -l .gpu/xrun .gpu/xrunbench .gpu/cuda.test .gpu/backend.test
du -sh .gpu

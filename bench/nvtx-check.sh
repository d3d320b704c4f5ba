#!/usr/bin/env bash
# Checks that a profiled xrun run shows one NVTX range per engine iteration
# on Nsight Systems' timeline, named as TensorRT-LLM names them
# ("iteration 6: 0 ctx reqs, 0 ctx tokens, 8 gen reqs").
#
# Here (the build machine: no GPU, no CUDA): `bash bench/nvtx-check.sh build`
# cross-builds .gpu/xrun (bench/gpu-check.sh builds it too).
#
# There (a GPU machine with nsys, the repository with .gpu/ beside it):
# `bash bench/nvtx-check.sh` records a short study of TinyLlama-1.1B with
# profile_window "4-8" under `nsys profile -c cudaProfilerApi`, prints the
# NVTX range summary and checks that exactly iterations 4..8 have a range.
# Without nsys it says so and exits 0. The report and the summary go to
# $OUT (or .gpu/nvtx-out). With the workplace's device tool:
# run(command="bash bench/nvtx-check.sh", carry=[".gpu"]).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-run}" = build ]; then
	set -e
	mkdir -p .gpu
	CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o .gpu/xrun ./cmd/xrun
	ls -l .gpu/xrun
	exit 0
fi

nsys=$(command -v nsys || ls -d /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | tail -1)
if [ -z "$nsys" ] || [ ! -x "$nsys" ]; then
	echo "nsys not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems): NVTX check skipped"
	exit 0
fi
xrun=${XRUN:-.gpu/xrun}
if [ ! -x "$xrun" ]; then
	echo "$xrun missing: build it first with bash bench/nvtx-check.sh build" >&2
	exit 1
fi

out=${OUT:-.gpu/nvtx-out}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Eight requests in one batch: iteration 0 prefills them all, 1..15 decode.
# No warm-up requests, so iterations 4..8 are plain decode steps.
cat >"$tmp/nvtx.yaml" <<'EOF'
schema_version: 1
name: nvtx-check
description: A profiled pass of TinyLlama-1.1B whose window nsys records
params:
  engine: cuda
  model: tinyllama-1.1b
  dtype: float16
  batch_size: 8
  warmup: 0
  profile_window: "4-8"
  dataset:
    generator: token-norm-dist
    num_requests: 8
    input_mean: 64
    input_stdev: 0
    output_mean: 16
    output_stdev: 0
repeats: 1
EOF

echo "== $("$nsys" --version 2>&1 | head -1)"
XRUN_CACHE_DIR=$tmp/cache timeout 300 "$nsys" profile -c cudaProfilerApi --capture-range-end=stop -t cuda,nvtx \
	-o "$out/nvtx" --force-overwrite true \
	"$xrun" run "$tmp/nvtx.yaml" --out "$tmp/results" >"$out/nsys.txt" 2>&1
rc=$?
if [ "$rc" != 0 ] || [ ! -e "$out/nvtx.nsys-rep" ]; then
	echo "nsys profile exited $rc, report: $(ls "$out"/nvtx.* 2>/dev/null)"
	tail -30 "$out/nsys.txt"
	exit 1
fi

# The summary's report name changed over nsys versions.
for report in nvtx_sum nvtxsum; do
	if "$nsys" stats --report "$report" --format csv --output - "$out/nvtx.nsys-rep" >"$out/nvtx_sum.csv" 2>"$out/stats.txt" &&
		grep -q 'Range' "$out/nvtx_sum.csv"; then
		break
	fi
done
echo "== NVTX range summary ($out/nvtx_sum.csv)"
cat "$out/nvtx_sum.csv"

got=$(grep -oE 'iteration [0-9]+:' "$out/nvtx_sum.csv" | grep -oE '[0-9]+' | sort -n | uniq | tr '\n' ' ')
echo "== iterations with a range: ${got:-none} (want 4 5 6 7 8)"
if [ "$got" = "4 5 6 7 8 " ]; then
	echo "NVTX check: ok"
	exit 0
fi
echo "NVTX check: FAILED"
tail -20 "$out/stats.txt"
exit 1

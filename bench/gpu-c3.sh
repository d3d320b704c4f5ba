#!/usr/bin/env bash
# One 4-GPU call that checks and measures a change to the decode path and
# the MoE kernels at once: GPU 0 the engine/cuda checks, GPU 3 the
# whole-model checks (engine/cuda/backend), GPU 1 TinyLlama through
# xrunbench (batch 1 with A/B switches, batch 64/256 both plugins), GPU 2
# bench/specs/moe-quick.yaml through bench/gpu-multi.sh.
# Here: bash bench/gpu-check.sh (clean worktree), copy .gpu/ to .gpu-NAME/,
# then run(kind="nvidia-h200-x4", carry=[".gpu-NAME"],
#   command="mkdir -p .gpu && cp .gpu-NAME/* .gpu/ && bash bench/gpu-c3.sh").
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-.gpu/out}
mkdir -p "$out"
log=/tmp/xrun-c3
mkdir -p "$log"
(cd engine/cuda && CUDA_VISIBLE_DEVICES=0 timeout 300 "$root/.gpu/cuda.test" -test.v -test.timeout 295s >"$log/tests.txt" 2>&1; echo "cuda.test exit $?" >>"$log/tests.txt") &
(cd engine/cuda/backend && CUDA_VISIBLE_DEVICES=3 timeout 200 "$root/.gpu/backend.test" -test.v -test.timeout 195s >"$log/backend.txt" 2>&1; echo "backend.test exit $?" >>"$log/backend.txt") &
(
	export CUDA_VISIBLE_DEVICES=1
	b() { timeout 120 .gpu/xrunbench "$@" -json "$log/xrun.jsonl" 2>>"$log/xrun.log"; }
	echo "== batch 1, 64 requests, median of 3"
	b -batch 1 -gemm disable,auto -requests 64 -repeats 3
	for v in XRUN_CUDA_ATTN_ROPE=0 XRUN_CUDA_GEMV_PLAN=0 XRUN_CUDA_ATTN_SHORT=0 XRUN_CUDA_ATTN_SHORT=128; do
		echo "== batch 1 disable, $v"
		env "$v" timeout 120 .gpu/xrunbench -batch 1 -gemm disable -requests 64 -repeats 3 2>>"$log/xrun.log"
	done
	echo "== batch 64/256, 3000 requests, median of 3"
	b -batch 64,256 -gemm auto,disable -requests 3000 -repeats 3
	echo "== batch 256 auto, XRUN_CUDA_ATTN_ROPE=0"
	XRUN_CUDA_ATTN_ROPE=0 timeout 120 .gpu/xrunbench -batch 256 -gemm auto -requests 3000 -repeats 3 2>>"$log/xrun.log"
) >"$log/xrun.txt" 2>&1 &
DEADLINE=${DEADLINE:-330} STUDIES='2=bench/specs/moe-quick.yaml' bash bench/gpu-multi.sh
wait
cp "$log"/*.txt "$log"/*.log "$log"/*.jsonl "$out/" 2>/dev/null
tar -czf "$out/c3-logs.tgz" -C "$log" . && rm -f "$out"/tests.txt "$out"/backend.txt "$out"/xrun.log "$out"/xrun.jsonl
echo "== engine/cuda: $(tail -1 "$log/tests.txt"), $(grep -c -- '--- PASS' "$log/tests.txt") passed, failures:"
grep -E -- '--- FAIL|^panic' "$log/tests.txt" | head -20
echo "== backend: $(tail -1 "$log/backend.txt"), $(grep -c -- '--- PASS' "$log/backend.txt") passed, failures:"
grep -E -- '--- FAIL|^panic' "$log/backend.txt" | head -20
cat "$log/xrun.txt"

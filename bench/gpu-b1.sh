#!/usr/bin/env bash
# One 4-GPU call for a change to the batch-1 decode path: GPU 0 the
# engine/cuda checks, GPU 1 the whole-model checks (engine/cuda/backend)
# then bench/specs/b1-trace.yaml (the kernel timeline of ten decode
# iterations, both plugins), GPUs 2 and 3 TinyLlama through xrunbench with
# environment switches, one line of VARIANTS each.
# Here: bash bench/gpu-check.sh (clean worktree), copy .gpu/ to .gpu-NAME/,
# then run(kind="nvidia-h200-x4", carry=[".gpu-NAME"],
#   command="mkdir -p .gpu && cp .gpu-NAME/* .gpu/ && bash bench/gpu-b1.sh").
# Environment: VARIANTS2, VARIANTS3 (';'-separated "ENV=V ...|xrunbench
# flags" runs for GPU 2 and 3; defaults below), NOTESTS=1 (skip the checks
# and use GPUs 0 and 1 for VARIANTS0 / VARIANTS1 as well), NOTRACE=1,
# TESTTIMEOUT (seconds for the engine/cuda checks, default 300), TESTRUN
# (their -test.run pattern). An entry whose ENV holds XRUNBENCH=PATH runs
# that xrunbench (e.g. the parent commit's, for an A/B on one GPU); each
# GPU's runs append to xrun-GPU.jsonl in b1-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-.gpu/out}
mkdir -p "$out"
log=/tmp/xrun-b1
mkdir -p "$log"
b1='-batch 1 -gemm disable -requests 64 -repeats 3'
b1a='-batch 1 -gemm auto -requests 64 -repeats 3'
: "${VARIANTS2:=XRUN_OVERLAP=0|$b1;|$b1;XRUN_OVERLAP=0|$b1a;|$b1a}"
: "${VARIANTS3:=|-batch 64,256 -gemm auto,disable -requests 3000 -repeats 3;XRUN_OVERLAP=0|-batch 64 -gemm auto -requests 3000 -repeats 3;|-batch 2,4,8 -gemm disable,auto -requests 128 -repeats 3}"

# variants GPU LIST: each "ENV...|FLAGS" entry is one xrunbench run.
variants() {
	local gpu=$1 list=$2
	IFS=';' read -ra runs <<<"$list"
	for r in "${runs[@]}"; do
		local envs=${r%%|*} flags=${r#*|}
		local bin=.gpu/xrunbench e
		for e in $envs; do
			[[ $e == XRUNBENCH=* ]] && bin=${e#XRUNBENCH=}
		done
		echo "== GPU $gpu: ${envs:-defaults} | $flags"
		# shellcheck disable=SC2086
		env CUDA_VISIBLE_DEVICES="$gpu" $envs timeout 200 "$bin" $flags -json "$log/xrun-$gpu.jsonl" 2>>"$log/xrun-$gpu.log"
	done >"$log/xrun-$gpu.txt" 2>&1
}

if [ "${NOTESTS:-0}" = 1 ]; then
	[ -n "${VARIANTS0:-}" ] && variants 0 "$VARIANTS0" &
	[ -n "${VARIANTS1:-}" ] && variants 1 "$VARIANTS1" &
else
	tt=${TESTTIMEOUT:-300}
	(cd engine/cuda && CUDA_VISIBLE_DEVICES=0 timeout "$tt" "$root/.gpu/cuda.test" -test.v -test.timeout "$((tt - 5))s" -test.run "${TESTRUN:-.}" >"$log/tests.txt" 2>&1; echo "cuda.test exit $?" >>"$log/tests.txt") &
	(
		cd engine/cuda/backend && CUDA_VISIBLE_DEVICES=1 timeout 200 "$root/.gpu/backend.test" -test.v -test.timeout 195s >"$log/backend.txt" 2>&1
		echo "backend.test exit $?" >>"$log/backend.txt"
	) &
fi
variants 2 "$VARIANTS2" &
variants 3 "$VARIANTS3" &
if [ "${NOTRACE:-0}" != 1 ]; then
	# After the whole-model checks on GPU 1 (or at once without them).
	(
		while [ "${NOTESTS:-0}" != 1 ] && ! grep -q "backend.test exit" "$log/backend.txt" 2>/dev/null; do sleep 2; done
		CUDA_VISIBLE_DEVICES=1 timeout 200 .gpu/xrun run bench/specs/b1-trace.yaml --out "$log/b1-trace" --fresh >"$log/b1-trace.log" 2>&1
		echo "b1-trace exit $?" >>"$log/b1-trace.log"
	) &
fi
wait
[ -d "$log/b1-trace" ] && rm -rf "$log/b1-trace/datasets"
tar -czf "$out/b1-logs.tgz" -C "$log" .
if [ -f "$log/tests.txt" ]; then
	echo "== engine/cuda: $(tail -1 "$log/tests.txt"), $(grep -c -- '--- PASS' "$log/tests.txt") passed, failures:"
	grep -E -- '--- FAIL|^panic|error' "$log/tests.txt" | head -20
	echo "== backend: $(tail -1 "$log/backend.txt"), $(grep -c -- '--- PASS' "$log/backend.txt") passed, failures:"
	grep -E -- '--- FAIL|^panic' "$log/backend.txt" | head -20
fi
[ -f "$log/b1-trace.log" ] && tail -3 "$log/b1-trace.log"
cat "$log"/xrun-[0-9].txt

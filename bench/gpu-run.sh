#!/usr/bin/env bash
# Companion of gpu-check.sh, run on the GPU machine: `xrun devices`, the
# engine/cuda GPU checks, and the GEMM benchmark (own kernel vs cuBLASLt at
# TinyLlama-1.1B's projections, M = 1, 64, 256). Logs go to $OUT (or
# .gpu/out); a short table is printed last.
#
# Environment: TESTRUN (a -test.run pattern, default all), BENCH (a
# -test.bench pattern, default BenchmarkGemm; "none" skips), BENCHTIME
# (default 200ms), TESTTIMEOUT (default 6m).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
	--format=csv >"$out/nvidia-smi.txt" 2>&1 || true

.gpu/xrun devices >"$out/devices.txt" 2>&1
devices_rc=$?

.gpu/cuda.test -test.v -test.timeout "${TESTTIMEOUT:-6m}" ${TESTRUN:+-test.run "$TESTRUN"} >"$out/tests.txt" 2>&1
tests_rc=$?

bench_rc=0
if [ "${BENCH:-BenchmarkGemm}" != none ]; then
	.gpu/cuda.test -test.run '^$' -test.bench "${BENCH:-BenchmarkGemm}" -test.benchtime "${BENCHTIME:-200ms}" \
		-test.timeout 8m >"$out/bench.txt" 2>&1
	bench_rc=$?
fi

echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== xrun devices (exit $devices_rc)"; cat "$out/devices.txt"
echo "== failures (full log: tests.txt)"
grep -E -- '--- FAIL|^(FAIL|panic)|_test\.go:[0-9]+: ' "$out/tests.txt" | grep -vE 'random seed|GPU check skipped|NVRTC [0-9.]+, [0-9]+ bytes' | head -60
grep -E -- 'graph of one|GPU [0-9]+: |(libcuda|cuBLASLt|NVRTC) ' "$out/tests.txt" | head -12
[ "$bench_rc" = 0 ] || tail -20 "$out/bench.txt"
echo "== GEMM, fp16, device time per call (us) and achieved GB/s (W + X + Y once)"
awk '
function usof(line,   f, i, n) { n = split(line, f, /[ \t]+/); for (i = 2; i <= n; i++) if (f[i] == "us/gemm") return f[i-1]; return 0 }
/^BenchmarkGemm\// {
	split($1, p, "/"); impl = p[2]; key = p[3] " " p[4] " " p[5] " " p[6]; sub(/-[0-9]+$/, "", key)
	if (impl ~ /^own-/) { extra = extra sprintf("%-30s %-12s %9.2f us\n", key, impl, $0 ~ /us\/gemm/ ? usof($0) : 0); next }
	for (i = 2; i <= NF; i++) { if ($i == "us/gemm") us = $(i-1); if ($i == "GB/s") gb = $(i-1); if ($i == "TFLOP/s") tf = $(i-1) }
	if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	U[impl, key] = us; G[impl, key] = gb; T[impl, key] = tf
}
END {
	if (n == 0) exit
	printf "%-30s %9s %9s %7s %9s %9s %8s\n", "shape", "own_us", "lt_us", "own/lt", "own_GB/s", "lt_GB/s", "own_TF/s"
	for (i = 1; i <= n; i++) { k = order[i]
		r = (U["cublaslt", k] > 0) ? U["own", k] / U["cublaslt", k] : 0
		printf "%-30s %9.2f %9.2f %7.2f %9.0f %9.0f %8.1f\n", k, U["own", k], U["cublaslt", k], r, G["own", k], G["cublaslt", k], T["own", k] }
	if (extra != "") printf "own GEMM with other split-K targets (blocks per SM):\n%s", extra
}' "$out/bench.txt" 2>/dev/null
pass=$(grep -cE -- '--- PASS' "$out/tests.txt"); fail=$(grep -cE -- '--- FAIL' "$out/tests.txt"); skip=$(grep -cE -- '--- SKIP' "$out/tests.txt")
echo "GPU checks (exit $tests_rc): $pass passed, $fail failed, $skip skipped; devices exit $devices_rc; bench exit $bench_rc"
[ "$tests_rc" = 0 ] && [ "$devices_rc" = 0 ] && [ "$bench_rc" = 0 ]

#!/usr/bin/env bash
# The closing GPU call of a change: the GPU checks (engine/cuda kernels,
# the whole model in engine/cuda/backend), then the gemm study through the
# runner itself (`xrun run`, worker processes, results directory), trimmed
# to fit one 10-minute device call: batch 64 and 256 with the spec's 3000
# requests, batch 1 with B1_REQUESTS (default 100) requests, REPEATS
# (default 3) repeats each. Build first with bench/gpu-check.sh; then
#   run(command="bash bench/gpu-final.sh", carry=[".gpu"])
# Results land in $OUT/gemm and $OUT/gemm-b1 (results.json, results.md);
# xrun's own tables are printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"
root=$PWD
tests_rc=0 backend_rc=0
if [ "${SKIPTESTS:-0}" != 1 ]; then
	# In its package directory: tests read testdata/ by relative path.
	(cd engine/cuda && timeout 260 "$root/.gpu/cuda.test" -test.v -test.timeout 255s ${TESTRUN:+-test.run "$TESTRUN"}) >"$out/tests.txt" 2>&1
	tests_rc=$?
	(cd engine/cuda/backend && timeout 120 "$root/.gpu/backend.test" -test.v -test.timeout 115s ${BACKENDRUN:+-test.run "$BACKENDRUN"}) >"$out/backend.txt" 2>&1
	backend_rc=$?
fi
rep=${REPEATS:-3}
timeout 330 .gpu/xrun run experiments/gemm.yaml --out "$out/gemm" --fresh --log-format json \
	--set 'matrix.batch_size=[64,256]' --set "repeats=$rep" >"$out/xrun-run.log" 2>&1
run_rc=$?
timeout 150 .gpu/xrun run experiments/gemm.yaml --out "$out/gemm-b1" --fresh --log-format json \
	--set 'matrix.batch_size=[1]' --set "repeats=$rep" --set "params.dataset.num_requests=${B1_REQUESTS:-100}" >>"$out/xrun-run.log" 2>&1
run1_rc=$?
# Only two folder levels come back from the device: keep the per-cell files here.
for d in gemm gemm-b1; do
	[ -d "$out/$d/cells" ] && mv "$out/$d/cells" "/tmp/cells-$d"
	rm -rf "$out/$d/datasets" 2>/dev/null
done
for f in tests backend; do
	[ -f "$out/$f.txt" ] || continue
	echo "== $f failures (full log: $f.txt)"
	grep -E -- '--- FAIL|^(FAIL|panic)' "$out/$f.txt" | head -20
done
pass=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- PASS'); fail=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- FAIL')
echo "GPU checks (cuda exit $tests_rc, backend exit $backend_rc): $pass passed, $fail failed; xrun run exit $run_rc (batch 64/256), $run1_rc (batch 1)"
[ "$run_rc" = 0 ] && [ "$run1_rc" = 0 ] || tail -20 "$out/xrun-run.log"
echo "== xrun results.md (batch 1, ${B1_REQUESTS:-100} requests)"; cat "$out/gemm-b1/results.md" 2>/dev/null
echo "== xrun results.md (batch 64, 256)"; cat "$out/gemm/results.md" 2>/dev/null

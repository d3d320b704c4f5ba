#!/usr/bin/env bash
# The closing GPU call of a session, in one go: every GPU check (the
# engine/cuda kernels, the whole model in engine/cuda/backend), the NVTX
# check under Nsight Systems (bench/nvtx-check.sh) and the profiling study
# (`xrun run experiments/profile.yaml`) until a deadline: the run is then
# interrupted (SIGINT: finished cells are kept, exit 130) and a later call
# continues it with RESUME=1 and the results carried back.
#
# Here: bash bench/gpu-check.sh (builds .gpu/), then
#   run(command="bash bench/gpu-closing.sh", carry=[".gpu"])
# Environment: DEADLINE (seconds from the start for the whole call,
# default 540), SKIPTESTS=1, SKIPNVTX=1, SPEC (default
# experiments/profile.yaml), RESUME=1 (continue results/<name> carried in
# as .gpu/closing-results.tar.gz). Logs go to $OUT (or .gpu/out); the
# study's cells come back as $OUT/cells.tar.gz (the device returns only
# two folder levels); a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
out=${OUT:-.gpu/out}
mkdir -p "$out"
root=$PWD
deadline=${DEADLINE:-540}
spec=${SPEC:-experiments/profile.yaml}

tests_rc=skipped backend_rc=skipped
if [ "${SKIPTESTS:-0}" != 1 ]; then
	# In its package directory: tests read testdata/ by relative path.
	(cd engine/cuda && timeout 260 "$root/.gpu/cuda.test" -test.v -test.timeout 255s) >"$out/tests.txt" 2>&1
	tests_rc=$?
	(cd engine/cuda/backend && timeout 120 "$root/.gpu/backend.test" -test.v -test.timeout 115s) >"$out/backend.txt" 2>&1
	backend_rc=$?
fi
nvtx_rc=skipped
if [ "${SKIPNVTX:-0}" != 1 ]; then
	OUT="$out/nvtx" timeout 90 bash bench/nvtx-check.sh >"$out/nvtx.txt" 2>&1
	nvtx_rc=$?
fi

res=/tmp/xrun-closing
mkdir -p "$res"
resume=(--fresh)
if [ "${RESUME:-0}" = 1 ] && [ -f .gpu/closing-results.tar.gz ]; then
	tar -xzf .gpu/closing-results.tar.gz -C "$res"
	resume=(--resume)
fi
name=$(sed -n 's/^name: *//p' "$spec" | head -1)
left=$((deadline - (SECONDS - start) - 25))
run_rc=skipped
if [ "$left" -gt 30 ]; then
	timeout -s INT -k 20 "$left" .gpu/xrun run "$spec" --out "$res/$name" "${resume[@]}" --log-format json >"$out/xrun-run.log" 2>&1
	run_rc=$?
fi
rm -rf "$res/$name/datasets"
tar -czf "$out/cells.tar.gz" -C "$res" "$name" 2>/dev/null
cp "$res/$name/results.md" "$out/results.md" 2>/dev/null

for f in tests backend; do
	[ -f "$out/$f.txt" ] || continue
	echo "== $f failures (full log: $f.txt)"
	grep -E -- '--- FAIL|^(FAIL|panic)' "$out/$f.txt" | head -20
done
echo "== nvtx (exit $nvtx_rc)"; tail -15 "$out/nvtx.txt" 2>/dev/null
echo "== $spec: cells done"
ls "$res/$name/cells" 2>/dev/null | while read -r c; do
	f="$res/$name/cells/$c"
	printf '%-48s %s\n' "$c" "$(ls "$f" | tr '\n' ' ')"
done
pass=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- PASS'); fail=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- FAIL')
echo "GPU checks (cuda exit $tests_rc, backend exit $backend_rc): $pass passed, $fail failed; nvtx exit $nvtx_rc; xrun run exit $run_rc (130: stopped at the deadline, resume later); $((SECONDS - start)) s"

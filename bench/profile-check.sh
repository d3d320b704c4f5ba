#!/usr/bin/env bash
# The profiling check of issue 8, in two halves.
#
# Here (the build machine: no GPU, no CUDA): `bash bench/profile-check.sh`
# vets and cross-builds into .gpu/profile/ the test binaries of
# engine/profile/cupti (CUPTI self-test, a two-iteration window, the cost
# per launch, stepping aside under ncu) and engine/profile (TinyLlama-1.1B
# profiled through engine.New + Run with gemm_plugin disable and auto:
# kernels.csv, trace.json, diagnosis, kernel diff, overhead). CUDA, CUPTI
# and NVML are loaded at run time, so nothing here needs them.
#
# There (a GPU machine, the repository with .gpu/profile/ beside it):
# `bash bench/profile-check.sh run` writes logs and a few artifacts under
# $OUT (or .gpu/profile/out) and prints a short table last. With the
# workplace's device tool: run(command="bash bench/profile-check.sh run",
# carry=[".gpu/profile"]).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.gpu/profile

if [ "${1:-build}" = build ]; then
	set -e
	go vet ./engine/profile/...
	CGO_ENABLED=0 go vet ./engine/profile/...
	mkdir -p "$bin"
	flags=(-trimpath -ldflags='-s -w')
	CGO_ENABLED=1 go test -c "${flags[@]}" -o "$bin/cupti.test" ./engine/profile/cupti
	CGO_ENABLED=1 go test -c "${flags[@]}" -o "$bin/profile.test" ./engine/profile
	ls -l "$bin"/*.test
	exit 0
fi

out=${OUT:-$bin/out}
mkdir -p "$out"
cells=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >"$out/gpu.txt" 2>&1 || true
ls /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so* /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* >>"$out/gpu.txt" 2>&1 || true

timeout 120 "$bin/cupti.test" -test.v -test.timeout 115s >"$out/cupti.txt" 2>&1
cupti_rc=$?

ncu_rc=skipped
if command -v ncu >/dev/null; then
	XRUN_UNDER_PROFILER=1 timeout 90 ncu --profile-from-start off --target-processes all "$bin/cupti.test" -test.v -test.run TestGPUStepAside >"$out/ncu.txt" 2>&1
	ncu_rc=$?
fi

# From the package's folder, where the CPU golden files are.
root=$PWD
(cd engine/profile && XRUN_PROFILE_OUT=$cells timeout 200 "$root/$bin/profile.test" -test.v -test.timeout 195s \
	-test.run 'TestGPUProfiledPass|TestCPUProfileGolden') >"$out/profile.txt" 2>&1
profile_rc=$?
for g in auto disable; do
	cp "$cells/gemm-$g/kernels.csv" "$out/kernels-$g.csv" 2>/dev/null
done
cp "$cells/gemm-auto/trace.json" "$out/trace-auto.json" 2>/dev/null
cp "$cells/diff.txt" "$out/diff.txt" 2>/dev/null

echo "== GPU: $(head -1 "$out/gpu.txt")"
echo "== CUPTI (cupti.test exit $cupti_rc, full log cupti.txt)"
grep -E -- '--- (FAIL|SKIP)|_test\.go:[0-9]+: |^PROFILE' "$out/cupti.txt" | head -20
echo "== under ncu (exit $ncu_rc)"
grep -E '^PROFILE|--- (PASS|FAIL|SKIP)|_test\.go:[0-9]+: ' "$out/ncu.txt" 2>/dev/null | head -8
echo "== TinyLlama-1.1B profiled through engine.New + Run (profile.test exit $profile_rc)"
grep -vE '^(=== RUN|PASS$|ok )' "$out/profile.txt" | head -80
pass=$(cat "$out"/cupti.txt "$out"/profile.txt | grep -c -- '--- PASS')
fail=$(cat "$out"/cupti.txt "$out"/profile.txt | grep -c -- '--- FAIL')
skip=$(cat "$out"/cupti.txt "$out"/profile.txt | grep -c -- '--- SKIP')
echo "== summary"
printf '%-28s %s\n' "tests" "$pass passed, $fail failed, $skip skipped"
awk '/^PROFILE launch_us/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); printf "%-28s %s\n", "launch " kv[1], kv[2] } }' "$out/cupti.txt"
awk '/^PROFILE gemm=/ { split($2, g, "="); for (i = 3; i <= NF; i++) if ($i ~ /=/) { split($i, kv, "="); printf "%-28s %s\n", g[2] " " kv[1], kv[2] } }' "$out/profile.txt"
[ "$cupti_rc" = 0 ] && [ "$profile_rc" = 0 ]

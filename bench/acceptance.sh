#!/usr/bin/env bash
# Acceptance run of the GPU issues in one device call (7: the backend's
# whole-model checks; 8: profiled cells through the runner with CUPTI;
# 9: MoE checks), trimmed to fit one call.
#
# Here (build machine, no GPU):  bash bench/acceptance.sh
#   vets and cross-builds into .gpu/acc/ (xrun, backend.test, profile.test).
# There (GPU machine):           bash bench/acceptance.sh run
#   with the device tool: run(command="bash bench/acceptance.sh run", carry=[".gpu/acc"]).
#   Logs and the study's results go to $OUT; a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.gpu/acc

if [ "${1:-build}" = build ]; then
	set -e
	go vet ./engine/... ./runner ./cmd/xrun
	CGO_ENABLED=0 go build ./...
	rm -rf "$bin" && mkdir -p "$bin"
	flags=(-trimpath -ldflags='-s -w')
	CGO_ENABLED=1 go build "${flags[@]}" -o "$bin/xrun" ./cmd/xrun
	CGO_ENABLED=1 go test -c "${flags[@]}" -o "$bin/backend.test" ./engine/cuda/backend
	CGO_ENABLED=1 go test -c "${flags[@]}" -o "$bin/profile.test" ./engine/profile
	du -sh "$bin"
	exit 0
fi

out=${OUT:-$bin/out}
mkdir -p "$out"
root=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >"$out/gpu.txt" 2>&1

# Whole-model and MoE checks (HF golden incl. tiny-mixtral, conformance, MoE vs CPU).
(cd engine/cuda/backend && timeout 200 "$root/$bin/backend.test" -test.v -test.timeout 190s \
	-test.run 'GoldenHF|Conformance|MoE|MatchesCPU') >"$out/backend.txt" 2>&1
backend_rc=$?

# The profiled pass with the backend's own CUPTI session.
(cd engine/profile && timeout 150 "$root/$bin/profile.test" -test.v -test.timeout 140s -test.run 'TestGPUProfiledPass') >"$out/profile-test.txt" 2>&1
profile_rc=$?

# A trimmed experiments/profile.yaml through the runner.
timeout 240 "$bin/xrun" run experiments/profile.yaml --out "$out/profile" --fresh --log-format json \
	--set 'matrix.model=[llama-3.2-1b]' --set 'matrix.profile_window=[none, "100-150"]' \
	--set params.dataset.num_requests=256 --set repeats=2 >"$out/study.txt" 2>"$out/study.log"
study_rc=$?
tar -C "$out" -czf "$out/profile-study.tgz" profile 2>/dev/null

echo "== GPU: $(head -1 "$out/gpu.txt")"
echo "== backend checks (exit $backend_rc):"
grep -E '^(--- (FAIL|PASS)|ok|FAIL)' "$out/backend.txt" | sort | uniq -c | sort -rn | head -8
grep -E '^--- FAIL' "$out/backend.txt" | head -10
echo "== profiled pass with CUPTI (exit $profile_rc):"
grep -E '^PROFILE|^--- ' "$out/profile-test.txt" | head -6
echo "== study (exit $study_rc): artifacts per profiled cell"
for d in "$out"/profile/cells/*/; do
	printf '  %-40s %s\n' "$(basename "$d")" "$(cd "$d" && ls kernels.csv trace.json telemetry.csv 2>/dev/null | tr '\n' ' ')"
done
for d in "$out"/profile/cells/*/; do
	[ -f "$d/kernels.csv" ] && { echo "  top kernels of $(basename "$d"):"; sed -n '2,4p' "$d/kernels.csv" | cut -c1-150; }
done
echo "== xrun's table:"
tail -n 25 "$out/study.txt"

#!/usr/bin/env bash
# Several studies at once on one host of several GPUs, each on its own GPUs
# (xrun run --gpus), every one stopped at a common deadline (SIGINT:
# finished cells and repeats are kept, exit 130) and continued in a later
# call with RESUME=1. A device call is capped at 10 minutes and a session's
# GPU time at 30, so a 4-GPU machine does four times the work per minute.
#
# Here: bash bench/gpu-check.sh in a clean worktree of the commit, copy its
# .gpu/ to .gpu-NAME/ in the checkout, then e.g.
#   run(kind="nvidia-h200-x4", carry=[".gpu-NAME"], command="mkdir -p .gpu &&
#     cp .gpu-NAME/* .gpu/ && STUDIES='0,1,2=experiments/profile.yaml
#     3=bench/specs/moe-quick.yaml' bash bench/gpu-multi.sh")
# Environment: STUDIES (space-separated GPUS=SPEC or GPUS=SPEC@XRUN: an
# older xrun binary, to resume a study under the build that began it, since
# --resume keeps cells only under the same build), DEADLINE (seconds for
# the whole call, default 540), RESUME=1 (continue the results carried in as
# .gpu/multi-results.tar.gz), TESTGPU (a GPU index: run the engine/cuda and
# engine/cuda/backend checks there first, alongside the studies, the first
# with a TESTTIMEOUT of seconds, default 430; then the
# engine/cuda benchmarks matching BENCH, BENCHTIME default 100x), EXTRA
# (more xrun run flags for every study, e.g. --time-limit 535s). Results
# come back as $OUT/results-core.tgz.NN and $OUT/results-data.tgz.NN (see
# the packing below; datasets left out), each study's results.md as
# $OUT/NAME.md and every log in $OUT/logs.tgz (the device returns at most
# 8 files); a short table is printed last. bench/gpu-resume-pack.sh
# merges what came back here and packs the next call's
# multi-results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
out=${OUT:-.gpu/out}
mkdir -p "$out"
out=$(cd "$out" && pwd) # the checks below write it from other folders
root=$PWD
deadline=${DEADLINE:-540}
res=/tmp/xrun-multi
mkdir -p "$res"
resume=(--fresh)
if [ "${RESUME:-0}" = 1 ] && [ -f .gpu/multi-results.tar.gz ]; then
	# Carry only what --resume needs (cell.json and the small files): the
	# traces and expert loads of finished cells can stay here.
	tar -xzf .gpu/multi-results.tar.gz -C "$res"
	resume=(--resume)
fi
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm,power.limit \
	--format=csv >"$out/devices.txt" 2>&1 || true

tests_rc=skipped backend_rc=skipped
if [ -n "${TESTGPU:-}" ]; then
	(
		export CUDA_VISIBLE_DEVICES=$TESTGPU
		# engine/cuda took 278 s of test time on an H200 (95 s of it NVRTC
		# compiling every kernel: a fresh machine has no kernel cache).
		tt=${TESTTIMEOUT:-430}
		# Each test binary runs in its package's directory: tests read their
		# testdata/ by relative path.
		(cd engine/cuda && timeout "$tt" "$root/.gpu/cuda.test" -test.v -test.timeout "$((tt - 5))s" >"$out/tests.txt" 2>&1
			echo "cuda.test exit $?" >>"$out/tests.txt")
		(cd engine/cuda/backend && timeout 150 "$root/.gpu/backend.test" -test.v -test.timeout 145s >"$out/backend.txt" 2>&1
			echo "backend.test exit $?" >>"$out/backend.txt")
		if [ -n "${BENCH:-}" ]; then
			(cd engine/cuda && timeout 120 "$root/.gpu/cuda.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime "${BENCHTIME:-100x}" >"$out/bench.txt" 2>&1)
		fi
	) &
	tests_pid=$!
fi

left=$((deadline - (SECONDS - start) - 30))
pids=() names=()
for s in ${STUDIES:-}; do
	gpus=${s%%=*} spec=${s#*=} bin=.gpu/xrun
	if [[ $spec == *@* ]]; then
		bin=${spec#*@} spec=${spec%%@*}
	fi
	name=$(sed -n 's/^name: *//p' "$spec" | head -1)
	names+=("$name")
	# shellcheck disable=SC2086
	timeout -s INT -k 20 "$left" "$bin" run "$spec" --gpus "$gpus" --out "$res/$name" "${resume[@]}" \
		--log-format json ${EXTRA:-} >"$out/$name.log" 2>&1 &
	pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do
	wait "$p"
	rcs+=($?)
done
if [ -n "${tests_pid:-}" ]; then
	wait "$tests_pid"
	tests_rc=$(sed -n 's/^cuda.test exit //p' "$out/tests.txt")
	backend_rc=$(sed -n 's/^backend.test exit //p' "$out/backend.txt")
fi

for n in "${names[@]}"; do
	rm -rf "$res/$n/datasets"
	cp "$res/$n/results.md" "$out/$n.md" 2>/dev/null
done
# The device returns at most 8 files of 16 MiB, about 60 MB in all, and
# drops the last ones beyond that. So the results come back in two
# archives: results-core.tgz, everything --resume and the tables need
# (results.json/md, each cell's cell.json and log, the repeats of
# unfinished cells), then results-data.tgz.NN, the finished cells' data
# files (requests.jsonl, iterations.csv, telemetry.csv: batch 1 writes
# ~19 MB of iterations a repeat) in 15 MiB parts, the only thing lost
# when a call returns too much (cat results-data.tgz.* | tar -xz).
data=(-path '*/cells/*' '(' -name requests.jsonl -o -name iterations.csv -o -name telemetry.csv ')')
# The core too can pass 16 MiB (an unfinished batch-1 cell keeps ~20 MB of
# iterations a repeat), so it comes in parts as well: results-core.tgz.NN.
(cd "$res" && find . -type f ! '(' "${data[@]}" ')' -print0 | tar -czf - --null -T -) 2>/dev/null | split -b 15M -d - "$out/results-core.tgz."
(cd "$res" && find . -type f "${data[@]}" -print0 | tar -czf - --null -T -) 2>/dev/null | split -b 15M -d - "$out/results-data.tgz."

for f in tests backend; do
	[ -f "$out/$f.txt" ] || continue
	echo "== $f failures (full log: $f.txt in logs.tgz)"
	grep -E -- '--- FAIL|^(FAIL|panic)' "$out/$f.txt" | head -20
done
i=0
for n in "${names[@]}"; do
	echo "== $n: xrun run exit ${rcs[$i]} (130: stopped at the deadline; RESUME=1 continues)"
	ls "$res/$n/cells" 2>/dev/null | while read -r c; do
		f="$res/$n/cells/$c/cell.json"
		printf '  %-56s %s\n' "$c" "$(grep -o '"status": *"[a-z]*"' "$f" 2>/dev/null | head -1)"
	done
	i=$((i + 1))
done
pass=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- PASS')
fail=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- FAIL')
echo "GPU checks (cuda exit $tests_rc, backend exit $backend_rc): $pass passed, $fail failed; $((SECONDS - start)) s"
# The device returns at most 8 files: the logs travel as one archive, the
# study reports (NAME.md) and the results parts beside it.
# The archive is written outside $out (tar reading a folder it writes into
# complains "file changed as we read it" and fails) and the loose files go
# even if tar does: left there, they push results parts past the eighth.
tar -czf /tmp/xrun-multi-logs.tgz -C "$out" --exclude='results-*' --exclude='*.md' --exclude=logs.tgz .
(cd "$out" && find . -maxdepth 1 -type f ! -name 'results-*' ! -name '*.md' -delete)
mv /tmp/xrun-multi-logs.tgz "$out/logs.tgz"

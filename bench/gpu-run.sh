#!/usr/bin/env bash
# Companion of gpu-check.sh, run on the GPU machine in one go: `xrun
# devices`, the engine/cuda kernel checks, the whole-model checks of
# engine/cuda/backend, the gemm study's cells through engine.New + Run
# (xrunbench: TinyLlama-1.1B fp16, 128/128, batch 1 / 64 / 256, gemm_plugin
# auto and disable), and the Hugging Face transformers baseline on the same
# GPU. Logs go to $OUT (or .gpu/out); a short table is printed last.
#
# Environment: TESTRUN (a -test.run pattern for engine/cuda), BACKENDRUN
# (for engine/cuda/backend), BENCH (a -test.bench pattern for the GEMM
# benchmark, default none), BATCHES (default 1,64,256), REQUESTS (default
# 3000), REQUESTS_AT (per-batch overrides, default 1=32: batch 1 serves
# 32 requests, which is plenty to time a steady state), REPEATS (default
# 1), HF (0 skips the transformers baseline), SKIPTESTS=1, SKIPBENCH=1,
# ABLATE (0: none; else space-separated VAR=VALUE:batch:gemm runs of 16
# requests at batch 1 or 512 otherwise), NCU (space-separated
# batch:gemm:window:requests: xrunbench's profiled pass under
# ncu --profile-from-start off, one summary per iteration of the window).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"
root=$PWD

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
	--format=csv >"$out/devices.txt" 2>&1 || true

.gpu/xrun devices >>"$out/devices.txt" 2>&1
devices_rc=$?

tests_rc=0 backend_rc=0
if [ "${SKIPTESTS:-0}" != 1 ]; then
	# In its package directory: tests read testdata/ by relative path.
	(cd engine/cuda && timeout 260 "$root/.gpu/cuda.test" -test.v -test.timeout 255s ${TESTRUN:+-test.run "$TESTRUN"}) >"$out/tests.txt" 2>&1
	tests_rc=$?
	(cd engine/cuda/backend && timeout 120 "$root/.gpu/backend.test" -test.v -test.timeout 115s ${BACKENDRUN:+-test.run "$BACKENDRUN"}) >"$out/backend.txt" 2>&1
	backend_rc=$?
fi

bench_rc=0
if [ "${BENCH:-none}" != none ]; then
	(cd engine/cuda && "$root/.gpu/cuda.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime "${BENCHTIME:-200ms}" -test.timeout 8m) >"$out/bench.txt" 2>&1
	bench_rc=$?
fi

xrun_rc=0
if [ "${SKIPBENCH:-0}" != 1 ]; then
	XRUN_CUDA_LT_LOG=1 timeout 240 .gpu/xrunbench -batch "${BATCHES:-1,64,256}" -gemm auto,disable -requests "${REQUESTS:-3000}" \
		-requests-at "${REQUESTS_AT:-1=32}" -repeats "${REPEATS:-1}" -json "$out/xrun.jsonl" >"$out/xrun.txt" 2>"$out/xrun.log"
	xrun_rc=$?
fi
# Ablations: one switch off per run (graphs, split attention, PDL, fusions,
# cuBLASLt timing, the own GEMV).
ablate=${ABLATE-XRUN_CUDA_GRAPHS=0:1:auto XRUN_CUDA_ATTN_SPLIT=0:1:auto}
if [ "$ablate" != 0 ] && [ -n "$ablate" ]; then
	echo "== ablations (batch 1: 16 requests, else 512)" >>"$out/xrun.txt"
	for a in $ablate; do
		IFS=: read -r v bs gm <<<"$a"
		n=512
		[ "$bs" = 1 ] && n=16
		env "$v" timeout 60 .gpu/xrunbench -batch "$bs" -gemm "$gm" -requests "$n" -json "$out/xrun.jsonl" 2>>"$out/xrun.log" |
			sed -n "2s/\$/   $v/p" >>"$out/xrun.txt"
	done
fi
# Per-kernel device times of whole iterations (ncu serialises kernels: the
# sum leaves out launch gaps, which the TPOT includes).
for spec in ${NCU:-}; do
	IFS=: read -r bs gm win n <<<"$spec"
	tag="b${bs}_${gm}"
	mkdir -p /tmp/xrun-ncu
	timeout 150 ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
		--print-units base --log-file "/tmp/xrun-ncu/$tag.csv" .gpu/xrunbench -batch "$bs" -gemm "$gm" -requests "${n:-512}" -repeats 0 \
		-profile-window "$win" >/dev/null 2>>"$out/ncu.log"
	echo "ncu $tag exit $?" >>"$out/ncu.log"
	python3 bench/ncu_summary.py "/tmp/xrun-ncu/$tag.csv" "$tag" >>"$out/ncu.txt" 2>&1
done

hf_rc=0
if [ "${HF:-1}" != 0 ]; then
	PYTHONUNBUFFERED=1 timeout 110 python3 bench/hf_transformers.py --batch "${BATCHES:-1,64,256}" --json "$out/hf.jsonl" >"$out/hf.txt" 2>&1
	hf_rc=$?
fi

echo "== nvidia-smi, xrun devices (exit $devices_rc)"; head -12 "$out/devices.txt"
for f in tests backend; do
	[ -f "$out/$f.txt" ] || continue
	echo "== $f failures (full log: $f.txt)"
	grep -E -- '--- FAIL|^(FAIL|panic)|_test\.go:[0-9]+: ' "$out/$f.txt" | grep -vE 'random seed|GPU check skipped|NVRTC [0-9.]+, [0-9]+ bytes|relative error [0-9.e-]+$' | head -40
done
echo "== whole-model checks: worst logit relative error per test"
awk '/^=== (RUN|CONT)/ { name = $3 } / relative error [0-9.e+-]+/ { for (i = 1; i < NF; i++) if ($i == "error") { v = $(i+1) + 0; if (!(name in w) || v > w[name]) w[name] = v; if (!(name in seen)) { seen[name] = 1; order[++n] = name } } }
	/^ *--- (PASS|FAIL)/ { st[$3] = $2 }
	END { for (i = 1; i <= n; i++) printf "%-45s %-5s %.3g\n", order[i], st[order[i]], w[order[i]] }' "$out/backend.txt" 2>/dev/null
[ "$xrun_rc" = 0 ] || { echo "== xrunbench log"; tail -30 "$out/xrun.log"; }
[ "$hf_rc" = 0 ] || { echo "== hf log"; tail -30 "$out/hf.txt"; }
[ "$bench_rc" = 0 ] || tail -20 "$out/bench.txt"
[ -f "$out/ncu.txt" ] && { echo "== ncu (ncu.txt)"; cat "$out/ncu.txt"; tail -3 "$out/ncu.log"; }
grep -h "cuBLASLt M=" "$out/xrun.log" 2>/dev/null | sort -u | head -24
echo "== transformers eager (hf.txt)"; grep -E '^ *[0-9]+ +[0-9]+ ' "$out/hf.txt" 2>/dev/null
echo "== xrun (engine.New + Run), ratio to transformers eager at the same batch"
awk 'FNR == NR { if ($0 ~ /"output_tok_s"/) { match($0, /"batch_size": [0-9]+/); b = substr($0, RSTART + 14, RLENGTH - 14); match($0, /"output_tok_s": [0-9.e+]+/); hf[b + 0] = substr($0, RSTART + 16, RLENGTH - 16) + 0 } next }
	/^batch/ { print $0 "   x_hf"; next }
	{ r = ($1 + 0 in hf && hf[$1 + 0] > 0) ? sprintf("%7.1fx", $4 / hf[$1 + 0]) : "      -"; print $0 " " r }' "$out/hf.jsonl" "$out/xrun.txt" 2>/dev/null || cat "$out/xrun.txt"
pass=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- PASS'); fail=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- FAIL'); skip=$(cat "$out"/tests.txt "$out"/backend.txt 2>/dev/null | grep -cE -- '--- SKIP')
echo "GPU checks (cuda exit $tests_rc, backend exit $backend_rc): $pass passed, $fail failed, $skip skipped; devices exit $devices_rc; xrun exit $xrun_rc; hf exit $hf_rc"
[ "$tests_rc" = 0 ] && [ "$backend_rc" = 0 ] && [ "$devices_rc" = 0 ] && [ "$xrun_rc" = 0 ]

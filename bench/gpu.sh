#!/usr/bin/env bash
# bench/gpu.sh: xrun's CUDA backend checked and measured on a GPU machine
# that has the NVIDIA driver but no Go toolchain. Build on a machine with
# Go, copy the repository with the build folder to the GPU machine, run
# there, copy the output folder back. bench/GPU.md explains the workflow
# and the measurements behind it; `bash bench/gpu.sh help` lists the
# options.
#
#   bash bench/gpu.sh build                  # with Go: vet, build $GPU_DIR
#   bash bench/gpu.sh check [options]        # GPU: every GPU test, a table
#   bash bench/gpu.sh study [options] SPEC [xrun run flags]
#   bash bench/gpu.sh resume [options] SPEC [xrun run flags]
#   bash bench/gpu.sh collect FROM [TREE]    # with Go or not: merge, stage
#   bash bench/gpu.sh ab [options] OLD NEW   # GPU: two builds' benchmarks
#   bash bench/gpu.sh zoo [options] BINARY   # GPU: own GEMMs against cuBLASLt
#
# Environment: GPU_DIR (the binaries, default .gpu), OUT (logs and packed
# results, default $GPU_DIR/out), RESULTS (the studies' results directories
# on the GPU machine, default $GPU_DIR/results), PART_SIZE (the size of each
# packed part, default 15M). Relative paths are taken from the repository
# root.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PROG="bash bench/gpu.sh"

GPU_DIR=$(realpath -m "${GPU_DIR:-.gpu}")
OUT=$(realpath -m "${OUT:-$GPU_DIR/out}")
RESULTS=$(realpath -m "${RESULTS:-$GPU_DIR/results}")
PART_SIZE=${PART_SIZE:-15M}

# The GPU test binaries: name, package (where each runs: tests read their
# testdata/ by relative path) and the default timeout in seconds.
# engine/cuda's whole suite took 538 s on an H100 with 16 cores
# (2026-11-27), NVRTC compiling every kernel for the first time included
# (a fresh machine has no kernel cache): the tests compile every family
# at once when they open the GPU, and TestKernelsCompile compiles each for
# sm_80 and sm_90a, one a core (its slowest, sm_80's attention_tc_f8, 92 s).
declare -A PKG=([cuda]=engine/cuda [backend]=engine/cuda/backend [cupti]=engine/profile/cupti [profile]=engine/profile)
declare -A TIMEOUT=([nvidia-smi]=60 [devices]=120 [cuda]=1200 [cuda-warm]=600 [backend]=200 [bench]=300 [cupti]=120 [cupti-ncu]=120 [profile]=200 [nvtx]=300 [nvtx-stats]=120 [nccl]=200 [parallel]=400)
TEST_BINARIES=(cuda backend cupti profile)
STEP_NAMES=(nvidia-smi devices cuda cuda-warm backend bench cupti cupti-ncu profile nvtx nvtx-stats nccl parallel)

usage() {
	cat <<EOF
usage: $PROG COMMAND [options]

On a machine with Go (linux/amd64 with a C compiler; its glibc no newer
than the GPU machine's):
  build             go vet the GPU packages, check the cgo-free build, and
                    build into \$GPU_DIR (default .gpu): xrun and the test
                    binaries ${TEST_BINARIES[*]}; where an NVRTC is at hand
                    (XRUN_LIBNVRTC names one) also compile every kernel, so
                    a kernel that does not compile costs no GPU time.
  collect FROM [TREE]
                    merge the packed results a study or resume wrote (the
                    FROM folder: NAME-core.tgz.NNN, NAME-data.tgz.NNN) into
                    TREE/NAME (default TREE: results), and stage what the
                    next resume needs as \$GPU_DIR/resume/NAME.tgz.

On the GPU machine (the repository with \$GPU_DIR beside it; no Go needed):
  check [options]   nvidia-smi, xrun devices (when \$GPU_DIR has xrun) and
                    the GPU tests, each with its own timeout and log in
                    \$OUT (default .gpu/out); a short table last. Exit 0
                    when every step passed.
      --tests LIST  which tests (comma-separated, default cuda,backend):
                    cuda     engine/cuda: every kernel, cuBLASLt, graphs
                    backend  engine/cuda/backend: the whole model against
                             Hugging Face and the CPU backend, MoE, overlap
                    cupti    engine/profile/cupti: CUPTI's self-test, its
                             cost per launch, and (with ncu) stepping aside
                    profile  engine/profile: TinyLlama-1.1B profiled through
                             engine.New + Run, artifacts in \$OUT/profile-cells
                    nvtx     one NVTX range per iteration under nsys profile
                    parallel tensor and expert parallelism over NCCL (issue
                             23), on every GPU visible: step nccl
                             (engine/cuda: NCCL's loading, all-reduce and
                             all-gather, eager and in graphs) and step
                             parallel (engine/cuda/backend: TestParallel*,
                             split models against the unsplit one, tp 2/4,
                             ep 2/4); checks needing more GPUs than visible
                             skip, saying so
                    all      every one of them
      --run PATTERN         -test.run for engine/cuda
      --backend-run PATTERN -test.run for engine/cuda/backend
      --bench PATTERN       also engine/cuda's benchmarks matching PATTERN
      --benchtime D         their -test.benchtime (default 100x)
      --gpu N               run on GPU N only (CUDA_VISIBLE_DEVICES), e.g.
                            beside a study on the others
      --gpus LIST           run on these GPUs (comma-separated, e.g. 0,1):
                            engine/cuda's tests dealt out over them, one
                            process a GPU at once (steps cuda.0, cuda.1,
                            ...), after step cuda-warm has compiled the
                            kernels into the disk cache on the first; the
                            deal balances the test times of the cuda.log
                            an earlier check left in \$OUT, else goes in
                            turn; the other steps see every GPU listed
      --timeout STEP=SECONDS  override a step's timeout (repeatable); steps:
                            ${STEP_NAMES[*]:0:6}
                            ${STEP_NAMES[*]:6}

  study [options] SPEC [xrun run flags]
                    xrun run SPEC --fresh into \$RESULTS/NAME, then pack the
                    results into \$OUT: NAME.md (the tables), NAME.log (xrun's
                    JSON log), NAME-core.tgz.NNN (what --resume and the
                    tables need) and NAME-data.tgz.NNN (finished cells'
                    requests.jsonl, iterations.csv, telemetry.csv), in parts
                    of \$PART_SIZE (default 15M).
      --time-limit SECONDS  end within SECONDS (xrun run --time-limit, and a
                            hard stop 30 s later); exit 130 means stopped
                            there, resume continues
      --gpus LIST           xrun run --gpus
      --as NAME             results named NAME instead of the spec's name
                            (the same spec under another switch or binary)
      --xrun PATH           another xrun binary (the one a study began
                            with: --resume keeps cells of the same build)
      --ncu                 under Nsight Compute (ncu --profile-from-start
                            off): every kernel of the profile_window,
                            summarised per iteration in \$OUT/NAME-ncu.txt
                            (profile one cell: --only id=CELL); the study's
                            timings are not comparable then
  resume [options] SPEC [xrun run flags]
                    as study, with --resume: continue \$RESULTS/NAME, or,
                    when it is not there, the pack collect staged
                    (\$GPU_DIR/resume/NAME.tgz).
  ab [options] OLD NEW
                    engine/cuda's benchmarks from two builds of its test
                    binary (OLD, NEW: e.g. \$GPU_DIR/cuda.test and a
                    branch's), each first run once to compile its kernels
                    into the disk cache, then timed in crossed order: on a
                    GPU the rounds alternate OLD, NEW and NEW, OLD, and
                    with --gpus the GPUs start opposite ways, at once, so
                    that neither build always runs first or on one GPU.
                    Every round's output in \$OUT/ab-old.txt and
                    \$OUT/ab-new.txt; a table of the runs, then each
                    benchmark's medians and NEW / OLD, then the benchmarks
                    whose logged plan (BenchmarkGemm's own GEMMs, under
                    -test.v) differs between the builds. For significance, on
                    a machine with Go, from the repository:
                    go run golang.org/x/perf/cmd/benchstat OLD.txt NEW.txt
      --bench PATTERN       -test.bench (required), e.g.
                            'BenchmarkGemmFP8/^own-fp8\$/./^M=128\$'
      --benchtime D         -test.benchtime (default 100x: samples of
                            20 launches of 8-11 us GEMMs moved by up to
                            18 %)
      --count N             -test.count a run (default 3)
      --rounds R            rounds a GPU (default 2)
      --gpus LIST           these GPUs (comma-separated, e.g. 0,1) at once
      --rows LIST           BenchmarkGemm's and BenchmarkGemmFP8's M values
                            (-gemm.rows, comma-separated, e.g. 192,256)
      --timeout SECONDS     each run's limit (default 300)
  zoo [options] BINARY
                    engine/cuda's own GEMMs against cuBLASLt on the zoo's
                    shapes (BINARY: its test binary, e.g. \$GPU_DIR/cuda.test):
                    BenchmarkGemm's own and cublaslt, BenchmarkGemmFP8's
                    own-fp8 and cublaslt-fp8, at the M values of --rows,
                    dealt in turn over --gpus (one process a GPU, at once)
                    after a run on the first has compiled the kernels;
                    --samples runs of each, every second one with
                    -gemm.reverse (each shape's implementations in reverse
                    order), so that the pooled medians carry no position.
                    Each run's output in \$OUT/zoo-GPU-SAMPLE.log, all of
                    them in \$OUT/zoo.txt; a table of the runs, then, with
                    \$GPU_DIR/gemmvs (build makes it), how many shapes at
                    each M are within --within per cent of cuBLASLt and
                    which are not (all of it in \$OUT/zoo-verdicts.txt;
                    elsewhere: go run ./bench/gemmvs -within 15 zoo.txt).
                    Exit 0 when every run passed, whatever the verdicts.
      --rows LIST           the M values (required), comma-separated
      --gpus LIST           these GPUs (comma-separated, e.g. 0,1,2,3)
      --samples N           runs of each M (default 3)
      --impls PATTERN       the implementations, -test.bench's second
                            element (default
                            ^(own|cublaslt|own-fp8|cublaslt-fp8)\$; forced
                            tiles: own-tma-TILE, own-fp8-tma-TILE)
      --shapes PATTERN      the shapes, its third (default: every one)
      --within PCT          the verdicts' margin (default 15)
      --benchtime D         -test.benchtime (default 100x)
      --timeout SECONDS     each run's limit (default 600)
EOF
}

die() {
	echo "gpu.sh: $*" >&2
	exit 2
}

# need_gpu CMD [xrun] fails fast where check, study and resume cannot
# run; with xrun, also without the xrun binary.
need_gpu() {
	command -v nvidia-smi >/dev/null ||
		die "no NVIDIA driver here (nvidia-smi not found): '$1' runs on the GPU machine; here, '$PROG build' and copy the repository with $GPU_DIR there"
	local out
	out=$(timeout 60 nvidia-smi -L 2>&1) || die "nvidia-smi -L failed, no usable GPU: $out"
	if [ "${2:-}" = xrun ] && [ ! -x "$GPU_DIR/xrun" ]; then
		die "$GPU_DIR/xrun missing: run '$PROG build' on a machine with Go, then copy $GPU_DIR here"
	fi
	mkdir -p "$OUT" || die "cannot create OUT=$OUT"
}

# ---- steps: the one way check, study and resume run a command ----

STEPS=()
declare -A RC SECS NOTE LOG

# step NAME DIR CMD...: CMD in DIR (relative to the repository root),
# stopped after TIMEOUT[NAME] seconds (0: never) by SIGTERM (xrun stops
# as on Ctrl-C, keeping what it measured), then SIGKILL 15 s later; its
# output in $OUT/NAME.log; the exit status and time go to the table. An
# environment given as VAR=VALUE before the call reaches CMD.
step() {
	local name=$1 dir=$2 t0=$SECONDS
	shift 2
	local secs=${TIMEOUT[$name]:-0}
	STEPS+=("$name")
	LOG[$name]=$name.log
	echo "== $name: $* ($([ "$secs" = 0 ] && echo "no timeout" || echo "timeout ${secs}s"))" >&2
	(cd "$ROOT/$dir" && exec timeout -k 15 "$secs" "$@") >"$OUT/$name.log" 2>&1
	RC[$name]=$?
	SECS[$name]=$((SECONDS - t0))
	stopped "$name" "$secs" "$name"
}

# stopped NAME SECS FLAG notes in the table, and in NAME's log, that step
# NAME ran out of its SECS seconds: killed by timeout (exit 124 or 137),
# or stopped by the test binary's own -test.timeout, SECS - 10 (a panic
# in the log, exit 2, which the table would show as a bare failure).
# FLAG is the --timeout step that gives it more (empty: --timeout SECONDS
# itself, as ab takes it).
stopped() {
	local name=$1 secs=$2 log=$OUT/$1.log hint="--timeout ${3:+$3=}SECONDS"
	if [ "${RC[$name]}" = 124 ] || [ "${RC[$name]}" = 137 ]; then
		NOTE[$name]="stopped after the ${secs}s timeout"
		echo "gpu.sh: $name stopped after ${secs}s ($hint)" >>"$log"
	elif grep -q '^panic: test timed out after' "$log" 2>/dev/null; then
		NOTE[$name]="stopped by -test.timeout $((secs - 10))s; $hint"
		echo "gpu.sh: $name stopped by -test.timeout $((secs - 10))s ($hint)" >>"$log"
	fi
}

# gotest NAME [ARGS]: test binary NAME in its package, -test.v, with Go's
# own -test.timeout 10 s before the step's so that a stuck test prints
# its goroutines before the kill.
gotest() {
	local name=$1 bin=$1
	shift
	case $name in bench | nccl | cuda-warm) bin=cuda ;; parallel) bin=backend ;; esac
	local secs=${TIMEOUT[$name]}
	step "$name" "${PKG[$bin]}" "$GPU_DIR/$bin.test" -test.v -test.timeout "$((secs - 10))s" "$@"
}

# skipped NAME WHY: a step that could not run here, for the table.
skipped() {
	STEPS+=("$1")
	RC[$1]=skip SECS[$1]=0 NOTE[$1]=$2 LOG[$1]=-
}

# table prints the steps and returns 1 when any failed.
table() {
	local failed=0 n p f s
	printf '%-12s %5s %6s %5s %5s %6s  %s\n' step exit passed failed skip secs log
	for n in "${STEPS[@]}"; do
		p=- f=- s=-
		if [ -f "$OUT/${LOG[$n]}" ] && grep -q '^=== RUN' "$OUT/${LOG[$n]}"; then
			p=$(grep -c -- '--- PASS' "$OUT/${LOG[$n]}")
			f=$(grep -c -- '--- FAIL' "$OUT/${LOG[$n]}")
			s=$(grep -c -- '--- SKIP' "$OUT/${LOG[$n]}")
		fi
		printf '%-12s %5s %6s %5s %5s %6s  %s\n' "$n" "${RC[$n]}" "$p" "$f" "$s" "${SECS[$n]}" "${LOG[$n]}${NOTE[$n]:+ (${NOTE[$n]})}"
		case ${RC[$n]} in 0 | skip) ;; *) failed=1 ;; esac
	done
	return $failed
}

# ---- build ----

cmd_build() {
	[ $# = 0 ] || die "build takes no arguments"
	command -v go >/dev/null || die "build needs Go (go not found); check, study and resume need none"
	set -e
	go vet ./engine/cuda/... ./engine/profile/... ./bench/...
	# Without cgo xrun must still plan, report and diff.
	CGO_ENABLED=0 go build ./...
	mkdir -p "$GPU_DIR"
	local flags=(-trimpath -ldflags='-s -w') b
	CGO_ENABLED=1 go build "${flags[@]}" -o "$GPU_DIR/xrun" ./cmd/xrun
	for b in "${TEST_BINARIES[@]}"; do
		CGO_ENABLED=1 go test -c "${flags[@]}" -o "$GPU_DIR/$b.test" "./${PKG[$b]}"
	done
	# zoo's verdicts on the GPU machine, which has no Go.
	CGO_ENABLED=0 go build "${flags[@]}" -o "$GPU_DIR/gemmvs" ./bench/gemmvs
	# Debian's CUDA 11.8 NVRTC checks sm_80 at least.
	if [ -z "${XRUN_LIBNVRTC:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2 ]; then
		export XRUN_LIBNVRTC=/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2
	fi
	if [ -n "${XRUN_LIBNVRTC:-}" ] || ldconfig -p 2>/dev/null | grep -qE 'libnvrtc\.so\.1[23]'; then
		CGO_ENABLED=1 go test -count=1 -run TestKernelsCompile ./engine/cuda
	else
		echo "no NVRTC here (XRUN_LIBNVRTC unset): the kernels compile on the GPU, in the first check"
	fi
	set +e
	ls -l "$GPU_DIR"/xrun "$GPU_DIR"/gemmvs "$GPU_DIR"/*.test
	du -sh "$GPU_DIR"
	echo "next: copy the repository with $GPU_DIR to the GPU machine and run '$PROG check' there"
}

# ---- check ----

cmd_check() {
	local tests=cuda,backend run="" backend_run="" bench="" benchtime=100x gpu="" gpus="" t kv
	while [ $# -gt 0 ]; do
		case $1 in
		--tests) tests=${2:?--tests LIST}; shift ;;
		--run) run=${2:?--run PATTERN}; shift ;;
		--backend-run) backend_run=${2:?--backend-run PATTERN}; shift ;;
		--bench) bench=${2:?--bench PATTERN}; shift ;;
		--benchtime) benchtime=${2:?--benchtime D}; shift ;;
		--gpu) gpu=${2:?--gpu N}; shift ;;
		--gpus)
			gpus=${2:?--gpus LIST}
			[[ $gpus =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus $gpus: GPU indices separated by commas, e.g. 0,1"
			shift
			;;
		--timeout)
			kv=${2:?--timeout STEP=SECONDS}
			[ -n "${TIMEOUT[${kv%%=*}]+x}" ] || die "--timeout $kv: no step ${kv%%=*} (steps: ${STEP_NAMES[*]})"
			[[ ${kv#*=} =~ ^[0-9]+$ ]] || die "--timeout $kv: SECONDS must be a whole number"
			case ${kv%%=*} in cuda | cuda-warm | backend | bench | cupti | profile | nccl | parallel)
				[ "${kv#*=}" -gt 20 ] || die "--timeout $kv: a test binary needs more than 20 s" ;;
			esac
			TIMEOUT[${kv%%=*}]=${kv#*=}
			shift
			;;
		-h | --help) usage; exit 0 ;;
		*) die "check: unknown option $1 (see '$PROG help')" ;;
		esac
		shift
	done
	[ -n "$gpu" ] && [ -n "$gpus" ] && die "--gpu $gpu and --gpus $gpus: one or the other"
	[[ $gpus == *,* ]] && [[ $run == */* ]] && die "--gpus $gpus deals whole tests: --run $run names subtests"
	[ -n "$gpus$gpu" ] && export CUDA_VISIBLE_DEVICES=$gpus$gpu
	[ "$tests" = all ] && tests=cuda,backend,cupti,profile,nvtx,parallel
	for t in ${tests//,/ }; do
		case $t in cuda | backend | cupti | profile | nvtx | parallel | none) ;; *) die "--tests: unknown test $t (cuda, backend, cupti, profile, nvtx, parallel, all, none)" ;; esac
	done
	need_gpu check
	local want=",$tests,"
	for t in cuda backend cupti profile; do
		if [[ $want == *,$t,* ]] || { [ $t = cuda ] && [ -n "$bench" ]; } || { [[ $want == *,parallel,* ]] && [[ $t == cuda || $t == backend ]]; }; then
			[ -x "$GPU_DIR/$t.test" ] || die "$GPU_DIR/$t.test missing: '$PROG build' builds it"
		fi
	done
	# Over several GPUs, engine/cuda's tests dealt by the last check's
	# times (its cuda.log), before anything runs.
	local shares=""
	if [[ $want == *,cuda,* ]] && [[ $gpus == *,* ]]; then
		local times=""
		[ -f "$OUT/cuda.log" ] && times=$(sed -n 's/^--- [A-Z]*: \(Test[^ ]*\) (\([0-9.]*\)s)$/\1 \2/p' "$OUT/cuda.log")
		shares=$(deal_cuda "$gpus" "$run" "$times") || exit
	fi
	# Logs of an earlier check would pass for this one's.
	(cd "$OUT" && rm -rf "${STEP_NAMES[@]/%/.log}" cuda.[0-9]*.log nvtx.nsys-rep profile-cells)

	step nvidia-smi . nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv
	if [ -x "$GPU_DIR/xrun" ]; then
		step devices . "$GPU_DIR/xrun" devices
	else
		skipped devices "no $GPU_DIR/xrun"
	fi
	if [[ $want == *,cuda,* ]]; then
		if [ -n "$shares" ]; then
			cuda_shards "$gpus" "$shares"
		else
			gotest cuda ${run:+-test.run "$run"}
		fi
	fi
	[[ $want == *,backend,* ]] && gotest backend ${backend_run:+-test.run "$backend_run"}
	[ -n "$bench" ] && gotest bench -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime"
	if [[ $want == *,cupti,* ]]; then
		gotest cupti
		# Under an outside profiler xrun must leave CUPTI to it.
		if command -v ncu >/dev/null; then
			XRUN_UNDER_PROFILER=1 step cupti-ncu "${PKG[cupti]}" ncu --profile-from-start off --target-processes all \
				"$GPU_DIR/cupti.test" -test.v -test.run TestGPUStepAside
		else
			skipped cupti-ncu "ncu not found"
		fi
	fi
	if [[ $want == *,profile,* ]]; then
		rm -rf "$OUT/profile-cells" && mkdir -p "$OUT/profile-cells"
		XRUN_PROFILE_OUT=$OUT/profile-cells gotest profile -test.run 'TestGPUProfiledPass|TestCPUProfileGolden'
	fi
	[[ $want == *,nvtx,* ]] && nvtx_check
	if [[ $want == *,parallel,* ]]; then
		gotest nccl -test.run 'TestParallel|TestNCCL|TestGatherBlocks|TestMoEShardIDs'
		gotest parallel -test.run 'TestParallel'
	fi

	summary
	echo "== gpu.sh check: logs in $OUT"
	table
}

# nvtx_check records a short profiled study under nsys and checks that
# exactly the window's iterations 4..8 have an NVTX range, named as
# TensorRT-LLM names them ("iteration 6: 0 ctx reqs, 0 ctx tokens, 8 gen
# reqs").
nvtx_check() {
	local nsys c
	nsys=$(command -v nsys)
	for c in /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
		[ -z "$nsys" ] && [ -x "$c" ] && nsys=$c
	done
	if [ -z "$nsys" ]; then
		skipped nvtx "nsys not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems)"
		return
	fi
	if [ ! -x "$GPU_DIR/xrun" ]; then
		skipped nvtx "no $GPU_DIR/xrun"
		return
	fi
	local tmp
	tmp=$(mktemp -d)
	# Eight requests in one batch: iteration 0 prefills them all, 1..15
	# decode; without warm-up requests iterations 4..8 are plain decode.
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
	rm -f "$OUT"/nvtx.nsys-rep
	XRUN_CACHE_DIR=$tmp/cache step nvtx . "$nsys" profile -c cudaProfilerApi --capture-range-end=stop -t cuda,nvtx \
		-o "$OUT/nvtx" --force-overwrite true "$GPU_DIR/xrun" run "$tmp/nvtx.yaml" --out "$tmp/results"
	if [ "${RC[nvtx]}" = 0 ] && [ -e "$OUT/nvtx.nsys-rep" ]; then
		# The summary's report name changed over nsys versions.
		local got
		step nvtx-stats . "$nsys" stats --report nvtx_sum --format csv --output - "$OUT/nvtx.nsys-rep"
		if ! grep -q 'Range' "$OUT/nvtx-stats.log"; then
			# The report's name before nsys 2023.
			unset 'STEPS[${#STEPS[@]}-1]'
			step nvtx-stats . "$nsys" stats --report nvtxsum --format csv --output - "$OUT/nvtx.nsys-rep"
		fi
		got=$(grep -oE 'iteration [0-9]+:' "$OUT/nvtx-stats.log" | grep -oE '[0-9]+' | sort -n | uniq | tr '\n' ' ')
		if [ "$got" = "4 5 6 7 8 " ]; then
			NOTE[nvtx-stats]="ranges for iterations 4-8: ok"
		else
			RC[nvtx-stats]=1 NOTE[nvtx-stats]="ranges for iterations ${got:-none}, want 4 5 6 7 8"
		fi
	elif [ "${RC[nvtx]}" = 0 ]; then
		RC[nvtx]=1 NOTE[nvtx]="nsys wrote no report"
	fi
	rm -rf "$tmp"
}

# deal_cuda GPUS RUN TIMES prints engine/cuda's tests (those RUN matches,
# all without it) dealt over the comma-separated GPUS, one line of
# names joined by | for each. TIMES ("TestName seconds" lines) weighs the
# deal: the longest test first to the share with the least time, ties to
# the one with the fewest tests, so that without times the tests go in
# turn.
deal_cuda() {
	local n names
	n=$(awk -F, '{ print NF }' <<<"$1")
	names=$(cd "$ROOT/${PKG[cuda]}" && "$GPU_DIR/cuda.test" -test.list "${2:-.}" | grep '^Test')
	[ -n "$names" ] || die "--run ${2:-.}: no engine/cuda test matches"
	awk -v n="$n" '
		NR == FNR { w[$1] = $2; next }
		{ name[FNR] = $1; wt[FNR] = w[$1] + 0; order[FNR] = FNR; m = FNR }
		END {
			# Longest first; a stable insertion sort keeps the order of equals.
			for (i = 2; i <= m; i++)
				for (j = i; j > 1 && wt[order[j]] > wt[order[j-1]]; j--) { x = order[j]; order[j] = order[j-1]; order[j-1] = x }
			for (i = 1; i <= m; i++) {
				k = order[i]; b = 0
				for (s = 1; s < n; s++) if (load[s] < load[b] || load[s] == load[b] && cnt[s] < cnt[b]) b = s
				load[b] += wt[k]; cnt[b]++; pick[b] = pick[b] (cnt[b] > 1 ? "|" : "") name[k]
			}
			for (s = 0; s < n; s++) print pick[s]
		}' <(printf '%s\n' "$3") <(printf '%s\n' "$names")
}

# cuda_shards GPUS SHARES runs engine/cuda's tests as dealt (SHARES, one
# line a GPU, deal_cuda) at once, one process a GPU (steps cuda.0,
# cuda.1, ...; the logs together also as cuda.log), after step cuda-warm
# has filled the kernel cache on the first GPU, so that the shares do not
# each compile every kernel.
cuda_shards() {
	local -a ids shares pids=()
	IFS=, read -r -a ids <<<"$1"
	mapfile -t shares <<<"$2"
	local secs=${TIMEOUT[cuda]} i t0
	CUDA_VISIBLE_DEVICES=${ids[0]} gotest cuda-warm -test.run '^TestMemory$'
	t0=$SECONDS
	for i in "${!ids[@]}"; do
		[ -n "${shares[$i]:-}" ] || continue
		STEPS+=("cuda.$i")
		LOG[cuda.$i]=cuda.$i.log
		echo "== cuda.$i: GPU ${ids[$i]}, $(tr '|' '\n' <<<"${shares[$i]}" | wc -l) tests (timeout ${secs}s)" >&2
		(cd "$ROOT/${PKG[cuda]}" && CUDA_VISIBLE_DEVICES=${ids[$i]} exec timeout -k 15 "$secs" \
			"$GPU_DIR/cuda.test" -test.v -test.timeout "$((secs - 10))s" -test.run "^(${shares[$i]})\$") >"$OUT/cuda.$i.log" 2>&1 &
		pids[i]=$!
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}"
		RC[cuda.$i]=$?
		SECS[cuda.$i]=$((SECONDS - t0))
		stopped "cuda.$i" "$secs" cuda
	done
	for i in "${!pids[@]}"; do cat "$OUT/cuda.$i.log"; done >"$OUT/cuda.log"
}

# summary prints what the logs hold beyond the table: failures, the whole
# model's worst logit errors, CUPTI's costs, benchmarks.
summary() {
	local n
	for n in "${STEPS[@]}"; do
		case $n in cuda | cuda-warm | cuda.* | backend | cupti | profile | nccl | parallel) ;; *) continue ;; esac
		if [ -z "${RC[$n]+x}" ] || [ "${RC[$n]}" = 0 ]; then continue; fi
		echo "== $n failures ($n.log)"
		grep -E -- '--- FAIL|^(FAIL|panic)|_test\.go:[0-9]+: ' "$OUT/$n.log" |
			grep -vE 'random seed|GPU check skipped|NVRTC [0-9.]+, [0-9]+ bytes|relative error [0-9.e-]+$' | head -40
	done
	case ${RC[devices]:-0} in 0 | skip) ;; *) echo "== xrun devices (devices.log)"; head -20 "$OUT/devices.log" ;; esac
	if [ -f "$OUT/backend.log" ]; then
		echo "== whole-model checks: worst logit relative error per test (backend.log)"
		awk '/^=== (RUN|CONT)/ { name = $3 }
			/ relative error [0-9.e+-]+/ { for (i = 1; i < NF; i++) if ($i == "error") { v = $(i+1) + 0; if (!(name in w) || v > w[name]) w[name] = v; if (!(name in seen)) { seen[name] = 1; order[++n] = name } } }
			/^ *--- (PASS|FAIL)/ { s = $2; sub(/:$/, "", s); st[$3] = s }
			END { for (i = 1; i <= n; i++) printf "  %-45s %-5s %.3g\n", order[i], st[order[i]], w[order[i]] }' "$OUT/backend.log"
	fi
	[ -f "$OUT/bench.log" ] && { echo "== benchmarks (bench.log)"; grep -E '^Benchmark' "$OUT/bench.log"; }
	if [ -f "$OUT/cupti.log" ] || [ -f "$OUT/profile.log" ]; then
		echo "== profiling costs (cupti.log, profile.log)"
		awk '/^PROFILE launch_us/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); printf "  %-28s %s\n", "launch " kv[1], kv[2] } }' "$OUT/cupti.log" 2>/dev/null
		awk '/^PROFILE gemm=/ { split($2, g, "="); for (i = 3; i <= NF; i++) if ($i ~ /=/) { split($i, kv, "="); printf "  %-28s %s\n", g[2] " " kv[1], kv[2] } }' "$OUT/profile.log" 2>/dev/null
		grep -E '^PROFILE|--- (PASS|FAIL|SKIP)' "$OUT/cupti-ncu.log" 2>/dev/null | sed 's/^/  under ncu: /' | head -4
	fi
	return 0
}

# ---- study and resume ----

# study_name SPEC: the study's name as xrun reads it.
study_name() {
	"$GPU_DIR/xrun" plan "$1" --json 2>/dev/null | sed -n 's/^  "name": "\(.*\)",$/\1/p' | head -1
}

# cmd_study MODE ARGS...: MODE fresh (study) or resume.
cmd_study() {
	local mode=$1 limit="" gpus="" as="" xrun="" ncu=0 spec="" cmd=$1
	shift
	[ "$mode" = fresh ] && cmd=study
	while [ $# -gt 0 ]; do
		case $1 in
		--time-limit) limit=${2:?--time-limit SECONDS}; shift ;;
		--gpus) gpus=${2:?--gpus LIST}; shift ;;
		--as) as=${2:?--as NAME}; shift ;;
		--xrun) xrun=${2:?--xrun PATH}; shift ;;
		--ncu) ncu=1 ;;
		-h | --help) usage; exit 0 ;;
		--*) die "$cmd: unknown option $1 before SPEC (xrun run's flags go after it)" ;;
		*) spec=$1; shift; break ;;
		esac
		shift
	done
	[ -n "$spec" ] || die "$cmd: no SPEC (see '$PROG help')"
	[ -f "$spec" ] || die "$cmd: $spec: no such file"
	[ -z "$limit" ] || [[ $limit =~ ^[0-9]+$ ]] || die "--time-limit $limit: SECONDS must be a whole number"
	[[ $as =~ ^[A-Za-z0-9._-]*$ ]] || die "--as $as: letters, digits, '.', '_' and '-' only"
	need_gpu "$cmd" xrun
	xrun=$(realpath -m "${xrun:-$GPU_DIR/xrun}")
	[ -x "$xrun" ] || die "--xrun $xrun: not an executable"
	local name=${as:-$(study_name "$spec")}
	[ -n "$name" ] || die "$cmd: $spec: xrun plan cannot read it: $("$GPU_DIR/xrun" plan "$spec" 2>&1 | head -3)"
	local res=$RESULTS/$name flag=--fresh
	if [ "$mode" = resume ]; then
		flag=--resume
		local pack=$GPU_DIR/resume/$name.tgz
		if [ -d "$res" ]; then
			echo "== resume: continuing $res"
		elif [ -f "$pack" ]; then
			mkdir -p "$RESULTS" || die "cannot create RESULTS=$RESULTS"
			tar -xzf "$pack" -C "$RESULTS" || die "cannot unpack $pack"
			echo "== resume: continuing $pack (unpacked into $res)"
		else
			die "resume: nothing to continue: no $res and no $pack ('$PROG collect FROM' stages it from an earlier run's output)"
		fi
	fi
	mkdir -p "$RESULTS"

	local run=("$xrun" run "$spec" --out "$res" "$flag" --log-format json ${gpus:+--gpus "$gpus"} ${limit:+--time-limit "${limit}s"} "$@")
	TIMEOUT[$name]=0
	[ -n "$limit" ] && TIMEOUT[$name]=$((limit + 30))
	if [ "$ncu" = 1 ]; then
		command -v ncu >/dev/null || die "--ncu: ncu (Nsight Compute) not found"
		command -v python3 >/dev/null || die "--ncu: python3 not found (bench/ncu_summary.py summarises ncu's log)"
		# ncu serialises kernels and flushes caches: the sums leave out
		# launch gaps and run above the time per output token.
		rm -f "$OUT/$name-ncu.csv"
		step "$name" . ncu --profile-from-start off --target-processes all --clock-control none \
			--metrics gpu__time_duration.sum --csv --page raw --print-units base --log-file "$OUT/$name-ncu.csv" "${run[@]}"
		python3 bench/ncu_summary.py "$OUT/$name-ncu.csv" "$name" >"$OUT/$name-ncu.txt" 2>&1
	else
		step "$name" . "${run[@]}"
	fi
	# Exit 2: bad input, nothing ran; whatever RESULTS holds is older.
	pack "$name" "$([ "${RC[$name]}" = 2 ] && echo none)"

	cat "$OUT/$name.md" 2>/dev/null
	[ "$ncu" = 1 ] && { echo "== ncu ($name-ncu.txt)"; cat "$OUT/$name-ncu.txt"; }
	local kind f
	echo "== in $OUT:"
	for f in "$name".md "$name".log "$name"-ncu.csv "$name"-ncu.txt; do
		[ -e "$OUT/$f" ] && echo "   $f"
	done
	for kind in core data; do
		set -- "$OUT/$name-$kind".tgz.*
		[ -e "$1" ] && echo "   $name-$kind.tgz.000... $# part(s), $(du -ch "$@" | tail -1 | cut -f1)"
	done
	case ${RC[$name]} in
	0) echo "== $name: xrun run $flag: every cell ok" ;;
	130) echo "== $name: xrun run $flag stopped at the time limit (or interrupted), exit 130; '$PROG resume $spec' continues" ;;
	*) echo "== $name: xrun run $flag exited ${RC[$name]}${NOTE[$name]:+ (${NOTE[$name]})}; the log's end ($name.log):"
		tail -n 20 "$OUT/$name.log" ;;
	esac
	case ${RC[$name]} in 0 | 130) return "${RC[$name]}" ;; *) return 1 ;; esac
}

# The per-cell data files that finished cells keep; --resume needs none of
# them (an unfinished cell's repeats keep theirs under repeats/).
DATA=(-path '*/cells/*' '(' -name requests.jsonl -o -name iterations.csv -o -name telemetry.csv ')')

# pack NAME [none]: $RESULTS/NAME as $OUT/NAME-core.tgz.NNN (everything
# but the data files and the datasets) and $OUT/NAME-data.tgz.NNN (the
# data files), each split in parts of $PART_SIZE, and the tables as
# NAME.md; with none, only the earlier packs removed. Parts keep every
# file under a copy's size cap; a lost data part costs only the file it
# cuts (collect), and the core, small, is what a resume needs.
pack() {
	local name=$1
	rm -f "$OUT/$name"-core.tgz.* "$OUT/$name"-data.tgz.* "$OUT/$name.md"
	[ "${2:-}" != none ] && [ -d "$RESULTS/$name" ] || return 0
	(cd "$RESULTS" && find "$name" -type f ! -path "$name/datasets/*" ! '(' "${DATA[@]}" ')' -print0 |
		tar -czf - --null -T -) | split -a 3 -d -b "$PART_SIZE" - "$OUT/$name-core.tgz."
	(cd "$RESULTS" && find "$name" -type f "${DATA[@]}" -print0 | tar -czf - --null -T -) |
		split -a 3 -d -b "$PART_SIZE" - "$OUT/$name-data.tgz."
	cp "$RESULTS/$name/results.md" "$OUT/$name.md" 2>/dev/null
	return 0
}

# ---- collect ----

# cmd_collect FROM [TREE]: for each study packed in FROM, its core whole
# (without every part nothing is merged), then its data parts; cells
# finished since lose their stale repeats/; then the next resume's pack.
cmd_collect() {
	local from=${1:-} tree=${2:-results} rc=0 core name cut c n=0
	if [ -z "$from" ] || [ $# -gt 2 ]; then die "usage: $PROG collect FROM [TREE]"; fi
	[ -d "$from" ] || die "collect: $from: no such folder"
	mkdir -p "$tree" "$GPU_DIR/resume" || die "collect: cannot create $tree or $GPU_DIR/resume"
	for core in "$from"/*-core.tgz.000; do
		[ -e "$core" ] || continue
		name=$(basename "$core" -core.tgz.000)
		n=$((n + 1))
		if ! cat "$from/$name"-core.tgz.* | tar -tzf - >/dev/null || ! cat "$from/$name"-core.tgz.* | tar -xzf - -C "$tree"; then
			echo "collect: $name: the core is incomplete (a part is missing or cut): nothing merged" >&2
			rc=1
			continue
		fi
		if compgen -G "$from/$name-data.tgz.*" >/dev/null &&
			! cat "$from/$name"-data.tgz.* | tar -xzf - -C "$tree" 2>/dev/null; then
			# A missing part cuts the stream: the files before it are
			# whole, the one it cut is removed rather than kept half.
			cut=$(cat "$from/$name"-data.tgz.* | tar -tzf - 2>/dev/null | tail -1)
			[ -n "$cut" ] && rm -f "$tree/$cut"
			echo "collect: $name: the data came back incomplete (copy the missing part and collect again); removed the cut file: ${cut:-none}" >&2
			rc=1
		fi
		# A cell finished there had its repeats/ merged and removed; a copy
		# here from an earlier run is stale.
		for c in "$tree/$name"/cells/*/; do
			[ -f "$c/cell.json" ] && rm -rf "$c/repeats"
		done
		(cd "$tree" && find "$name" -type f ! '(' "${DATA[@]}" ')' -print0 | tar -czf - --null -T -) >"$GPU_DIR/resume/$name.tgz.tmp" &&
			mv "$GPU_DIR/resume/$name.tgz.tmp" "$GPU_DIR/resume/$name.tgz"
		echo "== $name: merged into $tree/$name; $(find "$tree/$name/cells" -name cell.json 2>/dev/null | wc -l) cells complete" \
			"of $(find "$tree/$name/cells" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l) begun;" \
			"$GPU_DIR/resume/$name.tgz staged for '$PROG resume'"
	done
	[ "$n" -gt 0 ] || die "collect: no NAME-core.tgz.000 in $from"
	return $rc
}

# ---- ab ----

# ab_run NAME GPU BIN ARGS...: one run of cmd_ab's, like step but safe to
# run beside others (its exit status and seconds go to $OUT/NAME.rc for
# the table); GPU empty leaves CUDA_VISIBLE_DEVICES as it is.
ab_run() {
	local name=$1 gpu=$2 bin=$3 t0=$SECONDS rc
	shift 3
	(cd "$ROOT/${PKG[cuda]}" && { [ -z "$gpu" ] || export CUDA_VISIBLE_DEVICES=$gpu; } &&
		exec timeout -k 15 "$AB_SECS" "$bin" -test.timeout "$((AB_SECS - 10))s" "$@") >"$OUT/$name.log" 2>&1
	rc=$?
	echo "$rc $((SECONDS - t0))" >"$OUT/$name.rc"
}

# ab_options CMD GPUS ROWS: ab's and zoo's checks of --timeout (AB_SECS),
# --gpus and --rows.
ab_options() {
	[[ $AB_SECS =~ ^[0-9]+$ ]] && [ "$AB_SECS" -gt 20 ] || die "$1: --timeout $AB_SECS: SECONDS, a whole number above 20"
	[ -z "$2" ] || [[ $2 =~ ^[0-9]+(,[0-9]+)*$ ]] || die "$1: --gpus $2: GPU numbers, comma-separated"
	[ -z "$3" ] || [[ $3 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "$1: --rows $3: row counts (M), comma-separated"
}

# ab_steps NAME...: ab_run's runs into the table, each with the exit and
# seconds of its .rc file, which goes.
ab_steps() {
	local rc secs name
	for name in "$@"; do
		read -r rc secs <"$OUT/$name.rc" || rc=? secs=?
		rm -f "$OUT/$name.rc"
		STEPS+=("$name") RC[$name]=$rc SECS[$name]=$secs LOG[$name]=$name.log
		stopped "$name" "$AB_SECS" ""
	done
}

# cmd_ab [options] OLD NEW: see usage.
cmd_ab() {
	local bench="" benchtime=100x count=3 rounds=2 gpus="" rows="" old="" new="" v
	AB_SECS=300
	while [ $# -gt 0 ]; do
		case $1 in
		--bench) bench=${2:?--bench PATTERN}; shift ;;
		--benchtime) benchtime=${2:?--benchtime D}; shift ;;
		--count) count=${2:?--count N}; shift ;;
		--rounds) rounds=${2:?--rounds R}; shift ;;
		--gpus) gpus=${2:?--gpus LIST}; shift ;;
		--rows) rows=${2:?--rows LIST}; shift ;;
		--timeout) AB_SECS=${2:?--timeout SECONDS}; shift ;;
		-h | --help) usage; exit 0 ;;
		--*) die "ab: unknown option $1" ;;
		*)
			if [ -z "$old" ]; then old=$1; elif [ -z "$new" ]; then new=$1; else die "ab: a third binary $1 (OLD and NEW only)"; fi
			;;
		esac
		shift
	done
	[ -n "$new" ] || die "ab: needs two test binaries, OLD and NEW (see '$PROG help')"
	[ -n "$bench" ] || die "ab: --bench PATTERN is required (the benchmarks both builds run)"
	for v in "--count $count" "--rounds $rounds"; do
		[[ ${v#* } =~ ^[1-9][0-9]*$ ]] || die "ab: $v: a whole number of at least 1"
	done
	ab_options ab "$gpus" "$rows"
	local -a extra=()
	[ -z "$rows" ] || extra=(-gemm.rows "$rows")
	old=$(realpath -m "$old") new=$(realpath -m "$new")
	for v in "$old" "$new"; do [ -f "$v" ] && [ -x "$v" ] || die "ab: $v: not an executable test binary"; done
	[ "$old" != "$new" ] || die "ab: OLD and NEW are the same file"
	need_gpu ab
	local -a ids=("")
	[ -z "$gpus" ] || IFS=, read -r -a ids <<<"$gpus"
	rm -f "$OUT"/ab-*.log "$OUT"/ab-*.rc "$OUT/ab-old.txt" "$OUT/ab-new.txt"
	# Each build's kernels into the disk cache first, one after the other,
	# so that no timed run waits on NVRTC or shares the CPU with it.
	local side bin i r name
	for side in old new; do
		bin=$old
		[ $side = new ] && bin=$new
		echo "== ab-warm-$side: $bin (kernels compiled, GPU ${ids[0]:-default})" >&2
		ab_run "ab-warm-$side" "${ids[0]}" "$bin" -test.run '^TestMemory$'
	done
	local -a pids=() runs=(ab-warm-old ab-warm-new)
	for i in "${!ids[@]}"; do
		for ((r = 0; r < rounds; r++)); do
			if (((i + r) % 2 == 0)); then runs+=("ab-old-$i-$r" "ab-new-$i-$r"); else runs+=("ab-new-$i-$r" "ab-old-$i-$r"); fi
		done
	done
	echo "== ab: $bench on GPU ${gpus:-default}, $rounds rounds of -test.count $count a GPU (timeout ${AB_SECS}s a run)" >&2
	for i in "${!ids[@]}"; do
		(
			for name in "${runs[@]}"; do
				[[ $name == ab-*-$i-* ]] || continue
				bin=$old
				[[ $name == ab-new-* ]] && bin=$new
				ab_run "$name" "${ids[$i]}" "$bin" -test.v -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.count "$count" "${extra[@]}"
			done
		) &
		pids+=($!)
	done
	wait "${pids[@]}"
	ab_steps "${runs[@]}"
	for name in "${runs[@]}"; do
		[[ $name == ab-warm-* ]] || cat "$OUT/$name.log" >>"$OUT/${name:0:6}.txt"
	done
	table
	local failed=$?
	echo "== ab: medians, NEW / OLD (ab-old.txt, ab-new.txt; significance: benchstat)"
	ab_medians "$OUT/ab-old.txt" "$OUT/ab-new.txt"
	ab_plans "$OUT/ab-old.txt" "$OUT/ab-new.txt"
	return $failed
}

# cmd_zoo [options] BINARY: see usage.
cmd_zoo() {
	local impls='^(own|cublaslt|own-fp8|cublaslt-fp8)$' shapes="" benchtime=100x samples=3 within=15 gpus="" rows="" bin=""
	AB_SECS=600
	while [ $# -gt 0 ]; do
		case $1 in
		--rows) rows=${2:?--rows LIST}; shift ;;
		--gpus) gpus=${2:?--gpus LIST}; shift ;;
		--samples) samples=${2:?--samples N}; shift ;;
		--impls) impls=${2:?--impls PATTERN}; shift ;;
		--shapes) shapes=${2:?--shapes PATTERN}; shift ;;
		--within) within=${2:?--within PCT}; shift ;;
		--benchtime) benchtime=${2:?--benchtime D}; shift ;;
		--timeout) AB_SECS=${2:?--timeout SECONDS}; shift ;;
		-h | --help) usage; exit 0 ;;
		--*) die "zoo: unknown option $1" ;;
		*)
			[ -z "$bin" ] || die "zoo: a second binary $1 (one test binary only)"
			bin=$1
			;;
		esac
		shift
	done
	[ -n "$bin" ] || die "zoo: needs engine/cuda's test binary (see '$PROG help')"
	[ -n "$rows" ] || die "zoo: --rows LIST is required (the M values to time)"
	ab_options zoo "$gpus" "$rows"
	[[ $samples =~ ^[1-9][0-9]*$ ]] || die "zoo: --samples $samples: a whole number of at least 1"
	[[ $within =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "zoo: --within $within: a margin in per cent, e.g. 15"
	bin=$(realpath -m "$bin")
	[ -f "$bin" ] && [ -x "$bin" ] || die "zoo: $bin: not an executable test binary"
	need_gpu zoo
	local -a ids=("") ms share=()
	[ -z "$gpus" ] || IFS=, read -r -a ids <<<"$gpus"
	IFS=, read -r -a ms <<<"$rows"
	# The M values in turn over the GPUs: GPU i times every len(ids)-th.
	local i j s
	for j in "${!ms[@]}"; do
		i=$((j % ${#ids[@]}))
		share[i]=${share[i]:+${share[i]},}${ms[j]}
	done
	rm -f "$OUT"/zoo-*.log "$OUT"/zoo-*.rc "$OUT/zoo.txt"
	echo "== zoo-warm: $bin (kernels compiled, GPU ${ids[0]:-default})" >&2
	ab_run zoo-warm "${ids[0]}" "$bin" -test.run '^TestMemory$'
	local -a pids=() runs=(zoo-warm)
	local bench="^BenchmarkGemm(FP8)?\$/$impls/${shapes:-.}/"
	echo "== zoo: $bench on GPU ${gpus:-default}, $samples samples of each M (timeout ${AB_SECS}s a run)" >&2
	for i in "${!ids[@]}"; do
		[ -n "${share[i]:-}" ] || continue
		for ((s = 1; s <= samples; s++)); do runs+=("zoo-$i-$s"); done
		(
			for ((s = 1; s <= samples; s++)); do
				rev=()
				((s % 2 == 0)) && rev=(-gemm.reverse)
				echo "== zoo-$i-$s: GPU ${ids[$i]:-default}, M = ${share[i]}${rev[0]:+, reversed}" >&2
				ab_run "zoo-$i-$s" "${ids[$i]}" "$bin" -test.v -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.count 1 -gemm.rows "${share[i]}" "${rev[@]}"
			done
		) &
		pids+=($!)
	done
	wait "${pids[@]}"
	ab_steps "${runs[@]}"
	local name
	for name in "${runs[@]}"; do
		[ "$name" = zoo-warm ] || cat "$OUT/$name.log" >>"$OUT/zoo.txt"
	done
	table
	local failed=$?
	echo "== zoo: $(grep -c 'us/gemm' "$OUT/zoo.txt") timings in zoo.txt"
	if [ -x "$GPU_DIR/gemmvs" ]; then
		# A verdict needs as many samples a side as there are, up to gemmvs's 3.
		"$GPU_DIR/gemmvs" -within "$within" -min "$((samples < 3 ? samples : 3))" "$OUT/zoo.txt" >"$OUT/zoo-verdicts.txt" 2>&1
		echo "== zoo: within $within % of cuBLASLt (zoo-verdicts.txt)"
		grep -E '^family | OUTSIDE( |$)| shapes within ' "$OUT/zoo-verdicts.txt"
	else
		echo "== zoo: no $GPU_DIR/gemmvs ('$PROG build' makes it); from the repository: go run ./bench/gemmvs -within $within zoo.txt"
	fi
	return $failed
}

# ab_plans OLD.txt NEW.txt prints the benchmarks whose logged plan ("plan
# TILE" lines under -test.v, which go test prints after the benchmark's
# name or result line) differs between the sides: a planner change's A/B
# then says which GEMMs it moved. Nothing where no benchmark logs one.
ab_plans() {
	awk '
		FNR == 1 { side++ }
		{ line = $0; sub(/^--- BENCH: /, "", line) }
		line ~ /^Benchmark/ { split(line, f, /[ \t]+/); cur = f[1]; sub(/-[0-9]+$/, "", cur); next }
		/^ +[^ ]+:[0-9]+: plan / && cur != "" {
			p = $0; sub(/^.*: plan /, "", p)
			k = side SUBSEP cur
			if (!(k in plan)) plan[k] = p
			else if (plan[k] != p) plan[k] = "varies"
			if (!(cur in seen)) { seen[cur] = 1; order[++n] = cur }
		}
		END {
			if (!n) exit
			for (i = 1; i <= n; i++) {
				c = order[i]
				if (!((1, c) in plan) || !((2, c) in plan)) continue
				both++
				if (plan[1, c] != plan[2, c]) diff[++d] = c
			}
			if (!d) { printf "== ab: plans: the same in both builds (%d benchmarks)\n", both; exit }
			printf "== ab: plans that differ (%d of %d benchmarks)\n", d, both
			printf "%-60s %-16s %-16s\n", "benchmark", "old", "new"
			for (i = 1; i <= d; i++) printf "%-60s %-16s %-16s\n", diff[i], plan[1, diff[i]], plan[2, diff[i]]
		}' "$1" "$2"
}

# ab_medians OLD.txt NEW.txt prints, for each benchmark and unit both
# hold, the median of each side's values and their ratio, then each
# unit's geometric mean of the ratios.
ab_medians() {
	awk '
		function median(s,    n, a, i, j, t) {
			n = split(s, a, " ")
			for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		FNR == 1 { side++ }
		$1 ~ /^Benchmark/ && $2 ~ /^[0-9]+$/ {
			for (i = 3; i < NF; i += 2) {
				k = $1 SUBSEP $(i + 1)
				v[side, k] = v[side, k] " " $i
				if (side == 1 && !(k in seen)) { seen[k] = 1; order[++n] = k }
			}
		}
		END {
			printf "%-60s %-10s %12s %12s %9s\n", "benchmark", "unit", "old", "new", "new/old"
			for (i = 1; i <= n; i++) {
				k = order[i]
				if (!((2, k) in v)) continue
				a = median(v[1, k]); b = median(v[2, k])
				split(k, p, SUBSEP)
				if (!(p[2] in seenu)) { seenu[p[2]] = 1; units[++nu] = p[2] }
				if (a > 0 && b > 0) { r = b / a; lg[p[2]] += log(r); cnt[p[2]]++ } else r = 0
				printf "%-60s %-10s %12.4g %12.4g %9.3f\n", p[1], p[2], a, b, r
			}
			for (i = 1; i <= nu; i++) if (cnt[units[i]]) printf "%-60s %-10s %12s %12s %9.3f\n", "geomean (" cnt[units[i]] ")", units[i], "", "", exp(lg[units[i]] / cnt[units[i]])
		}' "$1" "$2"
}

case ${1:-help} in
build) shift; cmd_build "$@" ;;
ab) shift; cmd_ab "$@" ;;
zoo) shift; cmd_zoo "$@" ;;
check) shift; cmd_check "$@" ;;
study) shift; cmd_study fresh "$@" ;;
resume) shift; cmd_study resume "$@" ;;
collect) shift; cmd_collect "$@" ;;
help | -h | --help) usage ;;
*) die "unknown command $1 (see '$PROG help')" ;;
esac

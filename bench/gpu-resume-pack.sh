#!/usr/bin/env bash
# Merges what one bench/gpu-multi.sh call returned into a results tree on
# the build machine and packs what the next RESUME=1 call must carry.
#
#   bash bench/gpu-resume-pack.sh FILES_AT TREE CARRY_DIR
#
# FILES_AT: the folder the device returned (results-core.tgz.NN,
# results-data.tgz.NN). TREE: the merged results, one folder per study
# (created; files already there and not returned, such as the data files
# of cells finished in earlier calls, stay). CARRY_DIR: the folder carried
# to the device (e.g. .gpu-NAME, beside the xrun binary); its
# multi-results.tar.gz gets only what --resume reads: every cell.json and
# log, the repeats of unfinished cells, results.json, the plan; not the
# finished cells' requests.jsonl, iterations.csv and telemetry.csv, which
# would not fit the 64 MiB a call carries.
set -euo pipefail
at=$1 tree=$2 carry=$3
mkdir -p "$tree" "$carry"
# The core comes whole: without every part nothing is merged.
cat "$at"/results-core.tgz* | tar -xzf - -C "$tree"
if compgen -G "$at/results-data.tgz.*" >/dev/null; then
	# A part the device left out truncates the stream: the files before it
	# are whole, the one it cut is removed rather than kept half-written.
	if ! cat "$at"/results-data.tgz.* | tar -xzf - -C "$tree" 2>/tmp/resume-pack.err; then
		cut=$(cat "$at"/results-data.tgz.* | tar -tzf - 2>/dev/null | tail -1 || true)
		[ -n "$cut" ] && rm -f "$tree/$cut"
		echo "results-data came back incomplete (a part was left out); removed the cut file: ${cut:-none}" >&2
	fi
fi
# A cell the device finished (cell.json written) had its repeats/ merged
# and removed there; the copy here from an earlier call is stale.
for c in "$tree"/*/cells/*/; do
	[ -f "$c/cell.json" ] && rm -rf "$c/repeats"
done
(cd "$tree" && find . -type f ! '(' -path '*/cells/*' '(' -name requests.jsonl -o -name iterations.csv -o -name telemetry.csv ')' ')' -print0 |
	tar -czf - --null -T -) >"$carry/multi-results.tar.gz"
ls -l "$carry/multi-results.tar.gz"

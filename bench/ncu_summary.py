#!/usr/bin/env python3
"""Summarise an ncu CSV log (--csv --page raw --metrics gpu__time_duration.sum
--print-units base) of the iterations of a profile window, as
`bash bench/gpu.sh study --ncu SPEC` records them: one block per iteration
(each starts with the embedding kernel), kernels grouped by name with count
and total device time, largest first. A study with several profiled cells
gives their iterations one after the other: profile one cell (--only).

    python3 bench/ncu_summary.py NAME-ncu.csv [label]
"""
import csv
import re
import sys
from collections import OrderedDict


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    rd = csv.reader(lines)
    hdr = None
    for r in rd:
        if hdr is None:
            if "Kernel Name" in r:
                hdr = r
            continue
        if len(r) != len(hdr):
            continue
        d = dict(zip(hdr, r))
        t = d.get("gpu__time_duration.sum", "").replace(",", "")
        try:
            ns = float(t)
        except ValueError:
            continue  # the units row
        yield d["Kernel Name"], ns, d.get("Grid Size", ""), d.get("Block Size", "")


def short(name):
    name = re.sub(r"\(.*", "", name)
    if len(name) > 70:
        name = name[:67] + "..."
    return name


def main():
    path = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else path
    iters = []
    for name, ns, grid, block in rows(path):
        if name.startswith("embedding") or not iters:
            iters.append([])
        iters[-1].append((name, ns, grid, block))
    for i, it in enumerate(iters):
        total = sum(ns for _, ns, _, _ in it)
        print(f"== {label}: iteration {i}: {len(it)} kernels, {total/1e3:.1f} us of kernel time")
        g = OrderedDict()
        for name, ns, grid, block in it:
            k = short(name)
            c = g.setdefault(k, [0, 0.0, grid, block])
            c[0] += 1
            c[1] += ns
        for k, (n, ns, grid, block) in sorted(g.items(), key=lambda kv: -kv[1][1])[:14]:
            print(f"  {ns/1e3:9.1f} us {100*ns/total:5.1f}%  x{n:<4d} {ns/n/1e3:7.2f} us  {k}  grid {grid} block {block}")


if __name__ == "__main__":
    main()

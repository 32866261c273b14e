#!/usr/bin/env python3
"""Does every region of every PolyBench kernel get its answers, and how long does the analysis
take? (Issue "every hot region answered": at MINI, every region answered, analysis at most 3 s
per kernel, heat-3d's main region scheduled.)

For each kernel (as audit.py finds them): build it at MINI (-O2 -g), run
`POLYPROF_TIMING=1 polyprof --region-threshold 1`, and print one row: traced instructions,
polyprof's wall time, the analysis time (the sum of the `feedback ...` stage times polyprof
prints, plus its storage and scheduler seconds), regions, regions whose loop table is empty,
loops answered from the distances alone, regions where isl stopped at its budget somewhere,
regions scheduled by parts, regions not scheduled because they do input or output, and the
top region's tile depth. See README.md beside this file.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audit import compile_c, find_kernels, run  # noqa: E402

STAGE = re.compile(r"^polyprof: feedback [\w-]+: ([0-9.]+) s$")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polybench", required=True, help="PolyBench/C 4.2.1 source tree")
    ap.add_argument("--polyprof", default="target/release/polyprof")
    ap.add_argument("--work", default="/tmp/polybench-answers")
    ap.add_argument("--only", default="", help="kernels, comma separated")
    ap.add_argument("--opt", default="-O2")
    args = ap.parse_args()
    pp = os.path.abspath(args.polyprof)
    only = set(filter(None, args.only.split(",")))
    os.makedirs(args.work, exist_ok=True)
    rows = []
    head = ("kernel", "instr", "wall s", "analysis s", "regions", "empty tables",
            "by distances", "isl stopped", "by parts", "I/O", "top TileD")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, src_dir in find_kernels(args.polybench):
        if only and name not in only:
            continue
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        exe = os.path.join(work, name)
        built, _ = compile_c(args.polybench, src_dir, os.path.join(src_dir, name + ".c"), exe,
                             args.opt)
        if not built:
            print(f"| {name} | build failed |")
            continue
        env = dict(os.environ, POLYPROF_TIMING="1")
        out = os.path.join(work, "out")
        t0 = time.time()
        rc, _, err = run([pp, "--region-threshold", "1", "-o", out, exe], cwd=work, env=env,
                         timeout=900)
        wall = time.time() - t0
        if rc != 0:
            print(f"| {name} | polyprof exit {rc} |")
            continue
        err = err.decode(errors="replace")
        stages = sum(float(m.group(1)) for line in err.splitlines()
                     if (m := STAGE.match(line)))
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        regions = rep.get("regions", [])
        storage = sum(r.get("storage_seconds") or 0.0 for r in regions)
        empty = sum(1 for r in regions if not r.get("all_loops"))
        by_dist = sum(1 for r in regions for lp in r.get("all_loops", []) if lp.get("by_distances"))
        why = [r.get("why_not") or "" for r in regions]
        stopped = sum(1 for w in why if "isl's scheduler stopped" in w
                      or "isl stopped at its budget" in w or "analysis stopped" in w)
        io = sum(1 for w in why if "does input or output" in w)
        parts = sum(1 for w in why if "was scheduled on its own" in w)
        instr = rep.get("trace", {}).get("instructions") or rep.get("instructions") or 0
        top = regions[0]["metrics"]["tile_depth"] if regions else "-"
        row = (name, f"{instr / 1e3:.0f}K", f"{wall:.1f}", f"{stages + storage:.2f}",
               str(len(regions)), str(empty), str(by_dist), str(stopped), str(parts), str(io),
               str(top))
        rows.append(row)
        print("| " + " | ".join(row) + " |", flush=True)
    total = sum(float(r[3]) for r in rows)
    worst = max(rows, key=lambda r: float(r[3])) if rows else None
    print(f"\n{len(rows)} kernels; analysis {total:.1f} s in all"
          + (f", at most {worst[3]} s ({worst[0]})" if worst else "")
          + f"; regions with an empty loop table: {sum(int(r[5]) for r in rows)}")


if __name__ == "__main__":
    main()

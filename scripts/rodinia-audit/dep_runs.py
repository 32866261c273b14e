#!/usr/bin/env python3
"""Dependence runs against dependences one by one, on real programs (issue 37).

For every program of an audit's work directory (`WORK/<name>/out`, a polyprof output directory
with its recording), runs `polyprof report` on two copies of the recording: with dependence
runs (the default) and with `POLYPROF_DEP_RUNS=0` (every dependence on its own, the reference
path). Prints, per program, whether the folded dependence streams are the same
(`POLYPROF_DUMP_DEP_STREAMS`: what the runs change, free of isl's time budgets), whether
report.json is (fields with "seconds" in their name left out; "budget" when the only
differences are what isl's time budget cut short, which varies with the machine's load), the
second pass's wall time and its three threads' CPU times, both ways (`POLYPROF_TIMING=1`), and the share of
dependences that travelled in runs.

    python3 scripts/rodinia-audit/dep_runs.py --polyprof BIN --work WORK [--only a,b]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

PASS = re.compile(
    r"second pass: ([\d.]+) s .*CPU ([\d.]+) s schedule, ([\d.]+) s dependences, ([\d.]+) s "
    r"folding\); (\d+) steps, (\d+) dependences \((\d+) in runs\)"
)


def unmeasured(v):
    if isinstance(v, dict):
        return {k: unmeasured(x) for k, x in v.items() if "seconds" not in k}
    if isinstance(v, list):
        return [unmeasured(x) for x in v]
    return v


def report(bin_, out, runs, scratch):
    d = os.path.join(scratch, "runs" if runs else "one-by-one")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(out, d)
    env = dict(os.environ, POLYPROF_TIMING="1", POLYPROF_DEP_RUNS="1" if runs else "0",
               POLYPROF_DUMP_DEP_STREAMS=d + ".streams")
    t = time.time()
    p = subprocess.run([bin_, "report", d], env=env, capture_output=True, text=True)
    wall = time.time() - t
    m = PASS.search(p.stderr)
    try:
        with open(os.path.join(d, "report.json")) as f:
            rep = unmeasured(json.load(f))
    except (OSError, ValueError) as e:
        rep = {"error": str(e)}
    try:
        with open(d + ".streams", "rb") as f:
            streams = f.read()
    except OSError:
        streams = None
    return p.returncode, wall, m, rep, streams


def differences(a, b, path=""):
    """The differing leaves of two JSON values, as (path, a, b)."""
    if type(a) is not type(b):
        return [(path, a, b)]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k), b.get(k), f"{path}/{k}")
        return out
    if isinstance(a, list):
        out = [] if len(a) == len(b) else [(path, len(a), len(b))]
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}/{i}")
        return out
    return [] if a == b else [(path, a, b)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--polyprof", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    names = sorted(
        n for n in os.listdir(a.work)
        if os.path.isdir(os.path.join(a.work, n, "out", "recording")) and (not only or n in only)
    )
    print(f"{'program':14} {'streams':7} {'report':6} {'deps':>11} {'in runs':>8} | "
          f"{'runs: pass s':>12} {'sched':>6} {'deps':>6} {'fold':>6} | "
          f"{'1 by 1: pass':>12} {'sched':>6} {'deps':>6} {'fold':>6}")
    differ = 0
    for n in names:
        scratch = os.path.join(a.work, n, "dep-runs-check")
        os.makedirs(scratch, exist_ok=True)
        out = os.path.join(a.work, n, "out")
        r1 = report(a.polyprof, out, True, scratch)
        r0 = report(a.polyprof, out, False, scratch)
        same = r1[0] == r0[0] == 0 and r1[4] is not None and r1[4] == r0[4]
        differ += not same
        diff = differences(r1[3], r0[3])
        budget = all("budget" in str(x) or "isl stopped" in str(x) for d in diff for x in d[1:])
        # A region whose isl work stopped in one run only differs in every answer after it.
        budget = budget or any("isl stopped" in str(d[1]) + str(d[2]) for d in diff)
        rep = "same" if not diff else "budget" if budget else "NO"
        def cols(r):
            m = r[2]
            return (f"{float(m.group(1)):12.2f} {float(m.group(2)):6.2f} {float(m.group(3)):6.2f} "
                    f"{float(m.group(4)):6.2f}" if m else f"{'-':>12} {'-':>6} {'-':>6} {'-':>6}")
        m = r1[2]
        deps = int(m.group(6)) if m else 0
        share = f"{100.0 * int(m.group(7)) / deps:7.1f}%" if m and deps else f"{'-':>8}"
        print(f"{n:14} {'same' if same else 'NO':7} {rep:6} {deps:11d} {share} | {cols(r1)} | {cols(r0)}")
    print(f"{len(names)} programs, {differ} with different dependence streams")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

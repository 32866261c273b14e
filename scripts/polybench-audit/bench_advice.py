#!/usr/bin/env python3
"""Apply polyprof's recommended transformation to each PolyBench kernel and time it.

For every kernel: profile it with polyprof (the -O2 build at the profiling dataset, SMALL by
default, where tiles and threads pay), read report.json's `recommended` transformation of
the hottest region, and apply it to the kernel's source as printed: the loop order (headers
permuted), the tiled band (tile and point loops, the printed tile size), the directive
before each parallel loop and the vectorized loop. Then:

- check it: the transformed kernel at the profiled dataset (its printed array sections,
  `reduction(+: y[0:124])`, are that input's lengths), -fopenmp -O2, 10 runs with 2 threads,
  must dump the same arrays ("%a") as the original -O2 build;
- time it at the timing dataset (LARGE by default), the minimum of --runs runs taken round
  robin, against gcc -O2, clang -O3, clang -O3 with Polly and Polly with -polly-parallel
  (2 threads);
- print a table: each variant's speedup over gcc -O2, and polyprof's estimate beside the
  measured speedup of the recommendation.

What the script cannot apply (isl's own schedule for a skew, a source change such as a copy,
a nest that is not perfect in the source) is said in the table, not guessed. See README.md
beside this file. Needs clang-14 (Debian's has Polly built in): `make bench-advice` installs
it.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import audit  # noqa: E402  (the same source rewriting as the legality audit)

CLANG = "clang-14"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build(pb, src, exe, compiler, flags, defines, cwd):
    util = os.path.join(pb, "utilities")
    cmd = [compiler] + flags + defines + ["-I" + util, "-I" + os.path.dirname(src),
                                          os.path.join(util, "polybench.c"), src, "-lm",
                                          "-o", exe]
    rc, _, e = audit.run(cmd, cwd=cwd, timeout=300)
    return rc == 0, e.decode(errors="replace")


# The compared builds: name, compiler, flags, threads (None: sequential).
PEERS = [
    ("gcc -O2", "gcc", ["-O2"], None),
    ("clang -O3", CLANG, ["-O3"], None),
    ("Polly", CLANG, ["-O3", "-mllvm", "-polly"], None),
    ("Polly parallel", CLANG, ["-O3", "-mllvm", "-polly", "-mllvm", "-polly-parallel",
                               "-lgomp"], 2),
]


class Kernel:
    def __init__(self, args, name, src_dir):
        self.args, self.name, self.src_dir = args, name, src_dir
        self.dir = os.path.join(args.work, name)
        self.c = os.path.join(self.dir, name + ".c")
        self.row = {"kernel": name, "recommended": "", "applied": "", "check": "",
                    "times": {}, "estimate": None}

    def prepare(self):
        self.src_lines = audit.copy_kernel(self.src_dir, self.name, self.dir)

    def profile(self):
        """report.json of the -O2 build at the profiling dataset."""
        out = os.path.join(self.dir, "out")
        rep = os.path.join(out, "report.json")
        if self.args.reuse and os.path.exists(rep):
            return json.load(open(rep))
        exe = os.path.join(self.dir, "prof")
        ok, err = build(self.args.polybench, self.c, exe, "gcc", ["-O2", "-g"],
                        ["-D%s_DATASET" % self.args.profile_dataset], self.dir)
        if not ok:
            raise RuntimeError("does not compile: " + err.strip()[:200])
        shutil.rmtree(out, ignore_errors=True)
        t = time.time()
        rc, _, e = audit.run([self.args.polyprof, "-o", "out", "./prof"], cwd=self.dir,
                             timeout=self.args.timeout)
        log("  polyprof: rc=%s in %.1fs" % (rc, time.time() - t))
        if not os.path.exists(rep):
            raise RuntimeError("polyprof wrote no report (rc=%s): %s"
                               % (rc, e.decode(errors="replace").strip()[-200:]))
        return json.load(open(rep))

    def apply(self, report):
        """The source with the recommendation of each region (over --min-share of the
        instructions, hottest first) applied, or None (the row says why)."""
        regions = [r for r in report.get("regions") or [] if r.get("recommended")
                   and r.get("ops_percent", 0) >= self.args.min_share]
        if not regions:
            self.row["applied"] = "no recommendation"
            return None
        regions.sort(key=lambda r: -r.get("ops_percent", 0))
        hottest = regions[0]["recommended"]
        self.row["recommended"] = hottest.get("text", "")
        self.row["estimate"] = hottest.get("estimate")
        self.row["region"] = regions[0].get("id")
        lines, inserts, done, why_not = list(self.src_lines), [], [], []
        for reg in regions:
            try:
                lines = self.apply_region(reg, lines, inserts, done)
            except Unapplied as why:
                if reg is regions[0]:
                    raise
                why_not.append("%s: %s" % (reg.get("id"), why))
        # Directives last: they add lines, and every region's lines are the source's.
        for n, directive in sorted(inserts, reverse=True):
            indent = re.match(r"\s*", lines[n - 1]).group(0)
            lines.insert(n - 1, indent + directive)
        self.row["applied"] = "%d regions: " % len(regions) + ", ".join(done) \
            if len(regions) > 1 else ", ".join(done) or "nothing"
        if self.row.get("without"):
            self.row["applied"] += " (without %s)" % "; ".join(self.row["without"])
        self.row["not_applied"] = why_not
        self.row["reduction"] = any("reduction(" in d for _, d in inserts)
        # An array section's length is the profiled input's: at another size the clause
        # reduces too few elements (or too many), so it is not timed there.
        self.row["sized"] = any(re.search(r"\[\d+:\d+\]", d) for _, d in inserts)
        return "\n".join(lines) + "\n"

    def apply_region(self, reg, lines, inserts, done):
        """Applies one region's recommendation to `lines` (loop order and tiles in place);
        adds its directives to `inserts` as (line, text)."""
        rec = reg["recommended"]
        loops = {l["id"]: l for l in (reg.get("all_loops") or []) + (reg.get("loops") or [])}
        by_rank = {s.get("rank"): s for s in reg.get("suggestions") or []}

        def line_of(lid):
            loc = (loops.get(lid) or {}).get("location") or {}
            if os.path.basename(loc.get("file") or "") != self.name + ".c":
                raise Unapplied("loop %s is not in %s.c" % (lid, self.name))
            return loc["line"]

        if rec.get("schedule"):
            raise Unapplied("isl's schedule (%s) is not rewritten by this script"
                            % rec["schedule"])
        if rec.get("needs"):
            raise Unapplied("needs " + "; ".join(rec["needs"]))
        # Where each loop's header is now (an interchange moves headers between lines).
        at = {}
        if rec.get("order"):
            new = [line_of(l) for l in rec["order"]]
            text = next((s.get("text", "") for r, s in by_rank.items()
                         if r in rec.get("ranks", []) and s.get("kind") == "interchange"), "")
            if len(audit.moving(new)[0]) >= 2:
                lines, at = audit.reordered(lines, new, text)
                if lines is None:
                    raise Unapplied("order: " + at)
                done.append("order")

        def cur(lid):
            return at.get(line_of(lid), line_of(lid))

        band_lines = []
        if rec.get("tile"):
            t = rec["tile"]
            # The band's loops in the order already given: tiling permutes nothing.
            band = sorted(cur(l) for l in t["loops"])
            size = (t.get("sizes") or [32])[0]
            out, why = audit.tiled(lines, band, band, size)
            if out is None:
                out, why2 = tiled_with_prologue(lines, band, size)
                why = "%s; %s" % (why, why2)
            if out is None:
                # The rest applies without it: said in the row, not hidden.
                self.row.setdefault("without", []).append("%s: tiling (%s)" % (
                    reg.get("id"), why))
            else:
                lines = out
                band_lines = band
                done.append("tile %d" % size)
        band_vars = [audit.FOR_HEAD.search(self.src_lines[line_of(l) - 1]).group(1)
                     for l in (rec.get("tile") or {}).get("loops", [])]
        for d in rec.get("parallel") or []:
            n = cur(d["loop"])
            directive = d["directive"]
            if band_lines and n in band_lines and n != band_lines[0]:
                raise Unapplied("the parallel loop is inside the tiled band")
            if band_lines and n == band_lines[0]:
                # The directive now stands before the tile loops: the point loops' counters,
                # set inside them, are the threads' own.
                directive = with_private(directive, band_vars)
            inserts.append((n, directive))
            done.append("parallel")
        if rec.get("simd"):
            n = cur(rec["simd"]["loop"])
            if not (band_lines and n == band_lines[0]):
                inserts.append((n, rec["simd"]["directive"]))
                done.append("simd")
        return lines

    def check(self, text):
        """The profiled dataset (the printed clauses hold for it), -fopenmp -O2, 10 runs with
        2 threads, against the original's dump."""
        vdir = os.path.join(self.dir, "check")
        os.makedirs(vdir, exist_ok=True)
        shutil.copy(os.path.join(self.dir, self.name + ".h"), vdir)
        ref_exe = os.path.join(vdir, "ref")
        ok, err = build(self.args.polybench, self.c, ref_exe, "gcc", ["-O2"],
                        ["-D%s_DATASET" % self.args.profile_dataset, "-DPOLYBENCH_DUMP_ARRAYS"], vdir)
        if not ok:
            return "original does not compile"
        _, _, ref = audit.run([ref_exe], cwd=vdir)
        src = os.path.join(vdir, self.name + ".c")
        open(src, "w").write(text)
        exe = os.path.join(vdir, "applied")
        ok, err = build(self.args.polybench, src, exe, "gcc", ["-O2", "-fopenmp"],
                        ["-D%s_DATASET" % self.args.profile_dataset, "-DPOLYBENCH_DUMP_ARRAYS"], vdir)
        if not ok:
            first = [l for l in err.split("\n") if "error" in l][:1]
            return "FAILED: does not compile: " + (first or [err.strip()])[0][:150]
        env = dict(os.environ, OMP_NUM_THREADS="2")
        worst = 0.0
        for i in range(10):
            rc, _, e = audit.run([exe], cwd=vdir, env=env, timeout=60)
            if rc != 0:
                return "FAILED: run %d exits with %s" % (i + 1, rc)
            if e != ref:
                rel = max_rel(ref, e)
                # A reduction sums in another order: the last bits may differ, no more.
                if not self.row.get("reduction") or rel is None or rel > REASSOCIATION:
                    return "FAILED: run %d: %s (max rel. error %s)" % (
                        i + 1, audit.first_diff(ref, e), rel)
                worst = max(worst, rel)
        if worst:
            return "reassociates: max rel. error %.1e (10 runs)" % worst
        return "same output (10 runs)"

    def time(self, text):
        """Seconds of the kernel (POLYBENCH_TIME), the minimum of the runs, per build."""
        tdir = os.path.join(self.dir, "time")
        os.makedirs(tdir, exist_ok=True)
        shutil.copy(os.path.join(self.dir, self.name + ".h"), tdir)
        orig = os.path.join(tdir, "orig.c")
        shutil.copy(self.c, orig)
        defines = ["-D%s_DATASET" % self.args.time_dataset, "-DPOLYBENCH_TIME"]
        builds = []
        for name, cc, flags, threads in PEERS:
            builds.append((name, orig, cc, flags, threads))
        if text is not None:
            applied = os.path.join(tdir, "applied.c")
            open(applied, "w").write(text)
            builds.append(("polyprof", applied, "gcc", ["-O2", "-fopenmp"], 2))
        exes = []
        for k, (name, src, cc, flags, threads) in enumerate(builds):
            exe = os.path.join(tdir, "v%d" % k)
            ok, err = build(self.args.polybench, src, exe, cc, flags, defines, tdir)
            if not ok:
                self.row["times"][name] = "no build"
                log("  %s: %s" % (name, err.strip()[:200]))
                continue
            exes.append((name, exe, threads))
        best = {}
        for _ in range(self.args.runs):
            for name, exe, threads in exes:
                env = dict(os.environ, OMP_NUM_THREADS=str(threads or 1))
                rc, o, _ = audit.run([exe], cwd=tdir, env=env, timeout=self.args.run_timeout)
                try:
                    t = float(o.decode().strip().split()[-1]) if rc == 0 else None
                except (ValueError, IndexError):
                    t = None
                if t is None:
                    best.setdefault(name, None)
                    continue
                best[name] = t if best.get(name) is None else min(best[name], t)
        for name, t in best.items():
            self.row["times"][name] = t if t is not None else "failed"


def tiled_with_prologue(lines, band, size):
    """The band `band` (source lines, outermost first) tiled by `size` when the outermost
    loop's body runs statements before the rest of the band (gemm's `C[i][j] *= beta` loop
    before its k loop): they run in the first tile of the inner band loops, as polyprof's
    code after the advice shows (`if (c3 == 0 && c5 == 0)`). Or (None, why)."""
    for o, i in zip(band[1:], band[2:]):
        if not audit.sole_child(lines, o, i):
            return None, "not a perfect nest below line %d" % band[1]
    src = "\n".join(lines)
    off = lambda n: sum(len(l) + 1 for l in lines[:n - 1])
    hs = audit.header_span(lines[band[0] - 1])
    if hs is None:
        return None, "no `for` header on line %d" % band[0]
    a, b = audit.loop_body_span(src, off(band[0]))
    c, d = audit.loop_body_span(src, off(band[1]))
    body = off(band[0]) + hs[1]
    after = audit.COMMENT.sub("", src[d:b]).split()
    if not a < c < d <= b or after != ["}"] or not src[body:c].lstrip().startswith("{"):
        return None, "the outer loop's body runs more than statements before the band"
    parts = [audit.FOR_RE.search(lines[n - 1]) for n in band]
    if not all(parts):
        return None, "a band header is not a simple `for`"
    names = [m.group(1) for m in parts]
    for m in parts:
        if any(v != m.group(1) and re.search(r"\b%s\b" % re.escape(v), m.group(0))
               for v in names):
            return None, "the band is not rectangular"
    prev = lines[band[1] - 2]
    brace_line = src.count("\n", 0, src.index("{", body)) + 1
    if "//" in prev:
        return None, "a comment ends line %d" % (band[1] - 1)
    out = list(lines)
    audit.tile_headers(out, band, parts, size)
    # The statements before the band run in the first tile of its inner loops.
    first = " && ".join("pp_t%d == %s" % (k, m.group(2)) for k, m in enumerate(parts)
                        if k > 0)
    line = out[brace_line - 1]
    col = line.rindex("{") if brace_line == band[0] else line.index("{")
    out[brace_line - 1] = line[:col + 1] + " if (%s) {" % first + line[col + 1:]
    out[band[1] - 2] = out[band[1] - 2] + " }"
    return out, None


# The largest relative difference a reduction's new summation order explains.
REASSOCIATION = 1e-9


def max_rel(ref, got):
    """The largest relative difference between two dumps' numbers ("%a"), or None when they
    do not hold the same tokens in the same places."""
    a, b = ref.decode(errors="replace").split(), got.decode(errors="replace").split()
    if len(a) != len(b):
        return None
    worst = 0.0
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float.fromhex(x), float.fromhex(y)
        except ValueError:
            return None
        worst = max(worst, abs(fx - fy) / max(abs(fx), abs(fy), 1e-300))
    return worst


class Unapplied(Exception):
    pass


def with_private(directive, names):
    """The directive with `names` added to its private clause (or a new one)."""
    m = re.search(r"\bprivate\(([^)]*)\)", directive)
    have = [v.strip() for v in m.group(1).split(",")] if m else []
    new = have + [n for n in names if n not in have and not re.search(
        r"\b%s\b" % re.escape(n), directive)]
    if m:
        return directive[:m.start()] + "private(%s)" % ", ".join(new) + directive[m.end():]
    return directive + " private(%s)" % ", ".join(new) if new else directive


def speedup(row, name):
    base, t = row["times"].get("gcc -O2"), row["times"].get(name)
    if not isinstance(base, float) or not isinstance(t, float) or t <= 0:
        return None
    return base / t


def table(rows, args):
    names = [p[0] for p in PEERS[1:]] + ["polyprof"]
    out = ["PolyBench/C: speedup over gcc -O2 at %s (min of %d runs, %s threads for the "
           "parallel builds), polyprof's recommendation profiled at %s"
           % (args.time_dataset, args.runs, 2, args.profile_dataset), ""]
    hdr = "%-15s %9s " % ("kernel", "gcc -O2 s") + " ".join("%14s" % n for n in names) + \
        " %9s  %-30s %s" % ("estimate", "applied", "check / why not")
    out += [hdr, "-" * len(hdr)]
    geo = {n: [] for n in names}
    both = []
    for r in rows:
        base = r["times"].get("gcc -O2")
        cells = []
        for n in names:
            s = speedup(r, n)
            cells.append("%13.2fx" % s if s else "%14s" % (r["times"].get(n) or "-"))
            if s:
                geo[n].append(s)
        pp, pol = speedup(r, "polyprof"), speedup(r, "Polly parallel")
        if pp and pol:
            both.append((pp, pol))
        est = "%8.2fx" % r["estimate"] if r["estimate"] else "%9s" % "-"
        out.append("%-15s %9s " % (r["kernel"], "%.3f" % base if isinstance(base, float)
                                   else "-") + " ".join(cells) + " %s  %-30s %s"
                   % (est, r["applied"][:30], r["check"]))
    out.append("")
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    out.append("geomean over each column's kernels: " + ", ".join(
        "%s %.2fx (%d)" % (n, g(v), len(v)) for n, v in geo.items()))
    if both:
        out.append("where polyprof's recommendation and Polly parallel both apply (%d kernels):"
                   " polyprof %.2fx, Polly parallel %.2fx"
                   % (len(both), g([a for a, _ in both]), g([b for _, b in both])))
    est = [(r["estimate"], speedup(r, "polyprof")) for r in rows
           if r["estimate"] and speedup(r, "polyprof")]
    if est:
        within = sum(1 for e, m in est if 0.5 <= e / m <= 2)
        out.append("estimates within 2x of the measured speedup: %d of %d" % (within, len(est)))
    out.append("")
    out.append("recommendations (hottest region), and what was applied:")
    for r in rows:
        if r["recommended"]:
            out.append("  %s (%s): %s" % (r["kernel"], r.get("region"), r["recommended"]))
            out.append("      applied: %s" % r["applied"])
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--polybench", default="/tmp/pb", help="PolyBench/C 4.2.1 tree (read only)")
    ap.add_argument("--polyprof", default="target/release/polyprof", help="polyprof binary")
    ap.add_argument("--work", default="/tmp/bench-advice", help="work directory")
    ap.add_argument("--only", default="", help="comma-separated kernels (default: all)")
    ap.add_argument("--profile-dataset", default="SMALL")
    ap.add_argument("--time-dataset", default="LARGE")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per build (the minimum)")
    ap.add_argument("--timeout", type=int, default=900, help="polyprof timeout per kernel (s)")
    ap.add_argument("--run-timeout", type=int, default=300, help="timeout per timed run (s)")
    ap.add_argument("--no-time", action="store_true", help="apply and check only")
    ap.add_argument("--min-share", type=float, default=5.0,
                    help="apply the recommendations of regions over this %% of the "
                    "instructions (default 5)")
    ap.add_argument("--reuse", action="store_true", help="reuse WORK/<kernel>/out/report.json")
    args = ap.parse_args()
    args.polybench = os.path.abspath(args.polybench)
    args.polyprof = os.path.abspath(args.polyprof)
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    if not args.no_time and not shutil.which(CLANG):
        sys.exit("bench-advice: %s not found (Debian: apt-get install clang-14)" % CLANG)
    kernels = audit.find_kernels(args.polybench)
    if args.only:
        want = args.only.split(",")
        kernels = [k for k in kernels if k[0] in want]
    rows = []
    for name, d in kernels:
        log("== %s" % name)
        k = Kernel(args, name, d)
        rows.append(k.row)
        text = None
        try:
            k.prepare()
            text = k.apply(k.profile())
            if text is not None:
                k.row["check"] = k.check(text)
                if k.row["check"].startswith("FAILED"):
                    text = None
        except Unapplied as why:
            k.row["check"] = "not applied: %s" % why
        except Exception as ex:  # one kernel's failure is reported, not fatal
            k.row["check"] = "error: %s" % ex
        log("  %s | %s | %s" % (k.row["recommended"], k.row["applied"], k.row["check"]))
        if text is not None and k.row.get("sized") and \
                args.time_dataset != args.profile_dataset:
            k.row["check"] += "; not timed: a clause names an array section of the " \
                "profiled input's length"
            text = None
        if not args.no_time:
            k.time(text)
            log("  times: %s" % k.row["times"])
    t = table(rows, args)
    print(t)
    open(os.path.join(args.work, "table.txt"), "w").write(t + "\n")
    json.dump(rows, open(os.path.join(args.work, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()

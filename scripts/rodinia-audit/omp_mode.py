"""The --openmp mode of the Rodinia audit (audit.py): the programs built as shipped, with
-fopenmp, profiled with no OpenMP environment set, put beside the serial audit's reports.

polyprof runs an OpenMP program with one OpenMP thread, so the top region and its ranked
advice should be those of the serial build, and each of the program's own worksharing loops
gets a verdict (report.json `all_loops[].openmp`). This module reads the reports and prints
that comparison; audit.py builds and runs. See README.md beside this file.
"""

import os
import re

# Variables an OpenMP program reads from its environment: none is set for the polyprof run
# (polyprof itself then picks one thread); the native reference run sets one thread.
OMP_ENV = re.compile(r"^(OMP_|GOMP_|KMP_)")


def env_without_omp(env):
    return {k: v for k, v in env.items() if not OMP_ENV.match(k)}


def env_one_thread(env):
    e = env_without_omp(env)
    e["OMP_NUM_THREADS"] = "1"
    return e


def loc_of(loop):
    loc = loop.get("location") or {}
    if loc.get("file"):
        return "%s:%s" % (os.path.basename(loc["file"]), loc.get("line"))
    return loop.get("id", "?")


def loop_locations(report):
    """Loop id -> `file:line`, over every region (ids differ between two builds, lines do
    not)."""
    out = {}
    for r in (report or {}).get("regions") or []:
        for l in (r.get("all_loops") or []) + (r.get("loops") or []):
            out.setdefault(l["id"], loc_of(l))
    return out


def advice(report, region):
    """The ranked advice of a region as comparable text: `kind@file:line,...` in rank
    order (the suggestions skipped as not paying marked `(skipped)`)."""
    if region is None:
        return []
    locs = loop_locations(report)
    out = []
    for s in sorted(region.get("suggestions") or [], key=lambda s: s.get("rank", 0)):
        where = ",".join(locs.get(l, l) for l in s.get("loops") or [])
        skipped = " (skipped)" if s.get("skipped") else ""
        out.append("%s@%s%s" % (s.get("kind"), where, skipped))
    return out


def top(report):
    regs = (report or {}).get("regions") or []
    return regs[0] if regs else None


def region_name(r):
    if r is None:
        return "-"
    loc = r.get("location") or {}
    label = ("%s:%s" % (os.path.basename(loc["file"]), loc.get("line"))
             if loc.get("file") else r.get("function") or "?")
    return "%s %.0f%%" % (label, r.get("ops_percent") or 0)


def same_region(a, b):
    return (a is not None and b is not None
            and (a.get("location") or {}).get("file") is not None
            and os.path.basename((a.get("location") or {}).get("file") or "")
            == os.path.basename((b.get("location") or {}).get("file") or "")
            and (a.get("location") or {}).get("line") == (b.get("location") or {}).get("line"))


def advice_diff(a, b):
    """'same', or the first difference between two ranked advice lists."""
    if a == b:
        return "same"
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "-"
        y = b[i] if i < len(b) else "-"
        if x != y:
            return "differs at %d: serial %s, openmp %s" % (i + 1, x, y)
    return "same"


def own_loops(report):
    """The program's own OpenMP loops with their verdicts, one per source location (a loop
    listed by several regions once): [(loc, file, line, openmp)]."""
    seen = {}
    for r in (report or {}).get("regions") or []:
        for l in r.get("all_loops") or []:
            o = l.get("openmp")
            if not o:
                continue
            key = loc_of(l)
            if key not in seen:
                loc = l.get("location") or {}
                seen[key] = (key, loc.get("file") or "", loc.get("line") or 0, o)
    return sorted(seen.values(), key=lambda t: (t[1], t[2]))


DIRECTIVE = re.compile(r"^\s*#\s*pragma\s+omp\b(.*)")


def compiled_sources(p, root):
    """The files the build compiles (paths relative to `root`, WORK/<name>): the suite's
    folders hold variants that are not built (cfd's euler3d_cpu_double.cpp)."""
    bdir = p.get("build", ".")
    return [os.path.normpath(os.path.join(bdir, u)) for u in p["units"]]


def source_directives(root, sources):
    """The worksharing-loop directives of the program's sources: [(rel path, line, text)],
    continuation lines joined. A commented-out pragma is not one."""
    out = []
    for rel in sources:
        try:
            lines = open(os.path.join(root, rel), encoding="latin-1").read().split("\n")
        except OSError:
            continue
        k = 0
        while k < len(lines):
            m = DIRECTIVE.match(lines[k])
            start = k
            if m:
                text = lines[k].strip()
                while text.endswith("\\") and k + 1 < len(lines):
                    k += 1
                    text = text[:-1].strip() + " " + lines[k].strip()
                words = re.findall(r"[A-Za-z_]+", text.split("omp", 1)[1])[:3]
                if "for" in words:
                    out.append((rel, start + 1, text))
            k += 1
    return out


def match_directives(directives, loops):
    """Each directive with the verdicts of the loops below it (the nearest directive on or
    above a loop's line, in the same file, is its own: gcc may name the loop by the
    directive's line): [(rel, line, text, [loop rows])]."""
    out = [(rel, line, text, []) for rel, line, text in directives]
    for row in loops:
        _, f, line, _ = row
        best = None
        for k, (rel, dline, _, _) in enumerate(out):
            if os.path.basename(rel) == os.path.basename(f) and dline <= line and \
                    (best is None or dline > out[best][1]):
                best = k
        if best is not None:
            out[best][3].append(row)
    return out


def why(o):
    """The verdict's text, without its common opening, short."""
    t = o.get("text") or ""
    for lead in ("iterations given to different threads race: ", "the directive lacks "):
        if t.startswith(lead):
            t = t[len(lead):]
    if o.get("verdict") == "parallel":
        return "-"
    return t[:110] + (" ..." if len(t) > 110 else "")


def table(progs, serial):
    """The --openmp tables: one row per program, then every own loop's verdict, then the
    directives left without one. `serial`: name -> the serial audit's report (or None)."""
    hdr = "%-14s %-5s %-6s | %-30s %-30s %-4s | %s" % (
        "program", "out", "=ser", "top region (serial)", "top region (openmp)", "same",
        "ranked advice of the top region")
    lines = [hdr, "-" * len(hdr)]
    loops_out, missing = [], []
    counts = {}
    for p in progs:
        srep = serial.get(p.name)
        st, ot = top(srep), top(p.report)
        lines.append("%-14s %-5s %-6s | %-30s %-30s %-4s | %s" % (
            p.name, p.verdict, getattr(p, "vs_serial", "-"), region_name(st)[:30],
            region_name(ot)[:30], "yes" if same_region(st, ot) else "NO",
            advice_diff(advice(srep, st), advice(p.report, ot)) if p.report else "-"))
        rows = own_loops(p.report)
        for loc, _, _, o in rows:
            counts[o.get("verdict")] = counts.get(o.get("verdict"), 0) + 1
            loops_out.append("%-14s %-28s %-16s %-34s %-44s %s" % (
                p.name, loc, o.get("verdict"), ", ".join(o.get("missing") or [])[:34],
                (o.get("directive") or "-")[:44], why(o)))
        directives = source_directives(p.dir, compiled_sources(p.p, p.dir))
        for rel, line, text, got in match_directives(directives, rows):
            if not got:
                missing.append("%-14s %s:%d %s" % (p.name, rel, line, text[:80]))
    lines += ["", "The programs' own OpenMP loops (report.json all_loops[].openmp), %d: %s" % (
        len(loops_out), ", ".join("%s %d" % kv for kv in sorted(counts.items())) or "none"),
        "%-14s %-28s %-16s %-34s %-44s %s" % ("program", "loop", "verdict", "missing",
                                              "directive", "why (the verdict's text)")]
    lines += loops_out
    lines += ["", "Worksharing directives of the sources with no verdict (%d):" % len(missing)]
    lines += missing or ["none"]
    return lines

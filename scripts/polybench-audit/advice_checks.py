#!/usr/bin/env python3
"""Issue 36's checks of an audit's reports that need report.json (beside whynots.py):

    python3 scripts/polybench-audit/advice_checks.py OUT_DIR ...

For each polyprof output directory (report.json, report.txt, report.html):
- flags: no loop-table flag in report.txt says plain `yes` for a loop whose parallelize
  suggestion (for the loop where it stands, not an interchanged order) requires a copy, an expansion, a substitution, a local array or a reduction;
- after: in each region's `code_after`, every `#pragma omp` line is the text a suggestion of
  the region prints for the loop below it (a `simd` with no printed directive: a vectorize
  suggestion of that loop), no parallel loop is inside another, and report.html shows the code.
Exits 1 on any problem."""
import html
import json
import os
import re
import sys

SRC = {"copy_in", "expand", "map_to_array", "closed_form", "local_array"}


def flags(d, r):
    bad, n = [], 0
    txt = open(os.path.join(d, "report.txt")).read()
    table = {m.group(1): m.group(2).strip() for m in
             re.finditer(r"^  (L\d+) \S+\s+(.*?)\s+(yes|no)\s+\d+%", txt, re.M)}
    for reg in r["regions"]:
        for s in reg.get("suggestions") or []:
            if s["kind"] != "parallelize" or len(s.get("loops") or []) != 1:
                continue
            if "once the loops are interchanged" in s.get("text", ""):
                # Written for the interchanged order (deriche's 136 inside 141), whose
                # expansions the loop where it stands does not need: its flag is for there.
                continue
            lid = s["loops"][0]
            ch = set(x.get("change") for x in (s.get("requires") or []))
            n += 1
            if table.get(lid) == "yes" and (ch & SRC or "reduction" in ch):
                bad.append("%s %s %s: flag `yes`, requires %s" % (d, reg["id"], lid,
                                                                   sorted(ch)))
    return n, bad
def after(d):
    r = json.load(open(os.path.join(d, "report.json")))
    h = html.unescape(open(os.path.join(d, "report.html")).read())
    bad = []
    for reg in r["regions"]:
        code = reg.get("code_after") or ""
        sugg = (reg.get("suggestions") or [])
        lines = code.split("\n")
        openp = []
        for i, l in enumerate(lines):
            ind = len(l) - len(l.lstrip())
            openp = [x for x in openp if ind > x]
            t = l.strip()
            if not t.startswith("#pragma omp"):
                continue
            nxt = next((x for x in lines[i+1:] if not x.strip().startswith("#pragma")), "")
            m = re.search(r"\((L\d+)\)", nxt)
            lid = m.group(1) if m else None
            kind = "parallelize" if "parallel" in t else "vectorize"
            ok = any(s["kind"] == kind and s["loops"][0] == lid and ("`%s`" % t in s["text"] or (kind == "vectorize" and "`#pragma omp simd" not in s["text"] and t == "#pragma omp simd")) for s in sugg)
            if not ok:
                bad.append("%s %s: %r on %s is no suggestion's" % (d, reg["id"], t, lid))
            if "parallel" in t:
                if openp:
                    bad.append("%s %s: nested parallel" % (d, reg["id"]))
                openp.append(ind)
        for l in lines:
            if l.strip() and l.strip() not in h:
                bad.append("%s %s: html lacks %r" % (d, reg["id"], l.strip()[:80])); break
    return bad


def main():
    bad, n = [], 0
    for d in sys.argv[1:]:
        r = json.load(open(os.path.join(d, "report.json")))
        k, b = flags(d, r)
        n += k
        bad += b + after(d)
    print("\n".join(bad))
    print("%d reports, %d parallelize suggestions, %d problems" % (len(sys.argv) - 1, n,
                                                                  len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

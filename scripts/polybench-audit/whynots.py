#!/usr/bin/env python3
"""Issue 36's report.txt checks over the reports of an audit: no reason of "Why not more"
or of "Loops without a suggestion" over 300 characters, and no "isl failed" anywhere.

    python3 scripts/polybench-audit/whynots.py REPORT.txt|DIR ...

A DIR is searched for `report.txt` files (an audit's WORK). Prints each offence and the
counts; exits 1 if there is any."""
import os
import sys

LIMIT = 300


def reports(args):
    for a in args:
        if os.path.isdir(a):
            for root, dirs, files in os.walk(a):
                dirs.sort()
                if "report.txt" in files:
                    yield os.path.join(root, "report.txt")
        else:
            yield a


def check(path):
    """(why-nots read, offences) of one report.txt."""
    bad, n, section = [], 0, None
    for k, line in enumerate(open(path, errors="replace"), 1):
        line = line.rstrip("\n")
        s = line.strip()
        if "isl failed" in line:
            bad.append("%s:%d: says \"isl failed\": %s" % (path, k, s[:160]))
        if s.startswith("Why not more:"):
            section = "why"
            rest = s[len("Why not more:"):].strip()
            if rest:  # one reason on the heading's line
                n += 1
                if len(rest) > LIMIT:
                    bad.append("%s:%d: why-not of %d characters: %s..." % (path, k, len(rest),
                                                                           rest[:120]))
            continue
        if s.startswith("Loops without a suggestion:"):
            section = "loops"
            continue
        if section and s.startswith("- "):
            n += 1
            reason = s[2:]
            if section == "loops":  # "L28: it cannot run in parallel: ..."
                reason = reason.split(": ", 1)[-1]
            if len(reason) > LIMIT:
                bad.append("%s:%d: %s of %d characters: %s..." % (
                    path, k, "why-not" if section == "why" else "loop reason", len(reason),
                    reason[:120]))
            continue
        if section and not line.startswith("      "):
            section = None
    return n, bad


def main():
    files = list(reports(sys.argv[1:]))
    total, offences = 0, []
    for f in files:
        n, bad = check(f)
        total += n
        offences += bad
    for b in offences:
        print(b)
    print("%d report.txt files, %d reasons read, %d offences (over %d characters or "
          "\"isl failed\")" % (len(files), total, len(offences), LIMIT))
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())

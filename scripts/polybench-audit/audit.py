#!/usr/bin/env python3
"""Audit polyprof's advice on PolyBench/C by applying it to the source.

For every PolyBench kernel: build it (MINI dataset, exact "%a" output), run polyprof on it,
and for every `parallelize` suggestion insert the OpenMP pragma its text prints, as written,
before the loop's `for` line, build the variant (-fopenmp, -O2 and -O0), run it with 2 threads
(plain and schedule(static,1)) and compare the dumped arrays (stderr) byte for byte with the
sequential program's. Also run the loop reversed, sequentially. Interchanges and tilings are
applied where their loops form a perfect nest in the source (headers permuted; tiles of TILE
iterations), a vectorize suggestion's printed `#pragma omp simd ...` is inserted as written
(after the local accumulator its text asks for, made as it says; -fopenmp), a loop said to
vectorize with no printed directive is reversed, and each result is run sequentially and
compared the same way. See README.md beside this file.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

CFLAGS = ["-g", "-DMINI_DATASET", "-DPOLYBENCH_DUMP_ARRAYS"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, cwd=None, env=None, timeout=120, stdin=subprocess.DEVNULL):
    """Run a command; return (rc, stdout bytes, stderr bytes); rc None on timeout."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or b"", e.stderr or b""


def find_kernels(pb):
    out = []
    for root, dirs, files in os.walk(pb):
        dirs.sort()
        name = os.path.basename(root)
        if "utilities" in os.path.relpath(root, pb).split(os.sep):
            continue
        if name + ".c" in files and name + ".h" in files:
            out.append((name, root))
    return sorted(out)


def compile_c(pb, src_dir, src, exe, opt, openmp=False):
    util = os.path.join(pb, "utilities")
    cmd = ["gcc"] + opt.split() + CFLAGS + (["-fopenmp"] if openmp else []) + \
        ["-I" + util, os.path.join(util, "polybench.c"), src, "-lm", "-o", exe]
    rc, o, e = run(cmd, cwd=src_dir, timeout=300)
    return rc == 0, e.decode(errors="replace")


def first_diff(ref, got):
    a = ref.decode(errors="replace").split("\n")
    b = got.decode(errors="replace").split("\n")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<missing>"
        y = b[i] if i < len(b) else "<missing>"
        if x != y:
            # narrow to the first differing token
            xs, ys = x.split(" "), y.split(" ")
            for k in range(max(len(xs), len(ys))):
                xt = xs[k] if k < len(xs) else "<none>"
                yt = ys[k] if k < len(ys) else "<none>"
                if xt != yt:
                    return "line %d token %d: expected %s got %s" % (i + 1, k + 1, xt, yt)
            return "line %d: expected %r got %r" % (i + 1, x[:120], y[:120])
    return "same"


def max_rel(fails):
    """Largest relative difference between the expected and got values in failure strings."""
    worst = 0.0
    for f in fails:
        m = re.search(r"expected (\S+) got (\S+)", f)
        if not m:
            continue
        try:
            a, b = float.fromhex(m.group(1)), float.fromhex(m.group(2))
        except ValueError:
            return "n/a"
        worst = max(worst, abs(a - b) / max(abs(a), abs(b), 1e-300))
    return "%.1e" % worst


# Changes the printed pragma cannot express: the text asks for them before its pragma.
SOURCE_CHANGES = ("expand", "copy_in", "map_to_array", "closed_form", "local_array")


def split_items(text):
    """The comma-separated items of a clause, commas inside brackets kept (`y[0:42]`)."""
    items, depth, cur = [], 0, ""
    for c in text:
        depth += c in "[("
        depth -= c in "])"
        if c == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        items.append(cur.strip())
    return items


def parse_pragma(pragma):
    """The data-sharing clauses of a printed pragma, as {private, firstprivate, lastprivate:
    [names], reduction: {var: (op, item)}}; the static check and the diagnosis read them."""
    c = {"private": [], "firstprivate": [], "lastprivate": [], "reduction": {}}
    for m in re.finditer(r"\b(private|firstprivate|lastprivate|reduction)\s*\(", pragma):
        depth, i = 1, m.end()
        while i < len(pragma) and depth:
            depth += pragma[i] == "("
            depth -= pragma[i] == ")"
            i += 1
        inner = pragma[m.end():i - 1]
        if m.group(1) == "reduction":
            op, _, items = inner.partition(":")
            for item in split_items(items):
                c["reduction"][re.match(r"[A-Za-z_]\w*", item).group(0)] = (op.strip(), item)
        else:
            c[m.group(1)] += split_items(inner)
    return c


def printed_pragma(sugg):
    """What the suggestion's text asks, as (status, pragma, reassociates): status None when
    the printed pragma is the whole advice and can be inserted as written; otherwise why it
    is not applied ("no pragma printed", "needs storage change: ...")."""
    text = sugg.get("text", "")
    reqs = (sugg.get("requires") or []) + (sugg.get("reduction") or [])
    reassoc = any(r.get("reassociates") for r in reqs) or "reassociates" in text
    m = re.search(r"`(#pragma omp [^`]*)`", text)
    if not m:
        return "no pragma printed", None, reassoc
    needs = ["%s %s" % (r.get("change"), r.get("storage")) for r in reqs
             if r.get("change") in SOURCE_CHANGES]
    # "The loop takes `...` plus a `lastprivate` clause on the source variable ... holds":
    # the clause the pragma lacks names storage debug information does not name.
    plus = re.search(r"plus a `(\w+)` clause on the source variable (.*?) holds", text)
    if plus:
        needs.append("%s clause on %s" % (plus.group(1), plus.group(2)))
    if needs:
        return "needs storage change: " + "; ".join(needs), m.group(1), reassoc
    return None, m.group(1), reassoc


def clause_text(c):
    parts = []
    for k in ("private", "firstprivate", "lastprivate"):
        if c[k]:
            parts.append("%s(%s)" % (k, ", ".join(c[k])))
    byop = {}
    for op, item in c["reduction"].values():
        byop.setdefault(op, []).append(item)
    for op, vs in byop.items():
        parts.append("reduction(%s: %s)" % (op, ", ".join(vs)))
    return " ".join(parts)


def loop_body_span(src, start):
    """(start, end) character offsets of the `for` statement beginning at offset start."""
    return statement_span(src, src.index("for", start))


def statement_span(src, start):
    """(start, end) character offsets of the C statement beginning at offset start (after
    white space and comments)."""

    def skip_ws(i):
        while i < len(src):
            if src[i].isspace():
                i += 1
            elif src.startswith("//", i):
                i = src.index("\n", i)
            elif src.startswith("/*", i):
                i = src.index("*/", i) + 2
            elif src[i] == "#":  # a pragma line
                i = src.index("\n", i)
            else:
                break
        return i

    def parens(i):  # i at "(": return index after matching ")"
        depth = 0
        while True:
            c = src[i]
            depth += c == "("
            depth -= c == ")"
            i += 1
            if depth == 0:
                return i

    def stmt(i):
        i = skip_ws(i)
        if src[i] == "{":
            depth = 0
            while True:
                depth += src[i] == "{"
                depth -= src[i] == "}"
                i += 1
                if depth == 0:
                    return i
        m = re.match(r"(for|while|if|switch)\b", src[i:])
        if m:
            i = parens(skip_ws(i + len(m.group(1))))
            i = stmt(i)
            if m.group(1) == "if":
                j = skip_ws(i)
                if src.startswith("else", j) and not (src[j + 4].isalnum() or src[j + 4] == "_"):
                    i = stmt(j + 4)
            return i
        if re.match(r"do\b", src[i:]):
            i = stmt(i + 2)
            j = skip_ws(i)
            i = parens(skip_ws(j + 5))
            return src.index(";", i) + 1
        return src.index(";", i) + 1

    i = skip_ws(start)
    return i, stmt(i)


def acc_rewritten(src_lines, line, names, accs=("acc",)):
    """The source with the `for` loop at `line` rewritten as a vectorize suggestion's text
    asks before its directive (issue 36): "Sum the element into a local scalar `acc`
    declared before the loop, add `acc` to it after the loop". Its statements `E = E + X;`,
    `E = X + E;`, `E += X;` and `E -= X;` on an element `E` of an array in `names` that no
    counter of the loop (its own, or a nested loop's) indexes become `acc += X;` (`acc -=
    X;`), within `{ __typeof__(E) acc = 0;` ... `E += acc; }` around the loop. With several
    elements (`accs` of the printed clause, `acc_tmp, acc_y`), each array's element gets its
    `acc_<array>`. Returns (the
    source's lines with a `@PRAGMA@` line before the loop's, None) or (None, why not)."""
    src = "\n".join(src_lines) + "\n"
    start = sum(len(l) + 1 for l in src_lines[:line - 1])
    s, e = loop_body_span(src, start)
    loop = src[s:e]
    counters = set(re.findall(r"\bfor\s*\(\s*(?:int\s+)?([A-Za-z_]\w*)\s*=", loop))
    elements, edits = set(), []
    # `(POLYBENCH_ARRAY(B))[r][s]`: PolyBench's initialisations name an array by a macro.
    pat = re.compile(r"(?<![\w.>])((?:\(\s*POLYBENCH_ARRAY\s*\(\s*)?(%s)(?:\s*\)\s*\))?"
                     r"\s*(?:\[[^;=\]]*\])+)\s*(\+=|-=|=)\s*([^;]*);"
                     % "|".join(map(re.escape, names)))
    for m in pat.finditer(loop):
        elem, op, rhs = m.group(1), m.group(3), m.group(4).strip()
        norm = re.sub(r"\s+", "", elem)
        if any(re.search(r"\b%s\b" % c, elem) for c in counters):
            return None, "the element %s varies with a loop counter (%s)" % (
                norm, ", ".join(sorted(counters)))
        acc = accs[0] if len(accs) == 1 else "acc_" + m.group(2)
        if acc not in accs:
            return None, "no accumulator named for %s in the clause" % norm
        if op == "=":
            flex = r"\s*".join(map(re.escape, norm))
            first = re.match(r"^%s\s*\+(.*)$" % flex, rhs, re.S)
            last = re.match(r"^(.*)\+\s*%s$" % flex, rhs, re.S)
            if first:
                new = "%s += %s;" % (acc, first.group(1).strip())
            elif last:
                new = "%s += %s;" % (acc, last.group(1).strip())
            else:
                return None, "%s is set, not accumulated" % norm
        else:
            new = "%s %s %s;" % (acc, op, rhs)
        elements.add((norm, acc))
        edits.append((m.start(), m.end(), new, elem, acc))
    if not edits:
        return None, "no accumulation into %s found in the loop" % ", ".join(names)
    if len(set(a for _, a in elements)) < len(elements):
        return None, "the text names %d accumulators for %d elements (%s)" % (
            len(accs), len(elements), ", ".join(sorted(e for e, _ in elements)))
    for a, b, new, _, _ in reversed(edits):
        loop = loop[:a] + new + loop[b:]
    indent = re.match(r"\s*", src_lines[line - 1]).group(0)
    firsts = {}
    for _, _, _, elem, acc in edits:
        firsts.setdefault(acc, elem)
    decl = " ".join("__typeof__(%s) %s = 0;" % (e, a) for a, e in firsts.items())
    back = " ".join("%s += %s;" % (e, a) for a, e in firsts.items())
    text = (src[:s] + "{ %s\n%s@PRAGMA@\n%s" % (decl, indent, indent) + loop +
            "\n%s%s }" % (indent, back) + src[e:])
    return text.split("\n")[:-1], None


def shared_assigned(src_lines, line, clauses, want_all=False):
    """Variables assigned inside the loop at `line` that no clause makes private and that are
    not declared inside it: candidates for a race (only scalars; arrays are not listed)."""
    src = "\n".join(src_lines)
    off = sum(len(l) + 1 for l in src_lines[:line - 1])
    off = src.index("for", off)
    a, b = loop_body_span(src, off)
    body = src[a:b]
    m = FOR_HEAD.match(body)
    own = m.group(1) if m else None
    declared = set(re.findall(r"\b(?:int|long|double|float|char|unsigned|DATA_TYPE)\s+"
                              r"([A-Za-z_]\w*)", body))
    assigned = set()
    for m in re.finditer(r"(?<![\w\].>])([A-Za-z_]\w*)\s*([+\-*/&|^]?=(?!=))", body):
        assigned.add(m.group(1))
    for m in re.finditer(r"(?<![\w\].>])([A-Za-z_]\w*)\s*(\+\+|--)|(\+\+|--)\s*([A-Za-z_]\w*)",
                         body):
        assigned.add(m.group(1) or m.group(4))
    covered = set(clauses["private"]) | set(clauses["firstprivate"]) | \
        set(clauses["lastprivate"]) | set(clauses["reduction"])
    if want_all:
        return own, set(v for v in assigned if v and v not in declared)
    return sorted(v for v in assigned if v and v != own and v not in covered
                  and v not in declared)


# Iterations per loop of the tiles the audit applies: small, so that the small dataset's order
# changes, and not a divisor of its sizes, so that partial tiles run.
TILE = 3
# Runs per optimisation level of a printed `simd` directive, with 2 threads (issue 36).
SIMD_RUNS = 10
# A vectorize text whose claim is for the order its region's interchange gives.
AS_ADVISED = "This holds once the loops are interchanged as advised"

FOR_HEAD = re.compile(r"for\s*\(\s*([A-Za-z_]\w*)\s*=")


FOR_RE = re.compile(
    r"for\s*\(\s*([A-Za-z_]\w*)\s*=\s*([^;]+?)\s*;\s*\1\s*(<=|<)\s*([^;]+?)\s*;\s*"
    r"(?:\1\s*\+\+|\+\+\s*\1|\1\s*\+=\s*1|\1\s*=\s*\1\s*\+\s*1)\s*\)")


def reversed_header(line):
    m = FOR_RE.search(line)
    if not m:
        return None
    v, lo, op, hi = m.group(1), m.group(2), m.group(3), m.group(4)
    start = "(%s) - 1" % hi if op == "<" else "(%s)" % hi
    new = "for (%s = %s; %s >= (%s); %s--)" % (v, start, v, lo, v)
    return line[:m.start()] + new + line[m.end():]


def write_variant(src_lines, path, lineno, pragma=None, reverse=False):
    lines = list(src_lines)
    if reverse:
        lines[lineno - 1] = reversed_header(lines[lineno - 1])
    if pragma is not None:
        lines.insert(lineno - 1, pragma)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def header_span(line):
    """(start, end) of the `for (...)` header on a source line, or None."""
    m = re.search(r"\bfor\s*\(", line)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    while i < len(line):
        depth += line[i] == "("
        depth -= line[i] == ")"
        i += 1
        if depth == 0:
            return m.start(), i
    return None


def sole_child(src_lines, outer, inner):
    """Is the `for` statement on line `inner` the whole body of the one on line `outer` (a
    perfect nest: nothing else runs between the two headers)?"""
    src = "\n".join(src_lines)
    off = lambda n: sum(len(l) + 1 for l in src_lines[:n - 1])
    a, b = loop_body_span(src, off(outer))
    hs = header_span(src_lines[outer - 1])
    c, d = loop_body_span(src, off(inner))
    if hs is None or not a < c < d <= b:
        return False
    before = COMMENT.sub("", src[off(outer) + hs[1]:c]).split()
    after = COMMENT.sub("", src[d:b]).split()
    return (before, after) in (([], []), (["{"], ["}"]))


def distributed(src_lines, text):
    """Moves the statements an interchange's text moves first ("The nest is not perfect: first
    move k.c:12 to a copy of loop k.c:11 before it [and k.c:15 to one after it].") out of
    their loop: (lines with those statements blanked, {line: code to put before it},
    {line: code to put after it}), or (None, why). Line numbers stay the source's."""
    m = re.search(r"The nest is not perfect: first move (.*?) to a copy of loop (\S+:\d+) "
                  r"(before it(?: and (.*?) to one after it)?|after it)\.", text)
    if not m:
        return list(src_lines), {}, {}
    if m.group(3) == "after it":
        before, after = "", m.group(1)
    else:
        before, after = m.group(1), m.group(4) or ""
    loop = int(m.group(2).rsplit(":", 1)[1])
    lines = list(src_lines)
    src = "\n".join(src_lines)
    off = lambda n: sum(len(l) + 1 for l in src_lines[:n - 1])
    line_at = lambda o: src.count("\n", 0, o) + 1
    hs = header_span(src_lines[loop - 1])
    if hs is None:
        return None, "no `for` on line %d" % loop
    a, b = loop_body_span(src, off(loop))
    header = src_lines[loop - 1][hs[0]:hs[1]]
    pre, post = {}, {}
    for refs, where, at in ((before, pre, loop), (after, post, line_at(b - 1))):
        body = []
        for ref in filter(None, refs.split(", ")):
            n = int(ref.rsplit(":", 1)[1])
            c, d = statement_span(src, off(n))
            if not (a < c and d <= b) or line_at(c) != n:
                return None, "no statement of loop %d starts on line %d" % (loop, n)
            body.append(" ".join(src[c:d].split()))
            first, last = line_at(c), line_at(d - 1)
            for k in range(first, last + 1):
                lines[k - 1] = ""
        if body:
            where[at] = "%s { %s }" % (header, " ".join(body))
    if pre and not post:
        post[line_at(b - 1)] = ""
    elif post and not pre:
        pre[loop] = ""
    return lines, pre, post


def interchanged(src_lines, lines_now, lines_new, text=""):
    """The source with the headers of the nest `lines_now` (outermost first) permuted to
    `lines_new`, once the statements `text` says to move first are moved (the nest must then
    be perfect), or (None, why)."""
    src_lines, pre, post = distributed(src_lines, text)
    if src_lines is None:
        return None, pre
    for o, i in zip(lines_now, lines_now[1:]):
        if not sole_child(src_lines, o, i):
            return None, "not a perfect nest in the source between lines %d and %d" % (o, i)
    heads = {}
    for n in lines_now:
        hs = header_span(src_lines[n - 1])
        m = FOR_HEAD.match(src_lines[n - 1][hs[0]:hs[1]]) if hs else None
        if not m:
            return None, "no simple `for` header on line %d" % n
        heads[n] = (hs, src_lines[n - 1][hs[0]:hs[1]], m.group(1))
    # A header moved outside a loop whose variable its bounds use would read it unset.
    for p, n in enumerate(lines_new):
        text, var = heads[n][1], heads[n][2]
        for inner in lines_new[p + 1:]:
            v = heads[inner][2]
            if v != var and re.search(r"\b%s\b" % re.escape(v), text):
                return None, "the bounds of line %d use `%s`, which would be inner" % (n, v)
    out = list(src_lines)
    for at, n in zip(lines_now, lines_new):
        (s0, s1), _, _ = heads[at]
        out[at - 1] = src_lines[at - 1][:s0] + heads[n][1] + src_lines[at - 1][s1:]
    # One block for the copies and the loop: its parent may be a `for` without braces.
    for n, code in pre.items():
        out[n - 1] = "{ " + code + " " + out[n - 1]
    for n, code in post.items():
        out[n - 1] = out[n - 1] + " " + code + " }"
    return out, None


def moving(new):
    """The loops an interchange to the order `new` (header lines, outermost first) moves:
    (their lines now, sorted; their lines in the new order), the outer loops that keep their
    place left out."""
    now = sorted(new)
    while now and now[0] == new[0]:
        now, new = now[1:], new[1:]
    return now, new


def reordered(src_lines, new, text=""):
    """An interchange applied as printed: the source with the nest's headers permuted to the
    order `new` (header lines, outermost first) once the statements `text` moves first are
    moved, and {a moved loop's header line in the source: its line now}; or (None, why)."""
    now, new = moving(new)
    out, why = interchanged(src_lines, now, new, text)
    if out is None:
        return None, why
    return out, {n: o for o, n in zip(now, new)}


def tiled(src_lines, lines_now, lines_band, size):
    """The source with the perfect, rectangular nest `lines_now` (outermost first) reordered
    to the band `lines_band` and tiled by `size` iterations per loop, or (None, why)."""
    out, why = interchanged(src_lines, lines_now, lines_band)
    if out is None:
        return None, why
    parts = []
    for n in lines_now:
        m = FOR_RE.search(out[n - 1])
        if not m:
            return None, "no simple `for` header on line %d" % n
        parts.append(m)
    names = [m.group(1) for m in parts]
    for m in parts:
        for v in names:
            if v != m.group(1) and re.search(r"\b%s\b" % re.escape(v), m.group(0)):
                return None, "the band is not rectangular (`%s` in `%s`)" % (v, m.group(0))
    tile_headers(out, lines_now, parts, size)
    return out, None


def tile_headers(out, lines, parts, size):
    """Rewrites the `for` headers `parts` (FOR_RE matches) on `lines` of `out` into tile
    loops (all on the first line) and point loops of `size` iterations."""
    tiles = ["for (int pp_t%d = %s; pp_t%d %s %s; pp_t%d += %d)" % (
        k, m.group(2), k, m.group(3), m.group(4), k, size) for k, m in enumerate(parts)]
    for k, (n, m) in enumerate(zip(lines, parts)):
        v = m.group(1)
        # One bound, the smaller: OpenMP's canonical loop form (a `simd` or `for` directive
        # on a point loop) takes no `&&`.
        hi = "(%s)" % m.group(4) if m.group(3) == "<" else "(%s) + 1" % m.group(4)
        end = "pp_t%d + %d" % (k, size)
        point = "for (%s = pp_t%d; %s < (%s < %s ? %s : %s); %s++)" % (
            v, k, v, hi, end, hi, end, v)
        head = " ".join(tiles + [point]) if k == 0 else point
        out[n - 1] = out[n - 1][:m.start()] + head + out[n - 1][m.end():]


def copy_kernel(src_dir, name, work_dir):
    """Copies `<name>.c` and `<name>.h` to `work_dir`, the header printing "%a" (exact
    output); returns the source's lines."""
    os.makedirs(work_dir, exist_ok=True)
    c = os.path.join(work_dir, name + ".c")
    shutil.copy(os.path.join(src_dir, name + ".c"), c)
    h = open(os.path.join(src_dir, name + ".h")).read()
    h = h.replace('"%0.2lf "', '"%a "').replace('"%0.2f "', '"%a "')
    open(os.path.join(work_dir, name + ".h"), "w").write(h)
    lines = open(c).read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class Kernel:
    def __init__(self, args, name, src_dir):
        self.args, self.name, self.src_dir = args, name, src_dir
        self.dir = os.path.join(args.work, name)
        self.c = os.path.join(self.dir, name + ".c")
        self.ref = None
        self.rows = []          # (region, loop@line, requires, clauses, outcome, detail)
        self.irows = []         # interchange and tile suggestions, applied to the source
        self.other = {}         # kind -> count
        self.error = None
        self.cache = {}         # variant source text -> outcome

    def prepare(self):
        self.src_lines = copy_kernel(self.src_dir, self.name, self.dir)
        exe = os.path.join(self.dir, "prog")
        ok, err = compile_c(self.args.polybench, self.dir, self.c, exe, "-O2")
        if not ok:
            self.error = "original does not compile: " + err.strip()[:300]
            return False
        rc, o, e = run([exe], cwd=self.dir)
        if rc != 0:
            self.error = "original exits with %s" % rc
            return False
        self.ref = e
        # The binary polyprof profiles (the -O2 one unless --profile-flags says otherwise); the
        # reference output stays the -O2 build's, which the variants are built like.
        self.profiled = "./prog"
        if self.args.profile_flags != "-O2":
            ok, err = compile_c(self.args.polybench, self.dir, self.c, exe + "-profiled",
                                self.args.profile_flags)
            if not ok:
                self.error = "does not compile with %s: %s" % (self.args.profile_flags,
                                                               err.strip()[:300])
                return False
            self.profiled = "./prog-profiled"
        ok, _ = compile_c(self.args.polybench, self.dir, self.c, exe + "-O0", "-O0")
        rc0, _, e0 = run([exe + "-O0"], cwd=self.dir)
        if e0 != self.ref:
            log("  warning: %s -O0 output differs from -O2: %s" % (self.name,
                                                                  first_diff(self.ref, e0)))
            self.ref_o0 = e0
        else:
            self.ref_o0 = None
        return True

    def profile(self):
        out = os.path.join(self.dir, "out")
        rep = os.path.join(out, "report.json")
        if self.args.reuse and os.path.exists(rep):
            return json.load(open(rep))
        for d in (out, out + ".old"):
            shutil.rmtree(d, ignore_errors=True)
        t = time.time()
        rc, o, e = run([self.args.polyprof, "--region-threshold", "1", "-o", "out",
                        self.profiled],
                       cwd=self.dir, timeout=self.args.timeout)
        open(os.path.join(self.dir, "polyprof.stderr"), "wb").write(e)
        log("  polyprof: rc=%s in %.1fs" % (rc, time.time() - t))
        if rc is None:
            self.error = "polyprof timed out after %ds" % self.args.timeout
            return None
        if e != self.ref and rc == 0:
            # the program's own stderr is mixed with polyprof's messages; only note it
            prog_part = b"\n".join(l for l in e.split(b"\n") if not l.startswith(b"polyprof:"))
            if prog_part.strip() != self.ref.strip():
                log("  note: program output under polyprof differs: %s"
                    % first_diff(self.ref, prog_part))
        if not os.path.exists(rep):
            tail = e.decode(errors="replace").strip().split("\n")[-3:]
            self.error = "polyprof failed (rc=%s): %s" % (rc, " | ".join(tail))
            return None
        try:
            r = json.load(open(rep))
        except Exception as ex:
            self.error = "report.json unreadable: %s" % ex
            return None
        if rc != 0:
            self.error = "polyprof exit %s (report written)" % rc
        return r

    def test_variant(self, tag, text, openmp, runs):
        """Build text at -O2 and -O0; run; return list of failure strings."""
        fails = []
        key = (text, openmp, tuple(runs))
        if key in self.cache:
            return self.cache[key]
        vdir = os.path.join(self.dir, "variants")
        os.makedirs(vdir, exist_ok=True)
        for opt in ("-O2", "-O0"):
            src = os.path.join(vdir, "%s%s.c" % (tag, opt))
            exe = src[:-2]
            open(src, "w").write(text)
            # the header is found beside the copy of the kernel
            shutil.copy(os.path.join(self.dir, self.name + ".h"), vdir)
            ok, err = compile_c(self.args.polybench, vdir, src, exe, opt, openmp)
            if not ok:
                first = [l for l in err.split("\n") if "error" in l][:1]
                fails.append("%s does not compile: %s" % (opt, (first or [err.strip()])[0]))
                continue
            env = dict(os.environ, OMP_NUM_THREADS="2")
            env.pop("OMP_SCHEDULE", None)
            for i, r in enumerate(runs):
                rc, o, e = run([exe], cwd=vdir, env=env, timeout=60)
                if rc is None:
                    fails.append("%s %s run %d: timed out" % (opt, r, i + 1))
                    break
                if rc != 0:
                    fails.append("%s %s run %d: exit status %d" % (opt, r, i + 1, rc))
                    break
                if e != self.ref:
                    fails.append("%s %s run %d: %s" % (opt, r, i + 1, first_diff(self.ref, e)))
                    break
        self.cache[key] = fails
        return fails

    def diagnose(self, row, line, clauses, indent, tag):
        """Diagnostic only: does the loop pass with the private list corrected by the static
        check (scalars assigned in the loop added, names not assigned in it dropped)?"""
        try:
            own, assigned = shared_assigned(self.src_lines, line, clauses, want_all=True)
        except (ValueError, IndexError):
            return
        fixed = dict(clauses)
        fixed["private"] = sorted(set(v for v in clauses["private"] if v in assigned
                                      or v == own) |
                                  (assigned - set(clauses["firstprivate"]) -
                                   set(clauses["lastprivate"]) - set(clauses["reduction"])))
        ct = clause_text(fixed)
        fails = []
        for sched, extra in (("plain", ""), ("static1", " schedule(static,1)")):
            lines = list(self.src_lines)
            lines.insert(line - 1, (indent + "#pragma omp parallel for " + ct).rstrip() + extra)
            fails += self.test_variant(tag + "_fixed_" + sched, "\n".join(lines) + "\n", True,
                                       [sched] * 3)
        row["diagnosis"] = "with %s instead: %s" % (ct or "no clause",
                                                     "passes" if not fails else fails[0])

    def audit(self, report):
        regions = report.get("regions") or []
        for reg in regions:
            loops = {}
            for l in (reg.get("all_loops") or []) + (reg.get("loops") or []):
                loops[l["id"]] = l
            for s in reg.get("suggestions") or []:
                if s.get("kind") in ("interchange", "tile", "vectorize"):
                    self.audit_reorder(reg, loops, s)
                    continue
                if s.get("kind") != "parallelize":
                    self.other[s.get("kind")] = self.other.get(s.get("kind"), 0) + 1
                    continue
                try:
                    self.audit_one(reg, loops, s)
                except Exception as ex:  # one suggestion's error is reported, not fatal
                    import traceback
                    traceback.print_exc()
                    self.rows.append({"kernel": self.name, "region": reg.get("id"),
                                      "loop": ",".join(s.get("loops", [])), "requires": "?",
                                      "text": s.get("text", ""), "clauses": "",
                                      "outcome": "unchecked: audit error %r" % ex,
                                      "detail": "", "skipped": ""})

    def audit_reorder(self, reg, loops, s):
        """Applies an interchange (the headers swapped) or a tiling (tiles of TILE iterations,
        so that the small dataset's order changes) where the loops form a perfect nest in the
        source, or reverses a loop said to vectorize (its iterations independent), and runs
        the result sequentially (-O2, -O0) against the reference output."""
        kind = s.get("kind")
        reqs = s.get("requires") or []
        row = {"kernel": self.name, "kind": kind, "region": reg.get("id"), "loops": "",
               "requires": "; ".join("%s %s" % (r.get("change"), r.get("storage"))
                                     for r in reqs) or "-",
               "text": s.get("text", ""), "outcome": "", "detail": "",
               "skipped": (s.get("skipped") or {}).get("reason", "")}
        self.irows.append(row)
        new = []
        for lid in s.get("loops") or []:
            loc = (loops.get(lid) or {}).get("location") or {}
            if os.path.basename(loc.get("file") or "") != self.name + ".c" or not loc.get("line"):
                row["outcome"] = "unmapped"
                row["detail"] = "loop %s at %s:%s" % (lid, loc.get("file"), loc.get("line"))
                return
            new.append(loc["line"])
        row["loops"] = ",".join(map(str, new))
        now = sorted(new)
        if kind == "tile" and "after skewing" in row["text"]:
            row["outcome"] = "not applied"
            row["detail"] = "tiles a skewed band"
            return
        if kind == "vectorize":
            self.reverse_vectorized(row, reqs, s, new, reg, loops)
            return
        if kind == "interchange":
            now, new = moving(new)
        if len(now) < 2:
            row["outcome"] = "unmapped"
            row["detail"] = "fewer than two loops"
            return
        try:
            if kind == "tile":
                lines, why = tiled(self.src_lines, now, new, TILE)
            else:
                lines, why = interchanged(self.src_lines, now, new, row["text"])
        except (ValueError, IndexError) as ex:
            lines, why = None, "source not understood (%r)" % ex
        if lines is None:
            row["outcome"] = "not applied"
            row["detail"] = why
            return
        tag = "%s_%s_%s" % (reg.get("id"), kind, "_".join(map(str, new)))
        fails = self.test_variant(tag, "\n".join(lines) + "\n", False, [kind])
        if not fails:
            row["outcome"] = "passed"
        elif [r for r in reqs if r.get("change") in ("expand", "copy_in")]:
            # The source keeps the scalar the advice expands first.
            row["outcome"] = "needs storage change"
            row["detail"] = fails[0]
        else:
            row["outcome"] = "FAILED: " + fails[0]

    def reverse_vectorized(self, row, reqs, s, lines, reg, loops):
        reds = s.get("reduction") or []
        changes = set(r.get("change") for r in reqs)
        if len(lines) != 1:
            row["outcome"] = "unmapped"
            row["detail"] = "%d loops" % len(lines)
            return
        status, printed, reassoc = printed_pragma(s)
        if printed:
            self.simd_printed(row, lines[0], s, status, printed, reassoc, reg, loops)
            return
        header = reversed_header(self.src_lines[lines[0] - 1])
        if header is None or changes & {"lastprivate", "expand", "copy_in"}:
            row["outcome"] = "not applied"
            row["detail"] = "header not simple" if header is None else \
                "needs %s" % ", ".join(sorted(changes & {"lastprivate", "expand", "copy_in"}))
            return
        row["applied"] = "reversed: no directive printed"
        out = list(self.src_lines)
        out[lines[0] - 1] = header
        fails = self.test_variant("%s_vrev_%d" % (row["region"], lines[0]),
                                  "\n".join(out) + "\n", False, ["reversed"])
        reassoc = any(r.get("reassociates") for r in reds + reqs)
        if not fails:
            row["outcome"] = "passed"
        elif reassoc and not [f for f in fails if re.search(r"compile|exit|timed", f)]:
            row["outcome"] = "reassociates-differs"
            row["detail"] = fails[0]
        else:
            row["outcome"] = "FAILED: " + fails[0]

    def as_advised(self, reg, loops, s, line):
        """The source with the interchange a vectorize suggestion's text names ("This holds
        once the loops are interchanged as advised"): the region's interchange suggestion
        that puts the vectorized loop innermost, applied as `audit_reorder` and
        `bench_advice.py` apply one. Returns (lines, the vectorized loop's line now, the
        interchange's text) or (None, why, None)."""
        lid = (s.get("loops") or [None])[0]
        for o in reg.get("suggestions") or []:
            if o.get("kind") != "interchange" or (o.get("loops") or [None])[-1] != lid:
                continue
            new = [((loops.get(l) or {}).get("location") or {}).get("line") for l in o["loops"]]
            if None in new:
                return None, "a loop of the interchange has no line", None
            try:
                out, at = reordered(self.src_lines, new, o.get("text", ""))
            except (ValueError, IndexError) as ex:
                out, at = None, "source not understood (%r)" % ex
            if out is None:
                return None, at, None
            return out, at.get(line, line), o.get("text", "")
        return None, "the region has no interchange putting loop %s innermost" % lid, None

    def simd_printed(self, row, line, s, status, printed, reassoc, reg, loops):
        """A vectorize suggestion whose text prints a directive (`#pragma omp simd
        reduction(+: sum)`): the directive inserted as written on its own line before the
        loop's, as a user who copies it would, built with -fopenmp at -O2 and -O0 and run
        SIMD_RUNS times each with 2 threads against the reference output (issue 36). A text
        whose claim "holds once the loops are interchanged" gets that interchange first."""
        text = s.get("text", "")
        row["applied"] = "printed: " + printed
        src = self.src_lines
        if not status and AS_ADVISED in text:
            src, line, itext = self.as_advised(reg, loops, s, line)
            if src is None:
                row["outcome"] = "not applied"
                row["detail"] = "the interchange the text names: " + line
                return
            row["applied"] = "interchanged as advised (%s), then %s" % (
                re.sub(r"^Interchange the loops to the order (.*?) \(outermost first\).*",
                       r"\1", itext, flags=re.S), row["applied"])
        acc = "Sum the element into a local scalar" in text or \
            "Sum each element into a local scalar of its own" in text
        if acc and not status:
            # The directive names `acc`, a scalar the text asks the user to declare first:
            # that rewrite is made as the text says, then the directive inserted as printed.
            names = [r.get("storage", "").strip("`") for r in
                     (s.get("requires") or []) + (s.get("reduction") or [])
                     if r.get("change") == "reduction"]
            try:
                accs = split_items(re.search(r"reduction\([^:]*:([^)]*)\)", printed).group(1))
                lines, why = acc_rewritten(src, line, names, accs)
            except (ValueError, IndexError) as ex:
                lines, why = None, "source not understood (%r)" % ex
            if lines is None:
                row["outcome"] = "not applied"
                row["detail"] = "local accumulator `acc`: " + why
                return
            row["applied"] += " after the local accumulators"
            out = [printed if l.strip() == "@PRAGMA@" else l for l in lines]
            out = [l.replace("@PRAGMA@", printed) for l in out]
            return self.simd_run(row, line, text, out, reassoc)
        if status:
            row["outcome"] = status
            return
        if not printed.startswith("#pragma omp simd"):
            row["outcome"] = "unchecked: not a simd pragma"
            return
        if not (1 <= line <= len(src)) or not re.search(r"\bfor\b", src[line - 1]):
            row["outcome"] = "unmapped"
            row["detail"] = "no `for` on line %d" % line
            return
        indent = re.match(r"\s*", src[line - 1]).group(0)
        out = list(src)
        out.insert(line - 1, indent + printed)
        return self.simd_run(row, line, text, out, reassoc)

    def simd_run(self, row, line, text, out, reassoc):
        fails = self.test_variant("%s_simd_%d" % (row["region"], line),
                                  "\n".join(out) + "\n", True, ["simd"] * SIMD_RUNS)
        hard = [f for f in fails if re.search(r"does not compile|exit status|timed out", f)]
        if not fails:
            row["outcome"] = "passed"
        elif reassoc and not hard:
            row["outcome"] = "reassociates-differs"
            row["detail"] = "%s; max rel. error of first diffs %s" % (fails[0], max_rel(fails))
        else:
            row["outcome"] = "FAILED: " + fails[0]

    def audit_one(self, reg, loops, s):
        reqs = s.get("requires") or []
        reds = s.get("reduction") or []
        rsum = "; ".join("%s %s%s" % (r.get("change"), r.get("storage"),
                                      " (%s)" % r["op"] if r.get("op") else "")
                         for r in reqs) or "-"
        if reds:
            rsum += " | red: " + "; ".join("%s %s%s" % (r.get("op"), r.get("storage"),
                                                         " reassoc" if r.get("reassociates")
                                                         else "") for r in reds)
        row = {"kernel": self.name, "region": reg.get("id"), "loop": ",".join(s.get("loops", [])),
               "requires": rsum, "text": s.get("text", ""), "clauses": "", "outcome": "",
               "detail": "", "skipped": (s.get("skipped") or {}).get("reason", "")}
        self.rows.append(row)
        lids = s.get("loops") or []
        if len(lids) != 1 or lids[0] not in loops:
            row["outcome"] = "unmapped"
            row["detail"] = "loops %s" % lids
            return
        loc = loops[lids[0]].get("location") or {}
        line = loc.get("line")
        row["loop"] = "%s@%s" % (lids[0], line)
        f = loc.get("file") or ""
        if os.path.basename(f) != self.name + ".c" or not line:
            row["outcome"] = "unmapped"
            row["detail"] = "loop in %s:%s" % (f, line)
            return
        if not (1 <= line <= len(self.src_lines)) or \
                not re.search(r"\bfor\b", self.src_lines[line - 1]):
            row["outcome"] = "unmapped"
            row["detail"] = "no `for` on line %d" % line
            return
        row["source"] = self.src_lines[line - 1].strip()
        status, printed, reassoc = printed_pragma(s)
        if printed:
            row["clauses"] = printed[len("#pragma omp parallel for"):].strip()
        if status:
            row["outcome"] = status
            return
        if not printed.startswith("#pragma omp parallel for"):
            row["outcome"] = "unchecked: not a parallel-for pragma"
            return
        clauses = parse_pragma(printed)
        try:
            sh = shared_assigned(self.src_lines, line, clauses)
        except (ValueError, IndexError):
            sh = ["?"]
        row["shared_assigned"] = sh
        indent = re.match(r"\s*", self.src_lines[line - 1]).group(0)
        # Exactly the printed text, on its own line before the loop's.
        pragma = indent + printed
        pragma_s1 = (pragma + " schedule(static,1)")
        tag = "%s_%s" % (reg.get("id"), lids[0])
        fails = []
        # 10 runs per optimisation level (issue 36: 10 runs with 2 threads), alternating the plain pragma and schedule(static,1)
        for sched, prag in (("plain", pragma), ("static1", pragma_s1)):
            lines = list(self.src_lines)
            lines.insert(line - 1, prag)
            text = "\n".join(lines) + "\n"
            fails += self.test_variant(tag + "_" + sched, text, True, [sched] * 5)
        # sequential reversal
        rev = "skipped"
        if clauses["lastprivate"]:
            rev = "skipped (lastprivate)"
        elif reversed_header(self.src_lines[line - 1]) is None:
            rev = "skipped (header not simple)"
        else:
            lines = list(self.src_lines)
            lines[line - 1] = reversed_header(lines[line - 1])
            text = "\n".join(lines) + "\n"
            rf = self.test_variant(tag + "_rev", text, False, ["reversed"])
            rev = "passed" if not rf else "FAILED"
            fails += ["reversed: " + x for x in rf]
        row["reversed"] = rev
        hard = [f for f in fails if re.search(r"does not compile|exit status|timed out", f)]
        if reassoc and hard:
            row["outcome"] = "FAILED: " + hard[0]
            row["all_failures"] = fails
        elif reassoc:
            row["outcome"] = "reassociates-differs" if fails else "reassociates-same"
            if fails:
                row["detail"] = "; ".join(filter(None, [row["detail"], fails[0],
                                                        "max rel. error of first diffs %s"
                                                        % max_rel(fails)]))
        elif fails:
            row["outcome"] = "FAILED: " + fails[0]
            row["all_failures"] = fails
            self.diagnose(row, line, clauses, indent, tag)
        else:
            row["outcome"] = "passed"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--polybench", default="/tmp/pb", help="PolyBench/C 4.2.1 tree (read only)")
    ap.add_argument("--polyprof", default="/tmp/audit/polyprof", help="polyprof binary")
    ap.add_argument("--work", default="/tmp/audit/work", help="work directory")
    ap.add_argument("--table", default=None,
                    help="where to write the table (default: WORK/../table.txt)")
    ap.add_argument("--timeout", type=int, default=600, help="polyprof timeout per kernel (s)")
    ap.add_argument("--profile-flags", default="-O2",
                    help="gcc flags of the binary polyprof profiles (e.g. '-O3 -march=native'); "
                    "the reference output and the variants stay -O2 (and -O0)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse an existing WORK/<kernel>/out/report.json (same build) instead of profiling again")
    ap.add_argument("kernels", nargs="*", help="only these kernels")
    ap.add_argument("--only", default="", help="comma-separated kernels (as `bench_advice.py`)")
    args = ap.parse_args()
    args.polybench = os.path.abspath(args.polybench)
    args.polyprof = os.path.abspath(args.polyprof)
    args.work = os.path.abspath(args.work)
    table_path = args.table or os.path.join(os.path.dirname(args.work), "table.txt")
    os.makedirs(args.work, exist_ok=True)

    kernels = find_kernels(args.polybench)
    want = args.kernels + [k for k in args.only.split(",") if k]
    if want:
        kernels = [k for k in kernels if k[0] in want]
    log("%d kernels" % len(kernels))
    results = []
    for name, d in kernels:
        log("== %s" % name)
        k = Kernel(args, name, d)
        results.append(k)
        try:
            if not k.prepare():
                log("  " + k.error)
                continue
            rep = k.profile()
            if rep is None:
                log("  " + k.error)
                continue
            k.audit(rep)
        except Exception as ex:  # a failure on one kernel is reported, not fatal
            import traceback
            k.error = "audit error: %r" % ex
            traceback.print_exc()
        for r in k.rows:
            log("  %s %s %s -> %s" % (r["region"], r["loop"], r["clauses"], r["outcome"]))

    out = []
    hdr = "%-15s %-4s %-9s %-45s %-40s %s" % ("kernel", "reg", "loop@line", "requires",
                                               "clauses", "outcome")
    out.append(hdr)
    out.append("-" * len(hdr))
    totals = {}
    for k in results:
        if k.error:
            out.append("%-15s ERROR: %s" % (k.name, k.error))
        for r in k.rows:
            oc = r["outcome"]
            key = oc.split(":")[0]
            totals[key] = totals.get(key, 0) + 1
            extra = ""
            if r.get("reversed"):
                extra += "  [reversed: %s]" % r["reversed"]
            if r.get("skipped"):
                extra += "  [skipped: %s]" % r["skipped"]
            if r.get("shared_assigned"):
                extra += "  [static: assigned in loop, shared: %s]" % ",".join(
                    r["shared_assigned"])
            if r["detail"]:
                extra += "  [%s]" % r["detail"]
            out.append("%-15s %-4s %-9s %-45s %-40s %s%s" % (
                k.name, r["region"], r["loop"], r["requires"], r["clauses"] or "-", oc, extra))
    out.append("")
    out.append("Totals over %d parallelize suggestions: %s" % (
        sum(totals.values()), ", ".join("%s %d" % kv for kv in sorted(totals.items()))))
    errs = [k for k in results if k.error]
    out.append("Kernels with a polyprof/build error: %s" % (
        ", ".join("%s (%s)" % (k.name, k.error) for k in errs) or "none"))
    out.append("")
    out.append("Other suggestions (not applied), per kernel:")
    for k in results:
        if k.other:
            out.append("  %-15s %s" % (k.name, ", ".join("%s %d" % kv
                                                         for kv in sorted(k.other.items()))))
    out.append("")
    out.append("Interchange, tile and vectorize suggestions (interchanges and tiles applied "
               "where the loops form a perfect nest, tiles of %d; a printed `#pragma omp simd "
               "...` inserted as written, -fopenmp; a vectorized loop with no printed "
               "directive reversed; run sequentially):" % TILE)
    itotals = {}
    for k in results:
        for r in k.irows:
            key = r["outcome"].split(":")[0]
            itotals[key] = itotals.get(key, 0) + 1
            out.append("  %-15s %-4s %-11s %-12s %-40s %s%s%s%s" % (
                k.name, r["region"], r["kind"], r["loops"], r["requires"][:40], r["outcome"],
                "  [skipped: %s]" % r["skipped"] if r["skipped"] else "",
                "  [%s]" % r["detail"] if r["detail"] else "",
                "  [%s]" % r["applied"] if r.get("applied") else ""))
    out.append("Totals over %d interchange, tile and vectorize suggestions: %s" % (
        sum(itotals.values()), ", ".join("%s %d" % kv for kv in sorted(itotals.items()))))
    out.append("")
    out.append("FAILURES:")
    for k in results:
        for r in k.rows:
            if r["outcome"].startswith("FAILED"):
                out.append("- %s %s %s: `%s`" % (k.name, r["region"], r["loop"],
                                                  r.get("source", "")))
                out.append("    text: %s" % r["text"])
                out.append("    requires: %s" % r["requires"])
                out.append("    clauses: %s" % (r["clauses"] or "(none)"))
                if r.get("shared_assigned"):
                    out.append("    static check: scalars assigned in the loop and shared: %s"
                               % ", ".join(r["shared_assigned"]))
                for f in r.get("all_failures", []):
                    out.append("    %s" % f)
                if r.get("diagnosis"):
                    out.append("    diagnosis: %s" % r["diagnosis"])
        for r in k.irows:
            if r["outcome"].startswith("FAILED"):
                out.append("- %s %s %s %s: %s" % (k.name, r["region"], r["kind"], r["loops"],
                                                r["outcome"]))
                out.append("    text: %s" % r["text"])
    text = "\n".join(out) + "\n"
    print(text)
    with open(table_path, "w") as f:
        f.write(text)
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump([{"kernel": k.name, "error": k.error, "other": k.other, "rows": k.rows,
                    "interchanges": k.irows}
                   for k in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

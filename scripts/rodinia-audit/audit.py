#!/usr/bin/env python3
"""Audit polyprof on the CPU (OpenMP) programs of Rodinia 3.1, the suite of the POLY-PROF
paper's Table 5.

Phase 1, for each of the 19 programs: copy its sources to WORK/<name>/, build it serial
(gcc/g++ -O2 -g, no -fopenmp, a stub omp.h), write a small deterministic input into WORK,
run it natively and under `polyprof --region-threshold 5`, compare the outputs (stdout,
stderr without polyprof's lines, output files; timing lines filtered), and read the top
region of report.json into a table beside the paper's Table 5 values.

Phase 2 (--apply): every `parallelize` suggestion of a region over 5% is applied to a copy
of the source (the `#pragma omp parallel for ...` its text prints, inserted before the
loop's `for` line; the program's own OpenMP pragmas removed), built with -fopenmp -O2, run
10 times with OMP_NUM_THREADS=2 and compared with the serial output.

See README.md beside this file.
"""

import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

import omp_mode

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STUB_INCLUDE = os.path.join(HERE, "include")   # the stub omp.h of the serial builds


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, cwd=None, env=None, timeout=600, stdin=subprocess.DEVNULL):
    """Runs a command; (rc, stdout, stderr, seconds); rc None on timeout."""
    t = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode, p.stdout, p.stderr, time.time() - t
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or b"", e.stderr or b"", time.time() - t


# ------------------------------------------------------------------------------------------
# Inputs. Every generator writes into the program's run directory (or below it) from a
# random.Random with a fixed seed, so that two audits write the same bytes.
# ------------------------------------------------------------------------------------------

def gen_btree(ctx):
    n = ctx.p["n_keys"]
    keys = list(range(1, n + 1))
    random.Random(11).shuffle(keys)
    with open(os.path.join(ctx.run_dir, "keys.txt"), "w") as f:
        f.write("%d\n" % n)
        f.write("".join("%d\n" % k for k in keys))
    with open(os.path.join(ctx.run_dir, "command.txt"), "w") as f:
        f.write(ctx.p["commands"])


def gen_bfs(ctx):
    n = ctx.p["nodes"]
    rng = random.Random(12)
    adj = [[] for _ in range(n)]
    # A ring (so that every node is reached) plus random edges, both directions, as the
    # suite's graph generator makes undirected graphs.
    for i in range(n):
        j = (i + 1) % n
        adj[i].append(j)
        adj[j].append(i)
    for _ in range(n * 2):
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            adj[a].append(b)
            adj[b].append(a)
    lines = ["%d" % n]
    start = 0
    for i in range(n):
        lines.append("%d %d" % (start, len(adj[i])))
        start += len(adj[i])
    lines.append("0")          # source node
    lines.append("%d" % start)  # edge list size
    for i in range(n):
        for j in adj[i]:
            lines.append("%d %d" % (j, rng.randrange(1, 10)))
    with open(os.path.join(ctx.run_dir, "graph.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def gen_cfd(ctx):
    """A structured 2-D grid of nx x ny cells in the .domn format: area, then for each of the
    4 faces the neighbour (1-based; 0 = wall, -1 = far field) and the face's normal (3
    floats). Faces on the grid's edge are far field; a wall (a thin plate) lies across the
    middle third of the grid, between rows ny/2-1 and ny/2."""
    nx, ny = ctx.p["nx"], ctx.p["ny"]
    rng = random.Random(13)
    h = 0.1
    out = ["%d" % (nx * ny)]
    plate = range(nx // 3, 2 * nx // 3)
    for j in range(ny):
        for i in range(nx):
            area = h * h * (1.0 + 0.05 * rng.random())
            faces = []
            for di, dj, nxv, nyv in ((-1, 0, -h, 0.0), (1, 0, h, 0.0), (0, -1, 0.0, -h),
                                     (0, 1, 0.0, h)):
                a, b = i + di, j + dj
                if not (0 <= a < nx and 0 <= b < ny):
                    nb = -1
                elif i in plate and ((j == ny // 2 - 1 and dj == 1) or
                                     (j == ny // 2 and dj == -1)):
                    nb = 0
                else:
                    nb = b * nx + a + 1
                faces.append("%d %.6f %.6f %.6f" % (nb, nxv, nyv, 0.0))
            out.append("%.8f %s" % (area, " ".join(faces)))
    with open(os.path.join(ctx.run_dir, "mesh.domn"), "w") as f:
        f.write("\n".join(out) + "\n")


def write_avi(path, width, height, frames):
    """A minimal uncompressed AVI (8-bit frames, one video stream, no index): what
    avilib's reader needs (RIFF AVI, LIST hdrl with avih and strl/strh/strf, LIST movi of
    00db chunks; it scans movi when there is no idx1)."""
    def chunk(tag, data):
        return tag + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")

    def lst(kind, data):
        return chunk(b"LIST", kind + data)

    size = width * height
    avih = struct.pack("<14I", 40000, size * 25, 0, 0, len(frames), 0, 1, size, width,
                       height, 0, 0, 0, 0)
    strh = b"vids" + b"\0\0\0\0" + struct.pack("<IHHIIIIIIII4h", 0, 0, 0, 0, 1, 25, 0,
                                               len(frames), size, 0xFFFFFFFF, 0, 0, 0,
                                               width, height)
    strf = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 0, size, 0, 0, 256, 0)
    strf += b"".join(struct.pack("<BBBB", g, g, g, 0) for g in range(256))
    hdrl = chunk(b"avih", avih) + lst(b"strl", chunk(b"strh", strh) + chunk(b"strf", strf))
    movi = b"".join(chunk(b"00db", fr) for fr in frames)
    body = b"AVI " + lst(b"hdrl", hdrl) + lst(b"movi", movi)
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


def gen_heartwall(ctx):
    """Frames of 512 x 600 pixels (the program's points lie up to row 551 and column 465):
    smooth bright and dark bands that shift a little from frame to frame, plus noise."""
    import math
    w, h, nf = 512, 600, ctx.p["frames"]
    rng = random.Random(14)
    frames = []
    for f in range(nf):
        row = bytearray(w * h)
        for y in range(h):
            sy = math.sin((y + 2 * f) / 9.0)
            base = y * w
            for x in range(w):
                v = 128 + 60 * sy * math.cos((x + f) / 7.0) + rng.randrange(-8, 9)
                row[base + x] = max(0, min(255, int(v)))
        frames.append(bytes(row))
    write_avi(os.path.join(ctx.run_dir, "heart.avi"), w, h, frames)


def gen_leukocyte(ctx):
    """Frames of W x 340 pixels (the program crops rows 110 to 328 and flips them: crop row r
    is frame row 229 - r): a bright background with noise and dark disks of radius 10 with
    soft edges (the cells it looks for), which move a pixel per frame."""
    import math
    w, h, nf = ctx.p["width"], 340, ctx.p["frames"]
    rng = random.Random(15)
    cells = [(w // 2, 229 - 100)]
    frames = []
    for f in range(nf):
        img = bytearray(w * h)
        for y in range(h):
            for x in range(w):
                v = 200.0 + rng.randrange(-6, 7)
                for cx, cy in cells:
                    d = math.hypot(x - cx, y - (cy + f))
                    v -= 120.0 / (1.0 + math.exp((d - 10.0) / 1.5))
                img[y * w + x] = max(0, min(255, int(v)))
        frames.append(bytes(img))
    write_avi(os.path.join(ctx.run_dir, "cells.avi"), w, h, frames)


def gen_hotspot(ctx):
    r, c = ctx.p["rows"], ctx.p["cols"]
    rng = random.Random(16)
    with open(os.path.join(ctx.run_dir, "temp.txt"), "w") as f:
        f.write("".join("%.6f\n" % (323.0 + 10.0 * rng.random()) for _ in range(r * c)))
    with open(os.path.join(ctx.run_dir, "power.txt"), "w") as f:
        f.write("".join("%.6e\n" % (1e-3 * rng.random()) for _ in range(r * c)))


def gen_hotspot3d(ctx):
    n, layers = ctx.p["n"], ctx.p["layers"]
    rng = random.Random(17)
    with open(os.path.join(ctx.run_dir, "power.txt"), "w") as f:
        f.write("".join("%.6e\n" % (1e-3 * rng.random()) for _ in range(n * n * layers)))
    with open(os.path.join(ctx.run_dir, "temp.txt"), "w") as f:
        f.write("".join("%.6f\n" % (323.0 + 10.0 * rng.random())
                        for _ in range(n * n * layers)))


def gen_kmeans(ctx):
    n, nf = ctx.p["points"], ctx.p["features"]
    rng = random.Random(18)
    centres = [[rng.uniform(0, 100) for _ in range(nf)] for _ in range(5)]
    with open(os.path.join(ctx.run_dir, "points.txt"), "w") as f:
        for i in range(n):
            c = centres[rng.randrange(5)]
            f.write("%d %s\n" % (i + 1, " ".join("%.4f" % (x + rng.gauss(0, 8)) for x in c)))


# Rodinia 3.1's data/myocyte/y.txt (91 initial values) and params.txt (16 parameters), the
# inputs the program reads (absent from the suite's copy here; these are the suite's own
# values, a physical initial state the solver converges from).
MYOCYTE_Y = """1.3705539e-003 9.8714218e-001 9.9182408e-001 6.9968275e-006 1.0006761e+000
2.5800244e-002 1.5606144e-002 4.0110808e-003 3.1904893e-001 4.0110456e-003 9.9463216e-001
8.4705483e-003 6.0394891e-003 8.8875021e-001 8.2057663e-007 1.0271527e-007 3.5547650e+000
7.7561711e-001 9.0782945e-003 1.1836625e-001 1.0156121e-002 2.5328101e-004 2.0087204e-003
1.3747360e-001 2.2097020e-003 7.7737983e-003 1.0124416e-002 7.5692786e-002 1.1608535e-001
1.2509040e+000 5.6109998e-001 8.8597621e+000 8.8611627e+000 8.8615763e+000 1.3500000e+002
1.8394727e-004 1.0924132e-004 8.8935135e-005 -8.5719165e+001 4.1071583e-001 0.0000000e+000
0.0000000e+000 1.7483040e+004 -1.4677756e+004 -1.6869784e+005 1.6590486e+005 3.8674011e+002
6.0137654e+000 2.1665981e-003 0.0000000e+000 0.0000000e+000 0.0000000e+000 5.2910875e-001
3.1783490e-002 7.1017447e-006 2.8316127e-009 2.3444660e-009 1.3282361e-004 4.3772286e-003
1.2450156e-002 3.6005070e+000 4.3833441e-002 5.4727484e-005 8.6054033e-009 2.3715335e+000
1.3105350e+001 2.7224584e-004 1.1056849e-005 9.5203944e-006 1.3418139e-007 1.4654302e-012
8.8079626e-009 5.6863655e-004 2.1354933e-006 5.6653572e-006 1.3743596e-003 4.3580316e-002
3.8789477e-005 5.5612103e-010 4.1446000e+000 1.1342721e+000 1.5613769e-005 7.7666417e-006
4.5935002e-008 3.0629005e-013 3.2828882e-018 2.0356103e-014 1.2025051e-004 4.4862898e-007
1.7078402e-007 8.1327361e-007""".split()
MYOCYTE_PARAMS = """1.000000e003 4.180000e002 0.000000e000 1.200000e002 3.617508e000
9.650000e001 5.650000e000 2.420000e001 9.951600e-002 3.000000e-003 5.700000e-001
5.650000e000 2.420000e001 9.951600e-002 3.000000e-003 5.700000e-001""".split()


def gen_myocyte(ctx):
    # The program opens "../../data/myocyte/y.txt" from its working directory
    # WORK/myocyte/wd/a, i.e. WORK/myocyte/data/myocyte/.
    d = os.path.normpath(os.path.join(ctx.run_dir, "../../data/myocyte"))
    os.makedirs(d, exist_ok=True)
    assert len(MYOCYTE_Y) == 91 and len(MYOCYTE_PARAMS) == 16
    with open(os.path.join(d, "y.txt"), "w") as f:
        f.write("\n".join(MYOCYTE_Y) + "\n")
    with open(os.path.join(d, "params.txt"), "w") as f:
        f.write("\n".join(MYOCYTE_PARAMS) + "\n")


def gen_nn(ctx):
    """The suite's own generator, hurricane_gen.c (its time-based seed replaced by 7 + the
    file's number): `hurricane_gen N 4` writes data/cane4_0.db ... cane4_3.db."""
    src = os.path.join(ctx.dir, "hurricane_gen.c")
    exe = os.path.join(ctx.dir, "hurricane_gen")
    rc, _, e, _ = run(["gcc", "-O2", src, "-o", exe, "-lm"], timeout=120)
    if rc != 0:
        raise RuntimeError("hurricane_gen does not compile: " + e.decode(errors="replace"))
    os.makedirs(os.path.join(ctx.run_dir, "data"), exist_ok=True)
    rc, _, e, _ = run([exe, str(ctx.p["records"]), "4"], cwd=ctx.run_dir, timeout=120)
    if rc != 0:
        raise RuntimeError("hurricane_gen failed: " + e.decode(errors="replace"))
    with open(os.path.join(ctx.run_dir, "filelist.txt"), "w") as f:
        f.write("".join("data/cane4_%d.db\n" % i for i in range(4)))


def gen_srad_v1(ctx):
    """The program reads a 502 x 458 PGM from "../../../data/srad/image.pgm" (the size is
    fixed in main.c) and resizes it to its arguments' size: an ASCII PGM (P2), smooth
    shapes plus speckle noise."""
    import math
    d = os.path.normpath(os.path.join(ctx.run_dir, "../../../data/srad"))
    os.makedirs(d, exist_ok=True)
    rows, cols = 502, 458
    rng = random.Random(19)
    vals = []
    for i in range(rows):
        for j in range(cols):
            v = 100 + 50 * math.sin(i / 23.0) * math.cos(j / 31.0)
            v *= 0.8 + 0.4 * rng.random()
            vals.append("%d" % max(1, min(255, int(v))))
    with open(os.path.join(d, "image.pgm"), "w") as f:
        f.write("P2\n%d %d\n255\n" % (cols, rows))
        for i in range(rows):
            f.write(" ".join(vals[i * cols:(i + 1) * cols]) + "\n")


# ------------------------------------------------------------------------------------------
# The programs. `copy`: (suite folder, folder in WORK/<name>); `units`: the files compiled
# (relative to WORK/<name>/<build>); `patches`: exact text replacements in the copies, each
# keeping the file's line count (so that polyprof's line numbers are the suite's); `args`
# and `cwd` (the run directory, relative to WORK/<name>); `outputs`: files the program
# writes (relative to the run directory), compared byte for byte; `filter`: lines dropped
# from stdout and stderr before comparing (timings).
# ------------------------------------------------------------------------------------------

PAPER = {  # Table 5: region, %ops, %Aff, TileD, %||ops, %simdops, %reuse, %Preuse
    "backprop": ("facetrain.c:25", "67%", "85%", "2D", "100%", "100%", "50%", "100%"),
    "bfs": ("bfs.cpp:137", "55%", "21%", "2D", "100%", "100%", "1%", "1%"),
    "b+tree": ("main.c:2345", "26%", "49%", "3D", "100%", "100%", "44%", "44%"),
    "cfd": ("euler3d_cpu.cpp:480", "98%", "98%", "3D", "100%", "61%", "18%", "42%"),
    "heartwall": ("main.c:536", "99%", "1%", "5D", "100%", "100%", "0%", "0%"),
    "hotspot": ("hotspot_openmp.cpp:318", "81%", "0%", "2D", "100%", "100%", "3%", "3%"),
    "hotspot3D": ("3D.c:261", "49%", "99%", "3D", "100%", "99%", "11%", "11%"),
    "kmeans": ("kmeans_clustering.c:160", "97%", "97%", "4D", "100%", "100%", "46%", "53%"),
    "lavaMD": ("kernel_cpu.c:123", "99%", "0%", "3D", "100%", "100%", "0%", "0%"),
    "leukocyte": ("detect_main.c:51", "37%", "39%", "3D", "100%", "100%", "63%", "63%"),
    "lud": ("lud.c:121", "99%", "4%", "3D", "99%", "98%", "0%", "1%"),
    "myocyte": ("main.c:283", "99%", "89%", "1D", "100%", "99%", "47%", "47%"),
    "nn": ("nn_openmp.c:119", "31%", "1%", "1D", "100%", "0%", "0%", "0%"),
    "nw": ("needle.cpp:308", "79%", "99%", "2D", "100%", "100%", "77%", "77%"),
    "particlefilter": ("ex_particle_OPENMP_seq.c:593", "99%", "27%", "2D", "99%", "100%",
                       "55%", "55%"),
    "pathfinder": ("pathfinder.cpp:99", "31%", "67%", "2D", "100%", "0%", "0%", "40%"),
    "srad_v1": ("main.c:241", "99%", "99%", "2D", "99%", "100%", "18%", "18%"),
    "srad_v2": ("srad.cpp:114", "96%", "98%", "2D", "100%", "100%", "14%", "14%"),
    "streamcluster": ("streamcluster_omp.cpp:1269", "99%", "97%", "-", "-", "-", "-", "-"),
}

MESCHACH = ("copy err matrixio memory vecop matop pxop submat init otherio machine matlab "
            "ivecop version meminfo memstat lufactor bkpfacto chfactor qrfactor solve "
            "hsehldr givens update norm hessen symmeig schur svd fft mfunc bdfactor sparse "
            "sprow sparseio spchfctr splufctr spbkp spswap iter0 itersym iternsym zmachine "
            "zcopy zmatio zmemory zvecop zmatop znorm zfunc zlufctr zsolve zmatlab zhsehldr "
            "zqrfctr zgivens zhessen zschur").split()

TIME_LINE = r"(?i)(\btime\b|took|seconds|\d+\.\d+ s\b|\bs, )"

PROGRAMS = [
    dict(name="b+tree", copy=[("b+tree", ".")], cc="gcc",
         units=["main.c", "kernel/kernel_cpu.c", "kernel/kernel_cpu_2.c",
                "util/timer/timer.c", "util/num/num.c"],
         libs=["-lm"], gen=gen_btree, n_keys=4000, commands="j 600 600\nk 600\n",
         args=["cores", "1", "file", "keys.txt", "command", "command.txt"],
         outputs=["output.txt"],
         filter=r"(?i)(took|% :|^total time|^\d+\.\d+ s$|^time spent)"),
    dict(name="backprop", copy=[("backprop", ".")], cc="gcc",
         units=["backprop.c", "facetrain.c", "imagenet.c", "backprop_kernel.c"],
         libs=["-lm"], args=["16384"], outputs=["net.out"],
         patches=[("facetrain.c", "bpnn_train_kernel(net, &out_err, &hid_err);",
                   "bpnn_train_kernel(net, &out_err, &hid_err); bpnn_save(net, \"net.out\");",
                   "save the trained network (bpnn_save, the suite's own function) to "
                   "net.out, so that the results can be compared"),
                  ("backprop.c", "fwrite( mem , (unsigned)(sizeof(float)), (unsigned) ((n1+1) * (n2+1) * sizeof(float)) , pFile);",
                   "fwrite( mem , 1, (unsigned) ((n1+1) * (n2+1) * sizeof(float)) , pFile);",
                   "bpnn_save writes 4 times the size of its buffer (element size sizeof(float) "
                   "times a count in bytes), i.e. heap bytes past it: element size 1"),
                  ("backprop.c", "fwrite( mem , sizeof(float), (unsigned) ((n2+1) * (n3+1) * sizeof(float)) , pFile);",
                   "fwrite( mem , 1, (unsigned) ((n2+1) * (n3+1) * sizeof(float)) , pFile);",
                   "(the same for the second buffer)")]),
    dict(name="bfs", copy=[("bfs", ".")], cc="g++", units=["bfs.cpp"], gen=gen_bfs,
         nodes=20000, args=["1", "graph.txt"], outputs=["result.txt"],
         filter=r"^Compute time:"),
    dict(name="cfd", copy=[("cfd", ".")], cc="g++", units=["euler3d_cpu.cpp"],
         flags=["-Dblock_length=8"], gen=gen_cfd, nx=24, ny=24, args=["mesh.domn"],
         outputs=["density", "momentum", "density_energy"], filter=r"^Compute time:",
         patches=[("euler3d_cpu.cpp", "#define iterations 2000", "#define iterations 6",
                   "6 time steps instead of 2000 (the count is a constant of the source)")]),
    dict(name="heartwall", copy=[("heartwall", ".")], cc="gcc",
         units=["main.c", "AVI/avilib.c", "AVI/avimod.c"], incs=["AVI"],
         flags=["-DOUTPUT"], libs=["-lm"], gen=gen_heartwall, frames=3,
         args=["heart.avi", "3", "1"], outputs=["result.txt"],
         patches=[("main.c", "public.tSize = 25;", "public.tSize = 5;",
                   "template half-size 25 -> 5 pixels"),
                  ("main.c", "public.sSize = 40;", "public.sSize = 8;",
                   "search half-size 40 -> 8 pixels (with the suite's sizes one frame is "
                   "about 4e9 instructions)")]),
    dict(name="hotspot", copy=[("hotspot", ".")], cc="g++", units=["hotspot_openmp.cpp"],
         gen=gen_hotspot, rows=64, cols=64,
         args=["64", "64", "20", "1", "temp.txt", "power.txt", "output.out"],
         outputs=["output.out"], filter=r"^Total time:"),
    dict(name="hotspot3D", copy=[("hotspot3D", ".")], cc="gcc", units=["3D.c"],
         libs=["-lm"], gen=gen_hotspot3d, n=32, layers=8,
         args=["32", "8", "10", "power.txt", "temp.txt", "output.out"],
         outputs=["output.out"], filter=r"^Time:"),
    dict(name="kmeans", copy=[("kmeans/kmeans_openmp", ".")], cc="gcc",
         units=["cluster.c", "getopt.c", "kmeans.c", "kmeans_clustering.c"], libs=["-lm"],
         gen=gen_kmeans, points=2000, features=8,
         args=["-n", "1", "-i", "points.txt"], filter=r"^Time for process:",
         patches=[("kmeans.c", "  /*  \tprintf(\"Cluster Centers Output\\n\");",
                   "      \tprintf(\"Cluster Centers Output\\n\");",
                   "print the cluster centres (the suite's own printing, commented out)"),
                  ("kmeans.c", "\n*/\n\tprintf(\"Time for process", "\n\n\tprintf(\"Time for process",
                   "(end of that comment)")]),
    dict(name="lavaMD", copy=[("lavaMD", ".")], cc="gcc",
         units=["main.c", "kernel/kernel_cpu.c", "util/timer/timer.c", "util/num/num.c"],
         flags=["-DOUTPUT"], libs=["-lm"], args=["-cores", "1", "-boxes1d", "2"],
         outputs=["result.txt"], filter=r"(% :|^Total time|^\d+\.\d+ s$)",
         patches=[("main.c", "srand(time(NULL));", "srand(7);",
                   "a fixed seed instead of the time, so that two runs compute the same")]),
    dict(name="leukocyte", copy=[("leukocyte/OpenMP", "OpenMP"),
                                 ("leukocyte/meschach_lib", "meschach_lib")],
         build="OpenMP", cc="gcc",
         units=["detect_main.c", "avilib.c", "find_ellipse.c", "track_ellipse.c",
                "misc_math.c"],
         incs=["../meschach_lib"], flags=["-DOUTPUT"], libs=["-lm"],
         lib=("meschach_lib", MESCHACH, ["-DHAVE_CONFIG_H"]),
         gen=gen_leukocyte, width=48, frames=2, args=["1", "1", "cells.avi"],
         outputs=["result.txt"], filter=TIME_LINE),
    dict(name="lud", copy=[("lud/omp", "omp"), ("lud/common", "common")], build="omp",
         cc="gcc", units=["lud.c", "lud_omp.c", "../common/common.c"], incs=["../common"],
         libs=["-lm"], args=["-n", "1", "-s", "192"], filter=r"^Time consumed",
         patches=[("omp/lud.c",
                   "  printf(\"Time consumed(ms): %lf\\n\", 1000*get_interval_by_sec(&sw));",
                   "  printf(\"Time consumed(ms): %lf\\n\", 1000*get_interval_by_sec(&sw)); "
                   "print_matrix(m, matrix_dim);",
                   "print the factored matrix (print_matrix, the suite's own function)")]),
    dict(name="myocyte", copy=[("myocyte", ".")], cc="gcc", units=["main.c"], libs=["-lm"],
         gen=gen_myocyte, cwd="wd/a", args=["3", "1", "0", "1"], filter=TIME_LINE,
         patches=[("main.c", "\t// int k;\r\n\t// for(i=0; i<workload; i++){\r\n"
                   "\t\t// printf(\"WORKLOAD %d:\\n\", i);\r\n\t\t// for(j=0; j<(xmax+1); j++){\r\n"
                   "\t\t\t// printf(\"\\tTIME %d:\\n\", j);\r\n\t\t\t// for(k=0; k<EQUATIONS; k++){\r\n"
                   "\t\t\t\t// printf(\"\\t\\ty[%d][%d][%d]=%13.10f\\n\", i, j, k, y[i][j][k]);\r\n"
                   "\t\t\t// }\r\n\t\t// }\r\n\t// }\r\n",
                   "\tint k;\r\n\tfor(i=0; i<workload; i++){\r\n"
                   "\t\tprintf(\"WORKLOAD %d:\\n\", i);\r\n\t\tfor(j=0; j<(xmax+1); j++){\r\n"
                   "\t\t\tprintf(\"\\tTIME %d:\\n\", j);\r\n\t\t\tfor(k=0; k<EQUATIONS; k++){\r\n"
                   "\t\t\t\tprintf(\"\\t\\ty[%d][%d][%d]=%13.10f\\n\", i, j, k, y[i][j][k]);\r\n"
                   "\t\t\t}\r\n\t\t}\r\n\t}\r\n",
                   "print the results (the suite's own printing, commented out)"),
                  # master.c never assigns `th_id` (no omp_get_thread_num()) and splits its
                  # four pieces of work by omp_get_max_threads(): with its pragma removed
                  # and two threads, pieces went to a thread that never ran them.
                  ("master.c", "\t\tint th_id, nthreads;\r\n",
                   "\t\tint th_id = 0, nthreads;\r\n",
                   "give the never-assigned thread id a value"),
                  ("master.c", "\tnthreads = omp_get_max_threads();\r\n",
                   "\tnthreads = 1;\r\n",
                   "every piece of work to thread 0, the only one that runs them")]),
    dict(name="nn", copy=[("nn", ".")], cc="gcc", units=["nn_openmp.c"], libs=["-lm"],
         gen=gen_nn, records=20000, args=["filelist.txt", "5", "30", "90"],
         filter=r"^total time",
         patches=[("hurricane_gen.c", "srand(time(NULL));", "srand(7 + j);",
                   "the input generator's seed: 7 + the file's number instead of the time")]),
    dict(name="nw", copy=[("nw", ".")], cc="g++", units=["needle.cpp"],
         args=["256", "10", "1"], outputs=["result.txt"], filter=r"^Total time:"),
    dict(name="particlefilter", copy=[("particlefilter", ".")], cc="gcc",
         units=["ex_particle_OPENMP_seq.c"], flags=["-ffast-math"], libs=["-lm"],
         args=["-x", "64", "-y", "64", "-z", "4", "-np", "400"], filter=r"TOOK",
         patches=[("ex_particle_OPENMP_seq.c", "seed[i] = time(0)*i;",
                   "seed[i] = 1700000000L*i;",
                   "a fixed seed instead of the time, so that two runs compute the same")]),
    dict(name="pathfinder", copy=[("pathfinder", ".")], cc="g++", units=["pathfinder.cpp"],
         args=["1000", "40"], filter=r"^timer:"),
    dict(name="srad_v1", copy=[("srad/srad_v1", ".")], cc="gcc", units=["main.c"],
         libs=["-lm"], gen=gen_srad_v1, cwd="wd/a/b",
         args=["20", "0.5", "64", "64", "1"], outputs=["image_out.pgm"], filter=TIME_LINE),
    dict(name="srad_v2", copy=[("srad/srad_v2", ".")], cc="g++", units=["srad.cpp"],
         flags=["-DOUTPUT"], args=["64", "64", "0", "31", "0", "31", "1", "0.5", "20"]),
    dict(name="streamcluster", copy=[("streamcluster", ".")], cc="g++",
         units=["streamcluster_omp.cpp"],
         args=["5", "10", "8", "768", "768", "500", "none", "output.txt", "1"],
         outputs=["output.txt"], filter=r"^time"),
]
NAMES = [p["name"] for p in PROGRAMS]


class Ctx:
    """What a generator needs: the program's spec and its folders."""

    def __init__(self, p, d, run_dir):
        self.p, self.dir, self.run_dir = p, d, run_dir


# ------------------------------------------------------------------------------------------
# Building
# ------------------------------------------------------------------------------------------

def apply_patches(root, patches):
    for rel, old, new, _why in patches or []:
        path = os.path.join(root, rel)
        with open(path, newline="", encoding="latin-1") as f:
            text = f.read()
        if text.count(old) != 1:
            raise RuntimeError("patch of %s: %d matches of %r" % (rel, text.count(old), old[:60]))
        if old.count("\n") != new.count("\n"):
            raise RuntimeError("patch of %s would change the line count" % rel)
        with open(path, "w", newline="", encoding="latin-1") as f:
            f.write(text.replace(old, new))


def build(p, root, exe, openmp=False, lib_archive=None, timeout=600, shipped=False):
    """Compiles the program whose sources are under `root` (WORK/<name> or a variant's
    copy) into `exe`: serial with the stub omp.h, with -fopenmp and omp_set_num_threads()
    made a no-op (phase 2), or `shipped`: with -fopenmp alone (--openmp). (ok, message)."""
    bdir = os.path.join(root, p.get("build", "."))
    cmd = [p["cc"], "-O2", "-g"] + p.get("flags", [])
    if shipped:
        cmd += ["-fopenmp"]
    elif openmp:
        cmd += ["-fopenmp", "-include", os.path.join(STUB_INCLUDE, "omp_env_threads.h")]
    else:
        cmd += ["-I" + STUB_INCLUDE, "-include", "omp.h"]
    cmd += ["-I" + i for i in p.get("incs", [])]
    cmd += p["units"]
    if p.get("lib"):
        if lib_archive is None:
            ok, lib_archive = build_lib(p, root)
            if not ok:
                return False, lib_archive
        cmd.append(lib_archive)
    cmd += ["-o", exe] + p.get("libs", [])
    rc, _, e, _ = run(cmd, cwd=bdir, timeout=timeout)
    if rc != 0:
        return False, e.decode(errors="replace")
    return True, ""


def build_lib(p, root):
    """The library a program links (leukocyte's meschach), compiled -O2 -g into an
    archive under root/build-lib."""
    src_rel, names, flags = p["lib"]
    src = os.path.join(root, src_rel)
    out = os.path.join(root, "build-lib")
    os.makedirs(out, exist_ok=True)
    objs = []
    for n in names:
        o = os.path.join(out, n + ".o")
        rc, _, e, _ = run(["gcc", "-O2", "-g"] + flags + ["-I" + src, "-c",
                                                         os.path.join(src, n + ".c"), "-o", o],
                          timeout=300)
        if rc != 0:
            return False, "library file %s.c does not compile: %s" % (
                n, e.decode(errors="replace")[:300])
        objs.append(o)
    archive = os.path.join(out, "lib.a")
    if os.path.exists(archive):
        os.remove(archive)
    rc, _, e, _ = run(["ar", "rcs", archive] + objs)
    if rc != 0:
        return False, "ar failed: " + e.decode(errors="replace")
    return True, archive


def source_files(p, root):
    """The program's source files (compiled units and the headers beside them), as paths
    relative to root; the library's too."""
    out = []
    for _, dst in p["copy"]:
        base = os.path.join(root, dst)
        for dp, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in ("out", "out.old", "variants", "build-lib",
                                                    "wd", "native", "data")]
            for f in files:
                if f.endswith((".c", ".cpp", ".h", ".cc")):
                    out.append(os.path.normpath(os.path.relpath(os.path.join(dp, f), root)))
    return sorted(set(out))


# ------------------------------------------------------------------------------------------
# Comparing outputs
# ------------------------------------------------------------------------------------------

def filtered(data, pattern, drop_polyprof=False):
    lines = data.decode(errors="replace").split("\n")
    keep = []
    for l in lines:
        if drop_polyprof and l.startswith("polyprof:"):
            continue
        if pattern and re.search(pattern, l):
            continue
        keep.append(l)
    return "\n".join(keep)


def first_diff(a, b):
    a, b = a.split("\n"), b.split("\n")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<missing>"
        y = b[i] if i < len(b) else "<missing>"
        if x != y:
            return "line %d: expected %r got %r" % (i + 1, x[:80], y[:80])
    return "same"


def file_diff(a, b):
    try:
        return first_diff(a.decode(), b.decode())
    except UnicodeDecodeError:
        k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        return "binary, first difference at byte %d of %d (got %d bytes)" % (k, len(a), len(b))


class Result:
    """What one run of the program produced."""

    def __init__(self, rc, out, err, files, seconds):
        self.rc, self.out, self.err, self.files, self.seconds = rc, out, err, files, seconds


def collect(p, run_dir, rc, out, err, seconds):
    files = {}
    for f in p.get("outputs", []):
        path = os.path.join(run_dir, f)
        files[f] = open(path, "rb").read() if os.path.exists(path) else None
    return Result(rc, out, err, files, seconds)


def compare(p, ref, got, got_has_polyprof=False):
    """The differences between two runs: [] when the same (timing lines filtered)."""
    pat = p.get("filter")
    diffs = []
    if got.rc is None:
        return ["timed out"]
    if ref.rc != got.rc:
        diffs.append("exit status %s, expected %s" % (got.rc, ref.rc))
    a, b = filtered(ref.out, pat), filtered(got.out, pat)
    if a != b:
        diffs.append("stdout " + first_diff(a, b))
    a, b = filtered(ref.err, pat), filtered(got.err, pat, drop_polyprof=got_has_polyprof)
    if a != b:
        diffs.append("stderr " + first_diff(a, b))
    for f, data in ref.files.items():
        if got.files.get(f) != data:
            if got.files.get(f) is None:
                diffs.append("%s not written" % f)
            else:
                diffs.append("%s differs (%s)" % (f, file_diff(data or b"", got.files[f])))
    return diffs


# ------------------------------------------------------------------------------------------
# One program
# ------------------------------------------------------------------------------------------

def pct(x):
    return "-" if x is None else "%.0f%%" % x


def region_label(r):
    loc = r.get("location") or {}
    if loc.get("file"):
        return "%s:%s" % (os.path.basename(loc["file"]), loc.get("line"))
    return r.get("function") or "?"


def analysis_state(why):
    """'' or an abbreviation of a region's why_not when its analysis failed, or a part of it
    stopped at isl's budget or on an isl error."""
    if not why:
        return ""
    if "polyhedral analysis failed" in why:
        rest = why.split("failed:", 1)[1].strip()
        if "too large for the polyhedral scheduler" in rest:
            return "failed: isl budget"
        return "failed: " + rest[:50]
    if "budget" not in why and "isl failed" not in why:
        return ""

    def cause(text):
        return "isl error" if text.lstrip("( ").startswith("isl failed") else "budget"

    tags = []
    if "polyhedral analysis stopped" in why:
        tags.append("analysis stopped (budget)")
    m = re.search(r"scheduler stopped on the whole region (\([^)]*)", why)
    if m:
        tags.append("scheduler (%s)" % cause(m.group(1)))
    m = re.search(r"checks of (.*?) stopped at isl's budget", why)
    if m:
        tags.append("checks of %s (budget)" % m.group(1).replace(" and ", "/"))
    m = re.search(r"no ([a-z, ]*?) advice: (the region is too large|isl failed)", why)
    if m:
        tags.append("no %s advice (%s)" % (m.group(1).replace(", ", "/").replace(" or ", "/"),
                                           cause(m.group(2))))
    return ", ".join(tags) or why[:50]


class Program:
    def __init__(self, args, p):
        self.args, self.p, self.name = args, p, p["name"]
        self.dir = os.path.join(args.work, self.name)
        self.run_dir = os.path.join(self.dir, p.get("cwd", "."))
        self.exe = os.path.join(self.dir, "prog")
        self.error = None
        self.ref = None          # the native run
        self.verdict = "-"
        self.report = None
        self.pp_rc = None
        self.pp_seconds = None
        self.timing = ""
        self.arows = []          # phase 2 rows
        self.baseline = None
        self.openmp = getattr(args, "openmp", False)   # built as shipped, with -fopenmp
        self.vs_serial = "-"     # --openmp: the one-thread native run against the serial one

    # -- preparation --
    def prepare(self):
        if os.path.isdir(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir)
        for src, dst in self.p["copy"]:
            shutil.copytree(os.path.join(self.args.rodinia, src),
                            os.path.normpath(os.path.join(self.dir, dst)), dirs_exist_ok=True)
        apply_patches(self.dir, self.p.get("patches"))
        # the pristine (patched) sources, for phase 2's variants
        self.sources = source_files(self.p, self.dir)
        ok, err = build(self.p, self.dir, self.exe, shipped=self.openmp)
        if not ok:
            self.error = "does not build: " + err.strip()[-400:]
            return False
        os.makedirs(self.run_dir, exist_ok=True)
        if self.p.get("gen"):
            self.p["gen"](Ctx(self.p, self.dir, self.run_dir))
        return True

    def clean_outputs(self):
        for f in self.p.get("outputs", []):
            path = os.path.join(self.run_dir, f)
            if os.path.exists(path):
                os.remove(path)

    def run_native(self):
        self.clean_outputs()
        env = omp_mode.env_one_thread(os.environ) if self.openmp else None
        rc, o, e, t = run([self.exe] + self.p["args"], cwd=self.run_dir, env=env,
                          timeout=600)
        self.ref = collect(self.p, self.run_dir, rc, o, e, t)
        nat = os.path.join(self.dir, "native")
        os.makedirs(nat, exist_ok=True)
        open(os.path.join(nat, "stdout"), "wb").write(o)
        open(os.path.join(nat, "stderr"), "wb").write(e)
        for f, data in self.ref.files.items():
            if data is not None:
                open(os.path.join(nat, f.replace("/", "_")), "wb").write(data)
        log("  native: rc=%s in %.2fs" % (rc, t))
        if rc is None:
            self.error = "native run timed out"
            return False
        missing = [f for f, d in self.ref.files.items() if d is None]
        if missing:
            log("  warning: native run wrote no %s" % ", ".join(missing))
        return True

    def load_native(self):
        nat = os.path.join(self.dir, "native")
        files = {}
        for f in self.p.get("outputs", []):
            path = os.path.join(nat, f.replace("/", "_"))
            files[f] = open(path, "rb").read() if os.path.exists(path) else None
        meta = json.load(open(os.path.join(self.dir, "phase1.json")))
        self.ref = Result(meta["native_rc"], open(os.path.join(nat, "stdout"), "rb").read(),
                          open(os.path.join(nat, "stderr"), "rb").read(), files,
                          meta["native_seconds"])
        self.sources = source_files(self.p, self.dir)

    def profile(self):
        out = os.path.join(self.dir, "out")
        rep = os.path.join(out, "report.json")
        for d in (out, out + ".old"):
            shutil.rmtree(d, ignore_errors=True)
        self.clean_outputs()
        env = dict(os.environ, POLYPROF_TIMING="1")
        if self.openmp:
            env = omp_mode.env_without_omp(env)   # polyprof chooses the thread count
        cmd = [self.args.polyprof_bin, "--region-threshold", "5", "-o", out, self.exe] + \
            self.p["args"]
        rc, o, e, t = run(cmd, cwd=self.run_dir, env=env, timeout=self.args.timeout)
        self.pp_rc, self.pp_seconds = rc, t
        open(os.path.join(self.dir, "polyprof.stdout"), "wb").write(o)
        open(os.path.join(self.dir, "polyprof.stderr"), "wb").write(e)
        got = collect(self.p, self.run_dir, rc, o, e, t)
        log("  polyprof: rc=%s in %.1fs" % (rc, t))
        if rc is None:
            self.verdict = "timeout"
            self.error = "polyprof timed out after %ds" % self.args.timeout
        else:
            diffs = compare(self.p, self.ref, got, got_has_polyprof=True)
            self.verdict = "same" if not diffs else "DIFF"
            self.diffs = diffs
            if diffs:
                log("  outputs differ: " + "; ".join(diffs))
        stages = [l for l in e.decode(errors="replace").split("\n")
                  if re.match(r"polyprof: (traced|second pass|first pass|feedback|recording|"
                              r"analysis|report)", l)]
        self.timing = stages
        if not os.path.exists(rep):
            tail = e.decode(errors="replace").strip().split("\n")[-3:]
            self.error = self.error or "no report.json (rc=%s): %s" % (rc, " | ".join(tail))
            return
        try:
            self.report = json.load(open(rep))
        except ValueError as ex:
            self.error = "report.json unreadable: %s" % ex

    def load_report(self):
        rep = os.path.join(self.dir, "out", "report.json")
        if os.path.exists(rep):
            self.report = json.load(open(rep))
        meta = os.path.join(self.dir, "phase1.json")
        if os.path.exists(meta):
            m = json.load(open(meta))
            self.verdict, self.pp_rc, self.pp_seconds = m["verdict"], m["rc"], m["seconds"]
            self.error = m.get("error")
            self.vs_serial = m.get("vs_serial", "-")

    def save_meta(self):
        json.dump({"verdict": self.verdict, "rc": self.pp_rc, "seconds": self.pp_seconds,
                   "native_rc": self.ref.rc if self.ref else None,
                   "native_seconds": self.ref.seconds if self.ref else None,
                   "error": self.error, "diffs": getattr(self, "diffs", []),
                   "vs_serial": self.vs_serial},
                  open(os.path.join(self.dir, "phase1.json"), "w"), indent=1)

    # -- reading the report --
    def regions(self):
        return (self.report or {}).get("regions") or []

    def row(self):
        paper = PAPER[self.name]
        r = {"program": self.name, "output": self.verdict, "instr": None,
             "seconds": self.pp_seconds, "region": "-", "ops": None, "aff": None,
             "tiled": "-", "par": None, "simd": None, "reuse": "-", "loops": "-",
             "state": self.error or "", "isl": None, "paper": paper}
        if self.report:
            r["instr"] = (self.report.get("trace") or {}).get("instructions")
        regs = self.regions()
        if regs:
            t = regs[0]
            m = t.get("metrics") or {}
            r.update(region=region_label(t), ops=t.get("ops_percent"),
                     aff=t.get("affine_percent"),
                     tiled="%dD" % m["tile_depth"] if m.get("tile_depth") else "-",
                     par=m.get("parallel_ops_percent"), simd=m.get("simd_ops_percent"),
                     reuse="%s/%s" % (pct(m.get("reuse_percent")), pct(m.get("preuse_percent"))),
                     loops=len(t.get("all_loops") or []),
                     state=analysis_state(t.get("why_not")) or ("" if not self.error
                                                                else self.error),
                     isl=(t.get("scheduler") or {}).get("seconds"))
        elif self.report:
            r["state"] = r["state"] or "no region"
        return r

    # -- phase 2 --
    def apply_all(self):
        """Applies every parallelize suggestion of the regions over 5%."""
        vroot = os.path.join(self.dir, "variants")
        shutil.rmtree(vroot, ignore_errors=True)
        os.makedirs(vroot)
        self.lib_archive = None
        if self.p.get("lib"):
            self.lib_archive = os.path.join(self.dir, "build-lib", "lib.a")
        # Baseline: the program's own pragmas removed, built with -fopenmp, run once.
        base = self.make_variant("baseline", None, None, None)
        self.baseline = self.test_variant(base, runs=1)
        log("  baseline (-fopenmp, own pragmas removed): %s" % (
            "same" if not self.baseline else self.baseline[0]))
        n = 0
        for reg in self.regions():
            if (reg.get("ops_percent") or 0) <= 5:
                continue
            loops = {}
            for l in (reg.get("all_loops") or []) + (reg.get("loops") or []):
                loops[l["id"]] = l
            for s in reg.get("suggestions") or []:
                if s.get("kind") != "parallelize":
                    continue
                n += 1
                row = self.apply_one(reg, loops, s, n)
                self.arows.append(row)
                log("  %s %s %s -> %s%s" % (row["region"], row["loop"], row["pragma"],
                                          row["verdict"],
                                          " (%s)" % row["detail"] if row["detail"] else ""))
        json.dump({"baseline": self.baseline, "rows": self.arows},
                  open(os.path.join(self.dir, "phase2.json"), "w"), indent=1)

    def load_phase2(self):
        path = os.path.join(self.dir, "phase2.json")
        if os.path.exists(path):
            m = json.load(open(path))
            self.baseline, self.arows = m["baseline"], m["rows"]
            return True
        return False

    def make_variant(self, tag, rel, line, pragma):
        """A copy of the sources with the program's own `#pragma omp` lines blanked (and
        their continuation lines), and `pragma` inserted before line `line` of `rel`."""
        vdir = os.path.join(self.dir, "variants", tag)
        for src, dst in self.p["copy"]:
            s = os.path.normpath(os.path.join(self.dir, dst))
            d = os.path.normpath(os.path.join(vdir, dst))
            shutil.copytree(s, d, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("out", "out.old", "variants", "wd",
                                                          "native", "data", "build-lib",
                                                          "prog", "*.o"))
        for f in self.sources:
            path = os.path.join(vdir, f)
            if not os.path.exists(path):
                continue
            with open(path, newline="", encoding="latin-1") as fh:
                lines = fh.read().split("\n")
            i = 0
            while i < len(lines):
                if re.match(r"\s*#\s*pragma\s+omp\b", lines[i]):
                    while True:
                        cont = lines[i].rstrip("\r").endswith("\\")
                        lines[i] = "\r" if lines[i].endswith("\r") else ""
                        i += 1
                        if not cont or i >= len(lines):
                            break
                    continue
                i += 1
            if f == rel:
                indent = re.match(r"\s*", lines[line - 1]).group(0)
                cr = "\r" if lines[line - 1].endswith("\r") else ""
                lines.insert(line - 1, indent + pragma + cr)
            with open(path, "w", newline="", encoding="latin-1") as fh:
                fh.write("\n".join(lines))
        return vdir

    def test_variant(self, vdir, runs=10, in_lib=False):
        """Builds the variant with -fopenmp -O2 and runs it `runs` times with 2 threads;
        the list of failures ([] when every run matched the serial output)."""
        exe = os.path.join(vdir, "prog")
        # The library is linked prebuilt unless the suggestion is in it.
        lib = None if in_lib else self.lib_archive
        ok, err = build(self.p, vdir, exe, openmp=True, lib_archive=lib)
        if not ok:
            first = [l for l in err.split("\n") if "error" in l][:1]
            return ["compile error: " + (first or [err.strip()[:200]])[0].strip()]
        env = dict(os.environ, OMP_NUM_THREADS="2")
        limit = max(60.0, 30 * (self.ref.seconds or 1.0))
        for k in range(runs):
            self.clean_outputs()
            rc, o, e, t = run([exe] + self.p["args"], cwd=self.run_dir, env=env, timeout=limit)
            got = collect(self.p, self.run_dir, rc, o, e, t)
            if rc is None:
                return ["run %d: timed out after %.0fs" % (k + 1, limit)]
            diffs = compare(self.p, self.ref, got)
            if diffs:
                return ["run %d: %s" % (k + 1, diffs[0])]
        return []

    def apply_one(self, reg, loops, s, n):
        lids = s.get("loops") or []
        reqs = (s.get("requires") or []) + (s.get("reduction") or [])
        reassoc = any(r.get("reassociates") for r in reqs)
        m = re.search(r"`(#pragma omp [^`]*)`", s.get("text", ""))
        row = {"program": self.name, "region": reg.get("id"), "loop": ",".join(lids),
               "pragma": m.group(1) if m else "-", "verdict": "", "detail": "",
               "text": s.get("text", ""), "reassociates": reassoc,
               "skipped": (s.get("skipped") or {}).get("reason", "")}
        if not m:
            row.update(verdict="not-applied", detail="the text prints no #pragma")
            return row
        if "` plus a `" in s.get("text", ""):
            # The text says its pragma lacks a clause on storage no source name holds.
            row.update(verdict="not-applied", detail="the printed pragma lacks a clause on "
                       "storage debug information does not name, as its text says")
            return row
        rewrites = [r.get("storage", "") for r in reqs if r.get("change") == "closed_form"]
        if rewrites:
            # The text gives the pragma for after a source rewrite it names (an induction
            # variable computed from the counters): inserting it alone is not its advice.
            row.update(verdict="needs-rewrite",
                       detail="the pragma follows computing %s from the counters"
                       % ", ".join(rewrites))
            return row
        loc = (loops.get(lids[0]) or {}).get("location") if len(lids) == 1 else None
        if not loc or not loc.get("file") or not loc.get("line"):
            row.update(verdict="not-applied", detail="loop %s has no source location" % lids)
            return row
        line = loc["line"]
        row["loop"] = "%s@%s:%d" % (lids[0], os.path.basename(loc["file"]), line)
        path = os.path.normpath(loc["file"])
        rel = os.path.relpath(path, self.dir)
        if rel.startswith("..") or rel not in self.sources:
            row.update(verdict="not-applied",
                       detail="%s is not one of the program's sources" % loc["file"])
            return row
        src = open(os.path.join(self.dir, rel), newline="",
                   encoding="latin-1").read().split("\n")
        if not (1 <= line <= len(src)) or not re.search(r"\bfor\s*\(", src[line - 1]):
            row.update(verdict="not-applied", detail="line %d holds no `for`: %r" % (
                line, src[line - 1].strip()[:60] if 1 <= line <= len(src) else ""))
            return row
        if not re.match(r"\s*for\s*\(", src[line - 1]):
            row.update(verdict="not-applied", detail="the `for` of line %d is not the first "
                       "statement of its line: %r" % (line, src[line - 1].strip()[:60]))
            return row
        row["source"] = src[line - 1].strip()
        vdir = self.make_variant("%s_%s_%d" % (reg.get("id"), lids[0], n), rel, line,
                                 row["pragma"])
        fails = self.test_variant(vdir, in_lib=bool(self.p.get("lib")) and
                                  rel.startswith(self.p["lib"][0] + os.sep))
        if not fails:
            row["verdict"] = "passed"
        elif fails[0].startswith("compile error"):
            row.update(verdict="FAILED", detail=fails[0])
        elif reassoc and not re.search(r"exit status|timed out|not written", fails[0]):
            row.update(verdict="reassociates-differs", detail=fails[0])
        elif "timed out" in fails[0]:
            row.update(verdict="timed-out", detail=fails[0])
        elif self.baseline:
            # Without any pragma the -fopenmp build already computes something else
            # (myocyte's master.c splits its work by omp_get_max_threads()): no verdict.
            row.update(verdict="baseline-differs", detail=fails[0])
        else:
            row.update(verdict="FAILED", detail=fails[0])
        return row


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------

def fmt_table(progs):
    hdr = ("%-14s %-5s %3s %9s %6s | %-26s %5s %5s %5s %5s %5s %-9s %5s %6s %-44s | "
           "%-28s %4s %4s %4s %4s %4s %s" % (
               "program", "out", "rc", "instr", "pp s", "top region", "%ops", "%aff", "TileD",
               "%||", "%simd", "reuse/P", "loops", "isl s", "analysis",
               "paper region", "%ops", "%Aff", "Tile", "%||", "%smd", "reuse/P"))
    lines = [hdr, "-" * len(hdr)]
    for pr in progs:
        r = pr.row()
        pa = r["paper"]
        lines.append("%-14s %-5s %3s %9s %6s | %-26s %5s %5s %5s %5s %5s %-9s %5s %6s %-44s | "
                     "%-28s %4s %4s %4s %4s %4s %s/%s" % (
                         r["program"], r["output"], "-" if pr.pp_rc is None else pr.pp_rc,
                         "%.2fM" % (r["instr"] / 1e6) if r["instr"] else "-",
                         "%.0f" % r["seconds"] if r["seconds"] is not None else "-",
                         r["region"][:26], pct(r["ops"]), pct(r["aff"]), r["tiled"],
                         pct(r["par"]), pct(r["simd"]), r["reuse"], r["loops"],
                         "%.2f" % r["isl"] if r["isl"] is not None else "-",
                         (r["state"] or "ok")[:44],
                         pa[0], pa[1], pa[2], pa[3], pa[4], pa[5], pa[6], pa[7]))
    return lines


def summary(progs):
    ran = [p for p in progs if p.report is not None]
    same = [p for p in progs if p.verdict == "same"]
    filled = [p for p in ran if p.regions() and p.regions()[0].get("all_loops")]
    big = [(p, r) for p in ran for r in p.regions() if (r.get("ops_percent") or 0) > 5]
    empty = [(p, r) for p, r in big if not r.get("all_loops")]
    budget = [(p, r) for p, r in big if "budget" in (r.get("why_not") or "")]
    failed = [(p, r) for p, r in big if "analysis failed" in (r.get("why_not") or "")]
    islerr = [(p, r) for p, r in big if "isl failed" in (r.get("why_not") or "")]
    return ("Summary: %d programs, %d run under polyprof (report written), %d outputs same; "
            "top regions with a filled loop table: %d of %d; regions over 5%%: %d, with an "
            "empty loop table: %d, analysis failed: %d, budget stops: %d, isl errors: %d" % (
                len(progs), len(ran), len(same), len(filled), len([p for p in ran if p.regions()]),
                len(big), len(empty), len(failed), len(budget), len(islerr)))


def details(progs):
    out = []
    for p in progs:
        out.append("== %s: output %s, polyprof rc=%s, %s s, %s instructions%s" % (
            p.name, p.verdict, p.pp_rc,
            "%.1f" % p.pp_seconds if p.pp_seconds is not None else "-",
            (p.report or {}).get("trace", {}).get("instructions", "-"),
            "; ERROR: %s" % p.error if p.error else ""))
        if getattr(p, "diffs", None):
            out.append("   output differences: " + "; ".join(p.diffs))
        out.append("   command: %s %s (in WORK/%s/%s)" % (
            "prog", " ".join(p.p["args"]), p.name, p.p.get("cwd", ".")))
        for r in p.regions():
            if (r.get("ops_percent") or 0) <= 5:
                continue
            m = r.get("metrics") or {}
            kinds = {}
            for s in r.get("suggestions") or []:
                kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
            out.append("   %-4s %-28s %-24s ops %5.1f%% aff %5.1f%% TileD %s ||%s simd %s "
                       "reuse %s/%s loops %d isl %s s; suggestions: %s" % (
                           r.get("id"), region_label(r), (r.get("function") or "")[:24],
                           r.get("ops_percent") or 0, r.get("affine_percent") or 0,
                           m.get("tile_depth", "-"), pct(m.get("parallel_ops_percent")),
                           pct(m.get("simd_ops_percent")), pct(m.get("reuse_percent")),
                           pct(m.get("preuse_percent")), len(r.get("all_loops") or []),
                           "%.2f" % (r.get("scheduler") or {}).get("seconds", 0)
                           if r.get("scheduler") else "-",
                           ", ".join("%s %d" % kv for kv in sorted(kinds.items())) or "none"))
            if r.get("why_not"):
                w = r["why_not"]
                out.append("        why_not: %s" % (w if len(w) < 400 else w[:400] + " ..."))
        out.append("")
    return out


def apply_table(progs):
    out = ["Phase 2: parallelize suggestions of regions over 5%, applied (pragma as printed, "
           "the program's own pragmas removed), -fopenmp -O2, 10 runs with OMP_NUM_THREADS=2",
           "%-14s %-4s %-34s %-50s %s" % ("program", "reg", "loop", "pragma", "verdict")]
    totals = {}
    for p in progs:
        if p.baseline is not None:
            out.append("%-14s baseline (own pragmas removed, -fopenmp, 1 run): %s" % (
                p.name, "same as serial" if not p.baseline else p.baseline[0]))
        for r in p.arows:
            totals[r["verdict"]] = totals.get(r["verdict"], 0) + 1
            out.append("%-14s %-4s %-34s %-50s %s%s%s" % (
                p.name, r["region"], r["loop"][:34], r["pragma"][:50], r["verdict"],
                " [%s]" % r["detail"] if r["detail"] else "",
                " [skipped: %s]" % r["skipped"] if r["skipped"] else ""))
    out.append("")
    out.append("Phase 2 totals over %d suggestions: %s" % (
        sum(totals.values()), ", ".join("%s %d" % kv for kv in sorted(totals.items()))
        or "none"))
    return out


def serial_native(sargs, spec, p):
    """The one-thread native run of an -fopenmp build against the serial audit's native
    run: 'same', 'DIFF' (logged), or '-' when the serial audit has none."""
    sp = Program(sargs, spec)
    try:
        sp.load_native()
    except (OSError, ValueError, KeyError):
        return "-"
    diffs = compare(spec, sp.ref, p.ref)
    if diffs:
        log("  the one-thread run differs from the serial one: " + "; ".join(diffs))
    return "same" if not diffs else "DIFF"


def serial_report(sargs, spec):
    path = os.path.join(sargs.work, spec["name"], "out", "report.json")
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rodinia", default=os.path.join(REPO, "..", "shared", "suites",
                                                      "rodinia-3.1", "openmp"),
                    help="the suite's openmp folder (read only)")
    ap.add_argument("--polyprof", default=os.path.join(REPO, "target", "release", "polyprof"),
                    help="polyprof binary (copied to WORK/polyprof at the start)")
    ap.add_argument("--work", default="/tmp/rodinia-audit/work", help="work directory")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--timeout", type=int, default=900, help="per polyprof run (s)")
    ap.add_argument("--table", default=None, help="table file (default WORK/table.txt)")
    ap.add_argument("--apply", action="store_true",
                    help="phase 2: apply the parallelize suggestions and run them")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse WORK/<name> from an earlier run (sources, native outputs, "
                    "report.json) instead of building and profiling again")
    ap.add_argument("--openmp", action="store_true",
                    help="build as shipped with -fopenmp, profile with no OpenMP environment "
                    "set, and compare with the serial audit in --serial (see README.md)")
    ap.add_argument("--serial", default="/tmp/rodinia-audit/work",
                    help="with --openmp: the WORK of a serial audit (read only)")
    args = ap.parse_args()
    if args.openmp and args.apply:
        ap.error("--openmp does not run phase 2")
    args.serial = os.path.abspath(args.serial)
    args.rodinia = os.path.abspath(args.rodinia)
    args.polyprof = os.path.abspath(args.polyprof)
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    table_path = args.table or os.path.join(args.work, "table.txt")
    only = [n for n in args.only.split(",") if n]
    for n in only:
        if n not in NAMES:
            ap.error("unknown program %s (one of %s)" % (n, ", ".join(NAMES)))
    t0 = time.time()
    args.polyprof_bin = os.path.join(args.work, "polyprof")
    if not args.reuse:
        if not os.path.exists(args.polyprof):
            ap.error("no polyprof binary at %s (cargo build --release -p polyprof)"
                     % args.polyprof)
        shutil.copy2(args.polyprof, args.polyprof_bin)
    args.built = time.strftime("%Y-%m-%d %H:%M", time.localtime(
        os.path.getmtime(args.polyprof_bin))) if os.path.exists(args.polyprof_bin) else "?"
    commit = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])[1].decode().strip()
    meta_path = os.path.join(args.work, "run.json")
    if args.reuse and os.path.exists(meta_path):
        meta = json.load(open(meta_path))   # what the run that profiled recorded
        commit, args.built = meta["commit"], meta["built"]
    elif not args.reuse:
        json.dump({"commit": commit, "built": args.built, "polyprof": args.polyprof,
                   "date": time.strftime("%Y-%m-%d %H:%M")}, open(meta_path, "w"))

    serial = {}   # --openmp: name -> the serial audit's report.json
    sargs = argparse.Namespace(**dict(vars(args), work=args.serial, openmp=False))
    progs = []
    shown_apply = False   # --reuse without --apply: phase 2 as the earlier run left it
    for spec in PROGRAMS:
        if only and spec["name"] not in only:
            continue
        p = Program(args, spec)
        progs.append(p)
        log("== %s" % p.name)
        try:
            if args.reuse:
                p.load_native()
                p.load_report()
                if not args.apply:
                    shown_apply = p.load_phase2() or shown_apply
            else:
                if not p.prepare():
                    log("  " + p.error)
                    p.save_meta()
                    continue
                if p.run_native():
                    if p.openmp:
                        p.vs_serial = serial_native(sargs, spec, p)
                    p.profile()
                else:
                    log("  " + p.error)
                p.save_meta()
            if p.openmp:
                serial[p.name] = serial_report(sargs, spec)
            r = p.row()
            log("  %s: %s instr, top %s %s ops, %s loops %s" % (
                p.verdict, r["instr"], r["region"], pct(r["ops"]), r["loops"], r["state"]))
        except Exception as ex:  # one program's failure is reported, not fatal
            import traceback
            traceback.print_exc()
            p.error = ("audit error: %r" % ex)[:300]
    t1 = time.time()
    if args.apply:
        for p in progs:
            if p.report is None or p.ref is None:
                continue
            log("== apply %s" % p.name)
            try:
                p.apply_all()
            except Exception as ex:
                import traceback
                traceback.print_exc()
                p.error = (p.error or "") + " apply error: %r" % ex
    total = time.time() - t0
    timing = "this run %.0f s (phase 1 %.0f s%s)" % (
        total, t1 - t0, ", phase 2 %.0f s" % (total - (t1 - t0)) if args.apply else "")
    if args.reuse:
        timing = "tables from WORK (--reuse)%s; the run that profiled took %s" % (
            ", phase 2 run again in %.0f s" % (total - (t1 - t0)) if args.apply else "",
            meta.get("timing", "?") if os.path.exists(meta_path) else "?")
    elif not only:
        meta = json.load(open(meta_path))
        meta["timing"] = timing
        json.dump(meta, open(meta_path, "w"))
    out = ["Rodinia 3.1 audit of polyprof (%s, built %s; repository HEAD %s when it was "
           "copied), %s; %s" % (args.polyprof, args.built, commit,
                                time.strftime("%Y-%m-%d"), timing), ""]
    out += fmt_table(progs)
    out += ["", summary(progs)]
    errs = [p for p in progs if p.error]
    out.append("Programs with an error: %s" % (
        "; ".join("%s (%s)" % (p.name, p.error) for p in errs) or "none"))
    if args.apply or shown_apply:
        out += [""] + apply_table(progs)
    if args.openmp:
        out += ["", "OpenMP builds (-fopenmp as shipped, no OpenMP environment) against the "
                "serial audit in %s; `out`: under polyprof against the native run with "
                "OMP_NUM_THREADS=1; `=ser`: that run against the serial build's" % args.serial,
                ""] + omp_mode.table(progs, serial)
    text = "\n".join(out) + "\n"
    print(text)
    with open(table_path, "w") as f:
        f.write(text)
    with open(os.path.join(args.work, "details.txt"), "w") as f:
        f.write("\n".join(details(progs)) + "\n")
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump([{"program": p.name, "row": p.row(), "error": p.error,
                    "timing": p.timing, "apply": p.arows,
                    "baseline": p.baseline} for p in progs], f, indent=1, default=str)
    log("table: %s; details: %s" % (table_path, os.path.join(args.work, "details.txt")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

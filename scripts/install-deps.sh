#!/usr/bin/env bash
# Installs the system packages polyprof's build and tests need, when they are missing:
# a C compiler (the tests and examples compile C kernels), gfortran (the tests compile a
# Fortran kernel), objcopy (the tests split debug
# files off a binary), make, autoconf, automake and libtool (isl's build, for the polyhedral
# stages), and Chromium (the tests load the flame graph in a headless browser). Uses apt-get
# (Debian, Ubuntu).
set -euo pipefail

need=()
# `--bench`: also what `make bench-advice` compares against (clang-14, with Polly built in
# on Debian) and fetches PolyBench with (curl). Not needed by the tests.
if [ "${1:-}" = "--bench" ]; then
    command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
    command -v curl >/dev/null 2>&1 || need+=(curl)
fi
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v gfortran >/dev/null 2>&1 || need+=(gfortran)
command -v objcopy >/dev/null 2>&1 || need+=(binutils)
command -v make >/dev/null 2>&1 || need+=(make)
command -v autoconf >/dev/null 2>&1 || need+=(autoconf)
command -v automake >/dev/null 2>&1 || need+=(automake)
command -v libtoolize >/dev/null 2>&1 || need+=(libtool)
# Debian's package is `chromium`; Ubuntu's `chromium-browser` (a snap wrapper) also answers.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
    need+=(chromium)

if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing ${need[*]}" >&2
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-deps: apt-get not found; install these packages by hand: ${need[*]}" >&2
        exit 1
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 1
fi

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that misuses of the sleeping and RCU APIs do not compile.

Usage: tools/build/compile_fail.py [--build-dir DIR] [SNIPPET.rs ...]

Compiles every snippet of tools/build/compile_fail/ (or those named) as a
crate of its own against the kernel crate of the KUnit build (default
build/kunit) and against the Bonsai and RCX crates, whose metadata it
builds first into a temporary directory.  The rustc command line is the
build's own, read from the .cmd file of mm/bonsai_rs/bonsai.o (a CLIPPY=1
build writes clippy-driver there; rustc is used in its place).

A snippet's first line says what it must do: `// expect: E0502` (any of
several codes: `E0499|E0502`) fails only with those errors;
`// expect: ok` compiles.  Exits non-zero if any snippet does otherwise.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SNIPPETS = REPO / "tools/build/compile_fail"
RUSTC = "/usr/bin/rustc"

# The crates the snippets may use besides the kernel crate, by the object
# whose command line builds them.
CRATES = {
    "bonsai": "mm/bonsai_rs/.bonsai.o.cmd",
    "rcx": "mm/rcx_rs/.rcx.o.cmd",
}


def saved_command(cmd_file):
    """Returns (env, args) of the savedcmd line of a kbuild .cmd file."""
    for line in cmd_file.read_text().splitlines():
        if line.startswith("savedcmd_"):
            words = shlex.split(line.split(" := ", 1)[1])
            break
    else:
        sys.exit(f"compile-fail: no command in {cmd_file}")
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    compiler = words.pop(0)
    if not re.search(r"(rustc|clippy-driver)$", compiler):
        sys.exit(f"compile-fail: {cmd_file}: not a Rust command ({compiler})")
    source = words.pop()
    args, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("--crate-name", "--out-dir"):
            skip = True
            continue
        if w.startswith("--emit="):
            continue
        args.append(w)
    return env, args, source


def run(out, env, args):
    e = dict(os.environ)
    e.update(env)
    # As the kernel build does (it exports this in the top Makefile).
    e["RUSTC_BOOTSTRAP"] = "1"
    return subprocess.run([RUSTC] + args, cwd=out, env=e, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=str(REPO / "build/kunit"))
    ap.add_argument("snippets", nargs="*")
    a = ap.parse_args()
    out = Path(a.build_dir).resolve()
    if not (out / "rust/libkernel.rmeta").exists():
        sys.exit(f"compile-fail: no kernel crate in {out} (build the KUnit kernel first)")
    snippets = [Path(s) for s in a.snippets] or sorted(SNIPPETS.glob("*.rs"))
    t0 = time.monotonic()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="compile-fail-") as tmp:
        externs = []
        for name, cmd in CRATES.items():
            env, args, source = saved_command(out / cmd)
            r = run(out, env, args + ["--crate-name", name, "--out-dir", tmp,
                                      f"--emit=metadata={tmp}/lib{name}.rmeta", source])
            if r.returncode != 0:
                print(r.stderr[-3000:])
                sys.exit(f"compile-fail: the {name} crate does not build from {cmd}")
            externs += ["--extern", f"{name}={tmp}/lib{name}.rmeta"]
        env, base, _ = saved_command(out / CRATES["bonsai"])
        env["RUST_MODFILE"] = "compile_fail"
        for snip in snippets:
            first = snip.read_text().splitlines()[0]
            m = re.match(r"//\s*expect:\s*(\S+)", first)
            if not m:
                print(f"compile-fail: {snip.name}: first line must be '// expect: ...'")
                failed += 1
                continue
            want = m.group(1)
            stem = re.sub(r"\W", "_", snip.stem)
            r = run(out, env, base + ["-Awarnings", "-L", tmp] + externs +
                    ["--crate-name", f"cf_{stem}", "--out-dir", tmp,
                     f"--emit=metadata={tmp}/libcf_{stem}.rmeta", str(snip.resolve())])
            codes = sorted(set(re.findall(r"^error\[(E\d{4})\]", r.stderr, re.M)))
            bare = [l for l in r.stderr.splitlines()
                    if l.startswith("error:") and "aborting due to" not in l]
            if want == "ok":
                ok = r.returncode == 0
                what = "compiles" if ok else f"does not compile: {codes or bare[:1]}"
            else:
                allowed = set(want.split("|"))
                ok = r.returncode != 0 and codes and set(codes) <= allowed and not bare
                if r.returncode == 0:
                    what = f"COMPILES, expected {want}"
                else:
                    msg = next((l for l in r.stderr.splitlines() if l.startswith("error")), "")
                    what = f"fails: {msg}" if ok else f"fails with {codes + bare[:1]}, expected {want}"
            print(f"compile-fail: {'ok  ' if ok else 'FAIL'} {snip.name}: {what}")
            if not ok:
                failed += 1
                if os.environ.get("V"):
                    print(r.stderr)
    dt = time.monotonic() - t0
    if failed:
        print(f"compile-fail: {failed} of {len(snippets)} snippet(s) wrong ({dt:.1f} s; V=1 shows rustc's output)")
        return 1
    print(f"compile-fail: all {len(snippets)} snippet(s) as expected ({dt:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

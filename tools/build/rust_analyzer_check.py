#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check a rust-project.json against the kernel build it describes.

  rust_analyzer_check.py JSON SRCTREE OBJTREE

The crates expected are those the build in OBJTREE compiled: every object
under mm/ and samples/ whose .cmd file shows a rustc (or clippy-driver)
command is a crate whose root is the .rs file of the same name.  The check
fails unless:

- every crate is listed once (by root module and by name), and no .rs
  file that kbuild's dependency records show to be a module of a built
  crate is listed as a crate root of its own;
- each expected crate's root is SRCTREE/<dir>/<name>.rs, it depends on
  `core` and `kernel`, and its cfgs are the kernel crate's (the CONFIG_
  options of the build);
- the kernel crate's root is SRCTREE/rust/kernel/lib.rs and it depends on
  `bindings`, which is how `kernel::bindings` resolves.

Prints one line per crate checked and a last line "N crates ok" or the
problems found; exits non-zero on any problem.
"""

import json
import os
import re
import sys

DIRS = ("mm", "samples")
RUSTC = re.compile(r"(^|[\s/])(rustc|clippy-driver)\s")


def built_crates(objtree):
    """The Rust crates compiled in objtree: their roots (dir/name.rs,
    relative) and the real paths of every other .rs file they are made of
    (their modules, from the dependencies kbuild records)."""
    roots, modules = [], set()
    for top in DIRS:
        for root, _dirs, names in os.walk(os.path.join(objtree, top)):
            for n in names:
                if not (n.startswith(".") and n.endswith(".o.cmd")):
                    continue
                with open(os.path.join(root, n), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if not RUSTC.search(text.split("\n", 1)[0]):
                    continue
                rel = os.path.join(os.path.relpath(root, objtree), n[1:-len(".o.cmd")] + ".rs")
                roots.append(rel)
                for dep in re.findall(r"(\S+\.rs)\b", text):
                    if os.path.isabs(dep):
                        modules.add(os.path.realpath(dep))
    return sorted(roots), modules


def check(project, srctree, objtree):
    problems = []
    crates = project.get("crates", [])
    by_name = {}
    by_root = {}
    for i, c in enumerate(crates):
        by_name.setdefault(c["display_name"], []).append(i)
        by_root.setdefault(os.path.realpath(c["root_module"]), []).append(i)
    for name, idx in by_name.items():
        if len(idx) > 1:
            problems.append("crate name %s listed %d times" % (name, len(idx)))
    for root, idx in by_root.items():
        if len(idx) > 1:
            problems.append("root %s listed %d times" % (root, len(idx)))

    def deps(c):
        return {crates[d["crate"]]["display_name"] for d in c["deps"]}

    kernel = [c for c in crates if c["display_name"] == "kernel"]
    if len(kernel) != 1:
        return problems + ["no kernel crate"], 0
    kernel = kernel[0]
    if os.path.realpath(kernel["root_module"]) != os.path.realpath(
            os.path.join(srctree, "rust", "kernel", "lib.rs")):
        problems.append("kernel crate rooted at %s" % kernel["root_module"])
    if "bindings" not in deps(kernel):
        problems.append("kernel crate does not depend on bindings")
    kcfg = set(kernel["cfg"])

    expected, modules = built_crates(objtree)
    if not expected:
        problems.append("no Rust crate compiled under %s in %s" % ("/".join(DIRS), objtree))
    src = os.path.realpath(srctree)
    for rel in expected:
        root = os.path.join(src, rel)
        idx = by_root.get(root, [])
        if len(idx) != 1:
            problems.append("%s: listed %d times" % (rel, len(idx)))
            continue
        c = crates[idx[0]]
        name = os.path.splitext(os.path.basename(rel))[0]
        bad = []
        if c["display_name"] != name:
            bad.append("named %s" % c["display_name"])
        missing = {"core", "kernel"} - deps(c)
        if missing:
            bad.append("missing deps %s" % " ".join(sorted(missing)))
        if set(c["cfg"]) != kcfg:
            bad.append("cfgs differ from the kernel crate's (%d vs %d)" % (len(c["cfg"]), len(kcfg)))
        if bad:
            problems.append("%s: %s" % (rel, "; ".join(bad)))
        else:
            print("rust-analyzer: %-40s %s, deps %s" % (rel, name, " ".join(sorted(deps(c)))))

    # No module of a crate the build compiles may pose as a crate root.
    want = {os.path.join(src, rel) for rel in expected}
    for root in by_root:
        if root in modules and root not in want:
            problems.append("%s: listed as a crate, but it is a module of another crate"
                            % os.path.relpath(root, src))
    return problems, len(expected)


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, srctree, objtree = sys.argv[1:]
    with open(path, encoding="utf-8") as f:
        project = json.load(f)
    problems, n = check(project, srctree, objtree)
    for p in problems:
        print("rust-analyzer: %s" % p, file=sys.stderr)
    if problems:
        print("rust-analyzer: %d problem(s) in %s" % (len(problems), path), file=sys.stderr)
        return 1
    print("rust-analyzer: %d crates ok" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks a benchmark's hot code paths for conflicts in QEMU's jump cache.

Under QEMU's TCG, a translated block jumps straight to the next one only
within a guest page.  Every other control transfer (a call or jump to
another page, every return, every indirect call) looks its target up in a
per-vCPU jump cache of 4096 entries, indexed by a hash of the target's
address (QEMU 7.2, softmmu: bits 0-5 of the address xor bits 6-11, and
bits 12-17 xor bits 18-23).  The cache is direct-mapped: two hot targets
with the same index evict each other, and each then costs a search of
QEMU's global translation table instead of a cache hit.

Two return sites of the RCX hash lookup had the same index in one build:
every lookup paid two such searches, about a tenth of a lookup, where the
RCU baseline's lookup, the same walk, paid none.  This script lists, for
each path, the targets it transfers to through the cache (entries of the
functions it calls on other pages, return sites of its calls) and reports
those that share an index.  A benchmark figure of a path with a conflict
measures QEMU's cache, not the code.

It follows calls into the functions whose names match --follow (and into
any function shorter than 64 bytes, such as the C helpers), skipping
return sites after calls that do not return or run only on a cold path
(--cold).  It reads the machine code with llvm-objdump, so it sees what
the compiler emitted, not what the source suggests.

  tools/build/tcg-jump-cache.py build/perf/vmlinux

A conflict between two return sites of which one is on a path the
benchmark seldom takes (a retry after a failed attempt) costs little; the
script cannot tell and reports it.

The addresses are vmlinux's link addresses.  A kernel booted with KASLR
runs its text at a random multiple of 2 MiB above them, which changes
bits 21-23 of every address: two targets on the same 2 MiB region keep
their relation, but targets on different regions may collide under one
slide and not under another, so a KASLR boot's figures vary with the
slide.  --kaslr reports the conflicts under each of the 8 slides that
differ (the demo boots with nokaslr, where slide 0 is the truth).

--self-test checks the index function
and the conflict search and prints a cargo-style result line (the host
tier, tools/build/host-test.sh, runs it).

Exit status: 0 with no conflict, 1 with conflicts, 2 on errors.
"""

import argparse
import re
import subprocess
import sys

# The RCX benchmark's operations: each structure's lookup, insert and
# remove, and the worker loop that calls them (mm/rcx_rs/bench.rs).
PATHS = [
    (f"{struct} {op}", rf"7{struct}NtB.*7Subject6{op}$")
    for struct in ("RcxHash", "RcuHash", "RcxList", "RcuList")
    for op in ("lookup", "insert", "remove")
]
WORKER = r"5bench11worker_main$"
FOLLOW = r"3rcx"
COLD = r"panicking|slice5index|attempt_contended|rcx_bench_cond_resched"


# QEMU 7.2's jump cache: TB_JMP_CACHE_BITS, and half of them for the page.
CACHE_BITS = 12
PAGE_BITS = 12
HALF = CACHE_BITS // 2


def cache_index(pc):
    """The jump cache index of QEMU 7.2's tb_jmp_cache_hash_func()."""
    tmp = pc ^ (pc >> (PAGE_BITS - HALF))
    page_part = (tmp >> (PAGE_BITS - HALF)) & ((1 << CACHE_BITS) - (1 << HALF))
    return page_part | (tmp & ((1 << HALF) - 1))


# KASLR moves the kernel text by a multiple of CONFIG_PHYSICAL_ALIGN (2 MiB
# on x86_64); only bits 21-23 of the slide reach the index.
SLIDE_UNIT = 2 << 20
SLIDES = 8


def conflicts(path, slide=0):
    """Groups of targets of `path` ({address: what}) sharing an index when
    the text runs `slide` bytes above its link address."""
    by_index = {}
    for addr, what in sorted(path.items()):
        by_index.setdefault(cache_index(addr + slide), []).append((addr, what))
    return [g for g in by_index.values() if len(g) > 1]


def self_test():
    """Checks the index function and the conflict search; returns failures."""
    checks = [
        # The two return sites of the RCX hash lookup that evicted each
        # other in the build this script was written for.
        cache_index(0xFFFFFFFF8122B883) == cache_index(0xFFFFFFFF8122B8C2),
        # The same sites in the RCU baseline's lookup, 17 bytes apart.
        cache_index(0xFFFFFFFF8122B38D) != cache_index(0xFFFFFFFF8122B39E),
        # Within one aligned 64-byte block no two addresses share an index.
        len({cache_index(0xFFFFFFFF81229240 + i) for i in range(64)}) == 64,
        # Bits 12-17 and 18-23 are folded together: page 1 and page 64
        # share their entries, pages 1 and 2 do not.
        cache_index(0x1000) == cache_index(0x40000),
        cache_index(0x1000) != cache_index(0x2000),
        # The index stays within the cache.
        all(0 <= cache_index(a) < 1 << CACHE_BITS
            for a in (0, 0xFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF815E5170)),
        # The search finds exactly the colliding pair.
        conflicts({0xFFFFFFFF8122B883: "a", 0xFFFFFFFF8122B8C2: "b",
                   0xFFFFFFFF8122B8D1: "c"}) ==
        [[(0xFFFFFFFF8122B883, "a"), (0xFFFFFFFF8122B8C2, "b")]],
        conflicts({0xFFFFFFFF8122B38D: "a", 0xFFFFFFFF8122B39E: "b"}) == [],
        # Two targets on one 2 MiB region collide under every slide ...
        all(len(conflicts({0xFFFFFFFF8122B883: "a", 0xFFFFFFFF8122B8C2: "b"},
                          k * SLIDE_UNIT)) == 1 for k in range(SLIDES)),
        # ... but targets on different regions only under some: these two
        # do not at their link addresses, and do 2 MiB and 10 MiB above.
        [k for k in range(SLIDES)
         if conflicts({0xFFFFFFFF81100040: "a", 0xFFFFFFFF81318040: "b"},
                      k * SLIDE_UNIT)] == [1, 5],
    ]
    failed = [i for i, ok in enumerate(checks) if not ok]
    for i in failed:
        print(f"tcg-jump-cache: self-test check {i} failed", file=sys.stderr)
    print(f"test result: {'FAILED' if failed else 'ok'}. "
          f"{len(checks) - len(failed)} passed; {len(failed)} failed")
    return len(failed)


class Image:
    def __init__(self, vmlinux, objdump):
        self.vmlinux, self.objdump = vmlinux, objdump
        out = subprocess.run(["nm", "-S", vmlinux], capture_output=True,
                             text=True, check=True).stdout
        self.syms, self.at = {}, {}
        for line in out.splitlines():
            f = line.split()
            if len(f) != 4 or f[3].startswith("__pfx_"):
                continue
            addr, size = int(f[0], 16), int(f[1], 16)
            self.syms[f[3]] = (addr, size)
            self.at.setdefault(addr, f[3])

    def find(self, pattern):
        names = [n for n in self.syms if re.search(pattern, n)]
        if len(names) != 1:
            raise LookupError(f"{pattern!r} names {len(names)} functions")
        return names[0]

    def code(self, name):
        addr, size = self.syms[name]
        out = subprocess.run(
            [self.objdump, "-d", "--no-show-raw-insn",
             f"--start-address={addr:#x}", f"--stop-address={addr + size:#x}",
             self.vmlinux], capture_output=True, text=True, check=True).stdout
        insns = []
        for line in out.splitlines():
            m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
            if m:
                insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
        return insns


def targets(img, root, follow, cold):
    """{address: description} of the cache lookups of the path from root."""
    found, seen, todo = {}, set(), [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found.setdefault(img.syms[name][0], f"{short(name)} (entry)")
        insns = img.code(name)
        for i, (pc, op, arg) in enumerate(insns):
            if not (op.startswith("call") or op.startswith("jmp")):
                continue
            m = re.search(r"0x([0-9a-f]+) <([^>+]+)>", arg)
            callee = m.group(2) if m else None
            if callee and re.search(cold, callee):
                continue
            if m:
                dst = int(m.group(1), 16)
                if dst >> 12 != pc >> 12:
                    found.setdefault(dst, f"{short(callee)} (entry)")
                if callee in img.syms and callee not in seen and (
                        re.search(follow, callee) or img.syms[callee][1] < 64):
                    todo.append(callee)
            if op.startswith("call") and i + 1 < len(insns):
                ret = insns[i + 1][0]
                what = short(callee) if callee else arg
                found.setdefault(ret, f"return from {what} in {short(name)}")
    return found


def short(name):
    """A readable name: Rust names demangled, crate hashes dropped."""
    if not name.startswith("_R"):
        return name
    out = subprocess.run(["llvm-cxxfilt-16", name], capture_output=True,
                         text=True).stdout.strip()
    return re.sub(r"\[[0-9a-f]+\]", "", out) or name


def kaslr_report(paths):
    """Prints, per KASLR slide, the paths with conflicts; returns 0."""
    for k in range(SLIDES):
        hit = [f"{label} ({len(c)})" for label, path in paths
               if (c := conflicts(path, k * SLIDE_UNIT))]
        print(f"slide {k} x 2 MiB (mod 16 MiB): "
              + (", ".join(hit) if hit else "no conflict"))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vmlinux", nargs="?")
    ap.add_argument("--self-test", action="store_true",
                    help="check the index function and the search, then exit")
    ap.add_argument("--objdump", default="llvm-objdump-16")
    ap.add_argument("--follow", default=FOLLOW,
                    help="regex of the functions whose calls are followed")
    ap.add_argument("--cold", default=COLD,
                    help="regex of callees whose return sites are cold")
    ap.add_argument("--kaslr", action="store_true",
                    help="count the conflicts under each KASLR slide instead")
    args = ap.parse_args()
    if args.self_test:
        return 1 if self_test() else 0
    if not args.vmlinux:
        ap.error("the vmlinux to check is missing")
    try:
        img = Image(args.vmlinux, args.objdump)
        worker = targets(img, img.find(WORKER), args.follow, args.cold)
        paths = []
        for label, pattern in PATHS:
            path = dict(worker)
            path.update(targets(img, img.find(pattern), args.follow, args.cold))
            paths.append((label, path))
        if args.kaslr:
            return kaslr_report(paths)
        total = 0
        for label, path in paths:
            clash = conflicts(path)
            if not clash:
                print(f"{label}: {len(path)} targets, no conflict")
                continue
            total += len(clash)
            for group in clash:
                print(f"{label}: conflict at index {cache_index(group[0][0]):#05x}: "
                      + "; ".join(f"{a:#x} {w}" for a, w in group))
    except (OSError, subprocess.CalledProcessError, LookupError) as e:
        print(f"tcg-jump-cache: {e}", file=sys.stderr)
        return 2
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())

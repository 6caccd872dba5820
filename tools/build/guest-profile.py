#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sampling profiler of a guest kernel under QEMU, through QEMU's gdbstub.

QEMU's TCG has no PMU and the test initramfs has no perf tool, so this
samples from outside: it stops the guest through the gdb remote protocol
every INTERVAL, reads the instruction pointer of every vCPU, scans the top
of each vCPU's stack for kernel text addresses (the callers, as an oops
trace's "?" entries find them: approximate, but enough to attribute a
kmalloc to its caller), lets the guest go on, and at the end prints the
hottest functions of vmlinux.

Boot the guest with a gdbstub, for example:

  python3 tools/scenarios/run.py --kernel build/perf/arch/x86/boot/bzImage \\
      -s demo --smp 4 --numa 2 --qemu-arg=-gdb --qemu-arg=tcp::1234 \\
      --log-dir /tmp/prof &
  tools/build/guest-profile.py --vmlinux build/perf/vmlinux --port 1234 \\
      --log /tmp/prof/demo.log --start 'rcx: bench: list' \\
      --stop 'rcx: bench: done'

Stopping the guest perturbs what it measures (its clock runs on while it
is stopped); use the profile to see where time goes, not the benchmark's
figures of that boot.
"""

import argparse
import bisect
import collections
import re
import socket
import subprocess
import sys
import time


class Stub:
    """A minimal gdb remote protocol client (acknowledged mode)."""

    def __init__(self, port, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                # Small request-reply packets: Nagle's algorithm against
                # delayed acknowledgements would cost 40 ms a packet.
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.buf = b""

    def _read(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("gdbstub closed the connection")
        self.buf += data

    def _packet(self):
        """Returns the payload of the next packet, acknowledging it."""
        while True:
            start = self.buf.find(b"$")
            if start >= 0:
                end = self.buf.find(b"#", start)
                if end >= 0 and len(self.buf) >= end + 3:
                    payload = self.buf[start + 1:end]
                    self.buf = self.buf[end + 3:]
                    self.sock.sendall(b"+")
                    return payload.decode("latin-1")
            self._read()

    def send(self, payload, reply=True):
        data = payload.encode("latin-1")
        pkt = b"$" + data + b"#" + ("%02x" % (sum(data) & 0xFF)).encode()
        self.sock.sendall(pkt)
        # Wait for the acknowledgement.
        while b"+" not in self.buf[:1]:
            if self.buf[:1] == b"-":
                self.buf = self.buf[1:]
                self.sock.sendall(pkt)
                continue
            if self.buf and self.buf[:1] not in (b"+", b"-"):
                break
            self._read()
        if self.buf[:1] == b"+":
            self.buf = self.buf[1:]
        if not reply:
            return None
        # A stop reply can arrive late (QEMU reports the stop of every
        # vCPU it halted); none of the queries sent here answers with one.
        r = self._packet()
        while payload != "?" and r[:1] in ("T", "S"):
            r = self._packet()
        return r

    def interrupt(self):
        self.sock.sendall(b"\x03")
        return self._packet()

    def threads(self):
        out = []
        r = self.send("qfThreadInfo")
        while r.startswith("m"):
            out += [t for t in r[1:].split(",") if t]
            r = self.send("qsThreadInfo")
        return out


def le64(hexstr, off=0):
    return int.from_bytes(bytes.fromhex(hexstr[off * 2:off * 2 + 16]), "little")


class Symbols:
    def __init__(self, vmlinux):
        out = subprocess.run(["nm", "-n", "--demangle", vmlinux], check=True,
                             capture_output=True, text=True).stdout
        self.addrs, self.names = [], []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0] and parts[1] in ("t", "T", "w", "W"):
                self.addrs.append(int(parts[0], 16))
                self.names.append(parts[2])
        self.lo, self.hi = self.addrs[0], self.addrs[-1]

    def lookup(self, addr):
        if not self.lo <= addr <= self.hi:
            return None
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.names[i] if i >= 0 else None


def short(name, width=110):
    # Rust generics make names long; keep the path's tail.
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    return name if len(name) <= width else "..." + name[-(width - 3):]


def wait_for(log, regex, timeout):
    deadline = time.monotonic() + timeout
    pat = re.compile(regex)
    while time.monotonic() < deadline:
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                if pat.search(f.read()):
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--port", type=int, default=1234)
    ap.add_argument("--interval", type=float, default=0.01, help="seconds between samples")
    ap.add_argument("--duration", type=float, default=60.0, help="most seconds to sample")
    ap.add_argument("--log", help="serial log to watch for --start/--stop")
    ap.add_argument("--start", help="regex: start sampling once the log matches it")
    ap.add_argument("--stop", help="regex: stop sampling once the log matches it")
    ap.add_argument("--stack-words", type=int, default=64,
                    help="stack words scanned for callers (0: none)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--under", action="append", default=[], metavar="REGEX",
                    help="also profile the samples with a function matching "
                         "REGEX on the stack, apart: what they ran and what "
                         "else was on their stack (repeatable)")
    ap.add_argument("--annotate", action="append", default=[], metavar="REGEX",
                    help="print the disassembly of the functions matching "
                         "REGEX with the samples of each instruction "
                         "(repeatable; TCG stops a vCPU between translation "
                         "blocks, so hits land on block starts)")
    args = ap.parse_args()

    syms = Symbols(args.vmlinux)
    stub = Stub(args.port)
    # QEMU's gdbstub stops the guest when gdb attaches; let it run.
    stub.send("?")
    stub.send("c", reply=False)
    if args.start and not wait_for(args.log, args.start, 1800):
        sys.exit("start pattern never appeared in %s" % args.log)
    stop_pat = re.compile(args.stop) if args.stop else None

    self_hits = collections.Counter()
    incl_hits = collections.Counter()
    unders = [(re.compile(u), u, collections.Counter(), collections.Counter())
              for u in args.under]
    annotate = [re.compile(a) for a in args.annotate]
    ip_hits = collections.Counter()
    samples = 0
    t_end = time.monotonic() + args.duration
    last_check = 0.0
    while time.monotonic() < t_end:
        time.sleep(args.interval)
        try:
            samples += sample(stub, syms, args.stack_words, self_hits, incl_hits,
                              unders, annotate, ip_hits)
        except (EOFError, OSError):
            break    # the guest has shut down
        if stop_pat and time.monotonic() - last_check > 1.0:
            last_check = time.monotonic()
            if wait_for(args.log, args.stop, 0.01):
                break
    report(samples, self_hits, incl_hits, args.top)
    for _, text, hits, callers in unders:
        n = sum(hits.values())
        print("\nself, of the %d samples with /%s/ on the stack:" % (n, text))
        for name, c in hits.most_common(args.top):
            print("  %5.1f%%  %s" % (100.0 * c / n, short(name)))
        print("on the stack, of those samples (who called it; approximate):")
        for name, c in callers.most_common(args.top):
            print("  %5.1f%%  %s" % (100.0 * c / n, short(name)))
    annotate_report(args.vmlinux, syms, ip_hits, samples)


def annotate_report(vmlinux, syms, ip_hits, samples):
    """Prints each annotated function's disassembly with its hits."""
    by_func = collections.defaultdict(dict)
    for ip, c in ip_hits.items():
        by_func[syms.lookup(ip)][ip] = c
    for name, hits in sorted(by_func.items(), key=lambda kv: -sum(kv[1].values())):
        i = syms.names.index(name)
        lo = syms.addrs[i]
        hi = syms.addrs[i + 1] if i + 1 < len(syms.addrs) else max(hits) + 1
        total = sum(hits.values())
        print("\n%d samples (%.1f%%) in %s:" % (total, 100.0 * total / samples, short(name)))
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C",
                              "--start-address=%#x" % lo, "--stop-address=%#x" % hi,
                              vmlinux], check=True, capture_output=True,
                             text=True).stdout
        for line in dis.splitlines():
            m = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
            if not m:
                continue
            c = hits.get(int(m.group(1), 16), 0)
            print("  %6s  %s" % ("%.1f%%" % (100.0 * c / total) if c else "", line.strip()))


def sample(stub, syms, stack_words, self_hits, incl_hits, unders=(),
           annotate=(), ip_hits=None):
    """Stops the guest, samples every vCPU, resumes; returns the count."""
    n = 0
    stub.interrupt()
    for tid in stub.threads():
        stub.send("Hg" + tid)
        regs = stub.send("g")
        # x86-64 'g' layout: rax rbx rcx rdx rsi rdi rbp rsp r8..r15 rip
        rsp, rip = le64(regs, 8 * 7), le64(regs, 8 * 16)
        name = syms.lookup(rip)
        if name is None:
            name = "[user]" if rip < (1 << 63) else "[other]"
        self_hits[name] += 1
        if any(pat.search(name) for pat in annotate):
            ip_hits[rip] += 1
        seen = {name}
        if stack_words and name not in ("[user]", "[other]"):
            mem = stub.send("m%x,%x" % (rsp, 8 * stack_words))
            if not mem.startswith("E"):
                for i in range(len(mem) // 16):
                    caller = syms.lookup(le64(mem, 8 * i))
                    if caller:
                        seen.add(caller)
        for f in seen:
            incl_hits[f] += 1
        for pat, _, hits, callers in unders:
            if any(pat.search(f) for f in seen):
                hits[name] += 1
                for f in seen:
                    callers[f] += 1
        n += 1
    stub.send("c", reply=False)
    return n


def report(samples, self_hits, incl_hits, top):
    if not samples:
        print("no sample taken")
        return
    print("%d vCPU samples" % samples)
    print("\nself (the vCPU was executing the function):")
    for name, n in self_hits.most_common(top):
        print("  %5.1f%%  %s" % (100.0 * n / samples, short(name)))
    print("\non the stack (the function or a caller found on it; approximate):")
    for name, n in incl_hits.most_common(top):
        print("  %5.1f%%  %s" % (100.0 * n / samples, short(name)))


if __name__ == "__main__":
    main()

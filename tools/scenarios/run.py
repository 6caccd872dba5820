#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""End-to-end scenario runner: boot a bzImage in QEMU (TCG) with a generated
initramfs, run one scenario script per boot, and judge the serial console.

Exit status: 0 all scenarios passed, 1 some scenario failed, 2 usage error,
3 harness/setup error (initramfs build, QEMU missing).  See README.md.
"""

import argparse
import hashlib
import os
import queue
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = REPO / "build" / "scenarios"
CASES = HERE / "cases"
PROGS = HERE / "progs"
BUSYBOX = Path("/bin/busybox")
QEMU = "qemu-system-x86_64"
QBOOT = Path("/usr/share/qemu/qboot.rom")
DEFAULT_KERNELS = [
    REPO / "build" / "kunit" / "arch" / "x86" / "boot" / "bzImage",
    REPO / "build" / "kunit-base" / "arch" / "x86" / "boot" / "bzImage",
]
CFLAGS = ["-static", "-O2", "-Wall", "-Werror"]
CC = "gcc"
# "--arch arm64" (set_arch()): the arm64 test kernel (tools/arm64/run.sh)
# on QEMU's virt machine with a device tree, static arm64 programs and
# busybox, and only the scenarios whose "# arch:" header names arm64.
ARCH = "x86_64"
ARM64_DIR = REPO / "tools" / "arm64"
ARM64_BUSYBOX = Path("/usr/local/lib/rsmm/aarch64/busybox")
ARM64_CC = "aarch64-linux-gnu-gcc"
# Base of QEMU's virt machine for the device tree; the runner keeps the
# same machine options for the dump (dumpdtb) and the boot.
ARM64_MACHINE = ["-machine", "virt,gic-version=3", "-cpu", "max,pauth-impdef=on"]

# Bump when the initramfs layout changes, to invalidate the cache.
INITRAMFS_FORMAT = "5"

# The kernel's own mm selftests, built from the prepared kernel tree (see
# "Kernel selftests" in README.md) and installed as /selftests/mm/<name>.
# All are linked into one static, stripped program (selftests-mm, about
# 900 KiB) that runs the test named by argv[0]; the flags are those of the
# selftests' lib.mk and mm/Makefile (-D_GNU_SOURCE=, -U_FORTIFY_SOURCE).  A source
# is a file of the tree's selftests/mm, or one of our drivers in
# selftests/ that includes an upstream test to run a part of it.
KSRC = REPO / "build" / "linux"
SELFTESTS = HERE / "selftests"
SELFTESTS_MM = {
    "cow_pmd": SELFTESTS / "cow_pmd.c",
    "khugepaged": "khugepaged.c",
    "transhuge-stress": "transhuge-stress.c",
    "split_huge_page_thp": SELFTESTS / "split_huge_page_thp.c",
    # The tests of VMA changes (bonsai_vma_selftests).
    "map_fixed_noreplace": "map_fixed_noreplace.c",
    "map_populate": "map_populate.c",
    "migration-2s": "migration.c",
    "mlock2-tests": "mlock2-tests.c",
    "mremap_dontunmap": "mremap_dontunmap.c",
    "mremap_test": "mremap_test.c",
    "mseal_test": "mseal_test.c",
    "pagemap_ioctl-10": "pagemap_ioctl.c",
    "soft-dirty-1k": "soft-dirty.c",
    "uffd-stress": "uffd-stress.c",
    "uffd-unit-tests-4m": "uffd-unit-tests.c",
    "virtual_address_range_short": SELFTESTS / "virtual_address_range_short.c",
    # RCXVM's list (issue 28) beyond those, in the same scenario.
    "gup_longterm": "gup_longterm.c",
    "gup_test": "gup_test.c",
    "madv_populate": "madv_populate.c",
    "mdwe_test": "mdwe_test.c",
    "mkdirty": "mkdirty.c",
    "protection_keys": "protection_keys.c",
}
SELFTESTS_MM_HELPERS = ["vm_util.c", "thp_settings.c"]
# Helpers some tests link besides those (mm/Makefile's rules).
SELFTEST_HELPERS_EXTRA = {"uffd-stress": ["uffd-common.c"],
                          "uffd-unit-tests-4m": ["uffd-common.c"]}
# Constants of upstream tests set lower, for the run time under TCG with
# KASAN: the test is compiled from a copy of its source in which the
# "#define NAME ..." line of each NAME reads "#define NAME VALUE" (the
# build fails unless there is exactly one such line: upstream changed).
SELFTEST_DEFINES = {
    # Each of the six cases migrates for 2 s, not 20 s (2 min in all).
    "migration-2s": {"RUNTIME": "(2)"},
    # test_simple and test_hugepage: 1000 rounds of clear_refs, write
    # fault and pagemap reads, not 10000 (about 55 s).
    "soft-dirty-1k": {"TEST_ITERATIONS": "1000"},
    # Its "Smaller vec" case: 10 rounds of writes to half of 10,000
    # write-protected pages and PAGEMAP_SCAN walks, not 100 (10.8 of the
    # test's 20 s alone; 29 s in make test); test_simple 10 rounds too.
    "pagemap_ioctl-10": {"TEST_ITERATIONS": "10"},
    # Every case on 4 MiB per area, not 32 MiB (the move case alone took
    # 64 s, the minor ones 45 s each; whole: over four minutes).  With
    # 2 MiB, one huge page per area, its hugetlb poison case fails.
    "uffd-unit-tests-4m": {"UFFD_TEST_MEM_SIZE": "(4UL << 20)"},
}
SELFTEST_CFLAGS = ["-O2", "-Wall", "-D_GNU_SOURCE=", "-U_FORTIFY_SOURCE",
                   "-Werror=implicit-function-declaration", "-Werror=int-conversion"]
SELFTEST_LDFLAGS = ["-static", "-s"]
SELFTEST_BINARY = "selftests-mm"
# 6.12.y's khugepaged.c returns KSFT_SKIP (a stable backport) without
# including kselftest.h, so it does not compile as shipped: include it.
# Its main() ends in exit() (restore_settings()) without a return, which
# only main() may do: renamed, it warns.
SELFTEST_EXTRA = {"khugepaged": ["-include", "../kselftest.h", "-Wno-return-type"],
                  "protection_keys": ["-mxsave"]}
SELFTEST_LIBS = ["-lrt", "-lpthread", "-lm"]
# What `make headers_install` reads: the uapi headers and the scripts
# that generate or clean them (the x86 syscall numbers among them).
UAPI_INPUTS = ["include/uapi", "arch/x86/include/uapi", "arch/x86/entry/syscalls",
               "scripts/headers_install.sh", "scripts/Makefile.asm-headers",
               "scripts/syscallhdr.sh", "scripts/unifdef.c", "Makefile"]

DEFAULTS = {"smp": 2, "numa": 2, "mem": "1G", "timeout": 300, "tcg": "multi"}
MAX_SMP = 64
MIN_NODE_MIB = 64
MAX_MEM_MIB = 64 * 1024
MAX_DISK_MIB = 1024 * 1024

# Base kernel command line; scenario "# append:" and --append come after it
# (for most parameters the last occurrence wins).  No oops=panic: an oops is
# caught as a splat and the report stays readable on the console; a wedged
# guest is stopped by the timeout or the post-splat quiet period.
# The detectors of late reports get short timeouts so that the tail after
# the scenario (TAIL below) outlasts them: an RCU stall is reported after
# 10 s (the KUnit tier keeps the default 21 s), a task blocked for 30 s is
# reported during the scenario (checked every 5 s), and /init lowers that
# to 5 s once the scenario is done (see init.sh).
BASE_APPEND = [
    "console=ttyS0,115200",
    "earlyprintk=serial,ttyS0,115200",
    "panic=-1",
    "kunit.enable=0",
    "log_buf_len=1M",
    "rcupdate.rcu_cpu_stall_timeout=10",
    "sysctl.kernel.hung_task_timeout_secs=30",
    "sysctl.kernel.hung_task_check_interval_secs=5",
]

# Kernel "splat" lines: extended regexes valid for both Python and busybox
# grep -E, shared with the KUnit tier (tools/build/splat.re), and the kernel
# command-line echo that may match them without being one
# (tools/build/splat-ignore.re).  Both are also installed in the initramfs
# as /scenarios/splat.re and /scenarios/splat-ignore.re for lib.sh.
SPLAT_FILE = REPO / "tools" / "build" / "splat.re"
SPLAT_IGNORE_FILE = REPO / "tools" / "build" / "splat-ignore.re"


def read_patterns(path):
    # Read at import time, before the exception classes exist: a missing
    # file is a setup error (exit status 3) all the same.
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        print("run.py: setup error: cannot read %s: %s" % (path, e), file=sys.stderr)
        sys.exit(3)
    return [ln for ln in lines if ln and not ln.startswith("#")]


SPLAT_PATTERNS = read_patterns(SPLAT_FILE)
SPLAT_IGNORE_PATTERNS = read_patterns(SPLAT_IGNORE_FILE)
SPLAT_RE = re.compile("|".join("(?:%s)" % p for p in SPLAT_PATTERNS))
SPLAT_IGNORE_RE = re.compile("|".join("(?:%s)" % p for p in SPLAT_IGNORE_PATTERNS))

RESULT_RE = re.compile(r"SCENARIO (\S+) (PASS|FAIL)(?::\s*(.*))?$")
CHECK_RE = re.compile(r"CHECK (\S+) (\S+) (PASS|FAIL)\b(.*)$")
START_MARK = "SCENARIO-RUNNER START"
DONE_MARK = "SCENARIO-RUNNER DONE"
END_MARK = "SCENARIO-RUNNER END"
PANIC_RE = re.compile(r"Kernel panic - not syncing")

# After the scenario (DONE) the guest stays up TAIL seconds, so that an RCU
# stall or hung task that began during the scenario is reported, then scans
# for leaks if kmemleak is on, prints END and powers off.  The runner reads
# the console until QEMU exits; TAIL_GRACE bounds the scan and the power-off.
TAIL = 12
TAIL_GRACE = 180
SPLAT_QUIET = 60     # s of console silence after a splat before giving up
# With --jobs, a guest whose console has been silent BOOT_SILENCE s before
# its scenario started is stopped and boots again alone once the others
# are done.  Seen once in 23 boots beside another guest on a 2-CPU host
# (never alone): ACPI's _PRT loop hit its 30 s AML loop timeout, the
# virtio disk got no interrupt line, and the boot hung silently after
# probing it (on the pc machine, whose _PRT is a loop; x86 guests boot
# q35 now, see qemu_command).  A normal boot prints within a few seconds
# all the way.
BOOT_SILENCE = 120

# The largest x86 guest that boots q35 (see qemu_command): q35 puts RAM
# beyond 2.75 GiB above 4 GiB.
Q35_MAX_MIB = 2816

HEADER_RE = re.compile(r"^#\s*([a-z][a-z-]*)\s*:\s*(.*?)\s*$")
LIST_KEYS = {"append", "disk", "qemu", "allow-splat"}
SCALAR_KEYS = {"smp", "numa", "mem", "timeout", "description", "group", "selftests",
               "duration", "arch", "dtsi", "machine", "tcg"}
# "# tcg:" (and --tcg): how QEMU's TCG runs a guest's vCPUs.  multi (the
# default, MTTCG) gives each vCPU a host thread, so that the guest's
# threads really run at the same time: every scenario whose point is a
# race keeps it.  single runs all vCPUs on one host thread, in turns
# (QEMU switches at a halt, a PAUSE, an exception or every 100 ms).  On
# a host with fewer CPUs than vCPUs wanting one, multi loses host CPU
# time to vCPUs that spin waiting for a descheduled one (an IPI's
# acknowledgement, a lock), and single does not: two boots at a time on
# this 2-CPU host, each pair in the same session, alternating
# (2026-11-27):
#   gcma_dmem_file, gcma_thp_free, gcma_page_state, gcma_cma:
#     196 and 192 CPU-s multi, 166 and 165 single;
#   bonsai_vma_selftests 180 CPU-s multi, 136 single; gcma_thp_fault 36,
#     32; gcma_thp_selftests 89, 87; gcma_thp_khugepaged 26, 25;
#     gcma_dmem_swap 57, 61;
#   gcma_thp_numa, gcma_debug_pages, gcma_dma, gcma_bad_page,
#     gcma_badparam, boot_smoke, demo: 93 CPU-s multi, 85 single.
# A scenario that checks behaviour, not a race, and gains from it says
# "# tcg: single" (README.md lists them); the others stay multi.
TCG_MODES = ("multi", "single")

# --jobs auto: one boot per host CPU (a TCG guest of 2 vCPUs kept 1.1 of
# this 2-core host's CPUs busy on average, its vCPUs idle at times), as
# many as host memory holds: each boot needs its guest RAM and about
# QEMU_OVERHEAD_MIB more (QEMU, the TCG code cache).
QEMU_OVERHEAD_MIB = 1024


class UsageError(Exception):
    pass


class SetupError(Exception):
    pass


# ---------------------------------------------------------------- parsing

def parse_size_mib(text, what):
    """'512', '512M', '2G', '1048576K' -> MiB (no suffix means MiB)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KkMmGgTt]?)(?:i?B)?\s*", str(text))
    if not m:
        raise UsageError("invalid %s %r (expected e.g. 512M or 2G)" % (what, text))
    n = int(m.group(1))
    unit = m.group(2).upper()
    if unit == "K":
        if n % 1024:
            raise UsageError("%s %r is not a whole number of MiB" % (what, text))
        return n // 1024
    return n * {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[unit]


DISK_FS = ("ext2", "ext4")


def parse_disk(text, what):
    """'256M' or '256M ext4' -> (MiB, file system to format it with or None)."""
    parts = str(text).split()
    if len(parts) == 2 and parts[1] in DISK_FS:
        return parse_size_mib(parts[0], what), parts[1]
    if len(parts) != 1:
        raise UsageError("invalid %s %r (expected SIZE or SIZE %s)"
                         % (what, text, "|".join(DISK_FS)))
    return parse_size_mib(parts[0], what), None


def parse_int(text, what, lo, hi):
    try:
        v = int(str(text).strip(), 10)
    except ValueError:
        raise UsageError("invalid %s %r (expected an integer)" % (what, text))
    if not lo <= v <= hi:
        raise UsageError("%s must be in %d..%d, got %d" % (what, lo, hi, v))
    return v


class Scenario:
    def __init__(self, path):
        self.path = path
        self.name = path.name[:-3]
        self.meta = {k: [] for k in LIST_KEYS}
        self._parse_header()

    def _parse_header(self):
        try:
            lines = self.path.read_text().splitlines()
        except OSError as e:
            raise UsageError("cannot read %s: %s" % (self.path, e))
        for lineno, line in enumerate(lines, 1):
            if lineno == 1 and line.startswith("#!"):
                continue
            if not line.strip():
                continue
            if not line.startswith("#"):
                break
            m = HEADER_RE.match(line)
            if not m:
                continue
            key, value = m.group(1), m.group(2)
            where = "%s:%d" % (self.path, lineno)
            if key in LIST_KEYS:
                if value:
                    self.meta[key].append(value)
            elif key in SCALAR_KEYS:
                if key in self.meta:
                    raise UsageError("%s: duplicate '%s:' header" % (where, key))
                self.meta[key] = value
            # Other "# word: text" lines are ordinary comments.
        for key, what, lo, hi in (("smp", "smp", 1, MAX_SMP),
                                  ("numa", "numa", 1, MAX_SMP),
                                  ("timeout", "timeout", 1, 24 * 3600),
                                  ("duration", "duration", 1, 24 * 3600)):
            if key in self.meta:
                try:
                    self.meta[key] = parse_int(self.meta[key], what, lo, hi)
                except UsageError as e:
                    raise UsageError("%s: header: %s" % (self.path, e))
        if self.meta.get("machine", "q35") not in ("q35", "pc"):
            raise UsageError("%s: header: machine: %r (q35 or pc)"
                             % (self.path, self.meta["machine"]))
        if self.meta.get("tcg", "multi") not in TCG_MODES:
            raise UsageError("%s: header: tcg: %r (multi or single)"
                             % (self.path, self.meta["tcg"]))
        try:
            if "mem" in self.meta:
                parse_size_mib(self.meta["mem"], "mem")
            for d in self.meta["disk"]:
                parse_disk(d, "disk")
            for r in self.meta["allow-splat"]:
                re.compile(r)
        except (UsageError, re.error) as e:
            raise UsageError("%s: header: %s" % (self.path, e))

    @property
    def arches(self):
        """"# arch: x86_64 arm64": where the scenario runs (x86_64 alone
        when not given)."""
        return (self.meta.get("arch") or "x86_64").split()

    @property
    def description(self):
        return self.meta.get("description", "")


def discover():
    if not CASES.is_dir():
        return {}
    found = {}
    for p in sorted(CASES.glob("*.sh")):
        if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.sh", p.name):
            found[p.name[:-3]] = p
    return found


class Config:
    """Effective per-scenario machine configuration (header + CLI)."""

    def __init__(self, sc, args):
        def pick(key):
            v = getattr(args, key)
            return v if v is not None else sc.meta.get(key, DEFAULTS[key])

        self.smp = parse_int(pick("smp"), "--smp", 1, MAX_SMP)
        self.numa = parse_int(pick("numa"), "--numa", 1, MAX_SMP)
        self.mem_mib = parse_size_mib(pick("mem"), "--mem")
        self.timeout = parse_int(pick("timeout"), "--timeout", 1, 24 * 3600)
        self.tcg = pick("tcg")
        disks = args.disk if args.disk else sc.meta["disk"]
        self.disks = [parse_disk(d, "--disk") for d in disks]
        self.disks_mib = [mib for mib, _ in self.disks]
        self.append = list(sc.meta["append"]) + list(args.append or [])
        self.qemu_extra = []
        for q in sc.meta["qemu"]:
            self.qemu_extra += q.split()
        self.qemu_extra += list(args.qemu_arg or [])
        self.allow = [re.compile(r) for r in sc.meta["allow-splat"]]
        self.allow += [re.compile(r) for r in (args.allow_splat or [])]

        if self.numa > self.smp:
            raise UsageError("numa (%d) > smp (%d): every emulated node needs a vCPU"
                             % (self.numa, self.smp))
        if self.mem_mib < 128:
            raise UsageError("mem %d MiB is too small (min 128M)" % self.mem_mib)
        if self.mem_mib > MAX_MEM_MIB:
            raise UsageError("mem %d MiB is too large (max %dG)"
                             % (self.mem_mib, MAX_MEM_MIB // 1024))
        if self.mem_mib < MIN_NODE_MIB * self.numa:
            raise UsageError("mem %d MiB is too small for %d nodes (min %d MiB per node)"
                             % (self.mem_mib, self.numa, MIN_NODE_MIB))
        for d in self.disks_mib:
            if not 1 <= d <= MAX_DISK_MIB:
                raise UsageError("disk size %d MiB out of range 1M..1T" % d)

    def describe(self):
        s = "smp=%d numa=%d mem=%dM timeout=%ds" % (
            self.smp, self.numa, self.mem_mib, self.timeout)
        if self.disks_mib:
            s += " disks=" + ",".join("%dM" % d + (":" + fs if fs else "")
                                      for d, fs in self.disks)
        if self.tcg != "multi":
            s += " tcg=%s" % self.tcg
        if self.append:
            s += " append=%r" % " ".join(self.append)
        return s

    def accel(self):
        """QEMU's -accel for the guest: one host thread per vCPU (TCG's
        default, MTTCG), or with tcg single all vCPUs taking turns on one
        host thread (see TCG_MODES' comment)."""
        return [] if self.tcg == "multi" else ["-accel", "tcg,thread=single"]


# -------------------------------------------------------------- initramfs

class Cpio:
    """Minimal writer for the "newc" cpio format the kernel unpacks."""

    def __init__(self):
        self.data = bytearray()
        self.ino = 1
        self.names = set()

    def _pad(self):
        self.data += b"\0" * (-len(self.data) % 4)

    def _entry(self, name, mode, body=b"", rdev=(0, 0), nlink=1):
        if name in self.names:
            raise SetupError("duplicate initramfs entry %s" % name)
        self.names.add(name)
        raw = name.encode() + b"\0"
        fields = (self.ino, mode, 0, 0, nlink, 0, len(body), 0, 0,
                  rdev[0], rdev[1], len(raw), 0)
        self.ino += 1
        self.data += b"070701" + "".join("%08X" % f for f in fields).encode()
        self.data += raw
        self._pad()
        self.data += body
        self._pad()

    def dir(self, name, perm=0o755):
        self._entry(name, 0o040000 | perm, nlink=2)

    def file(self, name, body, perm=0o644):
        self._entry(name, 0o100000 | perm, body)

    def symlink(self, name, target):
        self._entry(name, 0o120777, target.encode())

    def chardev(self, name, major, minor, perm=0o666):
        self._entry(name, 0o020000 | perm, rdev=(major, minor))

    def finish(self):
        self.names.discard("TRAILER!!!")
        self._entry("TRAILER!!!", 0, nlink=1)
        return bytes(self.data)


def set_arch(arch):
    """Points the runner at another architecture's QEMU, kernel, compiler,
    busybox and console (--arch)."""
    global ARCH, QEMU, DEFAULT_KERNELS, BUSYBOX, CC, CACHE, BASE_APPEND
    ARCH = arch
    if arch == "x86_64":
        return
    QEMU = "qemu-system-aarch64"
    DEFAULT_KERNELS = [REPO / "build" / "arm64" / "arch" / "arm64" / "boot" / "Image"]
    BUSYBOX = ARM64_BUSYBOX
    CC = ARM64_CC
    CACHE = REPO / "build" / "scenarios-arm64"
    # The PL011 is the console; the protocol goes to a virtio console.
    BASE_APPEND = ["console=ttyAMA0", "earlycon"] + [
        a for a in BASE_APPEND if not a.startswith(("console=", "earlyprintk="))]


def busybox_applets():
    try:
        # The arm64 busybox cannot run here: the host's lists the applets
        # (the same Debian version, setup.sh).
        out = subprocess.run(["/bin/busybox", "--list"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SetupError("cannot run %s --list: %s (install busybox-static)" % (BUSYBOX, e))
    return sorted({a for a in out.split() if re.fullmatch(r"[\w.\[\]-]+", a)})


def gcc_version():
    try:
        return subprocess.run([CC, "--version"], check=True, capture_output=True,
                              text=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError) as e:
        raise SetupError("cannot run %s: %s (tools/build/setup.sh installs it)" % (CC, e))


def initramfs_inputs(selftests):
    """(label, bytes) pairs that determine the initramfs contents."""
    items = [("selftests", (selftests.digest if selftests else "none").encode())]
    for p in [HERE / "init.sh", HERE / "lib.sh"]:
        items.append(("file:" + p.name, p.read_bytes()))
    for p in sorted(CASES.glob("*.sh")):
        items.append(("case:" + p.name, p.read_bytes()))
    for p in sorted(PROGS.glob("*.[ch]")):
        items.append(("prog:" + p.name, p.read_bytes()))
    items.append(("splat", "\n".join(SPLAT_PATTERNS).encode() + b"\n"))
    items.append(("splat-ignore", "\n".join(SPLAT_IGNORE_PATTERNS).encode() + b"\n"))
    if not BUSYBOX.is_file():
        raise SetupError("%s not found (tools/build/setup.sh installs it)" % BUSYBOX)
    items.append(("busybox", BUSYBOX.read_bytes()))
    items.append(("gcc", gcc_version().encode()))
    items.append(("cflags", " ".join(CFLAGS).encode()))
    items.append(("format", INITRAMFS_FORMAT.encode()))
    return items


def compile_progs(outdir, log):
    outdir.mkdir(parents=True, exist_ok=True)
    built = []
    for src in sorted(PROGS.glob("*.c")):
        exe = outdir / src.stem
        cmd = [CC] + CFLAGS + ["-I", str(PROGS), "-o", str(exe), str(src)]
        log("compiling %s" % src.relative_to(REPO))
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SetupError("compiling %s failed:\n%s%s" % (src, r.stdout, r.stderr))
        built.append((src.stem, exe))
    return built


# ------------------------------------------------------------- selftests

def selftest_main(name):
    """The C name a test's main() gets in the multi-call program."""
    return "selftest_" + re.sub(r"\W", "_", name) + "_main"


def dispatcher_source():
    """main() of /selftests/mm/selftests-mm: runs the test named by argv[0]
    (each test is a symbolic link to it), with stdout line-buffered."""
    names = sorted(SELFTESTS_MM)
    return ("/* Generated by tools/scenarios/run.py. */\n"
            "#include <stdio.h>\n#include <string.h>\n\n"
            + "".join("int %s(int argc, char **argv);\n" % selftest_main(n) for n in names)
            + "\nstatic const struct {\n\tconst char *name;\n"
            "\tint (*main)(int argc, char **argv);\n} tests[] = {\n"
            + "".join('\t{ "%s", %s },\n' % (n, selftest_main(n)) for n in names)
            + "};\n\nint main(int argc, char **argv)\n{\n"
            "\tconst char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];\n"
            "\tunsigned int i;\n\n"
            "\t/* A test killed by a timeout has printed every line up to then. */\n"
            "\tsetvbuf(stdout, NULL, _IOLBF, 0);\n"
            "\tfor (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)\n"
            "\t\tif (!strcmp(name, tests[i].name))\n"
            "\t\t\treturn tests[i].main(argc, argv);\n"
            '\tfprintf(stderr, "%s: not a test of this program\\n", name);\n'
            "\treturn 2;\n}\n")


def _tree_files(root, rels, pattern="*"):
    """Files under root/rel for each rel (a file or a directory, recursively),
    sorted, as (relative path, Path)."""
    found = []
    for rel in rels:
        p = root / rel
        if p.is_file():
            found.append((rel, p))
        elif p.is_dir():
            found += [(str(f.relative_to(root)), f) for f in p.rglob(pattern) if f.is_file()]
    return sorted(found)


class Selftests:
    """The mm selftests of one kernel tree: a digest of everything the
    binaries depend on, and the cached build (CACHE/selftests) for it."""

    def __init__(self, ksrc):
        self.ksrc = ksrc
        self.src = ksrc / "tools" / "testing" / "selftests"
        self.out = CACHE / "selftests"
        self.bindir = self.out / "mm"
        self.stamp = self.out / "mm.sha256"
        self.uring = self.liburing()
        inputs = _tree_files(ksrc, ["tools/testing/selftests/mm"], "*.[ch]")
        inputs += _tree_files(ksrc, ["tools/testing/selftests/kselftest.h",
                                     "mm/gup_test.h", "tools/include/uapi"] + UAPI_INPUTS)
        inputs += [("driver:" + p.name, p) for p in sorted(SELFTESTS.glob("*.[ch]"))]
        h = hashlib.sha256()
        for rel, path in inputs:
            h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        tests = sorted((k, v if isinstance(v, str) else "driver:" + v.name)
                       for k, v in SELFTESTS_MM.items())
        for label, value in (("gcc", gcc_version()), ("tests", repr(tests)),
                             ("helpers", " ".join(SELFTESTS_MM_HELPERS)),
                             ("helpers-extra", repr(sorted(SELFTEST_HELPERS_EXTRA.items()))),
                             ("link", "ld -r, objcopy --keep-global-symbol"),
                             ("copies", "-fmacro-prefix-map: a bare __FILE__"),
                             ("defines", repr(sorted((k, sorted(v.items()))
                                                     for k, v in SELFTEST_DEFINES.items()))),
                             ("cflags", " ".join(SELFTEST_CFLAGS + SELFTEST_LDFLAGS)),
                             ("dispatcher", dispatcher_source()),
                             ("extra", repr(sorted(SELFTEST_EXTRA.items()))),
                             ("libs", " ".join(SELFTEST_LIBS)),
                             ("liburing", str(self.uring))):
            h.update(label.encode() + b"\0" + value.encode() + b"\0")
        self.digest = h.hexdigest()

    @staticmethod
    def liburing():
        """True when a static liburing links: cow then has its io_uring
        cases (liburing-dev; optional, they are not built without it)."""
        with tempfile.TemporaryDirectory(prefix="liburing.") as tmp:
            src = Path(tmp) / "t.c"
            src.write_text("#include <liburing.h>\n"
                           "int main(void) { struct io_uring r;"
                           " return io_uring_queue_init(1, &r, 0); }\n")
            r = subprocess.run(["gcc", "-static", "-o", str(Path(tmp) / "t"), str(src),
                                "-luring"], capture_output=True)
            return r.returncode == 0

    @staticmethod
    def with_defines(name, src, tmp):
        """A copy of src (in tmp/defines) with SELFTEST_DEFINES[name]'s
        constants, under the same file name."""
        text = src.read_text()
        for macro, value in sorted(SELFTEST_DEFINES[name].items()):
            pattern = re.compile(r"^#define[ \t]+%s[ \t]+\S.*$" % re.escape(macro), re.M)
            found = pattern.findall(text)
            if len(found) != 1:
                raise SetupError("selftest %s: %d lines '#define %s ...' in %s, expected 1"
                                 % (name, len(found), macro, src))
            text = pattern.sub("#define %s %s" % (macro, value), text)
        out = tmp / "defines" / name
        out.mkdir(parents=True, exist_ok=True)
        out = out / src.name
        out.write_text(text)
        return out

    def binary(self):
        return self.bindir / SELFTEST_BINARY

    def cached(self):
        return (self.stamp.is_file() and self.stamp.read_text().strip() == self.digest
                and self.binary().is_file())

    def build(self, force, log):
        """Installs the tree's uapi headers (the host's /usr/include is
        older than the kernel) in a scratch directory and compiles each
        test against them; keeps only the binaries."""
        if not force and self.cached():
            return
        self.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.out, prefix="build.") as tmp:
            tmp = Path(tmp)
            log("installing the uapi headers of %s" % self.ksrc)
            # O= keeps the kernel tree untouched; headers need no .config.
            cmd = ["make", "-s", "-C", str(self.ksrc), "O=%s" % (tmp / "obj"), "ARCH=x86_64",
                   "INSTALL_HDR_PATH=%s" % (tmp / "usr"), "headers_install"]
            env = dict(os.environ)
            for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
                env.pop(k, None)
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise SetupError("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr[-3000:]))
            cfg = tmp / "cfg"
            cfg.mkdir()
            uring = self.uring
            # What the selftests' check_config.sh would generate.
            (cfg / "local_config.h").write_text(
                "#define LOCAL_CONFIG_HAVE_LIBURING 1\n" if uring
                else "/* No liburing support found */\n")
            if not uring:
                log("no static liburing (liburing-dev): cow's io_uring cases are not built")
            bindir = tmp / "mm"
            bindir.mkdir()
            mm = self.src / "mm"
            # One program for all (each test's main() renamed, a
            # dispatcher on argv[0]): static glibc once, not per test.
            # The drivers' directory comes after the tree's: it has
            # stand-ins for libnuma's headers (migration.c).
            inc = ["-I", str(cfg), "-I", str(mm), "-I", str(self.ksrc),
                   "-I", str(SELFTESTS),
                   "-isystem", str(tmp / "usr" / "include"),
                   "-isystem", str(self.ksrc / "tools" / "include" / "uapi")]

            def compile_unit(name, src, defs, obj):
                # A test of the tree by its bare name, as mm/Makefile
                # does: pagemap_ioctl.c names its scratch files after
                # __FILE__, which must then be a path in the guest's cwd.
                # A copy with other constants finds the tree's headers
                # through -I, and its __FILE__ loses the copy's directory
                # (-fmacro-prefix-map).
                if src.parent == mm:
                    path, remap = src.name, []
                else:
                    path, remap = str(src), ["-fmacro-prefix-map=%s/=" % src.parent]
                cmd = (["gcc"] + SELFTEST_CFLAGS + SELFTEST_EXTRA.get(name, []) + defs + inc
                       + remap + ["-c", "-o", str(obj), path])
                log("compiling %s" % src.name)
                r = subprocess.run(cmd, cwd=str(mm), capture_output=True, text=True)
                if r.returncode != 0:
                    raise SetupError("compiling selftest %s failed:\n%s%s"
                                     % (name, r.stdout, r.stderr[-3000:]))

            def run_tool(cmd, what):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise SetupError("%s failed:\n%s%s" % (what, r.stdout, r.stderr[-3000:]))

            helpers = {}
            for h in sorted(set(SELFTESTS_MM_HELPERS).union(
                    *SELFTEST_HELPERS_EXTRA.values())):
                helpers[h] = tmp / ("helper-%s.o" % Path(h).stem)
                compile_unit(h, mm / h, [], helpers[h])
            # Each test is linked with its helpers alone (ld -r), as its
            # own program would be, and every symbol but its main() made
            # local: tests and helpers that define the same global
            # (page_size and uffd in pagemap_ioctl.c, mremap_dontunmap.c
            # and uffd-common.c) then each keep their own.
            objs = []
            for i, (name, src) in enumerate(sorted(SELFTESTS_MM.items())):
                main_sym = selftest_main(name)
                obj = tmp / ("%d.o" % i)
                src = mm / src
                if name in SELFTEST_DEFINES:
                    src = self.with_defines(name, src, tmp)
                compile_unit(name, src, ["-Dmain=%s" % main_sym,
                                         "-DSELFTEST_MAIN=%s" % main_sym], obj)
                linked = tmp / ("%d-linked.o" % i)
                deps = SELFTESTS_MM_HELPERS + SELFTEST_HELPERS_EXTRA.get(name, [])
                run_tool(["ld", "-r", "-o", str(linked), str(obj)]
                         + [str(helpers[h]) for h in deps], "ld -r of selftest %s" % name)
                run_tool(["objcopy", "--keep-global-symbol=%s" % main_sym, str(linked)],
                         "objcopy of selftest %s" % name)
                objs.append(str(linked))
            disp = tmp / "selftests-mm.c"
            disp.write_text(dispatcher_source())
            compile_unit("dispatcher", disp, [], tmp / "dispatcher.o")
            objs.append(str(tmp / "dispatcher.o"))
            cmd = (["gcc"] + SELFTEST_LDFLAGS + ["-o", str(bindir / SELFTEST_BINARY)] + objs
                   + SELFTEST_LIBS + (["-luring"] if uring else []))
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SetupError("linking %s failed:\n%s%s"
                                 % (SELFTEST_BINARY, r.stdout, r.stderr[-3000:]))
            if self.bindir.exists():
                shutil.rmtree(self.bindir)
            os.replace(bindir, self.bindir)
        self.stamp.write_text(self.digest + "\n")


def find_selftests(ksrc, log):
    """The Selftests of the kernel tree, or None (with a message) when
    there is no tree: the initramfs then has no /selftests."""
    if ksrc is None:
        ksrc, given = KSRC, False
    else:
        ksrc, given = Path(ksrc), True
    if not (ksrc / "tools" / "testing" / "selftests" / "mm").is_dir():
        if given:
            raise UsageError("--ksrc %s: no tools/testing/selftests/mm there" % ksrc)
        log("no kernel tree at %s (make prepare): the initramfs has no /selftests"
            % ksrc)
        return None
    return Selftests(ksrc.resolve())


def build_initramfs(force, log, ksrc=None, with_selftests=False):
    """The initramfs, cached; with_selftests: the variant with
    /selftests/mm, for the scenarios that ask for it ("# selftests: mm"),
    kept apart so that the others boot without it."""
    selftests = find_selftests(ksrc, log) if with_selftests else None
    items = initramfs_inputs(selftests)
    h = hashlib.sha256()
    for label, body in items:
        h.update(label.encode() + b"\0" + hashlib.sha256(body).digest())
    digest = h.hexdigest()
    name = "initramfs-selftests" if with_selftests else "initramfs"
    out = CACHE / (name + ".cpio")
    stamp = CACHE / (name + ".sha256")
    if not force and out.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return out, False

    CACHE.mkdir(parents=True, exist_ok=True)
    if selftests:
        selftests.build(force, log)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="progs.") as tmp:
        progs = compile_progs(Path(tmp), log)
        c = Cpio()
        for d in ["bin", "dev", "etc", "proc", "sys", "tmp", "run", "root", "mnt",
                  "var", "usr", "scenarios", "scenarios/cases"]:
            c.dir(d, 0o1777 if d == "tmp" else 0o755)
        for name, target in [("sbin", "bin"), ("usr/bin", "../bin"),
                             ("usr/sbin", "../bin"), ("etc/mtab", "/proc/mounts"),
                             ("var/tmp", "/tmp")]:
            c.symlink(name, target)
        # Static nodes for kernels without CONFIG_DEVTMPFS.
        for name, major, minor, perm in [("console", 5, 1, 0o600), ("tty", 5, 0, 0o666),
                                         ("ttyS0", 4, 64, 0o660), ("ttyS1", 4, 65, 0o660),
                                         ("ttyAMA0", 204, 64, 0o660),
                                         ("null", 1, 3, 0o666),
                                         ("zero", 1, 5, 0o666), ("random", 1, 8, 0o666),
                                         ("urandom", 1, 9, 0o666), ("kmsg", 1, 11, 0o644)]:
            c.chardev("dev/" + name, major, minor, perm)
        c.file("bin/busybox", BUSYBOX.read_bytes(), 0o755)
        prog_names = {name for name, _ in progs}
        for applet in busybox_applets():
            if applet != "busybox" and applet not in prog_names:
                c.symlink("bin/" + applet, "busybox")
        for name, exe in progs:
            c.file("bin/" + name, exe.read_bytes(), 0o755)
        if selftests:
            c.dir("selftests")
            c.dir("selftests/mm")
            c.file("selftests/mm/" + SELFTEST_BINARY, selftests.binary().read_bytes(), 0o755)
            for name in sorted(SELFTESTS_MM):
                c.symlink("selftests/mm/" + name, SELFTEST_BINARY)
        c.file("init", (HERE / "init.sh").read_bytes(), 0o755)
        c.file("scenarios/lib.sh", (HERE / "lib.sh").read_bytes())
        c.file("scenarios/splat.re", "\n".join(SPLAT_PATTERNS).encode() + b"\n")
        c.file("scenarios/splat-ignore.re",
               "\n".join(SPLAT_IGNORE_PATTERNS).encode() + b"\n")
        for p in sorted(CASES.glob("*.sh")):
            c.file("scenarios/cases/" + p.name, p.read_bytes(), 0o755)
        c.file("etc/hostname", b"scenario\n")
        data = c.finish()

    tmp_out = out.with_name(out.name + ".tmp.%d" % os.getpid())
    tmp_out.write_bytes(data)
    os.replace(tmp_out, out)
    stamp.write_text(digest + "\n")
    return out, True


# ------------------------------------------------------------------- QEMU

def smp_topology(smp, numa):
    """One socket per node, so no LLC spans two nodes (otherwise the kernel
    WARNs "llc-sibling CPU is not on the same node" in set_cpu_sibling_map)."""
    if numa <= 1:
        return str(smp)
    if smp % numa == 0:
        return "%d,sockets=%d,cores=%d,threads=1" % (smp, numa, smp // numa)
    return "%d,sockets=%d,cores=1,threads=1" % (smp, smp)


# Where QEMU's virt machine (hw/arm/boot.c; checked against QEMU 7.2)
# loads the device tree blob on a direct kernel boot: the initrd goes at
# RAM's base plus half of RAM, at most 128 MiB, or after the kernel image
# if that ends higher, and the blob after the initrd at the next 2 MiB
# boundary (aarch64).  A dtsi may name that address: run.py replaces
# @BLOB@ with it in hex (a unit address) and @BLOB_HI@ and @BLOB_LO@ with
# its two cells, so that a node can be placed on the blob.
ARM64_RAM_BASE = 0x40000000
ARM64_BLOB_ALIGN = 2 << 20
# dt_board_check.py's tree has no initrd: an address for its nodes' names.
ARM64_BLOB_STAND_IN = 0x48e00000


def arm64_image_end(kernel):
    """Where QEMU's copy of the arm64 Image at path kernel ends: it loads
    the file at RAM's base plus the header's text_offset (taken only with
    a non-zero image_size, as arm64's booting.rst says), moved up by 2 MiB
    if that would overlap its boot stub at the bottom of RAM."""
    with open(kernel, "rb") as f:
        head = f.read(24)
    text_offset, image_size = struct.unpack_from("<QQ", head, 8)
    offset = text_offset if image_size else 0
    if offset < 4096:
        offset += 2 << 20
    return ARM64_RAM_BASE + offset + Path(kernel).stat().st_size


def arm64_blob_address(mem_mib, initrd_size, image_end=0):
    """The physical address QEMU loads the blob at, for a guest of mem_mib
    with an initrd of initrd_size bytes and a kernel image ending at
    image_end."""
    initrd = max(ARM64_RAM_BASE + min((mem_mib << 20) // 2, 128 << 20), image_end)
    initrd = -(-initrd // 4096) * 4096
    return -(-(initrd + initrd_size) // ARM64_BLOB_ALIGN) * ARM64_BLOB_ALIGN


def arm64_dtb(cfg, sc, tmp, blob=ARM64_BLOB_STAND_IN):
    """The virt machine's own device tree (dumped by QEMU with the boot's
    machine, CPUs and memory), with the scenario's "# dtsi:" file of
    tools/arm64/ added (dtc merges a second "/ { ... };" into the first),
    its @BLOB@ names filled in with blob (arm64_blob_address())."""
    dtb = Path(tmp) / "virt.dtb"
    subprocess.run([QEMU, "-nodefaults", "-no-user-config", "-nographic"] + ARM64_MACHINE[:1]
                   + [ARM64_MACHINE[1] + ",dumpdtb=%s" % dtb] + ARM64_MACHINE[2:]
                   + ["-smp", str(cfg.smp), "-m", "%dM" % cfg.mem_mib],
                   check=True, capture_output=True)
    # Recompiled even without a "# dtsi:": the dump is padded to 1 MiB,
    # and the kernel booted with it as it is prints nothing at all.
    dtsi = sc.meta.get("dtsi")
    dts = subprocess.run(["dtc", "-q", "-I", "dtb", "-O", "dts", str(dtb)], check=True,
                         capture_output=True, text=True).stdout
    if dtsi:
        dts += "\n" + ((ARM64_DIR / dtsi).read_text()
                       .replace("@BLOB@", "%x" % blob)
                       .replace("@BLOB_HI@", "0x%x" % (blob >> 32))
                       .replace("@BLOB_LO@", "0x%x" % (blob & 0xffffffff)))
    src = Path(tmp) / "board.dts"
    src.write_text(dts)
    out = Path(tmp) / "board.dtb"
    r = subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(out), str(src)],
                       capture_output=True, text=True)
    if r.returncode:
        raise SetupError("dtc %s: %s" % (dtsi or "virt.dts", r.stderr.strip()))
    return out


def qemu_command_arm64(kernel, initrd, cfg, sc, disk_paths, proto_path, dtb):
    # The PL011 (stdio) is the kernel console; the scenario's protocol goes
    # to a virtio console (hvc0, init.sh), written to proto_path.
    cmd = [QEMU, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot"]
    cmd += ARM64_MACHINE + cfg.accel() + ["-smp", str(cfg.smp), "-m", "%dM" % cfg.mem_mib,
                            "-serial", "stdio", "-monitor", "none",
                            "-device", "virtio-serial-device",
                            "-chardev", "file,id=scn,path=%s" % proto_path,
                            "-device", "virtconsole,chardev=scn", "-dtb", str(dtb)]
    # The virt machine gives the first virtio-mmio device the transport
    # that Linux probes last: disks are added last first, so that the
    # first disk is /dev/vda as on x86.
    for i, path in reversed(list(enumerate(disk_paths))):
        cmd += ["-drive", "if=none,file=%s,format=raw,id=d%d" % (path, i),
                "-device", "virtio-blk-device,drive=d%d" % i]
    append = BASE_APPEND + [
        "scenario.run=%s" % sc.name,
        "scenario.smp=%d" % cfg.smp,
        "scenario.numa=1",
        "scenario.mem=%d" % cfg.mem_mib,
        "scenario.disks=%d" % len(disk_paths),
        "scenario.tail=%d" % TAIL,
    ] + cfg.append
    cmd += ["-kernel", str(kernel), "-initrd", str(initrd), "-append", " ".join(append)]
    return cmd + cfg.qemu_extra


def qemu_command(kernel, initrd, cfg, sc, disk_paths, proto_path):
    # ttyS0 (stdio) carries the kernel console only; /init sends the
    # scenario's own output to ttyS1 (a file), so that our lines never mix
    # with kernel text and every console line can be judged.
    # q35, not pc: on pc, the kernel finds a PCI device's interrupt line
    # by running the _PRT method of QEMU's ACPI tables, a loop over every
    # slot that builds the routing table anew each time, and under TCG
    # with KASAN (a stack trace saved for every object ACPICA allocates)
    # that took 6.5 s per virtio disk, before the scenario could start
    # (boot_smoke with three extra disks: start at 6.1 s on q35, about
    # 24 s on pc).  q35's routing tables are static.  But q35 keeps at most
    # 2.75 GiB of RAM below 4 GiB (2 GiB when there is more), where pc
    # keeps up to 3.5 GiB: a larger guest stays on pc, so that its memory
    # stays in one zone (DMA32), as the THP scenarios were written for.
    # A scenario may name its machine ("# machine: pc"), see README.md.
    # On pc the kernel boots with acpi=noirq, so that _PRT never runs:
    # virtio-pci takes MSI-X vectors and needs no INTx line, and the
    # probe of one virtio disk went from 8.5 s to 2 ms (gcma_page_state,
    # 3 GiB on pc: its scenario started at 6.3 s instead of 18 s and the
    # boot cost 25 CPU seconds instead of 42; 2026-11-27).  The kernel
    # then prints "can't find IRQ for PCI INT A" once per device.
    machine = sc.meta.get("machine") or ("q35" if cfg.mem_mib <= Q35_MAX_MIB else "pc")
    cmd = [QEMU, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
           "-machine", machine] + cfg.accel() + [
           "-smp", smp_topology(cfg.smp, cfg.numa), "-m", "%dM" % cfg.mem_mib,
           "-serial", "stdio", "-serial", "file:%s" % proto_path,
           "-monitor", "none"]
    if QBOOT.is_file():
        cmd += ["-bios", str(QBOOT)]
    if cfg.numa > 1:
        per_mem = (cfg.mem_mib // cfg.numa) & ~1
        cpu = 0
        for n in range(cfg.numa):
            mem = per_mem if n < cfg.numa - 1 else cfg.mem_mib - per_mem * (cfg.numa - 1)
            ncpu = cfg.smp // cfg.numa + (1 if n < cfg.smp % cfg.numa else 0)
            cpus = "%d" % cpu if ncpu == 1 else "%d-%d" % (cpu, cpu + ncpu - 1)
            cpu += ncpu
            cmd += ["-object", "memory-backend-ram,id=m%d,size=%dM" % (n, mem),
                    "-numa", "node,nodeid=%d,cpus=%s,memdev=m%d" % (n, cpus, n)]
    for i, path in enumerate(disk_paths):
        cmd += ["-drive", "if=none,file=%s,format=raw,id=d%d" % (path, i),
                "-device", "virtio-blk-pci,drive=d%d" % i]
    append = BASE_APPEND + [
        "scenario.run=%s" % sc.name,
        "scenario.smp=%d" % cfg.smp,
        "scenario.numa=%d" % cfg.numa,
        "scenario.mem=%d" % cfg.mem_mib,
        "scenario.disks=%d" % len(disk_paths),
        "scenario.tail=%d" % TAIL,
    ] + (["acpi=noirq"] if machine == "pc" else []) + cfg.append
    cmd += ["-kernel", str(kernel), "-initrd", str(initrd),
            "-append", " ".join(append)]
    cmd += cfg.qemu_extra
    return cmd


def _line(raw):
    return raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", "")


def _reader(stream, q, tag):
    try:
        for raw in iter(stream.readline, b""):
            q.put((tag, _line(raw)))
    finally:
        q.put((tag, None))


def _file_reader(path, q, tag, stop):
    """Follows the file QEMU writes the guest's ttyS1 to, until `stop` is
    set (QEMU has exited) and everything written has been read."""
    pending = b""
    try:
        f = None
        while f is None:
            try:
                f = open(path, "rb")
            except FileNotFoundError:
                if stop.is_set():
                    return
                time.sleep(0.1)
        with f:
            while True:
                chunk = f.readline()
                if chunk:
                    pending += chunk
                    if pending.endswith(b"\n"):
                        q.put((tag, _line(pending)))
                        pending = b""
                    continue
                if stop.is_set():
                    if pending:
                        q.put((tag, _line(pending)))
                    return
                time.sleep(0.1)
    finally:
        q.put((tag, None))


class Outcome:
    def __init__(self, name):
        self.name = name
        self.result = None       # (PASS|FAIL, reason)
        self.checks = []         # (check, PASS|FAIL, rest)
        self.failed_detail = []  # lines to show for failed checks
        self.splats = []
        self.splat_context = []  # (splat line, the line before it)
        self.started = False
        self.done = False
        self.ended = False
        self.panic = False
        self.timed_out = False
        self.tail_timed_out = False
        self.splat_stall = False
        self.boot_stalled = False
        self.qemu_rc = None
        self.stderr = []
        self.elapsed = 0.0
        # CPU seconds QEMU used (_reap), None if unknown.
        self.cpu_s = None
        self.reasons = []
        # (seconds since QEMU started, label): the scenario's start, each
        # check as it arrives, its end.  Where a scenario's time goes.
        self.timeline = []

    def slowest_steps(self, n=3):
        """The n longest stretches between consecutive timeline marks,
        each named by the mark that ends it, longest first."""
        steps = [(b[0] - a[0], b[1]) for a, b in zip(self.timeline, self.timeline[1:])]
        return sorted(steps, key=lambda s: -s[0])[:n]

    @property
    def passed(self):
        return not self.reasons


def _exited(proc):
    """Whether QEMU has exited, without reaping it (so that _reap can)."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _reap(proc, timeout):
    """Waits up to timeout seconds for QEMU to exit and reaps it, as
    Popen.wait would.  Returns its exit status and the CPU seconds it used
    (user and system, all its threads, from wait4), or None for either
    when it did not exit in time or was reaped elsewhere.  The CPU time is
    what a scenario costs the machine; its wall time depends on what ran
    beside it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return proc.poll(), None
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if time.monotonic() >= deadline:
            return None, None
        time.sleep(0.02)


def run_scenario(sc, cfg, kernel, initrd, log_path, verbose, dry_run, boot_silence=None,
                 on_done=None):
    out = Outcome(sc.name)
    with tempfile.TemporaryDirectory(prefix="scenario-disks.") as tmp:
        disk_paths = []
        for i, (mib, fs) in enumerate(cfg.disks):
            p = Path(tmp) / ("disk%d.raw" % i)
            with open(p, "wb") as f:
                f.truncate(mib * 1024 * 1024)
            if fs:
                # Formatted on the host: the guest's busybox has no mkfs.ext4.
                subprocess.run([shutil.which("mke2fs") or "/sbin/mke2fs", "-q", "-F", "-t", fs, str(p)], check=True,
                               stdout=subprocess.DEVNULL)
            disk_paths.append(p)
        proto_path = Path(tmp) / "scenario.out"
        if ARCH == "arm64":
            # The virtio console's file must exist for the reader.
            proto_path.touch()
            blob = arm64_blob_address(cfg.mem_mib, Path(initrd).stat().st_size,
                                      arm64_image_end(kernel))
            cmd = qemu_command_arm64(kernel, initrd, cfg, sc, disk_paths, proto_path,
                                     arm64_dtb(cfg, sc, tmp, blob))
        else:
            cmd = qemu_command(kernel, initrd, cfg, sc, disk_paths, proto_path)
        if dry_run:
            print(" ".join(shlex_quote(a) for a in cmd))
            return None
        _boot(cmd, cfg, out, log_path, verbose, proto_path, boot_silence, on_done)
    _judge(out, cfg)
    return out


def shlex_quote(s):
    import shlex
    return shlex.quote(s)


def _boot(cmd, cfg, out, log_path, verbose, proto_path, boot_silence=None, on_done=None):
    """Runs QEMU and reads its two channels until it exits: the kernel
    console ("out", every line judged for splats) and the scenario's own
    protocol lines ("scn", from ttyS1).  The log interleaves both.  With
    boot_silence, stops a boot whose console is silent that long before
    the scenario starts (out.boot_stalled).  on_done() is called when the
    scenario is done and the guest's tail begins."""
    logf = open(log_path, "w", encoding="utf-8") if log_path else None
    if logf:
        logf.write("# " + " ".join(shlex_quote(a) for a in cmd) + "\n")
        logf.flush()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as e:
        raise SetupError("cannot start %s: %s" % (QEMU, e))
    q = queue.Queue()
    stop = threading.Event()
    threads = [threading.Thread(target=_reader, args=(proc.stdout, q, "out"), daemon=True),
               threading.Thread(target=_reader, args=(proc.stderr, q, "err"), daemon=True),
               threading.Thread(target=_file_reader, args=(proto_path, q, "scn", stop),
                                daemon=True)]
    for t in threads:
        t.start()
    open_streams = {"out", "err", "scn"}
    deadline = start + cfg.timeout
    done_at = None
    last_output = start
    in_check_fail = False
    prev_line = ""
    try:
        while open_streams:
            now = time.monotonic()
            if done_at is None and now >= deadline:
                out.timed_out = True
                break
            if done_at is not None and now - done_at > TAIL + TAIL_GRACE:
                out.tail_timed_out = True
                break
            if out.splats and not out.done and now - last_output > SPLAT_QUIET:
                out.splat_stall = True
                break
            if (boot_silence is not None and not out.started
                    and now - last_output > boot_silence):
                out.boot_stalled = True
                break
            try:
                tag, line = q.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                open_streams.discard(tag)
                if not open_streams & {"out", "err"}:
                    # QEMU has exited: let the ttyS1 reader finish the file.
                    stop.set()
                continue
            if tag == "err":
                out.stderr.append(line)
                if logf:
                    logf.write("[qemu stderr] " + line + "\n")
                if verbose:
                    print("  [qemu] " + line, flush=True)
                continue
            last_output = time.monotonic()
            if logf:
                logf.write(line + "\n")
                logf.flush()
            if verbose:
                print(("  | " if tag == "out" else "  > ") + line, flush=True)
            if tag == "out":
                # The kernel console: every line is judged, nothing of ours
                # is on it (only the kernel's echo of its command line is
                # exempt), so no report can be hidden by our own output.
                if PANIC_RE.search(line):
                    out.panic = True
                if SPLAT_RE.search(line) and not SPLAT_IGNORE_RE.search(line):
                    if not any(a.search(line) for a in cfg.allow):
                        out.splats.append(line)
                        if prev_line and not SPLAT_RE.search(prev_line):
                            out.splat_context.append((line, prev_line))
                if "cut here" not in line:
                    prev_line = line
                continue
            # The scenario's protocol (ttyS1).
            if START_MARK in line:
                out.started = True
                out.timeline.append((time.monotonic() - start, "(start)"))
            if DONE_MARK in line and not out.done:
                out.done = True
                done_at = time.monotonic()
                out.timeline.append((done_at - start, "(done)"))
                if on_done:
                    on_done()
            if END_MARK in line:
                out.ended = True
            m = CHECK_RE.search(line)
            if m and m.group(1) == out.name:
                out.checks.append((m.group(2), m.group(3), m.group(4).strip()))
                out.timeline.append((time.monotonic() - start, m.group(2)))
                in_check_fail = m.group(3) == "FAIL"
                if in_check_fail:
                    out.failed_detail.append(line[m.start():])
                continue
            if in_check_fail and line.startswith("| "):
                out.failed_detail.append(line)
                continue
            in_check_fail = False
            m = RESULT_RE.search(line)
            if m and m.group(1) == out.name and out.result is None:
                out.result = (m.group(2), m.group(3) or "")
    finally:
        if not _exited(proc):
            proc.kill()
        out.qemu_rc, out.cpu_s = _reap(proc, 10)
        stop.set()
        for t in threads:
            t.join(timeout=2)
        out.elapsed = time.monotonic() - start
        if logf:
            killed = (" (killed: timeout)" if out.timed_out else
                      " (killed: silent boot)" if out.boot_stalled else "")
            for at, label in out.timeline:
                logf.write("# time %7.1fs %s\n" % (at, label))
            logf.write("# qemu exit status %s after %.1fs%s, %s CPU seconds\n" % (
                out.qemu_rc, out.elapsed, killed,
                "?" if out.cpu_s is None else "%.1f" % out.cpu_s))
            logf.close()


def _judge(out, cfg):
    r = out.reasons
    if out.result is None:
        if out.timed_out:
            why = "timed out after %ds" % cfg.timeout
        elif out.splat_stall:
            why = "console silent for %ds after a kernel splat" % SPLAT_QUIET
        elif out.boot_stalled:
            why = "console silent for %ds" % BOOT_SILENCE
        elif out.panic:
            why = "kernel panic"
        elif out.done:
            why = "init finished without a result line"
        else:
            why = "QEMU exited (status %s)" % out.qemu_rc
        stage = "before the scenario started" if not out.started else "during the scenario"
        r.append("no result line: %s %s" % (why, stage))
        if out.stderr and not out.started:
            r.append("qemu: " + " / ".join(out.stderr[-3:]))
    elif out.result[0] == "FAIL":
        r.append(out.result[1] or "scenario reported FAIL")
    failed = [c for c, st, _ in out.checks if st == "FAIL"]
    if failed and not (out.result and out.result[0] == "FAIL"):
        r.append("failed checks: " + ", ".join(failed))
    if out.result is not None and not out.ended and not out.panic:
        # The guest must get through the tail after the scenario: a hang
        # there is as much a failure as one during the scenario.
        why = ("still running %ds after the scenario" % (TAIL + TAIL_GRACE)
               if out.tail_timed_out else "QEMU exited (status %s)" % out.qemu_rc)
        r.append("no %s line after the scenario: %s" % (END_MARK, why))
    if out.splats:
        r.append("%d kernel splat line(s) on the console" % len(out.splats))


# -------------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="run.py",
        description="Boot a kernel in QEMU (TCG) and run end-to-end scenarios.",
        epilog="Exit status: 0 all passed, 1 a scenario failed, 2 usage error, "
               "3 setup error.")
    ap.add_argument("--arch", choices=["x86_64", "arm64"], default="x86_64",
                    help="guest architecture: arm64 boots QEMU's virt machine with a "
                         "device tree and runs the scenarios whose '# arch:' names it")
    ap.add_argument("--kernel", metavar="PATH",
                    help="bzImage to boot (default: build/kunit, then build/kunit-base)")
    ap.add_argument("--scenario", "-s", metavar="NAME", action="append",
                    help="scenario to run (repeatable, or 'all'; default all)")
    ap.add_argument("--smp", metavar="N", help="vCPUs (default %d)" % DEFAULTS["smp"])
    ap.add_argument("--numa", metavar="N",
                    help="emulated NUMA nodes (default %d)" % DEFAULTS["numa"])
    ap.add_argument("--mem", metavar="SIZE", help="guest RAM, e.g. 2G (default %s)"
                    % DEFAULTS["mem"])
    ap.add_argument("--append", metavar="ARGS", action="append",
                    help="extra kernel command line (after the scenario's)")
    ap.add_argument("--disk", metavar="SIZE[ FS]", action="append",
                    help="add a virtio-blk scratch disk, formatted on the host if FS (ext2, ext4) is given (repeatable; replaces "
                         "the scenario's '# disk:' list)")
    ap.add_argument("--timeout", metavar="SECONDS",
                    help="per-boot timeout (default %d)" % DEFAULTS["timeout"])
    ap.add_argument("--log-dir", metavar="DIR",
                    help="write <scenario>.log console logs here "
                         "(default build/scenarios/logs)")
    ap.add_argument("--tcg", choices=TCG_MODES,
                    help="TCG's threading for every guest, whatever the scenario's '# tcg:' "
                         "header says (default: the header's, else multi)")
    ap.add_argument("--qemu-arg", metavar="ARG", action="append",
                    help="extra QEMU argument (repeatable)")
    ap.add_argument("--allow-splat", metavar="REGEX", action="append",
                    help="do not count console lines matching REGEX as splats")
    ap.add_argument("--list", action="store_true", help="list scenarios and exit")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="stream the console while running")
    ap.add_argument("--ksrc", metavar="DIR",
                    help="kernel tree to build /selftests/mm from (default build/linux)")
    ap.add_argument("--rebuild", action="store_true",
                    help="force an initramfs rebuild (and of the selftests)")
    ap.add_argument("--initramfs-only", action="store_true",
                    help="build the initramfs images the selected scenarios boot (or "
                         "find them cached) and exit; needs no kernel")
    ap.add_argument("--dry-run", action="store_true",
                    help="build the initramfs, print the QEMU commands, do not boot")
    ap.add_argument("--self-test", action="store_true",
                    help="check --jobs and the scheduler without booting, and exit")
    ap.add_argument("--jobs", "-j", metavar="N", default="1",
                    help="boot up to N scenarios at once, or 'auto' (one per host CPU "
                         "that host memory holds), plus guests in their tail as memory "
                         "allows; benchmarks always run alone (default 1)")
    return ap.parse_args(argv)


def select(args, available):
    names = args.scenario or ["all"]
    if "all" in names:
        # Benchmarks ("# group: bench") are long and meant for the
        # performance kernel: they run only when named.
        return [n for n, path in available.items()
                if Scenario(path).meta.get("group") != "bench"
                and ARCH in Scenario(path).arches]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UsageError("unknown scenario(s): %s (available: %s)"
                         % (", ".join(unknown), ", ".join(available) or "none"))
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def mem_available_mib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def pick_jobs(args, scenarios, configs):
    """How many scenarios boot at once.  Benchmarks measure the host and
    run alone; so does --verbose, whose streamed consoles would mix."""
    text = args.jobs.strip().lower()
    if text == "auto":
        jobs = len(os.sched_getaffinity(0))
        avail = mem_available_mib()
        if avail is not None:
            biggest = max(cfg.mem_mib for cfg in configs) + QEMU_OVERHEAD_MIB
            jobs = min(jobs, avail // biggest)
        jobs = max(1, jobs)
    else:
        jobs = parse_int(text, "--jobs", 1, 256)
        if jobs > 1 and args.verbose:
            raise UsageError("--verbose streams one console: it needs --jobs 1")
    if any(sc.meta.get("group") == "bench" for sc in scenarios):
        return 1
    if args.verbose or args.dry_run:
        return 1
    return min(jobs, len(scenarios))


def pick_tails(jobs, configs):
    """How many guests in their tail may stay up beside `jobs` running
    ones: one per job, as far as host memory holds them.  A tail is TAIL
    idle seconds (and a kmemleak scan) that would otherwise keep one of
    the `jobs` places while the host CPU it stands for has nothing to do."""
    if jobs < 2:
        return 0
    avail = mem_available_mib()
    if avail is None:
        return jobs
    biggest = max(cfg.mem_mib for cfg in configs) + QEMU_OVERHEAD_MIB
    return max(0, min(jobs, avail // biggest - jobs))


def report(sc, cfg, out, log_path, header):
    """Prints a scenario's checks and verdict as one block; True if it
    passed."""
    lines = []
    if header:
        lines.append("=== %s (%s)" % (sc.name, cfg.describe()))
    for check, status, rest in out.checks:
        lines.append("  CHECK %s %s%s" % (check, status, (" " + rest) if rest else ""))
    if out.timeline:
        lines.append("  time: start at %.1fs; slowest: %s" % (
            out.timeline[0][0] if out.started else out.elapsed,
            ", ".join("%s %.1fs" % (label, secs) for secs, label in out.slowest_steps())))
    took = "%.1fs" % out.elapsed
    if out.cpu_s is not None:
        took += ", %.0f CPU-s" % out.cpu_s
    if out.passed:
        lines.append("PASS %s (%s)" % (sc.name, took))
    else:
        lines.append("FAIL %s (%s): %s" % (sc.name, took, "; ".join(out.reasons)))
        for line in out.failed_detail[:40]:
            lines.append("  " + line)
        context = dict(out.splat_context)
        for line in out.splats[:20]:
            if line in context:
                lines.append("  splat: (after: %s)" % context[line])
            lines.append("  splat: " + line)
        if len(out.splats) > 20:
            lines.append("  ... %d more splat lines" % (len(out.splats) - 20))
        lines.append("  log: %s" % log_path)
    print("\n".join(lines), flush=True)
    return out.passed


def run_parallel(jobs, runs, kernel, initrds, log_dir, run=None, tails=0):
    """Boots the scenarios `jobs` at a time, the longest ("# duration:")
    first so that no long one starts last; each one's report is printed
    whole when it ends.  A guest in its tail (the idle TAIL seconds after
    its scenario, see init.sh) gives its place to the next scenario, up
    to `tails` such guests besides the `jobs` running ones.  A boot
    silent for BOOT_SILENCE s before its
    scenario started, with no kernel report, boots again alone at the
    end, and only that boot counts; its first log is kept as
    NAME.stalled.log.  `run` stands in for run_scenario in the
    self-test.  Returns (passed, failed)."""
    run = run or run_scenario
    running = threading.Semaphore(jobs)     # guests before their tail
    order = sorted(runs, key=lambda r: -r[0].meta.get("duration", 0))
    todo = queue.Queue()
    for r in order:
        todo.put(r)
    lock = threading.Lock()
    counts = {"passed": 0, "failed": 0}
    errors = []
    again = []

    def boot(sc, cfg, boot_silence, on_done=None):
        log_path = log_dir / ("%s.log" % sc.name)
        initrd = initrds[sc.meta.get("selftests") == "mm"]
        return run(sc, cfg, kernel, initrd, log_path, False, False, boot_silence,
                   on_done), log_path

    def worker():
        while not errors:
            running.acquire()
            try:
                sc, cfg = todo.get_nowait()
            except queue.Empty:
                running.release()
                return
            released = []

            def release():
                # Once per boot: at the tail's start, or when the boot ends.
                with lock:
                    if released:
                        return
                    released.append(True)
                running.release()

            with lock:
                print("--- %s started" % sc.name, flush=True)
            try:
                out, log_path = boot(sc, cfg, BOOT_SILENCE, release if tails else None)
            except Exception as e:   # a setup error: the main thread raises it
                errors.append(e)
                release()
                return
            finally:
                release()
            with lock:
                if out.boot_stalled and not out.splats:
                    stalled = log_dir / ("%s.stalled.log" % sc.name)
                    if log_path.exists():
                        log_path.replace(stalled)
                    print("--- %s: console silent for %d s before the scenario started, "
                          "with other guests booting; boots again alone at the end (log: %s)"
                          % (sc.name, BOOT_SILENCE, stalled), flush=True)
                    again.append((sc, cfg))
                    continue
                ok = report(sc, cfg, out, log_path, True)
                counts["passed" if ok else "failed"] += 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs + tails)]
    for t in threads:
        t.start()
    for t in threads:
        # A timed join keeps the main thread responsive to Ctrl-C.
        while t.is_alive():
            t.join(timeout=1.0)
    if errors:
        raise errors[0]
    for sc, cfg in again:
        print("--- %s started again, alone" % sc.name, flush=True)
        out, log_path = boot(sc, cfg, None)
        ok = report(sc, cfg, out, log_path, True)
        counts["passed" if ok else "failed"] += 1
    return counts["passed"], counts["failed"]


def self_test():
    """Checks --jobs and the parallel scheduler without booting: the
    scenarios are header-only files in a temporary directory and a stub
    stands in for QEMU.  Returns the number of failed checks."""
    global mem_available_mib
    checks = []
    real_mem = mem_available_mib
    real_affinity = os.sched_getaffinity
    with tempfile.TemporaryDirectory(prefix="run-py-self-test.") as tmp:
        def case(name, header):
            p = Path(tmp) / ("%s.sh" % name)
            p.write_text(header + "check ok true\n")
            return Scenario(p)

        short = case("short", "# duration: 20\n")
        unknown = case("unknown", "")
        long_ = case("long", "# duration: 190\n# mem: 3G\n")
        mid = case("mid", "# duration: 100\n# mem: 2G\n")
        bench = case("bench", "# group: bench\n# duration: 600\n")
        scs = [short, unknown, long_, mid]

        def jobs_for(argv, scenarios, cpus, avail):
            global mem_available_mib
            args = parse_args(argv)
            os.sched_getaffinity = lambda pid: set(range(cpus))
            mem_available_mib = lambda: avail
            try:
                cfgs = [Config(sc, args) for sc in scenarios]
                return pick_jobs(args, scenarios, cfgs)
            except UsageError:
                return "usage"
            finally:
                os.sched_getaffinity = real_affinity
                mem_available_mib = real_mem

        # auto: one per CPU while memory lasts (3G guest + 1G each).
        checks.append(jobs_for(["-j", "auto"], scs, 2, 23 * 1024) == 2)
        checks.append(jobs_for(["-j", "auto"], scs, 8, 10 * 1024) == 2)
        checks.append(jobs_for(["-j", "auto"], scs, 8, 3 * 1024) == 1)
        checks.append(jobs_for(["-j", "auto"], scs, 8, None) == 4)
        # Never more jobs than scenarios; a benchmark runs alone.
        checks.append(jobs_for(["-j", "3"], [short, mid], 8, 64 * 1024) == 2)
        checks.append(jobs_for(["-j", "4"], scs + [bench], 8, 64 * 1024) == 1)
        # Bad values and --verbose with several jobs are usage errors.
        checks.append(jobs_for(["-j", "0"], scs, 2, None) == "usage")
        checks.append(jobs_for(["-j", "two"], scs, 2, None) == "usage")
        checks.append(jobs_for(["-j", "2", "-v"], scs, 2, None) == "usage")
        checks.append(jobs_for(["-j", "auto", "-v"], scs, 2, None) == 1)
        # Guests in their tail: one per job while memory lasts, none alone.
        def tails_for(jobs, avail):
            global mem_available_mib
            mem_available_mib = lambda: avail
            try:
                return pick_tails(jobs, [Config(sc, parse_args([])) for sc in scs])
            finally:
                mem_available_mib = real_mem
        checks.append(tails_for(2, 23 * 1024) == 2)
        checks.append(tails_for(2, 14 * 1024) == 1)
        checks.append(tails_for(2, 8 * 1024) == 0)
        checks.append(tails_for(1, 64 * 1024) == 0)
        # "# tcg:": the header's mode, --tcg over it, anything else refused.
        single = case("single", "# tcg: single\n")
        checks.append(Config(single, parse_args([])).accel() == ["-accel", "tcg,thread=single"])
        checks.append(Config(short, parse_args([])).accel() == [])
        checks.append(Config(single, parse_args(["--tcg", "multi"])).accel() == [])
        checks.append(Config(short, parse_args(["--tcg", "single"])).accel()
                      == ["-accel", "tcg,thread=single"])
        try:
            case("bad_tcg", "# tcg: mttcg\n")
            checks.append(False)
        except UsageError:
            checks.append(True)

        # The scheduler: longest first, every scenario once, verdicts
        # counted, at most `jobs` running at a time.  "unknown" stalls
        # in its boot beside another guest (boot_silence given): it boots
        # again alone at the end, its first log kept.
        started = []
        running = [0, 0, 0]    # now, most at once, running at a retry
        alive = [0, 0]         # guests with those in their tail: now, most
        lock = threading.Lock()

        def fake_run(sc, cfg, kernel, initrd, log_path, verbose, dry_run,
                     boot_silence=None, on_done=None):
            with lock:
                started.append(sc.name)
                running[0] += 1
                running[1] = max(running[1], running[0])
                alive[0] += 1
                alive[1] = max(alive[1], alive[0])
                if sc.name == "unknown" and boot_silence is None:
                    running[2] = running[0]
            log_path.write_text("boot_silence=%s\n" % boot_silence)
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            if on_done:
                on_done()       # the tail: the next one may start
            time.sleep(0.2 if on_done else 0)
            with lock:
                alive[0] -= 1
            out = Outcome(sc.name)
            if sc.name == "unknown" and boot_silence is not None:
                out.boot_stalled = True
            else:
                out.result = ("FAIL", "stub") if sc.name == "mid" else ("PASS", "")
                out.ended = True
            out.elapsed = 0.05
            _judge(out, cfg)
            return out

        args = parse_args([])
        runs = [(sc, Config(sc, args)) for sc in scs]
        log_dir = Path(tmp)
        real_stdout = sys.stdout
        sys.stdout = open(os.devnull, "w")
        try:
            serial = run_parallel(1, runs, None, {False: None}, log_dir, fake_run)
            order = list(started)
            del started[:]
            two = run_parallel(2, runs, None, {False: None}, log_dir, fake_run)
            two_alive = alive[1]
            alive[1] = running[1] = 0
            del started[:]
            tailed = run_parallel(2, runs, None, {False: None}, log_dir, fake_run, tails=2)
        finally:
            sys.stdout.close()
            sys.stdout = real_stdout
        checks.append(order == ["long", "mid", "short", "unknown", "unknown"])
        checks.append(serial == (3, 1) and two == (3, 1) and tailed == (3, 1))
        # Guests in their tail give their place: never more than 2 running,
        # more than 2 alive (at most 2 + tails) only with tails.
        checks.append(two_alive == 2 and running[1] == 2 and 2 < alive[1] <= 4)
        checks.append(sorted(started) == sorted([sc.name for sc in scs] + ["unknown"]))
        checks.append(running[1] == 2)
        checks.append(started[-1] == "unknown" and running[2] == 1)
        def text(name):
            p = log_dir / name
            return p.read_text() if p.exists() else None

        checks.append(text("unknown.stalled.log") == "boot_silence=%d\n" % BOOT_SILENCE)
        checks.append(text("unknown.log") == "boot_silence=None\n")
    failed = [i for i, ok in enumerate(checks) if not ok]
    for i in failed:
        print("run.py: self-test check %d failed" % i, file=sys.stderr)
    print("test result: %s. %d passed; %d failed"
          % ("FAILED" if failed else "ok", len(checks) - len(failed), len(failed)))
    return len(failed)


# Where each architecture's kernel image carries its magic, and what the
# error says when it does not: the x86 boot protocol header has "HdrS" at
# offset 0x202; an arm64 Image has "ARM\\x64" at offset 0x38.
KERNEL_MAGIC = {
    "x86_64": (0x202, b"HdrS", "an x86 bzImage (use arch/x86/boot/bzImage, not vmlinux)"),
    "arm64": (0x38, b"ARM\x64", "an arm64 Image"),
}


def check_bzimage(path):
    """Refuses a file that is not a kernel image of ARCH."""
    offset, magic, what = KERNEL_MAGIC[ARCH]
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            found = f.read(len(magic))
    except OSError as e:
        raise UsageError("kernel %s: %s" % (path, e))
    if found != magic:
        raise UsageError("kernel %s is not %s" % (path, what))


def pick_kernel(args):
    if args.kernel:
        k = Path(args.kernel)
        if not k.is_file():
            raise UsageError("kernel %s: no such file" % k)
        check_bzimage(k)
        return k
    for k in DEFAULT_KERNELS:
        if k.is_file():
            check_bzimage(k)
            return k
    raise UsageError("no --kernel given and none of %s exists"
                     % ", ".join(str(k.relative_to(REPO)) for k in DEFAULT_KERNELS))


def main(argv):
    args = parse_args(argv)
    set_arch(args.arch)
    if args.self_test:
        return 1 if self_test() else 0
    available = discover()
    if args.list:
        # The scenarios of --arch (x86_64 by default), as "all" selects.
        for name, path in available.items():
            sc = Scenario(path)
            if ARCH not in sc.arches:
                continue
            extra = []
            for key in ("smp", "numa", "mem", "timeout", "duration"):
                if key in sc.meta:
                    extra.append("%s=%s" % (key, sc.meta[key]))
            for key in ("append", "disk"):
                if sc.meta[key]:
                    extra.append("%s=%r" % (key, " ".join(sc.meta[key])))
            print("%-20s %s%s" % (name, sc.description,
                                  ("  [" + ", ".join(extra) + "]") if extra else ""))
        return 0

    names = select(args, available)
    if not names:
        raise UsageError("no scenarios in %s" % CASES)
    kernel = None if args.initramfs_only else pick_kernel(args)
    scenarios = [Scenario(available[n]) for n in names]
    configs = []    # validate all before booting
    for sc in scenarios:
        try:
            configs.append(Config(sc, args))
        except UsageError as e:
            raise UsageError("scenario %s: %s" % (sc.name, e))
    for a in args.allow_splat or []:
        try:
            re.compile(a)
        except re.error as e:
            raise UsageError("bad --allow-splat regex %r: %s" % (a, e))
    jobs = pick_jobs(args, scenarios, configs)
    if shutil.which(QEMU) is None:
        raise SetupError("%s not found" % QEMU)

    # One initramfs for all, and one with the kernel's selftests for the
    # scenarios that say "# selftests: mm".
    initrds = {}
    for sc in scenarios:
        variant = sc.meta.get("selftests")
        if variant not in (None, "mm"):
            raise UsageError("%s: header: selftests: %r (only 'mm')" % (sc.path, variant))
        with_selftests = variant == "mm"
        if with_selftests not in initrds:
            initrds[with_selftests], rebuilt = build_initramfs(
                args.rebuild, lambda m: print("[initramfs] " + m), args.ksrc, with_selftests)
            print("[initramfs] %s %s" % ("built" if rebuilt else "cached",
                                         initrds[with_selftests]))
    if args.initramfs_only:
        return 0
    print("[kernel] %s" % kernel)

    log_dir = Path(args.log_dir) if args.log_dir else CACHE / "logs"
    if not args.dry_run:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError("--log-dir %s: %s" % (log_dir, e))

    if jobs > 1:
        tails = pick_tails(jobs, configs)
        print("[jobs] %d scenarios, %d at a time (and up to %d in their tail)"
              % (len(scenarios), jobs, tails), flush=True)
        passed, failed = run_parallel(jobs, list(zip(scenarios, configs)), kernel,
                                      initrds, log_dir, tails=tails)
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0

    passed = failed = 0
    for sc, cfg in zip(scenarios, configs):
        print("=== %s (%s)" % (sc.name, cfg.describe()), flush=True)
        log_path = None if args.dry_run else log_dir / ("%s.log" % sc.name)
        initrd = initrds[sc.meta.get("selftests") == "mm"]
        out = run_scenario(sc, cfg, kernel, initrd, log_path, args.verbose, args.dry_run)
        if out is None:
            continue
        if report(sc, cfg, out, log_path, False):
            passed += 1
        else:
            failed += 1
    if args.dry_run:
        return 0
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print("run.py: error: %s" % e, file=sys.stderr)
        sys.exit(2)
    except SetupError as e:
        print("run.py: setup error: %s" % e, file=sys.stderr)
        sys.exit(3)
    except KeyboardInterrupt:
        print("run.py: interrupted", file=sys.stderr)
        sys.exit(130)

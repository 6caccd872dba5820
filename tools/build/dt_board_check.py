#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Validates the arm64 tier's device tree against the GCMA binding.

The arm64 tier boots QEMU's virt machine with its own device tree plus
tools/arm64/gcma.dtsi: three GCMA areas the kernel must accept, a firmware
carve-out, and nine GCMA nodes it must refuse, malformed or on a range
something else holds (scenario gcma_of checks the kernel's side).
This builds the same tree (run.py's arm64_dtb()), runs dt-schema's
dt-validate on it with the processed schema of
Documentation/devicetree/bindings/reserved-memory/gcma-shared-dma-pool.yaml
(made by the kernel's 'make dt_binding_check'), and checks that the
binding says what the kernel does, node by node (EXPECTED below):

- the areas the kernel accepts raise no error of the binding;
- the nodes the binding can tell apart as malformed (no size, THP and
  default together, no-map) raise at least one;
- the nodes malformed only in ways a schema cannot see (alignment, overlap
  with another area) raise none: only the kernel refuses those.

dt-schema's own reserved-memory/shared-dma-pool.yaml does not know the
"guarantee" and "linux,gcma-thp" properties yet, and reports them in every
GCMA node ("Unevaluated properties are not allowed"); that report, and
only that one, is expected of it (Documentation/mm/gcma.rst says so).
Errors in QEMU's own nodes are not ours and are not looked at.

Usage: dt_board_check.py --schema PROCESSED_SCHEMA_JSON [--dt-validate PATH]
Exit status: 0 as expected, 1 a node not as expected, 2 setup error.
"""

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DTSI = "gcma.dtsi"
OUR_SCHEMA = "http://devicetree.org/schemas/reserved-memory/gcma-shared-dma-pool.yaml#"
POOL_SCHEMA = "http://devicetree.org/schemas/reserved-memory/shared-dma-pool.yaml#"

# Node name: (whether the binding must report it, why).
EXPECTED = {
    "gcma-dev": (False, "the default DMA area, placed by the kernel"),
    "gcma-cam@70000000": (False, "a fixed area"),
    "gcma-thp": (False, "a THP area"),
    "bad-nosize": (True, "neither reg nor size"),
    "bad-thp-default": (True, "linux,gcma-thp with linux,cma-default"),
    "bad-nomap": (True, "no-map"),
    "bad-align@72100000": (False, "misaligned: the kernel refuses it, a schema cannot see it"),
    "bad-overlap@71000000": (False, "overlaps gcma-cam: the kernel refuses it, a schema cannot"),
    "fw@72e00000": (False, "a firmware carve-out, not GCMA's"),
    "bad-fw-overlap@72c00000": (False, "overlaps fw: the kernel refuses it, a schema cannot"),
    "bad-kernel@40200000": (False, "overlaps the kernel: the kernel refuses it, a schema cannot"),
    "bad-align-kernel@40500000": (False, "misaligned over the kernel: refused for the overlap, a schema cannot"),
    # run.py names this node after the blob's address; here its stand-in
    # (run.ARM64_BLOB_STAND_IN), there being no initrd.
    "bad-blob@48e00000": (False, "on the device tree blob: the kernel refuses it, a schema cannot"),
}

# dt-schema's shared-dma-pool.yaml on a GCMA node: only our properties.
POOL_KNOWN = re.compile(r"Unevaluated properties are not allowed \(("
                        r"'(guarantee|linux,gcma-thp)'(, )?)+ (was|were) unexpected\)")


def load_run_py():
    spec = importlib.util.spec_from_file_location(
        "scenario_run", REPO / "tools" / "scenarios" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dtsi_nodes(run):
    """The names of the reserved-memory children of the dtsi, with the
    blob's stand-in address where run.py fills one in."""
    text = (REPO / "tools" / "arm64" / DTSI).read_text()
    text = text.replace("@BLOB@", "%x" % run.ARM64_BLOB_STAND_IN)
    body = text[text.index("reserved-memory {"):]
    return re.findall(r"^\t\t(?:[\w-]+: )?([\w,@-]+) \{", body, re.M)


def records(output, dtb):
    """dt-validate's reports as (node, schema $id, text): a report starts
    with "DTB: NODE: " at the start of a line and ends with its "from
    schema $id: ..." line."""
    out, node, lines = [], None, []
    head = re.compile(r"^%s: ([^:\s]+): " % re.escape(str(dtb)))
    for line in output.splitlines():
        m = head.match(line)
        if m and node is None:
            node, lines = m.group(1), [line]
            continue
        if node is None:
            continue
        lines.append(line)
        m = re.match(r"^\s*from schema \$id: (\S+)", line)
        if m:
            out.append((node, m.group(1), "\n".join(lines)))
            node = None
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schema", required=True, help="processed-schema.json")
    ap.add_argument("--dt-validate", default="dt-validate")
    args = ap.parse_args(argv)

    run = load_run_py()
    nodes = dtsi_nodes(run)
    if sorted(nodes) != sorted(EXPECTED):
        print("dt: %s's nodes %s are not those this check expects %s: update EXPECTED"
              % (DTSI, sorted(nodes), sorted(EXPECTED)))
        return 1
    run.set_arch("arm64")
    with tempfile.TemporaryDirectory() as tmp:
        # The tier's smallest machine: the tree does not depend on it
        # beyond the memory and CPU nodes.
        cfg = types.SimpleNamespace(smp=2, mem_mib=1024)
        sc = types.SimpleNamespace(meta={"dtsi": DTSI})
        try:
            dtb = run.arm64_dtb(cfg, sc, tmp)
        except (OSError, subprocess.CalledProcessError, run.SetupError) as e:
            print("dt: cannot build the arm64 tier's device tree: %s" % e)
            return 2
        r = subprocess.run([args.dt_validate, "-s", args.schema, str(dtb)],
                           capture_output=True, text=True)
        reports = records(r.stdout + r.stderr, dtb)

    bad = 0
    for node, (must_fail, why) in EXPECTED.items():
        ours = [t for n, s, t in reports if n == node and s == OUR_SCHEMA]
        pool = [t for n, s, t in reports if n == node and s == POOL_SCHEMA]
        other = [t for n, s, t in reports
                 if n == node and s not in (OUR_SCHEMA, POOL_SCHEMA)]
        unknown_pool = [t for t in pool if not POOL_KNOWN.search(t)]
        if must_fail:
            ok = bool(ours)
            verdict = "reported by the binding" if ok else "NOT reported by the binding"
        else:
            ok = not ours
            verdict = "valid" if ok else "reported by the binding"
        # A node the kernel accepts must not trouble another schema
        # either (shared-dma-pool.yaml beyond our two properties); what
        # other schemas say of a malformed node does not matter.
        if not must_fail and (other or unknown_pool):
            ok = False
            verdict += ", but reported by other schemas"
        print("dt: %-22s %s: %s (%s)" % (node, "ok" if ok else "FAIL", verdict, why))
        if not ok:
            bad += 1
            for t in [] if must_fail else ours + other + unknown_pool:
                print("    " + t.replace("\n", "\n    "))
    if bad:
        print("dt: %d of %d reserved-memory nodes not as expected" % (bad, len(EXPECTED)))
        return 1
    print("dt: the binding accepts and refuses the arm64 tier's %d reserved-memory nodes as expected"
          % len(EXPECTED))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that an x86 build's bzImage carries the kernel just built.

usage: bzimage-fresh.py BUILD_DIR

arch/x86/boot/compressed/piggy.o holds the compressed kernel through an
.incbin of the file piggy.S names.  A compiler cache that served piggy.o
from an earlier build would boot that earlier kernel (see ccache-cc).
Exits 1, naming both files, if piggy.o's payload is not that file.
"""

import re
import sys
from pathlib import Path


def main() -> int:
    comp = Path(sys.argv[1]) / "arch/x86/boot/compressed"
    piggy_s = comp / "piggy.S"
    if not piggy_s.exists():
        return 0  # not an x86 compressed kernel
    m = re.search(r'\.incbin "([^"]+)"', piggy_s.read_text())
    if not m:
        print(f"bzimage-fresh: no .incbin in {piggy_s}", file=sys.stderr)
        return 1
    payload = (Path(sys.argv[1]) / m.group(1)).read_bytes()
    obj = (comp / "piggy.o").read_bytes()
    at = obj.find(payload[:4096])
    if at < 0 or obj[at:at + len(payload)] != payload:
        print(f"bzimage-fresh: {comp / 'piggy.o'} does not carry {m.group(1)}: "
              "the bzImage holds an older kernel (a cached piggy.o?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

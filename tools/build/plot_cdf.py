#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Draw the GCMA benchmark's allocation latency distributions as CDF curves.

Reads the kernel log of the gcma_bench scenario (the 'gcma: bench: cdf'
lines of mm/gcma_rs/bench.rs: every allocation latency of one
allocator at one size, sorted, in microseconds) and writes one SVG with a
panel per size: the cumulative share of allocations against latency on a
log scale, CMA and GCMA, solid for the SCHED_FIFO pass and dashed for the
normal-priority pass.  Standard library only.

  plot_cdf.py <gcma_bench.log> <out.svg> [TITLE]

TITLE replaces the heading (camera_bench's log has the same lines, from
userspace, one series per allocator).
"""

import math
import re
import sys
from collections import defaultdict

LINE = re.compile(r"gcma: bench: cdf pass=(\d+) alloc=(\w+) pages=(\d+) "
                  r"n=(\d+) part=(\d+):((?: \d+\.\d)+)\s*$")
COLOURS = {"cma": "#c0392b", "gcma": "#1f618d"}
DASH = {1: "5,3", 2: None}
PANEL_W, PANEL_H, MARGIN, COLS = 300, 210, 48, 4


def parse(path):
    """{(pass, alloc, pages): sorted samples}, from complete series only."""
    parts = defaultdict(dict)
    sizes = {}
    with open(path, "rb") as f:
        for raw in f:
            m = LINE.search(raw.decode("utf-8", "replace"))
            if not m:
                continue
            key = (int(m[1]), m[2], int(m[3]))
            sizes[key] = int(m[4])
            parts[key][int(m[5])] = [float(v) for v in m[6].split()]
    series = {}
    for key, by_part in parts.items():
        values = [v for i in sorted(by_part) for v in by_part[i]]
        if len(values) == sizes[key]:
            series[key] = sorted(values)
    return series


def ticks(lo, hi):
    """Powers of ten spanning lo..hi."""
    return [10.0 ** e for e in range(math.floor(math.log10(lo)),
                                     math.ceil(math.log10(hi)) + 1)]


def label(v):
    return ("%g" % v) if v < 1e4 else "1e%d" % round(math.log10(v))


def panel(out, x0, y0, pages, curves):
    """One panel at (x0, y0): curves is [(pass, alloc, samples)]."""
    allv = [v for _, _, s in curves for v in s if v > 0]
    if not allv:
        return
    lo, hi = min(allv), max(allv)
    tk = ticks(lo, hi)
    lx0, lx1 = math.log10(tk[0]), math.log10(tk[-1])
    w, h = PANEL_W - MARGIN - 10, PANEL_H - MARGIN - 10
    px, py = x0 + MARGIN, y0 + 10

    def X(v):
        return px + (math.log10(max(v, tk[0])) - lx0) / (lx1 - lx0) * w

    def Y(f):
        return py + h - f * h

    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
               'stroke="#888"/>' % (px, py, w, h))
    for t in tk:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                   % (X(t), py, X(t), py + h))
        out.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">'
                   '%s</text>' % (X(t), py + h + 11, label(t)))
    for f in (0.0, 0.5, 0.99, 1.0):
        out.append('<text x="%d" y="%.1f" font-size="9" text-anchor="end">'
                   '%g</text>' % (px - 3, Y(f) + 3, f))
        if f in (0.5, 0.99):
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                       'stroke="#ddd"/>' % (px, Y(f), px + w, Y(f)))
    out.append('<text x="%d" y="%d" font-size="11" font-weight="bold">'
               '%d pages (%s)</text>' % (px + 4, py + 12, pages,
                                         "%g MiB" % (pages * 4 / 1024)))
    out.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">'
               'allocation latency, us</text>' % (px + w / 2, py + h + 23))
    for ps, alloc, s in curves:
        n = len(s)
        pts = ["%.1f,%.1f" % (X(s[0]), Y(0))]
        for i, v in enumerate(s):
            pts.append("%.1f,%.1f" % (X(v), Y(i / n)))
            pts.append("%.1f,%.1f" % (X(v), Y((i + 1) / n)))
        dash = ' stroke-dasharray="%s"' % DASH[ps] if DASH.get(ps) else ""
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="1.3"%s/>' % (" ".join(pts), COLOURS[alloc], dash))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    series = parse(sys.argv[1])
    if not series:
        sys.exit("plot_cdf: no complete 'gcma: bench: cdf' series in %s" % sys.argv[1])
    sizes = sorted({k[2] for k in series})
    rows = (len(sizes) + COLS - 1) // COLS
    width, height = COLS * PANEL_W, rows * PANEL_H + 40
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="16" font-size="13">%s</text>' % (
               sys.argv[3] if len(sys.argv) == 4 else
               'Allocation latency CDF, CMA (red) vs GCMA (blue) with the GCMA '
               'area lent to DMEM; solid: SCHED_FIFO pass, dashed: normal '
               'priority')]
    for i, pages in enumerate(sizes):
        curves = [(ps, a, series[(ps, a, pages)])
                  for ps in (1, 2) for a in ("cma", "gcma")
                  if (ps, a, pages) in series]
        panel(out, (i % COLS) * PANEL_W, 30 + (i // COLS) * PANEL_H, pages, curves)
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print("plot_cdf: %d series, %d sizes -> %s" % (len(series), len(sizes), sys.argv[2]))


if __name__ == "__main__":
    main()

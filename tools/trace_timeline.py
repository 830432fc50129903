#!/usr/bin/python3
"""Renders a window of an Ember Chrome-trace profile (ENGINE_PROFILE) as a
PNG timeline: one row per worker thread and per GPU stream, as Perfetto or
chrome://tracing show them. For docs and for machines without a browser.

usage: trace_timeline.py TRACE.json OUT.png [--start-us N] [--window-us N]
  --start-us: window start, in us after the first span (default: middle)
  --window-us: window length in us (default 200)
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from chrome_trace import load  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--start-us", type=float)
    parser.add_argument("--window-us", type=float, default=200.0)
    args = parser.parse_args()
    names, spans = load(args.trace)
    first = min(e["ts"] for e in spans)
    last = max(e["ts"] + e["dur"] for e in spans)
    start = first + (args.start_us if args.start_us is not None else (last - first) / 2)
    end = start + args.window_us
    shown = [e for e in spans if e["ts"] < end and e["ts"] + e["dur"] > start]
    rows = sorted({(e["pid"], e["tid"]) for e in shown})
    fig, ax = plt.subplots(figsize=(12, 0.5 + 0.45 * len(rows)))
    colors = {"gpu": "#4c9a2a", "host-wait": "#c0392b"}
    for y, row in enumerate(rows):
        for e in (s for s in shown if (s["pid"], s["tid"]) == row):
            x0 = max(e["ts"], start) - start
            width = min(e["ts"] + e["dur"], end) - start - x0
            ax.broken_barh([(x0, max(width, 0.05))], (y - 0.4, 0.8),
                           facecolors=colors.get(e.get("cat"), "#2e86c1"), edgecolor="white",
                           linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([names.get(r, str(r[1])) for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, args.window_us)
    ax.set_xlabel("us (window of the trace; blue: op on its worker, green: GPU span on its "
                  "stream, red: host wait)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()

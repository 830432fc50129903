#!/usr/bin/python3
"""Reads an Ember Chrome-trace profile (ENGINE_PROFILE, ember-train --trace)
of GPU work and says what held the GPU ops up: how far ahead of the GPU the
host launched them, and which GPU ops took far longer than their kind
usually does, with what ran on the other streams meanwhile. For finding
where overlapped work slows the step (docs/benchmarks.md, "Where a step
goes").

usage: trace_stalls.py TRACE.json [--factor F] [--top N] [--medians]
                        [--beside NAME] [--last Q]
  --factor: an op is stalled when its GPU span is F times its name's median
            (default 4). One median covers every op of a name, so a name
            whose ops differ in size (Matmul) also lists its largest ones:
            what ran beside a stall, and what ended with it, tells them apart.
  --top:    the N longest stalls are listed (default 15)
  --medians: also list every GPU op name with its count and median span
  --beside: also, for the GPU spans of op NAME, the share of their time
            that each other op name ran beside them on another stream
  --last:   --beside reads only the last Q of NAME's spans (default 0.4:
            the steady state of a short run, past its start-up)

Host lead: each op's k-th host span (on an ember-gpu* thread) is paired
with its k-th GPU span, for op names whose counts match on both sides; the
lead is the GPU span's start minus the host span's. A median lead near zero
means the GPU waits for the host; a large one, that the host runs ahead.
"""
import argparse
import statistics
from collections import defaultdict

from chrome_trace import load


def rows(path):
    """The GPU spans and the GPU workers' host spans, each with its row name, by start."""
    names, spans = load(path)
    spans = sorted((dict(e, row=names.get((e["pid"], e["tid"]), "?")) for e in spans),
                   key=lambda e: e["ts"])
    gpu = [e for e in spans if " stream " in e["row"]]
    host = [e for e in spans if e["row"].startswith("ember-gpu")]
    return gpu, host


def host_lead(gpu, host):
    by_name = defaultdict(lambda: ([], []))
    for e in host:
        by_name[e["name"]][0].append(e)
    for e in gpu:
        by_name[e["name"]][1].append(e)
    leads = []
    for launched, ran in by_name.values():
        if len(launched) == len(ran):
            leads += [g["ts"] - h["ts"] for h, g in zip(launched, ran)]
    return sorted(leads)


def by_name(gpu):
    """{name: [its spans' durations]}."""
    durations = defaultdict(list)
    for e in gpu:
        durations[e["name"]].append(e["dur"])
    return durations


def stalls(gpu, factor):
    medians = {name: statistics.median(d) for name, d in by_name(gpu).items()}
    slow = [e for e in gpu if e["dur"] > factor * max(medians[e["name"]], 1.0)]
    return medians, sorted(slow, key=lambda e: -e["dur"])


def beside(gpu, span):
    end = span["ts"] + span["dur"]
    return [e for e in gpu if e is not span and e["row"] != span["row"]
            and e["ts"] < end and e["ts"] + e["dur"] > span["ts"]]


def share_beside(gpu, name, last):
    """{other name: the share of `name`'s time (its last `last` of spans)
    that it ran beside}, and those spans."""
    spans = [e for e in gpu if e["name"] == name]
    spans = spans[int(len(spans) * (1.0 - last)):]
    total = sum(e["dur"] for e in spans)
    shares = defaultdict(float)
    for e in spans:
        for o in beside(gpu, e):
            shares[o["name"]] += (min(e["ts"] + e["dur"], o["ts"] + o["dur"])
                                  - max(e["ts"], o["ts"])) / total
    return shares, spans


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--factor", type=float, default=4.0)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--medians", action="store_true")
    parser.add_argument("--beside")
    parser.add_argument("--last", type=float, default=0.4)
    args = parser.parse_args()
    gpu, host = rows(args.trace)
    if not gpu:
        raise SystemExit(f"{args.trace}: no GPU stream rows (a CPU run, or profiling was off)")
    leads = host_lead(gpu, host)
    if leads:
        pick = lambda q: leads[min(len(leads) - 1, int(q * len(leads)))]
        print(f"host lead over {len(leads)} ops: p5 {pick(0.05):.0f} us, median "
              f"{pick(0.5):.0f} us, p95 {pick(0.95):.0f} us; "
              f"{100.0 * sum(l < 15 for l in leads) / len(leads):.1f}% start within 15 us")
    medians, slow = stalls(gpu, args.factor)
    print(f"{len(slow)} of {len(gpu)} GPU ops ran over {args.factor:g}x their name's median")
    first = gpu[0]["ts"]
    for e in slow[:args.top]:
        others = beside(gpu, e)
        end = e["ts"] + e["dur"]
        ended_with = [o["name"] for o in others if abs(o["ts"] + o["dur"] - end) < 20.0]
        print(f"  {e['ts'] - first:10.0f} us  {e['row']:14s} {e['name']:34s} "
              f"{e['dur']:7.0f} us (median {medians[e['name']]:.0f})")
        print(f"{'':16s}beside: {', '.join(sorted({o['name'] for o in others})) or '-'}"
              f"{'; ended with ' + ', '.join(ended_with) if ended_with else ''}")
    if args.medians:
        print("GPU op medians (count, median us):")
        for name, d in sorted(by_name(gpu).items(), key=lambda kv: -sum(kv[1])):
            print(f"  {name:50s} {len(d):6d} {statistics.median(d):9.1f}")
    if args.beside:
        shares, spans = share_beside(gpu, args.beside, args.last)
        if not spans:
            raise SystemExit(f"{args.trace}: no GPU spans named '{args.beside}'")
        print(f"{args.beside}: the last {len(spans)} spans, median "
              f"{statistics.median(e['dur'] for e in spans):.1f} us; share of their time beside:")
        for other, share in sorted(shares.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {other:50s} {100.0 * share:6.1f}%")


if __name__ == "__main__":
    main()

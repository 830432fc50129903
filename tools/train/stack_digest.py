#!/usr/bin/env python3
"""Digest of a debugger's `thread apply all bt`: threads with the same stack
printed once, with their count and names, innermost frame first.

stall_stacks.sh prints it, so that a stalled run's stacks reach whoever
reads the run's output even where its files do not come back (a device
machine returns few files). The whole stacks stay in stacks.txt.

Usage: stack_digest.py STACKS [--frames N]
"""

import argparse
import collections
import re
import sys

THREAD = re.compile(r'^Thread \d+ \(.*?(?:"(?P<name>[^"]*)")?\):?\s*$')
FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(?P<call>.+?)"
                   r"(?: at (?P<file>\S+):(?P<line>\d+)| from (?P<lib>\S+))?\s*$")


def function_of(call):
    """FUNC of gdb's "FUNC (ARGS)": FUNC may hold parentheses of its own."""
    call = call.replace("(anonymous namespace)::", "")
    if not call.endswith(")"):
        return call
    depth = 0
    for i in range(len(call) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(call[i], 0)
        if depth == 0:
            return call[:i].rstrip()
    return call


def short_frame(match):
    """A frame as FUNC, with FILE:LINE for source files and [LIB] for
    libraries without them."""
    func = function_of(match["call"])
    if match["file"] and not match["file"].startswith("."):
        return f"{func} ({match['file'].rsplit('/', 1)[-1]}:{match['line']})"
    if match["lib"]:
        return f"{func} [{match['lib'].rsplit('/', 1)[-1]}]"
    return func


def keep(stack, frames):
    """The innermost frame, then up to `frames` - 1 frames that are not the
    C library's internals (names with a leading "__")."""
    return tuple(stack[:1] + [f for f in stack[1:] if not f.startswith("__")][:frames - 1])


def parse(lines, frames):
    """[(thread name, (frame, ...))] of every thread, and the lines after
    the last thread's stack (cuda-gdb's kernels)."""
    threads = []
    tail = []
    name, stack = None, None
    for line in lines:
        header = THREAD.match(line)
        if header:
            if stack is not None:
                threads.append((name, keep(stack, frames)))
            name, stack = header["name"] or "?", []
            continue
        frame = FRAME.match(line)
        if stack is not None and frame:
            stack.append(short_frame(frame))
        elif stack is not None and not line.strip():
            threads.append((name, keep(stack, frames)))
            name, stack = None, None
        elif stack is None and threads and line.strip():
            tail.append(line.rstrip())
    if stack is not None:
        threads.append((name, keep(stack, frames)))
    return threads, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stacks")
    parser.add_argument("--frames", type=int, default=10)
    args = parser.parse_args()
    with open(args.stacks, errors="replace") as f:
        threads, tail = parse(f, args.frames)
    groups = collections.defaultdict(list)
    for name, stack in threads:
        groups[stack].append(name)
    print(f"{len(threads)} threads, {len(groups)} distinct stacks")
    for stack, names in sorted(groups.items(), key=lambda g: len(g[1])):
        counts = collections.Counter(names)
        who = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(counts.items()))
        print(f"-- {len(names)} thread(s): {who}")
        for frame in stack:
            print(f"     {frame if len(frame) <= 160 else frame[:157] + '...'}")
    if tail:
        print("-- after the stacks:")
        for line in tail[:40]:
            print(f"     {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

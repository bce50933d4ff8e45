#!/usr/bin/env python3
"""The include graph of src/ has no cycle between rooms (docs/source-layout.md, Floors).

A room is a source with its header (src/core/x.cc and src/core/x.h); src/cli, src/remote and src/torch are
one room each. Every `#include "..."` of the project makes an arrow between two rooms; the graph of rooms
must have no cycle, so that the rooms stand on floors and every include points down. Prints each cycle
with the includes that make it and exits 1 where there is one.

Usage: scripts/check-includes.py [--root .]
"""
import argparse
import collections
import os
import re
import sys

FOLDER_ROOMS = ("src/cli", "src/remote", "src/torch")


def room(path):
    folder = os.path.dirname(path)
    return folder if folder in FOLDER_ROOMS else os.path.splitext(path)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    root = ap.parse_args().root
    edges, why = collections.defaultdict(set), collections.defaultdict(list)
    for folder, _, names in os.walk(os.path.join(root, "src")):
        for name in sorted(names):
            if not name.endswith((".cc", ".h")):
                continue
            path = os.path.relpath(os.path.join(folder, name), root)
            for line in open(os.path.join(root, path), encoding="utf-8"):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or not os.path.exists(os.path.join(root, "src", m.group(1))):
                    continue
                a, b = room(path), room(os.path.join("src", m.group(1)))
                if a != b:
                    edges[a].add(b)
                    why[(a, b)].append(f"{path} -> src/{m.group(1)}")
    # Tarjan's strongly connected components, iteratively.
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]
    for start in sorted(set(edges) | {b for v in edges.values() for b in v}):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))
    for comp in cycles:
        print("cycle: " + ", ".join(comp))
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    print(f"  {a} -> {b}: {'; '.join(why[(a, b)][:2])}")
    rooms = len(set(edges) | {b for v in edges.values() for b in v})
    print(f"{rooms} rooms, {sum(len(v) for v in edges.values())} arrows, {len(cycles)} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())

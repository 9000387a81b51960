#!/usr/bin/env python3
"""include_cycles.py SRC: fails (exit 1) when modules of the source tree include each other in a loop.

A module is a file path without its extension (foo.c, foo.h, foo.cu and foo.cuh are one module); module
A depends on B when a file of A includes a header of B ("..." includes, resolved beside the including
file, then from SRC). Prints every loop (strongly connected component of more than one module, or a
module that reaches itself) with the includes that tie it, and the module count. Exit 0: no loop."""
import os
import re
import sys

src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "src")
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
files = []
for d, _, names in os.walk(src):
    files += [os.path.join(d, n) for n in names if n.endswith((".c", ".h", ".cu", ".cuh"))]
module = lambda path: os.path.splitext(os.path.relpath(path, src))[0]
edges, why = {}, {}
for f in files:
    a = module(f)
    edges.setdefault(a, set())
    for name in include.findall(open(f, encoding="utf-8", errors="replace").read()):
        target = next((p for p in (os.path.join(os.path.dirname(f), name), os.path.join(src, name)) if os.path.isfile(p)), None)
        if target is None:
            continue
        b = module(target)
        if b != a:
            edges[a].add(b)
            why.setdefault((a, b), "%s includes \"%s\"" % (os.path.relpath(f, src), name))

# Tarjan's strongly connected components, iteratively.
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(edges.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))
for comp in comps:
    print("include loop: " + " <-> ".join(comp))
    for a in comp:
        for b in sorted(edges[a]):
            if b in comp:
                print("  " + why[(a, b)])
print("%d modules, %d include loop(s)" % (len(edges), len(comps)))
sys.exit(1 if comps else 0)

#!/usr/bin/env python3
"""calls.py: which object files call which, from nm; fails on a call circle.

    calls.py NM OBJ...          every object's global definitions and
                                undefined references; an edge A -> B when A
                                uses a symbol B defines; exit 1 naming a
                                circle (A -> B -> ... -> A) when there is one

The check itself is checked first on a graph with a circle and one without,
so a broken checker cannot pass a circle."""
import os
import subprocess
import sys


def symbols(nm, obj):
    out = subprocess.run([nm, obj], check=True, capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWGS":  # global definitions (weak included)
            defined.add(parts[2])
    return defined, used


def circle(edges):
    """One circle of the graph {node: set(nodes)} as a list, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def main():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"main": {"x", "util"}, "x": {"util"}, "util": set()}) is None
    nm, objs = sys.argv[1], sys.argv[2:]
    if not objs:
        sys.exit("calls.py: no objects given")
    defs, uses = {}, {}
    for o in objs:
        name = os.path.basename(o)
        defs[name], uses[name] = symbols(nm, o)
    owner = {s: n for n, d in defs.items() for s in d}
    edges = {n: {owner[s] for s in u if s in owner and owner[s] != n} for n, u in uses.items()}
    for n in sorted(edges):
        print("%s -> %s" % (n, " ".join(sorted(edges[n])) or "(the runtime only)"))
    c = circle(edges)
    if c:
        sys.exit("FAIL: a call circle: " + " -> ".join(c))
    print("ok: calls between the %d objects run one way" % len(objs))


main()

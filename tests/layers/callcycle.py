#!/usr/bin/env python3
"""callcycle.py: no two files of the compiler call into each other.

docs/design.md: calls between the files of ir/, frontend/, passes/, codegen/,
calibrate/ and driver/ run one way. This reads the object files of the
compiler's libraries (BUILD/**/CMakeFiles/TARGET.dir/**.o, TARGET one of
--targets), draws an edge A -> B whenever A uses a global symbol B defines
(nm), and fails naming the files of every strongly-connected component with
more than one file. Excluded, by not being a target here: runtime/ (libptdrt,
linked into the generated programs), codegen/trainer/ (embedded as text, never
compiled into ptdc), the measurement programs (ptdc-measure-*), bench/ and
tests/.

  callcycle.py BUILD_DIR [--targets T1,T2,...]   check a build
  callcycle.py --self-test                       two tiny files that call each
                                                 other must be caught, a chain
                                                 must not
"""
import os
import subprocess
import sys
import tempfile

TARGETS = ["ptdc_ir", "ptdc_frontend", "ptdc_passes", "ptdc_codegen", "ptdc_calibrate", "ptdc"]


def objects(build, targets):
    """(source path, object path) of every object of the targets."""
    out = []
    for root, dirs, files in os.walk(build):
        dirs.sort()
        base = os.path.basename(root)
        if not base.endswith(".dir") or base[:-4] not in targets:
            continue
        if os.path.basename(os.path.dirname(root)) != "CMakeFiles":
            continue
        srcdir = os.path.relpath(os.path.dirname(os.path.dirname(root)), build)
        for r2, d2, f2 in os.walk(root):
            d2.sort()
            for f in sorted(f2):
                if f.endswith(".o"):
                    rel = os.path.relpath(os.path.join(r2, f), root)[:-2].replace("__", "..")  # CMake writes ../ as __/
                    out.append((os.path.normpath(os.path.join(srcdir, rel)), os.path.join(r2, f)))
        dirs[:] = []
    return out


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    res = subprocess.run(["nm", "-P", "-g", obj], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("callcycle: nm %s failed: %s" % (obj, res.stderr.strip()))
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        (undefined if kind in "Uw" else defined).add(name)
    return defined, undefined


def graph(objs):
    """file -> set of files it calls (or whose data it uses)."""
    syms = {src: symbols(obj) for src, obj in objs}
    owner = {}
    for src, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, set()).add(src)
    edges = {src: set() for src in syms}
    for src, (_, undefined) in syms.items():
        for s in undefined:
            edges[src] |= owner.get(s, set()) - {src}
    return edges


def cycles(edges):
    """The strongly-connected components with more than one file (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def report(edges):
    """Print every circle with the calls that close it; the number of circles."""
    found = cycles(edges)
    for comp in found:
        print("callcycle: these files call each other: " + ", ".join(comp))
        for a in comp:
            for b in sorted(edges[a] & set(comp)):
                print("    %s -> %s" % (a, b))
    return len(found)


def self_test():
    """Two files calling each other are a circle; a chain a -> b -> c is not."""
    with tempfile.TemporaryDirectory() as d:
        cc = os.environ.get("CC", "cc")
        srcs = {
            "a.c": "int b_f(void); int a_f(void) { return b_f(); }\n",
            "b.c": "int a_f(void); int c_f(void); int b_f(void) { return c_f() + 1; }\n"
                   "int b_g(void) { return a_f(); }\n",
            "c.c": "int c_f(void) { return 3; }\n",
        }
        objs = []
        for name, text in srcs.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            subprocess.run([cc, "-c", path, "-o", path + ".o"], check=True)
            objs.append((name, path + ".o"))
        got = cycles(graph(objs))
        if got != [["a.c", "b.c"]]:
            sys.exit("callcycle --self-test: a.c <-> b.c not found as the one circle, got %r" % got)
        chain = cycles(graph([o for o in objs if o[0] != "a.c"]))
        if chain:
            sys.exit("callcycle --self-test: the chain b.c -> c.c reported as a circle: %r" % chain)
    print("callcycle --self-test: ok (a circle caught, a chain passed)")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--targets"):
        sys.exit(__doc__)
    targets = sys.argv[3].split(",") if len(sys.argv) == 4 else TARGETS
    objs = objects(sys.argv[1], set(targets))
    missing = set(targets) - {t for t in targets for _, o in objs if "/%s.dir/" % t in o}
    if missing:  # a target renamed or not built would otherwise pass unchecked
        sys.exit("callcycle: no object files of %s under %s" % (", ".join(sorted(missing)), sys.argv[1]))
    n = report(graph(objs))
    if n:
        print("callcycle: %d circle(s) among %d files (docs/design.md: calls run one way)" % (n, len(objs)))
        return 1
    print("callcycle: no circle among %d files of %s" % (len(objs), ", ".join(targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

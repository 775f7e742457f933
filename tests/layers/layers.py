#!/usr/bin/env python3
"""The compiler's call graph, file by file, from its object files (nm):

1. no call circle: no strongly connected component of more than one file
   (no two files calling into each other, directly or round a loop);
2. no call upwards: a file calls only into its own layer or the layers
   below it (LAYERS: ir, json < plan < frontend, autodiff < passes < report,
   codegen < calibrate < driver; codegen may not call passes or report).

usage: layers.py BUILD_DIR            check the tree's objects
       layers.py --self-test          plant a circle and an upward call in
                                      tiny objects and require both found
"""
import json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# layer -> the layers it may call (besides itself). The libraries' link
# lines say the same; static libraries would not catch a stray call.
ALLOWED = {
    'ir': set(),
    'json': set(),
    'plan': {'ir'},
    'frontend': {'ir', 'json'},
    'autodiff': {'ir'},
    'passes': {'plan', 'autodiff', 'ir'},
    'report': {'passes', 'plan', 'autodiff', 'ir'},
    'codegen': {'plan', 'autodiff', 'frontend', 'json', 'ir'},
    'calibrate': {'passes', 'plan', 'ir'},
    'driver': {'report', 'passes', 'plan', 'autodiff', 'frontend', 'codegen', 'calibrate', 'json', 'ir'},
}
# CMake target directory -> layer
TARGETS = {'ptdc_ir': 'ir', 'ptdc_json': 'json', 'ptdc_plan': 'plan', 'ptdc_frontend': 'frontend',
           'ptdc_autodiff': 'autodiff', 'ptdc_passes': 'passes', 'ptdc_report': 'report',
           'ptdc_codegen': 'codegen', 'ptdc_calibrate': 'calibrate', 'ptdc': 'driver'}


def symbols(obj):
    out = subprocess.run(['nm', '-P', obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == 'U':
            used.add(name)
        elif kind in 'TDBRVWC' or (kind in 'tdbr' and False):
            defined.add(name)
    return defined, used


def graph(objs):
    """objs: {object path: (layer, source name)} -> edges {src: set(dst)}."""
    defs, uses, layer = {}, {}, {}
    for o, (ly, name) in objs.items():
        d, u = symbols(o)
        uses[name] = u
        layer[name] = ly
        for s in d:
            defs.setdefault(s, name)
    edges = {n: set() for n in uses}
    for n, u in uses.items():
        for s in u:
            m = defs.get(s)
            if m and m != n:
                edges[n].add((m, s))
    return edges, layer


def sccs(nodes, succ):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
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
                        w = stack.pop(); on.discard(w); comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def check(objs):
    edges, layer = graph(objs)
    succ = {n: {m for m, _ in e} for n, e in edges.items()}
    bad = []
    for comp in sccs(sorted(succ), succ):
        if len(comp) > 1:
            calls = [f'{a} -> {b} ({s})' for a in sorted(comp) for b, s in sorted(edges[a]) if b in comp]
            bad.append('call circle between ' + ', '.join(sorted(comp)) + ':\n    ' + '\n    '.join(calls))
    for a in sorted(edges):
        for b, s in sorted(edges[a]):
            la, lb = layer[a], layer[b]
            if la != lb and lb not in ALLOWED[la]:
                bad.append(f'{a} ({la}) calls {s} in {b} ({lb}), a layer it may not call')
    return bad


def tree_objects(build):
    """The objects the build's current sources make (compile_commands.json,
    so objects left from renamed or deleted sources do not count)."""
    objs = {}
    for e in json.load(open(os.path.join(build, 'compile_commands.json'))):
        m = re.search(r'(?:^|\s)-o\s+(\S+)', e['command'])
        t = re.search(r'CMakeFiles/([^/]+)\.dir/', m.group(1)) if m else None
        if not t or t.group(1) not in TARGETS:
            continue
        path = os.path.join(e['directory'], m.group(1))
        if not os.path.exists(path):
            continue
        layer = TARGETS[t.group(1)]
        rel = os.path.relpath(e['file'], ROOT)
        objs[path] = (layer, rel)
    return objs


def self_test():
    src = {
        'a.c': 'int b1(void); int a1(void) { return b1(); }',
        'b.c': 'int a1(void); int b1(void) { return 0; } int b2(void) { return a1(); }',
        'low.c': 'int up(void); int low(void) { return up(); }',
        'up.c': 'int up(void) { return 1; }',
    }
    with tempfile.TemporaryDirectory() as d:
        objs = {}
        for name, text in src.items():
            c = os.path.join(d, name)
            open(c, 'w').write(text + '\n')
            o = c[:-2] + '.o'
            subprocess.run(['cc', '-c', c, '-o', o], check=True)
            objs[o] = ('ir' if name in ('low.c',) else 'passes', name)
        bad = check(objs)
        circle = any('call circle between a.c, b.c' in b for b in bad)
        upward = any('low.c (ir) calls up in up.c (passes)' in b for b in bad)
        if not (circle and upward) or len(bad) != 2:
            print('layers.py self-test: planted faults not found exactly:\n' + '\n'.join(bad))
            return 1
    print('layers.py self-test: a planted circle and a planted upward call are both found')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    objs = tree_objects(sys.argv[1])
    layers = {l for l, _ in objs.values()}
    missing = set(TARGETS.values()) - layers
    if missing:
        print('layers.py: no objects for ' + ', '.join(sorted(missing)) + ' under ' + sys.argv[1])
        return 1
    bad = check(objs)
    for b in bad:
        print('layers.py: ' + b)
    print(f'layers.py: {len(objs)} object files of {len(layers)} layers, '
          f'{len(bad)} violation{"s" if len(bad) != 1 else ""}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

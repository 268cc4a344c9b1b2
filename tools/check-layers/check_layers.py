#!/usr/bin/env python3
"""check_layers: holds the code to the layers that layers.txt names.

Reads two kinds of edges between the project's files:

  includes  the #include lines of every C/C++ source and header, resolved
            to a file of the tree (or one the build generates, such as
            proto/onnx.pb-c.h) the way the compiler finds it: the
            including file's folder first, then the -I folders that
            compile_commands.json gives it;
  calls     after a build, `nm` on every object file the build's
            compile_commands.json names: each undefined symbol of a file's
            object is a use of the file that defines it (functions and
            data alike; calls through a function pointer, such as a
            provider's vtable, are not seen and need not be).

and fails when

  (a) files of different layers form a loop (a cycle of includes or calls),
      unless layers.txt allows that pair of layers ('allow' lines);
  (b) a file includes or calls a file of a layer its own layer does not
      use: a lower layer reaching up, or a layer reaching sideways into a
      sibling (the core into a provider, one tool into another).

Loops inside one layer (a driver and its helpers) are allowed.  Every
.c/.h/.cu/.cuh/.cpp file of the tree must belong to a layer, so a new folder
is placed deliberately.  The layer list is layers.txt beside this script;
docs/ARCHITECTURE.md describes it.

Usage: check_layers.py [--source DIR] [--build DIR] [--layers FILE] [--edges]
Run by `meson test --suite lint` (and by the default `meson test`).
Standard library only.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys

SOURCE_EXT = ('.c', '.h', '.cu', '.cuh', '.cpp', '.hpp')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class LayerFile:
    """layers.txt: 'layer NAME: USES...' lines followed by indented path
    patterns, 'allow A <-> B: why' and 'interpose SYMBOL...' lines."""

    def __init__(self, path):
        self.order = []          # layer names, bottom first
        self.uses = {}           # name -> set of names it names
        self.patterns = []       # (pattern, layer)
        self.allowed = set()     # frozenset({a, b})
        self.interpose = set()
        self.path = path
        current = None
        with open(path, encoding='utf-8') as f:
            for n, raw in enumerate(f, 1):
                line = raw.split('#', 1)[0].rstrip()
                if not line.strip():
                    continue
                where = '%s:%d' % (path, n)
                if line[0].isspace():
                    if not current:
                        sys.exit('%s: a path before any layer' % where)
                    for pat in line.split():
                        self.patterns.append((pat, current))
                    continue
                word, _, rest = line.partition(' ')
                if word == 'layer':
                    name, _, uses = rest.partition(':')
                    name = name.strip()
                    if name in self.uses:
                        sys.exit('%s: layer %s defined twice' % (where, name))
                    used = set(uses.split()) - {'-'}
                    for u in used:
                        if u not in self.uses:
                            sys.exit('%s: layer %s uses %s, which is not defined above it'
                                     % (where, name, u))
                    self.order.append(name)
                    self.uses[name] = used
                    current = name
                elif word == 'allow':
                    pair, _, _why = rest.partition(':')
                    a, _, b = pair.partition('<->')
                    a, b = a.strip(), b.strip()
                    for x in (a, b):
                        if x not in self.uses:
                            sys.exit('%s: allow names an unknown layer %s' % (where, x))
                    self.allowed.add(frozenset((a, b)))
                    current = None
                elif word == 'interpose':
                    self.interpose.update(rest.split())
                    current = None
                else:
                    sys.exit('%s: expected layer, allow or interpose' % where)
        # What each layer may reach: what it names and, through them, what
        # those may reach.
        self.reach = {}
        for name in self.order:
            r = set()
            for u in self.uses[name]:
                r |= {u} | self.reach[u]
            self.reach[name] = r
        self.rank = {name: i for i, name in enumerate(self.order)}
        self.matched = set()

    def layer_of(self, path):
        """The layer of the most specific pattern that matches path."""
        best, best_len = None, -1
        for pat, layer in self.patterns:
            if pat.endswith('/'):
                ok = path.startswith(pat)
            else:
                ok = fnmatch.fnmatchcase(path, pat)
            if ok and len(pat) > best_len:
                best, best_len = (pat, layer), len(pat)
        if not best:
            return None
        self.matched.add(best[0])
        return best[1]

    def may_use(self, a, b):
        return a == b or b in self.reach[a] or frozenset((a, b)) in self.allowed


def tree_files(src, skip):
    """Source files of the tree, relative paths; build folders skipped."""
    out = []
    for d, dirs, files in os.walk(src):
        dirs[:] = sorted(x for x in dirs
                         if not x.startswith('.') and os.path.join(d, x) not in skip
                         and not os.path.exists(os.path.join(d, x, 'meson-private')))
        for f in files:
            if f.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(d, f), src))
    return sorted(out)


def generated_files(build, src):
    """Sources and headers the build generates beside its own folders
    (proto/onnx.pb-c.h...): named by their path under the build folder,
    which is the folder of the tree that generates them."""
    out = {}
    if not build:
        return out
    for d, dirs, files in os.walk(build):
        dirs[:] = sorted(x for x in dirs if not x.endswith('.p') and not x.startswith('meson-')
                         and not x.startswith('.'))
        rel_dir = os.path.relpath(d, build)
        if rel_dir != '.' and not os.path.isdir(os.path.join(src, rel_dir)):
            continue
        for f in files:
            if f.endswith(SOURCE_EXT):
                rel = os.path.normpath(os.path.join(rel_dir, f))
                out[rel] = os.path.join(d, f)
    return out


def compile_commands(build):
    path = os.path.join(build, 'compile_commands.json') if build else ''
    if not build or not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def command_words(entry):
    if 'arguments' in entry:
        return entry['arguments']
    import shlex
    return shlex.split(entry['command'])


class Tree:
    def __init__(self, src, build):
        self.src = os.path.realpath(src)
        self.build = os.path.realpath(build) if build else None
        skip = {self.build} if self.build else set()
        self.files = {p: os.path.join(self.src, p) for p in tree_files(self.src, skip)}
        for rel, full in generated_files(self.build, self.src).items():
            self.files.setdefault(rel, full)
        self.by_name = {}
        for p in self.files:
            self.by_name.setdefault(os.path.basename(p), []).append(p)
        self.cmds = compile_commands(self.build)
        self.inc_dirs = {}      # file -> list of tree-relative include folders
        self.objects = []       # (file, object path)
        for e in self.cmds:
            d = e['directory']
            full = os.path.realpath(os.path.join(d, e['file']))
            name = self.rel(full)
            if name is None:
                continue
            words = command_words(e)
            dirs = []
            for i, w in enumerate(words):
                if w.startswith('-I'):
                    x = w[2:] or (words[i + 1] if i + 1 < len(words) else '')
                    r = self.rel(os.path.realpath(os.path.join(d, x)))
                    if r is not None:
                        dirs.append(r)
            known = self.inc_dirs.setdefault(name, [])
            known.extend(x for x in dirs if x not in known)
            if 'output' in e:
                self.objects.append((name, os.path.join(d, e['output'])))

    def rel(self, full):
        """A path of the tree (or of a generated file) relative to the root,
        or None when it is outside both."""
        for root in (self.build, self.src):
            if root and (full == root or full.startswith(root + os.sep)):
                r = os.path.relpath(full, root)
                return '' if r == '.' else r
        return None

    def resolve(self, includer, text, quoted, dirs):
        cands = []
        if quoted:
            cands.append(os.path.dirname(includer))
        cands.extend(dirs)
        for d in cands:
            p = os.path.normpath(os.path.join(d, text))
            if p in self.files:
                return p
        # A header whose includer no compile command names (a header, a
        # file of a provider not built here): the one file of that path.
        hits = [p for p in self.by_name.get(os.path.basename(text), [])
                if p == text or p.endswith('/' + text)]
        return hits[0] if len(hits) == 1 else None


def include_edges(tree):
    # A header takes the include folders of the sources in its own folder.
    folder_dirs = {}
    for f, dirs in tree.inc_dirs.items():
        acc = folder_dirs.setdefault(os.path.dirname(f), [])
        acc.extend(x for x in dirs if x not in acc)
    edges = {}
    for f, full in tree.files.items():
        dirs = tree.inc_dirs.get(f) or folder_dirs.get(os.path.dirname(f), [])
        try:
            with open(full, encoding='utf-8', errors='replace') as fh:
                lines = fh.readlines()
        except OSError:
            continue
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            to = tree.resolve(f, m.group(2), m.group(1) == '"', dirs)
            if to and to != f:
                edges.setdefault((f, to), 'includes "%s" (line %d):' % (m.group(2), n))
    return edges


def read_symbols(nm, objects):
    """{object: [(symbol, kind)]} from `nm -P -A`, many objects a call."""
    out = {}
    for i in range(0, len(objects), 200):
        chunk = objects[i:i + 200]
        text = subprocess.run([nm, '-P', '-A'] + chunk, capture_output=True, text=True,
                              check=False).stdout
        for line in text.splitlines():
            obj, sep, rest = line.rpartition(': ')
            p = rest.split()
            if sep and len(p) >= 2:
                out.setdefault(obj, []).append((p[0], p[1]))
    return out


def call_edges(tree, layers, nm):
    defs, uses = {}, {}
    built = [(f, obj) for f, obj in tree.objects if os.path.exists(obj)]
    symbols = read_symbols(nm, [obj for _, obj in built])
    for f, obj in built:
        for sym, kind in symbols.get(obj, ()):
            if kind == 'U':
                uses.setdefault(f, set()).add(sym)
            elif kind.isupper():
                defs.setdefault(sym, set()).add(f)
    edges = {}
    for f, syms in uses.items():
        for sym in sorted(syms):
            where = defs.get(sym, set()) - {f}
            if not where or sym == 'main' or sym in layers.interpose:
                continue
            # A name defined twice: the definition in the caller's layer
            # (that is the one its link takes), else every one.
            own = {d for d in where if layers.layer_of(d) == layers.layer_of(f)}
            for d in sorted(own or where):
                edges.setdefault((f, d), []).append(sym)
    edges = {k: 'uses %s, defined in' % ', '.join(v[:4] + (['...'] if len(v) > 4 else []))
             for k, v in edges.items()}
    return edges, len(built), len(tree.objects) - len(built)


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative; components of more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
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
                        out.append(sorted(comp))
    return out


def cycle_in(comp, succ, layer_of):
    """One cycle through the component that crosses layers, as a list."""
    inside = set(comp)
    for start in comp:
        for nxt in sorted(succ.get(start, ())):
            if nxt in inside and layer_of[nxt] != layer_of[start]:
                # shortest way back from nxt to start inside the component
                prev, todo = {nxt: None}, [nxt]
                while todo and start not in prev:
                    todo2 = []
                    for v in todo:
                        for w in sorted(succ.get(v, ())):
                            if w in inside and w not in prev:
                                prev[w] = v
                                todo2.append(w)
                    todo = todo2
                if start in prev:
                    path, v = [], start
                    while v is not None:
                        path.append(v)
                        v = prev[v]
                    return [start] + path[::-1]
    return comp + [comp[0]]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--source', default=os.path.normpath(os.path.join(here, '..', '..')))
    ap.add_argument('--build', help='build folder (compile_commands.json, objects)')
    ap.add_argument('--layers', default=os.path.join(here, 'layers.txt'))
    ap.add_argument('--edges', action='store_true', help='print every edge between layers')
    args = ap.parse_args()

    layers = LayerFile(args.layers)
    tree = Tree(args.source, args.build)
    problems = []

    layer_of = {}
    for f in tree.files:
        layer = layers.layer_of(f)
        if layer is None:
            problems.append('%s: in no layer; add it to %s' % (f, os.path.relpath(args.layers, tree.src)))
        else:
            layer_of[f] = layer

    edges = include_edges(tree)
    n_inc = len(edges)
    nm = shutil.which('nm')
    n_obj = missing = 0
    if tree.objects and not nm:
        problems.append('nm not found: calls cannot be read (install binutils)')
    elif tree.objects:
        calls, n_obj, missing = call_edges(tree, layers, nm)
        for k, v in calls.items():
            edges.setdefault(k, v)
    n_call = len(edges) - n_inc
    if not tree.objects:
        print('check_layers: no build folder with compile_commands.json: includes only')

    succ = {}
    for (a, b), why in sorted(edges.items()):
        la, lb = layer_of.get(a), layer_of.get(b)
        if la is None or lb is None:
            continue
        succ.setdefault(a, set()).add(b)
        if la == lb:
            continue
        if args.edges:
            print('%s (%s) %s %s (%s)' % (a, la, why, b, lb))
        if not layers.may_use(la, lb):
            how = 'up into' if layers.rank[lb] > layers.rank[la] else 'sideways into'
            problems.append('%s (layer %s) %s %s (layer %s): %s %s, which %s does not use'
                            % (a, la, why, b, lb, how, lb, la))

    for comp in strongly_connected(sorted(succ), succ):
        names = {layer_of[f] for f in comp}
        if len(names) < 2:
            continue
        pairs = {frozenset((layer_of[a], layer_of[b])) for a in comp for b in succ.get(a, ())
                 if b in comp and layer_of[a] != layer_of[b]}
        if pairs <= layers.allowed:
            continue
        cyc = cycle_in(comp, succ, layer_of)
        problems.append('loop across layers %s: %s'
                        % (', '.join(sorted(names)),
                           ' -> '.join('%s (%s)' % (f, layer_of[f]) for f in cyc)))

    for pat, layer in layers.patterns:
        if pat not in layers.matched:
            print('check_layers: note: %s (layer %s) matches no file' % (pat, layer))
    if missing:
        print('check_layers: note: %d object files not built yet: their calls are not read' % missing)
    for p in problems:
        print('check_layers: ' + p)
    print('check_layers: %d files in %d layers, %d includes and %d calls between files '
          '(%d objects read): %s'
          % (len(layer_of), len(layers.order), n_inc, n_call, n_obj,
             'FAILED, %d problem(s)' % len(problems) if problems else 'ok'))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

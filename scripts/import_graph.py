#!/usr/bin/env python3
"""The import graph of a Rust crate's modules, and its cycles.

    scripts/import_graph.py server/src            # cycles between files and between folders
    scripts/import_graph.py server/src --edges    # and every edge between top-level modules
    scripts/import_graph.py src --allow=src/a/t.rs,src/a/t_builder.rs   # a cycle let be

Each `.rs` file is a module (`a/b.rs` is `a::b`, `a/mod.rs` is `a`, `main.rs` or `lib.rs` the
root). An edge goes from a file to the module a path in it names: `crate::…`, `super::…`,
`self::…`, or a child module's name first, in `use` trees and in code. Edges between a module
and its ancestor or descendant are dropped (a folder's `mod.rs` declares and re-exports its
children; a child uses its parent's items): what is left is the graph between siblings and
cousins. Cycles are reported between files and between top-level modules (a folder or a root
file); the exit status is 1 when there is one but the cycles `--allow` names, each by its files
joined with commas, in any order (a type and its builder, which name each other).

Text-level: comments and strings are stripped, macros are read as code; a `#[path]` module
is the module its declaration names.
"""

import os
import re
import sys
from collections import defaultdict


def module_of(root, path):
    rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["main"], ["lib"]):
        rel = []
    return tuple(rel)


def strip_keep_strings(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"(?m)^\s*//[^\n]*", " ", text)


def strip(text):
    """The code without comments, strings and chars (lifetimes kept)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text, flags=re.S)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    return re.sub(r"//[^\n]*", " ", text)


def use_paths(tree, prefix=""):
    """The paths a `use` tree names: `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        path = re.sub(r"\s+as\s+\w+$", "", tree).strip()
        return [prefix + path] if path else []
    head = tree[:brace]
    body = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    out = []
    for part in parts:
        if part.strip():
            out += use_paths(part, prefix + head)
    return out


def paths_in(code):
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        paths += use_paths(m.group(1))
    code = re.sub(r"\buse\s+[^;]+;", " ", code)
    paths += re.findall(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+", code)
    return [re.sub(r"\s+", "", p) for p in paths]


def resolve(path, here, modules):
    segments = [s for s in path.split("::") if s]
    if not segments:
        return None
    # A file's own module for `super`: `a/b.rs` is `a::b`, its super `a`; `a/mod.rs` is `a`.
    if segments[0] == "crate":
        at, segments = [], segments[1:]
    elif segments[0] in ("super", "self"):
        at = list(here)
        while segments and segments[0] in ("super", "self"):
            if segments[0] == "super":
                at = at[:-1]
            segments = segments[1:]
    elif tuple(here) + (segments[0],) in modules:
        at = list(here)
    else:
        return None  # another crate, or an item in scope
    best = tuple(at)
    for i in range(len(segments)):
        candidate = tuple(at) + tuple(segments[: i + 1])
        if candidate in modules:
            best = candidate
        else:
            break
    return best


def related(a, b):
    return a[: len(b)] == b or b[: len(a)] == a


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def name(module):
    return "::".join(module) or "(root)"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = args[0]
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.endswith(".rs"):
                path = os.path.join(dirpath, n)
                files[module_of(root, path)] = path
    # `#[path = "x.rs"] mod name;`: x.rs is `name` in the declaring file's module.
    for here, path in list(files.items()):
        with open(path, encoding="utf-8") as f:
            code = strip_keep_strings(f.read())
        for file, child in re.findall(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s*)?mod\s+(\w+)', code):
            target = os.path.normpath(os.path.join(os.path.dirname(path), file))
            for m, p in list(files.items()):
                if os.path.normpath(p) == target and p.startswith(os.path.normpath(root)):
                    del files[m]
                    files[here + (child,)] = p
    modules = set(files)
    edges = defaultdict(set)
    for here, path in files.items():
        with open(path, encoding="utf-8") as f:
            code = strip(f.read())
        for p in paths_in(code):
            target = resolve(p, here, modules)
            if target is not None and target != here and not related(here, target):
                edges[here].add(target)

    top = lambda m: m[:1]
    top_edges = defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            if top(a) != top(b) and a and b:
                top_edges[top(a)].add(top(b))

    if "--edges" in sys.argv:
        for a in sorted(top_edges):
            print(f"{name(a)} -> {', '.join(name(b) for b in sorted(top_edges[a]))}")
    found = False
    allowed = [set(a.split("=", 1)[1].split(",")) for a in sys.argv[1:] if a.startswith("--allow=")]
    for component in cycles(modules, edges):
        paths = [files[m] for m in component]
        if set(paths) in allowed:
            print("cycle between files (allowed):", " <-> ".join(paths))
            continue
        found = True
        print("cycle between files:", " <-> ".join(paths))
    for component in cycles({top(m) for m in modules if m}, top_edges):
        found = True
        print("cycle between top-level modules:", " <-> ".join(name(m) for m in component))
    if not found:
        print(f"no cycles: {len(files)} files, {sum(map(len, edges.values()))} edges")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

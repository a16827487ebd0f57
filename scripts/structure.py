#!/usr/bin/env python3
"""Checks the structure rules the workspace holds to, with no dependencies:

- the modules of each crate form no cycle (sibling modules under one parent, the way
  `use crate::...` and `use super::...` paths point; a parent and its own child are not
  an edge, re-exports of the crate root are followed to the module that defines them);
- no source file under crates/*/src is longer than MAX_FILE lines;
- no function outside tests is longer than MAX_FN lines.

Usage: python3 scripts/structure.py [--verbose]   (exit 1 on a violation)
"""
import os
import re
import sys

MAX_FILE = 800
MAX_FN = 100
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """Source with comments, string and char literals blanked (line count kept)."""
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), src, flags=re.S)
    src = re.sub(r'\br#*"(?:.|\n)*?"#*', lambda m: re.sub(r"[^\n]", " ", m.group()), src)
    src = re.sub(r'"(?:\\.|[^"\\])*"', lambda m: re.sub(r"[^\n]", " ", m.group()), src, flags=re.S)
    src = re.sub(r"'(?:\\.|[^'\\\n])'", "' '", src)
    src = re.sub(r"//[^\n]*", "", src)
    return src


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = tree.replace(" ", "").replace("\n", "")
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out += [prefix + e for e in expand_use(p)]
    return out


def module_path(src_dir, path):
    rel = os.path.relpath(path, src_dir)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    if rel and rel[0] == "bin":
        return None
    return tuple(rel)


def references(text, me):
    """Module paths (tuples) that `text` refers to via crate:: or super::."""
    refs = []
    paths = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)(?:::[^;]*))\s*;", text):
        paths += expand_use(m.group(1))
    for m in re.finditer(r"\b((?:crate|super)(?:::(?:" + IDENT + r"|super))+)", text):
        paths.append(m.group(1))
    for p in paths:
        segs = [s for s in p.split("::") if s]
        if segs and segs[-1].startswith("self"):
            segs = segs[:-1]
        if not segs:
            continue
        base = []
        if segs[0] == "crate":
            segs = segs[1:]
        else:
            base = list(me)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        refs.append(tuple(base + [s.split(" as ")[0] for s in segs]))
    return refs


def crate_graph(src_dir):
    files = {}
    for dp, _, fns in os.walk(src_dir):
        for fn in fns:
            if fn.endswith(".rs"):
                p = os.path.join(dp, fn)
                mp = module_path(src_dir, p)
                if mp is not None:
                    files[mp] = strip(open(p, encoding="utf-8").read())
    modules = set(files)
    # Names the crate root re-exports: `pub use x::{A, B}` -> A lives in x.
    reexport = {}
    for root in [()]:
        for m in re.finditer(r"\bpub\s+use\s+([^;]+);", files.get(root, "")):
            for p in expand_use(m.group(1)):
                segs = p.split("::")
                if segs[0] == "crate":
                    segs = segs[1:]
                reexport[segs[-1].split(" as ")[-1]] = tuple(segs[:-1])
    edges = {}
    for me, text in files.items():
        for ref in references(text, me):
            if len(ref) == 1 and ref not in modules and ref[0] in reexport:
                ref = reexport[ref[0]]
            target = ()
            for i in range(len(ref), 0, -1):
                if tuple(ref[:i]) in modules:
                    target = tuple(ref[:i])
                    break
            n = 0
            while n < min(len(me), len(target)) and me[n] == target[n]:
                n += 1
            if n == len(me) or n == len(target):
                continue  # self, parent or child
            a, b = me[: n + 1], target[: n + 1]
            edges.setdefault(a, set()).add(b)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def in_test_ranges(text):
    """Line ranges of `#[cfg(test)] mod ... { }` blocks."""
    ranges = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text):
        start = m.end() - 1
        end = match_brace(text, start)
        ranges.append((text.count("\n", 0, m.start()), text.count("\n", 0, end)))
    return ranges


def match_brace(text, i):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def long_functions(text):
    tests = in_test_ranges(text)
    out = []
    for m in re.finditer(r"\bfn\s+(" + IDENT + r")\b[^;{]*\{", text):
        line = text.count("\n", 0, m.start())
        if any(a <= line <= b for a, b in tests):
            continue
        end = match_brace(text, m.end() - 1)
        n = text.count("\n", m.start(), end) + 1
        if n > MAX_FN:
            out.append((m.group(1), line + 1, n))
    return out


def main():
    verbose = "--verbose" in sys.argv
    crates_dir = os.path.join(ROOT, "crates")
    bad = 0
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        edges = crate_graph(src)
        if verbose:
            for a in sorted(edges):
                print(f"{crate}: {'::'.join(a)} -> {', '.join('::'.join(b) for b in sorted(edges[a]))}")
        for comp in cycles(edges):
            bad += 1
            print(f"{crate}: module cycle: {' <-> '.join('::'.join(c) for c in comp)}")
        for dp, _, fns in os.walk(src):
            for fn in sorted(fns):
                if not fn.endswith(".rs"):
                    continue
                p = os.path.join(dp, fn)
                rel = os.path.relpath(p, ROOT)
                raw = open(p, encoding="utf-8").read()
                lines = raw.count("\n")
                is_test_file = fn == "tests.rs" or os.sep + "tests" + os.sep in rel
                if lines > MAX_FILE and not is_test_file:
                    bad += 1
                    print(f"{rel}: {lines} lines (at most {MAX_FILE})")
                if is_test_file:
                    continue
                for name, line, n in long_functions(strip(raw)):
                    bad += 1
                    print(f"{rel}:{line}: fn {name} is {n} lines (at most {MAX_FN})")
    if bad:
        print(f"structure: {bad} violation(s)")
        return 1
    print("structure: no module cycles, no file over 800 lines, no function over 100 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every relative link in the repository's Markdown resolves.

    scripts/doc_links.py

For each tracked `.md` file, each inline link `[text](target)` and each reference definition
`[name]: target` whose target is neither a URL (`https:`, `mailto:`, ...) nor a Rust path
(`Self::build`, in the pages rustdoc includes) must name a file or folder that exists,
relative to the page; a `#fragment` into a Markdown page must name one of its headings as
GitHub slugs them. Code blocks are skipped.

ARCHITECTURE.md, the map of the code, names files in backticks, often by their tail within a
folder the sentence names (`redis/batcher.rs`, `engine/{breaker,breakers}.rs`): each such
name (ending in a file extension, or a path from a top folder) must be the tail of a tracked
file's or folder's path.

Prints each broken link or stale path as `file:line: target: why`; the exit status is 1 when
there is one.
"""

import os
import re
import subprocess
import sys

LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|^\s*\[[^\]]+\]:\s*(\S+)', re.M)
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)


def headings(path, cache={}):
    """The fragments GitHub gives the headings of `path`."""
    if path not in cache:
        slugs, seen = set(), {}
        text = FENCE.sub("", open(path, encoding="utf-8").read())
        for line in text.splitlines():
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            slugs.add(slug if n == 0 else f"{slug}-{n}")
        cache[path] = slugs
    return cache[path]


MAP = "ARCHITECTURE.md"
NAMED = re.compile(r"`([^`\s]+)`")
TOP = ("src/", "server/", "tests/", "benches/", "lua/", "docs/", "examples/", "scripts/", "proto/")


def named_paths(tracked):
    """The stale file names of the map: `(line, name)` for each one no tracked path ends with."""
    known = set()
    for path in tracked:
        parts = path.split("/")
        for i in range(len(parts)):
            known.add("/".join(parts[i:]))
            known.add("/".join(parts[i:-1]))
    text = open(MAP, encoding="utf-8").read()
    for number, line in enumerate(text.splitlines(), 1):
        for name in NAMED.findall(line):
            name = name.rstrip(".,:;)")
            if "::" in name or not (re.search(r"\.(rs|lua|md|json|py|toml|yaml|sh)$", name) or name.startswith(TOP)):
                continue
            # `a/{b,c}.rs` names `a/b.rs` and `a/c.rs`; `*` and `<name>` stand for any file.
            m = re.match(r"(.*)\{([^}]*)\}(.*)", name)
            names = [m.group(1) + x + m.group(3) for x in m.group(2).split(",")] if m else [name]
            for each in names:
                each = re.split(r"[*<]", each)[0].rstrip("/")
                if each and each not in known and not any(k.startswith(each) for k in known if "*" in name or "<" in name):
                    yield number, each


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True)
    os.chdir(root.stdout.strip())
    listed = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True, check=True)
    pages = listed.stdout.split()
    broken = 0
    for page in pages:
        # Code blocks become blank lines, so that line numbers still count from the top.
        text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), open(page, encoding="utf-8").read())
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or "::" in target:
                continue
            line = text.count("\n", 0, m.start()) + 1
            path, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                print(f"{page}:{line}: {target}: no such file")
                broken += 1
            elif fragment and dest.endswith(".md") and fragment not in headings(dest):
                print(f"{page}:{line}: {target}: no heading #{fragment}")
                broken += 1
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    for line, name in named_paths(tracked):
        print(f"{MAP}:{line}: {name}: no tracked path ends with it")
        broken += 1
    print(f"{len(pages)} pages, {broken} broken links or stale paths", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The house rules a reader would otherwise check by hand, checked on every run of the suite.

    scripts/house_rules.py

- No Rust file over 500 lines in `src/`, `server/src/` or `benches/` (generated code aside: a
  file whose first line says `@generated`). A longer file holds more than one concept.
- No function of the Redis store takes the time as a parameter (`fn .*now_us` on its line): the store's
  clock (`store/redis/script/clock.rs`) is where a script's time comes from, Redis `TIME` or
  the time a test set through the gated test hooks.

Prints each breach and exits 1 if there is one.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 500


def rust_files(folder):
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for n in sorted(names):
            if n.endswith(".rs"):
                yield os.path.join(dirpath, n)


def main():
    breaches = []
    for folder in ("src", "server/src", "benches"):
        for path in rust_files(folder):
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            if lines and "@generated" in lines[0]:
                continue
            if len(lines) > MAX_LINES:
                rel = os.path.relpath(path, ROOT)
                breaches.append(f"{rel}: {len(lines)} lines (at most {MAX_LINES})")
    for path in rust_files("src/store/redis"):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if re.search(r"\bfn .*now_us", line):
                    rel = os.path.relpath(path, ROOT)
                    breaches.append(f"{rel}:{number}: the time as a parameter: {line.strip()}")
    for breach in breaches:
        print(breach)
    if not breaches:
        print("house rules kept: files under 500 lines, the Redis store's time from its clock")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())

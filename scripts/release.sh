#!/usr/bin/env bash
# Checks a release before `cargo publish`: run from a clean checkout of the commit to publish.
#   scripts/release.sh            checks only
# 1. the working tree is clean and CHANGELOG.md has a dated section for Cargo.toml's version;
# 2. the whole test suite (scripts/test.sh);
# 3. `cargo semver-checks` against the newest version on crates.io (installed if missing;
#    skipped, with a note, while nothing is published yet);
# 4. `cargo publish --dry-run`.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
if [ -n "$(git status --porcelain)" ]; then
  echo "release: the working tree has changes; commit or stash them" >&2
  exit 1
fi
if ! grep -Eq "^## \[$version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md; then
  echo "release: CHANGELOG.md has no dated section '## [$version] - YYYY-MM-DD'" >&2
  exit 1
fi

bash scripts/test.sh

if cargo info --registry crates-io redlimit 2>/dev/null | grep -q '^version:'; then
  command -v cargo-semver-checks >/dev/null 2>&1 || cargo install --locked cargo-semver-checks
  cargo semver-checks check-release --all-features
else
  echo "release: redlimit is not on crates.io yet; semver checks start with the next version" >&2
fi

cargo publish --dry-run
echo "release: $version is ready; publish with: cargo publish"

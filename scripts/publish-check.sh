#!/usr/bin/env bash
# Checks that the published crates (taps-core, usrsctp, taps) could go to crates.io:
# packages them and builds each from its package (`cargo publish --dry-run`, which
# uploads nothing), builds the docs of every crate with warnings denied, and fails if a
# dependency declares a higher `rust-version` than the workspace.
# Needs cargo >= 1.90 (several unpublished crates in one dry run) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

# taps depends on taps-core and usrsctp: one dry run sees the others' packages.
cargo publish --dry-run --allow-dirty -p taps-core -p usrsctp -p taps

RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace

cargo metadata --format-version 1 | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
key = lambda v: tuple(int(x) for x in (v.split(".") + ["0", "0"])[:3])
ours = {p["rust_version"] for p in packages if p["source"] is None}
deps = [p for p in packages if p["source"] is not None and p["rust_version"]]
needed = max((p["rust_version"] for p in deps), key=key)
names = sorted(p["name"] for p in deps if key(p["rust_version"]) == key(needed))
print("dependencies need Rust %s (%s); the workspace declares %s"
      % (needed, ", ".join(names), ", ".join(sorted(map(str, ours)))))
if any(v is None or key(v) < key(needed) for v in ours):
    sys.exit("rust-version is lower than a dependency needs")
'

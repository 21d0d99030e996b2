#!/usr/bin/env python3
"""The release binary's code by crate, for BENCHMARKS.md's "Binary size".

    CARGO_PROFILE_RELEASE_STRIP=false cargo build --release
    python3 bench/binary_size.py target/release/sloburn [ROWS]

The profile strips symbols, so the build above keeps them; the stripped size is measured on a
stripped copy (`strip -o`), which matches the profile's own within a few kilobytes. Each code
symbol (nm's t/T/w/W) counts for the first crate of Cargo.lock its demangled name mentions
that is not std, core or alloc (generic code is counted for the crate it was instantiated
for, as `cargo bloat --crates` does); C code (SQLite, ring) has no crate path. After fat LTO
a function inlined into another counts for the caller.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

BASE = {"std", "core", "alloc"}


def crates():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    lock = open(os.path.join(root, "Cargo.lock")).read()
    names = {n.replace("-", "_") for n in re.findall(r'name = "([^"]+)"', lock)}
    return names | BASE | {"sloburn", "gimli", "addr2line", "rustc_demangle", "miniz_oxide"}


def main():
    binary = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    known = crates()
    out = subprocess.run(["nm", "-S", "--size-sort", "-C", binary],
                         capture_output=True, text=True, check=True).stdout
    sizes = collections.Counter()
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in "tTwW":
            continue
        found = [m.group(1) for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)::", parts[3])
                 if m.group(1) in known]
        own = [c for c in found if c not in BASE]
        crate = own[0] if own else (found[0] if found else "[C: sqlite, ring]")
        sizes[crate] += int(parts[1], 16)
    with tempfile.TemporaryDirectory() as d:
        stripped = os.path.join(d, "s")
        subprocess.run(["strip", "-o", stripped, binary], check=True)
        size = os.path.getsize(stripped)
    print(f"stripped: {size:,} bytes ({size / 2**20:.2f} MiB); code in symbols: "
          f"{sum(sizes.values()) / 2**20:.2f} MiB")
    print("| crate | code, KiB |\n|---|---:|")
    for crate, n in sizes.most_common(rows):
        print(f"| {crate} | {n / 1024:,.0f} |")


if __name__ == "__main__":
    main()

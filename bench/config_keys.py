#!/usr/bin/env python3
"""`sloburn check` on configs with many keys (issue 30, item 1): the time per file size, so
linear growth shows as a flat time per key. Prints one row per file:

- one mapping (an SLO's `labels`) of 1,250 to 10,000 keys: the cap, parsed fully;
- one mapping of 100,000 and 200,000 keys: past the cap, the time to the positioned error;
- 100,000 and 200,000 keys spread over 10 and 20 mappings of 10,000: parsed fully;
- 10,000 profiles naming 10,000 unknown targets among 10,000 (references and their hints);
- 10,000 unknown fields under `server:` (an error line each, with a did-you-mean search).

Each figure is the best of --rounds runs (wall time of the whole process, start-up included).

    python3 bench/config_keys.py [--sloburn target/release/sloburn] [--rounds 3]
"""
import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

HEAD = "targets:\n  api:\n    url: http://127.0.0.1:9/\n"


def labels(mappings, keys):
    text = HEAD + "slos:\n"
    for j in range(mappings):
        text += f"  s{j}:\n    target: api\n    sli: availability\n    objective: 99\n    labels:\n"
        text += "".join(f"      l{i}: v\n" for i in range(keys))
    return text


def references(n):
    text = "targets:\n" + "".join(f"  t{i}: {{url: \"http://127.0.0.1:9/\"}}\n" for i in range(n))
    text += "profiles:\n" + "".join(
        f"  p{i}: {{target: tx{i}, executor: constant-vus, vus: 1, duration: 1s}}\n" for i in range(n)
    )
    return text


def unknown_fields(n):
    return HEAD + "server:\n" + "".join(f"  listn{i}: 1\n" for i in range(n))


def check(binary, path, rounds):
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        out = subprocess.run(
            [binary, "check", str(path)], capture_output=True, text=True, timeout=600
        )
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    first = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    return best, out.returncode, first if out.returncode else last


def main():
    ap = argparse.ArgumentParser()
    default = "target/release/sloburn"
    if not Path(default).exists():
        default = "target/debug/sloburn"
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN", default))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    cases = [
        ("one mapping", 1_250, lambda: labels(1, 1_250)),
        ("one mapping", 2_500, lambda: labels(1, 2_500)),
        ("one mapping", 5_000, lambda: labels(1, 5_000)),
        ("one mapping", 10_000, lambda: labels(1, 10_000)),
        ("one mapping, past the cap", 100_000, lambda: labels(1, 100_000)),
        ("one mapping, past the cap", 200_000, lambda: labels(1, 200_000)),
        ("10 mappings of 10,000", 100_000, lambda: labels(10, 10_000)),
        ("20 mappings of 10,000", 200_000, lambda: labels(20, 10_000)),
        ("unknown references", 5_000, lambda: references(5_000)),
        ("unknown references", 10_000, lambda: references(10_000)),
        ("unknown fields", 5_000, lambda: unknown_fields(5_000)),
        ("unknown fields", 10_000, lambda: unknown_fields(10_000)),
    ]
    print(f"sloburn: {binary}")
    print(f"{'case':<28} {'keys':>8} {'bytes':>10} {'exit':>4} {'seconds':>8} {'µs/key':>7}  last line")
    with tempfile.TemporaryDirectory() as tmp:
        for name, keys, make in cases:
            path = Path(tmp) / "sloburn.yaml"
            text = make()
            path.write_text(text)
            took, code, line = check(binary, path, args.rounds)
            print(
                f"{name:<28} {keys:>8} {len(text):>10} {code:>4} {took:>8.3f} "
                f"{took / keys * 1e6:>7.2f}  {line[:110]}"
            )


if __name__ == "__main__":
    main()

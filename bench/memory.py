#!/usr/bin/env python3
"""Bounded memory: peak RSS of `sloburn run --rate R` for a short and a long run, side by side.

Starts `sloburn target` on 127.0.0.1 (its own free port), runs sloburn against it for SHORT and
LONG seconds at the same rate, and prints both peak RSS figures (ru_maxrss from wait4) and their
ratio. Histograms, never samples: the ratio should stay within 1.10.

    python3 bench/memory.py [--sloburn target/release/sloburn] [--rate 5000] [--short 5] [--long 60]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from common import free_port, require_binary, sloburn_arg, stop  # noqa: E402,F401  (bench/ is on sys.path)


def run(binary: str, url: str, rate: int, seconds: int):
    cmd = [binary, "run", "--url", url, "--rate", f"{rate}/s", "--duration", f"{seconds}s", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read().decode()
    _, status, ru = os.wait4(proc.pid, 0)
    total = next((l.split()[-3].rstrip(",") for l in out.splitlines() if "Requests      [" in l), "?")
    return ru.ru_maxrss / 1024.0, total, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser()
    sloburn_arg(ap)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--short", type=int, default=5)
    ap.add_argument("--long", type=int, default=60)
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    port = free_port()
    target = subprocess.Popen([binary, "target", "--listen", f"127.0.0.1:{port}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        url = f"http://127.0.0.1:{port}/"
        rows = []
        for seconds in (args.short, args.long):
            rss, total, code = run(binary, url, args.rate, seconds)
            rows.append((seconds, rss, total, code))
        print(f"| run | requests | peak RSS MiB |\n|---|---:|---:|")
        for seconds, rss, total, code in rows:
            print(f"| {seconds}s at {args.rate}/s | {total} | {rss:.1f} |")
        ratio = rows[1][1] / rows[0][1]
        print(f"\nlong/short peak RSS: {ratio:.3f} (bounded if <= 1.10)")
        return 0 if ratio <= 1.10 and all(r[3] == 0 for r in rows) else 1
    finally:
        stop(target)


if __name__ == "__main__":
    sys.exit(main())

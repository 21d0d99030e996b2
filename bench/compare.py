#!/usr/bin/env python3
"""bench/compare.py — issue 48's statistical figures for `sloburn compare` and A/B under one
load: how often two equal sides are called `regressed` (false alarms), how often a 10 %
slower or faster side is found (power), and a side failing 2 % more requests.

Python 3.11, standard library only. Every request goes to `sloburn target` servers it starts
on 127.0.0.1 (fixed delay, no jitter); every run is bounded by --duration.

What it does, --rounds times each (default 20 runs of 10 s at 100/s, as the issue asks):
  aa-records  two records of one 20 ms server, `sloburn compare a1 a2`
  aa-ab       A/B of two identical 20 ms servers (`run --url --baseline-url`)
  slower      A/B, candidate 22 ms against a 20 ms baseline: found `regressed` naming
              http_req_duration?
  faster      A/B, candidate 18 ms against 20 ms: `improved`?
  failing     A/B, candidate failing 2 % of requests against one failing none: `regressed`
              naming http_req_failed?
Prints a markdown table: for each case the verdicts counted and the exit codes.

Usage
  python3 bench/compare.py [--rounds 20] [--duration 10s] [--rate 100/s] [--sloburn PATH]
  (the debug build is enough: the figures are verdicts, not speeds)
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import HOST, free_port, require_binary, sloburn_arg, stop  # noqa: E402


def target(binary: str, latency: str, error_ratio: float = 0.0):
    port = free_port()
    p = subprocess.Popen(
        [binary, "target", "--listen", f"{HOST}:{port}", "--latency", latency,
         "--error-ratio", str(error_ratio)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, f"http://{HOST}:{port}/"


def run(binary: str, args: list[str], duration: str) -> subprocess.CompletedProcess:
    limit = float(duration.rstrip("s")) + 60
    return subprocess.run([binary, "run", "--quiet", *args], capture_output=True, text=True,
                          timeout=limit)


def verdict(out: str) -> str:
    """The last line's verdict: `regressed: …`, `no regression; improved: …` or `no regression`."""
    lines = [l for l in out.strip().splitlines() if l]
    last = lines[-1] if lines else ""
    if last.startswith("regressed:"):
        return "regressed " + ",".join(p.split(" (")[0].strip() for p in last[10:].split("),"))
    if "improved:" in last:
        return "improved " + ",".join(p.split(" (")[0].strip() for p in last.split("improved:")[1].split("),"))
    return "unchanged" if last == "no regression" else f"? {last[:60]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--rate", default="100/s")
    ap.add_argument("--cases", default="aa-records,aa-ab,slower,faster,failing")
    sloburn_arg(ap, "debug")
    a = ap.parse_args()
    if not require_binary(a.sloburn):
        return 1
    load = ["--rate", a.rate, "--duration", a.duration]
    servers = {
        "20ms": target(a.sloburn, "20ms"),
        "20ms-b": target(a.sloburn, "20ms"),
        "22ms": target(a.sloburn, "22ms"),
        "18ms": target(a.sloburn, "18ms"),
        "fail2": target(a.sloburn, "20ms", 0.02),
    }
    url = {k: v[1] for k, v in servers.items()}
    ab = {
        "aa-ab": ("20ms", "20ms-b"),
        "slower": ("22ms", "20ms"),
        "faster": ("18ms", "20ms"),
        "failing": ("fail2", "20ms"),
    }
    counts: dict[str, collections.Counter] = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            for case in a.cases.split(","):
                c = counts.setdefault(case, collections.Counter())
                for i in range(a.rounds):
                    if case == "aa-records":
                        files = [f"{d}/a{i}-{k}.json" for k in (1, 2)]
                        for f in files:
                            run(a.sloburn, [*load, "--url", url["20ms"], "--record", f], a.duration)
                        out = subprocess.run([a.sloburn, "compare", *files], capture_output=True,
                                             text=True, timeout=60)
                    else:
                        new, old = ab[case]
                        out = run(a.sloburn, [*load, "--url", url[new], "--baseline-url", url[old]],
                                  a.duration)
                    v = verdict(out.stdout)
                    c[f"{v} (exit {out.returncode})"] += 1
                    print(f"{case} {i + 1}/{a.rounds}: {v} exit {out.returncode}", file=sys.stderr,
                          flush=True)
    finally:
        stop(*(p for p, _ in servers.values()))
    print(f"| case ({a.rounds} runs of {a.duration} at {a.rate}) | verdicts |")
    print("|---|---|")
    for case, c in counts.items():
        print(f"| {case} | " + "; ".join(f"{k}: {n}" for k, n in c.most_common()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

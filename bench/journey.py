#!/usr/bin/env python3
"""bench/journey.py — what a journey costs: CPU per request of a 3-step journey against the
same requests sent one per iteration, at the same request rate, side by side in one run.

Issue "journeys": a 3-step journey must cost at most 1.2x the CPU per request of single
requests.  Python 3.11, standard library only; reuses bench/run.py's nginx and rusage runner.

What it does
  1. Starts nginx (1 worker, access log off) on 127.0.0.1:<free port>, serving /index.html.
     All traffic goes there; every run is bounded (--duration, default 10 s, killed after a
     grace period).
  2. Runs `sloburn run` (release build) with a constant-arrival-rate profile at --rate
     requests per second in three shapes, interleaved --rounds times (noise hits all alike):
       single   one GET /index.html per iteration, --rate iterations/s
       journey  3 steps (GET /index.html?step=a|b|c) per iteration, --rate/3 iterations/s
       journey+ the same 3 steps with templates (${vu}, ${iter}, ${random_int(1,9)}) and a
                JSON capture-free header template, --rate/3 iterations/s
     CPU is user+sys from os.wait4's rusage; requests from --summary-export.
  3. Prints a markdown table: CPU seconds per 10k requests (median of rounds) and the ratio
     to single.

Usage
  python3 bench/journey.py [--duration 10] [--rate 3000] [--rounds 3] [--sloburn PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as peers  # noqa: E402  (bench/run.py: Nginx, run_measured, HOST)
from common import require_binary, sloburn_arg  # noqa: E402,F401

SHAPES = ["single", "journey", "journey+"]


def config(url: str, shape: str, rate: int, duration: int) -> str:
    base = url.rsplit("/", 1)[0] + "/"
    head = f"targets:\n  nginx:\n    url: {url}\n    timeout: 5s\n"
    profile = (
        "    executor: constant-arrival-rate\n"
        f"    rate: {rate if shape == 'single' else rate // 3}/s\n"
        f"    duration: {duration}s\n"
        "    pre_allocated_vus: 50\n"
        "    max_vus: 400\n"
    )
    if shape == "single":
        return head + "profiles:\n  p:\n    target: nginx\n" + profile
    if shape == "journey":
        steps = "".join(
            f"      - {{ name: {s}, path: /index.html?step={s}, checks: [ {{ status: 200 }} ] }}\n"
            for s in "abc"
        )
    else:
        steps = "".join(
            f"      - name: {s}\n"
            f"        path: /index.html?step={s}&vu=${{vu}}&i=${{iter}}&n=${{random_int(1,9)}}\n"
            f"        headers: {{ X-Iteration: \"${{iter}}-{s}\" }}\n"
            "        checks: [ { status: 200 } ]\n"
            for s in "abc"
        )
    return (
        head
        + f"journeys:\n  three:\n    target: nginx\n    steps:\n{steps}"
        + "profiles:\n  p:\n    journey: three\n"
        + profile
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rate", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the medians here (bench/all.py reads it)")
    sloburn_arg(ap)
    args = ap.parse_args()
    if not require_binary(args.sloburn):
        return 2
    work = Path(tempfile.mkdtemp(prefix="sloburn-journey-bench-"))
    nginx = peers.Nginx(work)
    nginx.start()
    cpu: dict[str, list[float]] = {s: [] for s in SHAPES}
    reqs: dict[str, list[int]] = {s: [] for s in SHAPES}
    try:
        for r in range(args.rounds):
            for shape in SHAPES:
                cfg = work / f"{shape.replace('+', 'plus')}.yaml"
                cfg.write_text(config(nginx.url, shape, args.rate, args.duration))
                export = work / f"{shape.replace('+', 'plus')}-{r}.json"
                cmd = [args.sloburn, "run", str(cfg), "--summary-export", str(export),
                       "--quiet"]
                res, out, err = peers.run_measured(cmd, work, f"{shape}-{r}",
                                                   args.duration + 30)
                if res.exit_code not in (0, 99):
                    print(f"{shape}: exit {res.exit_code}\n{out}\n{err}", file=sys.stderr)
                    return 1
                m = json.loads(export.read_text())["metrics"]
                n = int(m["http_reqs"]["count"])
                reqs[shape].append(n)
                cpu[shape].append(res.cpu_s / n * 10_000)
                peers.log(f"round {r + 1} {shape}: {n} requests, {res.cpu_s:.2f} s CPU")
    finally:
        nginx.stop()
    base = statistics.median(cpu["single"])
    print(f"\n{args.rate} requests/s for {args.duration} s, {args.rounds} rounds, "
          f"nginx 1 worker, 127.0.0.1\n")
    print("| shape | requests (median) | CPU s / 10k requests (median) | vs single |")
    print("|---|---:|---:|---:|")
    for shape in SHAPES:
        c = statistics.median(cpu[shape])
        print(f"| {shape} | {int(statistics.median(reqs[shape]))} | {c:.3f} | {c / base:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"cpu_per_10k": {s: statistics.median(cpu[s]) for s in SHAPES}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Hot-path cost of SLO classification: the same saturating profile run by `sloburn serve` with
no SLO and with three SLOs watching its traffic, alternated, each run's rate read from the
daemon's own /api/runs. Prints the rates and the throughput change.

    python3 bench/slo_cost.py [--sloburn target/release/sloburn] [--seconds 8] [--rounds 3]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from common import free_port, require_binary, sloburn_arg, stop  # noqa: E402,F401  (bench/ is on sys.path)

SLOS = """slos:
  avail:
    target: api
    sli: availability
    objective: 99.9
  latency:
    target: api
    sli: { latency: { under: 100ms } }
    objective: 99
  latency-strict:
    target: api
    sli: { latency: { under: 10ms, failures: exclude } }
    objective: 95
"""


def one_run(binary, target_port, seconds, with_slos, workdir):
    port = free_port()
    cfg = f"""server: {{ listen: "127.0.0.1:{port}" }}
storage: {{ path: "{workdir}/data-{port}" }}
targets:
  api:
    url: http://127.0.0.1:{target_port}/
    checks:
      - status: 200
profiles:
  sat:
    target: api
    every: 1h
    run_on_start: true
    executor: constant-vus
    vus: 50
    duration: {seconds}s
""" + (SLOS if with_slos else "")
    path = Path(workdir) / f"c-{port}.yaml"
    path.write_text(cfg)
    proc = subprocess.Popen([binary, "serve", "--config", str(path), "--no-watch"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + seconds + 30
        while time.time() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=2) as r:
                    runs = json.load(r)["runs"]
            except OSError:
                continue
            if runs and runs[0]["result"] in ("passed", "failed"):
                return runs[0]["rate"]
        raise SystemExit("the run did not finish")
    finally:
        stop(proc)


def main() -> int:
    ap = argparse.ArgumentParser()
    sloburn_arg(ap)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    tport = free_port()
    target = subprocess.Popen([binary, "target", "--listen", f"127.0.0.1:{tport}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        with tempfile.TemporaryDirectory() as workdir:
            base, slo = [], []
            for _ in range(args.rounds):
                base.append(one_run(binary, tport, args.seconds, False, workdir))
                slo.append(one_run(binary, tport, args.seconds, True, workdir))
        b, s = sum(base) / len(base), sum(slo) / len(slo)
        print("| daemon run | req/s per round | mean |\n|---|---|---:|")
        print(f"| no SLO | {', '.join(f'{x:,.0f}' for x in base)} | {b:,.0f} |")
        print(f"| 3 SLOs | {', '.join(f'{x:,.0f}' for x in slo)} | {s:,.0f} |")
        print(f"\nthroughput change with 3 SLOs: {100 * (s - b) / b:+.1f}% (goal: no worse than -5%)")
        return 0
    finally:
        stop(target)


if __name__ == "__main__":
    sys.exit(main())

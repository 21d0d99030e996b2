#!/usr/bin/env python3
"""bench/h2.py — HTTP/2 saturation: sloburn against h2load (and oha --http2 when installed),
all against the same nginx (1 worker, h2c with prior knowledge) at equal connections and
streams, in one run, one table.

Issue "Performance, round two", goal 3: sloburn's HTTP/2 saturation >= 0.8x h2load's.
Python 3.11, standard library only; reuses bench/run.py's nginx and rusage runner.

What it does
  1. Starts nginx (worker_processes 1, `listen 127.0.0.1:<free port> http2`, a 128-byte file)
     and sends traffic to nothing else.
  2. For --rounds rounds, runs each tool for --duration seconds, as fast as it can, with
     --connections connections and --streams concurrent streams on each:
       h2load  -c C -m M -D duration                      (nghttp2-client, Debian)
       oha     --http2 -c C -p M -z duration              (crates.io, bench/setup.sh)
       sloburn run: http "2", http2.max_connections C, constant-vus C*M
     Requests per second come from each tool's own figures (h2load "req/s", oha JSON,
     sloburn --summary-export); CPU seconds per 10k requests from wait4's rusage.
  3. Prints the median of the rounds per tool and the ratio to h2load.

Usage
  python3 bench/h2.py [--duration 5] [--rounds 3] [--connections 4] [--streams 25]
                      [--sloburn PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as peers  # noqa: E402
from common import require_binary, sloburn_arg  # noqa: E402,F401


def sloburn_config(url: str, conns: int, streams: int, duration: int) -> str:
    return (
        f"targets:\n  nginx:\n    url: {url}\n    http: \"2\"\n"
        f"    http2: {{ max_connections: {conns} }}\n    timeout: 5s\n"
        "profiles:\n  p:\n    target: nginx\n    executor: constant-vus\n"
        f"    vus: {conns * streams}\n    duration: {duration}s\n"
    )


def parse_h2load(out: str) -> tuple[int | None, float | None, int]:
    """(succeeded requests, h2load's req/s, failed + errored)."""
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    req = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, "
                    r"(\d+) failed, (\d+) errored", out)
    if not rps or not req:
        return None, None, 0
    return int(req.group(1)), float(rps.group(1)), int(req.group(2)) + int(req.group(3))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--streams", type=int, default=25)
    ap.add_argument("--json", help="also write the medians here (bench/all.py reads it)")
    sloburn_arg(ap)
    args = ap.parse_args()
    C, M, D = args.connections, args.streams, args.duration
    tools: dict[str, str | None] = {
        "h2load": peers.find_binary("h2load"),
        "oha": peers.find_binary("oha", [Path.home() / ".cargo" / "bin" / "oha"]),
        "sloburn": args.sloburn if Path(args.sloburn).exists() else None,
    }
    if not tools["h2load"]:
        print("h2load not found: apt-get install nghttp2-client", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sloburn-h2-bench-"))
    nginx = peers.Nginx(work, http2=True)
    nginx.start()
    url = nginx.url
    assert url.startswith(f"http://{peers.HOST}:"), url
    rps: dict[str, list[float]] = {t: [] for t in tools}
    cpu: dict[str, list[float]] = {t: [] for t in tools}
    notes: dict[str, str] = {}
    try:
        for r in range(args.rounds):
            for tool, binary in tools.items():
                if not binary:
                    continue
                tag = f"{tool}-{r}"
                if tool == "h2load":
                    cmd = [binary, "-c", str(C), "-m", str(M), "-D", str(D), url]
                elif tool == "oha":
                    cmd = [binary, "--http2", "-c", str(C), "-p", str(M), "-z", f"{D}s",
                           "--no-tui", "--output-format", "json", url]
                else:
                    cfg = work / f"{tag}.yaml"
                    cfg.write_text(sloburn_config(url, C, M, D))
                    export = work / f"{tag}.json"
                    cmd = [binary, "run", str(cfg), "--summary-export", str(export), "--quiet"]
                res, out, err = peers.run_measured(cmd, work, tag, D + 30)
                if tool == "h2load":
                    n, tool_rps, bad = parse_h2load(out)
                elif tool == "oha":
                    d = peers.parse_oha(out)
                    n, tool_rps, bad = d.get("ok_2xx"), d.get("tool_rps"), d.get("errors", 0)
                else:
                    try:
                        m = json.loads(export.read_text())["metrics"]
                        n = int(m["http_reqs"]["count"])
                        tool_rps = float(m["http_reqs"]["rate"])
                        bad = int(m.get("http_req_failed", {}).get("passes", 0))
                    except (OSError, KeyError, ValueError):
                        n, tool_rps, bad = None, None, 0
                if not n or not tool_rps:
                    notes[tool] = f"no figures (exit {res.exit_code}): {(err or out)[-300:]}"
                    continue
                if bad:
                    notes[tool] = f"{bad} failed requests in round {r + 1}"
                rps[tool].append(tool_rps)
                cpu[tool].append(res.cpu_s / n * 10_000)
                peers.log(f"round {r + 1} {tool}: {tool_rps:,.0f} req/s, "
                          f"{res.cpu_s / n * 10_000:.3f} CPU s / 10k")
    finally:
        nginx.stop()
    base = statistics.median(rps["h2load"]) if rps["h2load"] else None
    print(f"\nHTTP/2 (h2c) saturation: {C} connections x {M} streams, {D} s, median of "
          f"{args.rounds} rounds, nginx 1 worker, 127.0.0.1\n")
    print("| tool | req/s (median) | vs h2load | CPU s / 10k requests (median) |")
    print("|---|---:|---:|---:|")
    for tool, binary in tools.items():
        if not binary:
            print(f"| {tool} | not installed | | |")
            continue
        if not rps[tool]:
            print(f"| {tool} | {notes.get(tool, 'no figures')} | | |")
            continue
        v = statistics.median(rps[tool])
        ratio = f"{v / base:.2f}x" if base else "-"
        print(f"| {tool} | {v:,.0f} | {ratio} | {statistics.median(cpu[tool]):.3f} |")
    for tool, note in notes.items():
        print(f"\n{tool}: {note}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "connections": C, "streams": M,
            "rps": {t: statistics.median(v) for t, v in rps.items() if v},
            "cpu_per_10k": {t: statistics.median(v) for t, v in cpu.items() if v},
            "notes": notes,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

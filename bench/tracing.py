#!/usr/bin/env python3
"""bench/tracing.py — what tracing costs: CPU per request at a fixed 5,000 requests/s with
tracing off, with `sample_ratio: 0.01` and with `sample_ratio: 1.0`, side by side in one run.

Issue "OpenTelemetry": the cost at 0.01 must be within 3 % of off.  Python 3.11, standard
library only; reuses bench/run.py's nginx and rusage runner.

What it does
  1. Starts nginx (1 worker) on 127.0.0.1:<free port> as the target, and a small OTLP/HTTP
     sink on 127.0.0.1:<free port> that reads each POST /v1/traces body and answers 200 (the
     exporter batches, so it sees a few requests a second).  Nothing else is contacted.
  2. Runs `sloburn run` (release build), constant-arrival-rate at --rate for --duration, in
     three shapes, interleaved --rounds times: off (no `telemetry:`), 0.01 and 1.0.
  3. Prints CPU seconds per 10k requests (median of rounds), the ratio to off, and the spans
     exported and dropped as sloburn reports them.

Usage
  python3 bench/tracing.py [--duration 10] [--rate 5000] [--rounds 3] [--sloburn PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as peers  # noqa: E402

SHAPES = [("off", None), ("0.01", 0.01), ("1.0", 1.0)]


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("content-length", "0"))
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def config(url: str, sink: int, ratio: float | None, rate: int, duration: int) -> str:
    tele = ""
    if ratio is not None:
        tele = (
            "telemetry:\n"
            f"  otlp: {{ endpoint: \"http://{peers.HOST}:{sink}\", timeout: 5s }}\n"
            f"  traces: {{ sample_ratio: {ratio}, max_queue_size: 65536 }}\n"
        )
    return (
        tele
        + f"targets:\n  nginx:\n    url: {url}\n    timeout: 5s\n"
        + "profiles:\n  p:\n    target: nginx\n"
        + "    executor: constant-arrival-rate\n"
        + f"    rate: {rate}/s\n    duration: {duration}s\n"
        + "    pre_allocated_vus: 50\n    max_vus: 400\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN",
                    str(peers.REPO_ROOT / "target/release/sloburn")))
    args = ap.parse_args()
    if not Path(args.sloburn).exists():
        print(f"no sloburn binary at {args.sloburn}: cargo build --release", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sloburn-tracing-bench-"))
    nginx = peers.Nginx(work)
    nginx.start()
    sink = ThreadingHTTPServer((peers.HOST, 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    port = sink.server_address[1]
    cpu: dict[str, list[float]] = {s: [] for s, _ in SHAPES}
    reqs: dict[str, list[int]] = {s: [] for s, _ in SHAPES}
    spans: dict[str, str] = {}
    try:
        for r in range(args.rounds):
            for name, ratio in SHAPES:
                cfg = work / f"{name}.yaml"
                cfg.write_text(config(nginx.url, port, ratio, args.rate, args.duration))
                export = work / f"{name}-{r}.json"
                cmd = [args.sloburn, "run", str(cfg), "--summary-export", str(export), "--quiet"]
                res, out, err = peers.run_measured(cmd, work, f"{name}-{r}", args.duration + 40)
                if res.exit_code not in (0, 99):
                    print(f"{name}: exit {res.exit_code}\n{out}\n{err}", file=sys.stderr)
                    return 1
                n = int(json.loads(export.read_text())["metrics"]["http_reqs"]["count"])
                reqs[name].append(n)
                cpu[name].append(res.cpu_s / n * 10_000)
                m = re.search(r"telemetry: (\d+) spans exported, (\d+) dropped", out + err)
                spans[name] = f"{m.group(1)} / {m.group(2)}" if m else "-"
                peers.log(f"round {r + 1} {name}: {n} requests, {res.cpu_s:.2f} s CPU, spans {spans[name]}")
    finally:
        sink.shutdown()
        nginx.stop()
    base = statistics.median(cpu["off"])
    print(f"\n{args.rate} requests/s for {args.duration} s, {args.rounds} rounds, nginx 1 worker, "
          f"OTLP/HTTP sink, 127.0.0.1\n")
    print("| tracing | requests (median) | CPU s / 10k requests (median) | vs off | spans exported / dropped (last round) |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in SHAPES:
        c = statistics.median(cpu[name])
        print(f"| {name} | {int(statistics.median(reqs[name]))} | {c:.3f} | {c / base:.3f}x | {spans.get(name, '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

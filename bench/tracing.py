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
from common import require_binary, sloburn_arg  # noqa: E402,F401



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
    ap.add_argument("--json", help="also write the medians here (bench/all.py reads it)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per request under valgrind's cachegrind "
                         "(deterministic, unlike CPU time on a shared machine) at --ir-rate")
    ap.add_argument("--ir-rate", type=int, default=250)
    ap.add_argument("--ir-durations", default="4,16",
                    help="two run lengths in seconds: the per-request figure is the difference "
                         "of their instruction counts over the difference of their requests, "
                         "so start-up and shut-down cancel out")
    ap.add_argument("--ir-repeats", type=int, default=3,
                    help="cachegrind measurements per shape, interleaved; the median is shown")
    ap.add_argument("--shapes", default="off,0.01,1.0",
                    help="comma-separated: off, or a sample_ratio (0 keeps the exporter on)")
    sloburn_arg(ap)
    args = ap.parse_args()
    if not require_binary(args.sloburn):
        return 2
    work = Path(tempfile.mkdtemp(prefix="sloburn-tracing-bench-"))
    nginx = peers.Nginx(work)
    nginx.start()
    sink = ThreadingHTTPServer((peers.HOST, 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    port = sink.server_address[1]
    shapes = [(s, None if s == "off" else float(s)) for s in args.shapes.split(",")]
    if shapes[0][0] != "off":
        print("--shapes must start with off (the baseline)", file=sys.stderr)
        return 2
    cpu: dict[str, list[float]] = {s: [] for s, _ in shapes}
    reqs: dict[str, list[int]] = {s: [] for s, _ in shapes}
    spans: dict[str, str] = {}
    try:
        for r in range(args.rounds):
            # Every other round runs the shapes backwards, so no shape always follows another.
            for name, ratio in (shapes if r % 2 == 0 else shapes[::-1]):
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
        ir: dict[str, tuple[float, list[float], str]] = {}
        if args.instructions:
            per: dict[str, list[float]] = {s: [] for s, _ in shapes}
            spans_long: dict[str, str] = {}
            for k in range(args.ir_repeats):
                for name, ratio in shapes:
                    v, spans_long[name] = instructions(args, work, nginx.url, port, name, ratio)
                    per[name].append(v)
                    peers.log(f"instructions {k + 1} {name}: {v:.0f} per request")
            ir = {s: (statistics.median(per[s]), per[s], spans_long[s]) for s, _ in shapes}
    finally:
        sink.shutdown()
        nginx.stop()
    base = statistics.median(cpu["off"])
    print(f"\n{args.rate} requests/s for {args.duration} s, {args.rounds} rounds, nginx 1 worker, "
          f"OTLP/HTTP sink, 127.0.0.1\n")
    print("| tracing | requests (median) | CPU s / 10k requests (median) | vs off | vs off, paired by round (median) | spans exported / dropped (last round) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in shapes:
        c = statistics.median(cpu[name])
        paired = statistics.median(a / b for a, b in zip(cpu[name], cpu["off"]))
        print(f"| {name} | {int(statistics.median(reqs[name]))} | {c:.3f} | {c / base:.3f}x "
              f"| {paired:.3f}x | {spans.get(name, '-')} |")
    if ir:
        d1, d2 = args.ir_durations.split(",")
        print(f"\nInstructions per request under cachegrind: {args.ir_rate} requests/s, the "
              f"difference between a {d1} s and a {d2} s run (start-up and shut-down cancel "
              f"out), median of {args.ir_repeats}:\n")
        print("| tracing | instructions / request (median) | vs off | each measurement | "
              "spans exported (long run) |")
        print("|---|---:|---:|---|---:|")
        for name, _ in shapes:
            med, each, spans_long = ir[name]
            print(f"| {name} | {med:.0f} | {med / ir['off'][0]:.3f}x | "
                  f"{', '.join(f'{v:.0f}' for v in each)} | {spans_long} |")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cpu_per_10k": {n: statistics.median(cpu[n]) for n, _ in shapes},
            "cpu_paired_vs_off": {n: statistics.median(a / b for a, b in zip(cpu[n], cpu["off"]))
                                  for n, _ in shapes},
            "instructions_per_request": {n: v[0] for n, v in ir.items()},
        }, indent=2))
    return 0


def instructions(args, work: Path, url: str, sink: int, name: str,
                 ratio: float | None) -> tuple[float, str]:
    """Marginal instructions per request of `sloburn run` under `valgrind --tool=cachegrind`
    (counts are exact, so no rounds are needed), and the long run's spans exported."""
    counts = []
    spans = "-"
    for d in (int(x) for x in args.ir_durations.split(",")):
        cfg = work / f"ir-{name}-{d}.yaml"
        cfg.write_text(config(url, sink, ratio, args.ir_rate, d))
        export = work / f"ir-{name}-{d}.json"
        out = work / f"ir-{name}-{d}.cachegrind"
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               f"--cachegrind-out-file={out}",
               args.sloburn, "run", str(cfg), "--summary-export", str(export), "--quiet"]
        res, stdout, err = peers.run_measured(cmd, work, f"ir-{name}-{d}", d + 120)
        m = re.search(r"I\s+refs:\s+([\d,]+)", err)
        if res.exit_code not in (0, 99) or not m:
            raise SystemExit(f"cachegrind {name}: exit {res.exit_code}\n{err[-2000:]}")
        n = int(json.loads(export.read_text())["metrics"]["http_reqs"]["count"])
        counts.append((int(m.group(1).replace(",", "")), n))
        t = re.search(r"telemetry: (\d+) spans exported", stdout + err)
        spans = t.group(1) if t else "-"
    (i1, n1), (i2, n2) = counts
    return (i2 - i1) / max(n2 - n1, 1), spans


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/grpc.py — CPU per gRPC call: sloburn against k6 1.1's `k6/net/grpc`, same server, same
constant arrival rate, side by side in one run.

Issue 32 ("Beyond HTTP"), item 4: sloburn's CPU per call must be at most 0.5x k6's.
Python 3.11 plus grpcio and grpcio-health-checking (scripts/install-otel-test-tools.sh);
reuses bench/run.py's rusage runner.

What it does
  1. Starts a grpcio server (the standard grpc.health.v1 Health service, SERVING; one process,
     16 threads) on 127.0.0.1:<free port>, in a child process of this script. All traffic goes
     there; every run is bounded (--duration, killed after a grace period).
  2. Runs, interleaved --rounds times (noise hits both alike), at --rate calls per second for
     --duration seconds, one connection per VU:
       sloburn  run --url grpc://127.0.0.1:PORT --rate R/s --duration Ds  (the health check)
       k6       constant-arrival-rate R/s, client.load(health.proto), client.invoke(
                'grpc.health.v1.Health/Check', {}) after one client.connect per VU
     CPU is user+sys from os.wait4's rusage (the tool alone: the server is not its child);
     calls from --summary-export (`iterations.count`, one call each).
  3. Prints one markdown table: calls, CPU seconds per 10k calls (median of rounds), peak RSS,
     and sloburn's ratio to k6.

Usage
  python3 bench/grpc.py [--duration 10] [--rate 1000] [--rounds 3] [--sloburn PATH]
                        [--k6 PATH] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as peers  # noqa: E402  (bench/run.py: run_measured, log, REPO_ROOT, HOST)

HEALTH_PROTO = peers.REPO_ROOT / "src/http/grpc/health.proto"

SERVER = r"""
import sys
from concurrent import futures
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
checker = health.HealthServicer()
checker.set("", health_pb2.HealthCheckResponse.SERVING)
health_pb2_grpc.add_HealthServicer_to_server(checker, server)
port = server.add_insecure_port(sys.argv[1] + ":0")
server.start()
print(port, flush=True)
server.wait_for_termination(timeout=float(sys.argv[2]))
"""


def k6_script(address: str, rate: int, duration: int) -> str:
    return f"""import grpc from 'k6/net/grpc';
import {{ check }} from 'k6';
const client = new grpc.Client();
client.load([{json.dumps(str(HEALTH_PROTO.parent))}], 'health.proto');
let connected = false;
export const options = {{
  scenarios: {{ s: {{ executor: 'constant-arrival-rate', rate: {rate}, timeUnit: '1s',
    duration: '{duration}s', preAllocatedVUs: 20, maxVUs: 200 }} }},
}};
export default function () {{
  if (!connected) {{ client.connect('{address}', {{ plaintext: true }}); connected = true; }}
  const r = client.invoke('grpc.health.v1.Health/Check', {{}});
  check(r, {{ 'OK': (r) => r && r.status === grpc.StatusOK }});
}}
"""


def k6_binary(given: str | None) -> str:
    if given:
        return given
    out = subprocess.run(["bash", str(peers.REPO_ROOT / "scripts/install-k6.sh")],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the medians here")
    ap.add_argument("--k6", help="the k6 binary (default: scripts/install-k6.sh's)")
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN",
                    str(peers.REPO_ROOT / "target/release/sloburn")))
    args = ap.parse_args()
    if not 1 <= args.duration <= 60:
        print("--duration is 1..60 seconds", file=sys.stderr)
        return 2
    if not Path(args.sloburn).exists():
        print(f"no sloburn binary at {args.sloburn}: cargo build --release", file=sys.stderr)
        return 2
    args.sloburn = str(Path(args.sloburn).resolve())
    k6 = k6_binary(args.k6)
    work = Path(tempfile.mkdtemp(prefix="sloburn-grpc-bench-"))
    # The server ends by itself after every round could have run, whatever happens here.
    lifetime = args.rounds * 2 * (args.duration + 40) + 60
    server = subprocess.Popen([sys.executable, "-c", SERVER, peers.HOST, str(lifetime)],
                              stdout=subprocess.PIPE, text=True)
    tools = ["sloburn", "k6"]
    cpu: dict[str, list[float]] = {t: [] for t in tools}
    calls: dict[str, list[int]] = {t: [] for t in tools}
    rss: dict[str, list[float]] = {t: [] for t in tools}
    try:
        port = int(server.stdout.readline())
        address = f"{peers.HOST}:{port}"
        script = work / "grpc.js"
        script.write_text(k6_script(address, args.rate, args.duration))
        for r in range(args.rounds):
            for tool in tools:
                export = work / f"{tool}-{r}.json"
                if tool == "sloburn":
                    cmd = [args.sloburn, "run", "--url", f"grpc://{address}",
                           "--rate", f"{args.rate}/s", "--duration", f"{args.duration}s",
                           "--summary-export", str(export), "--quiet"]
                    env = None
                else:
                    cmd = [k6, "run", "--quiet", "--no-color", "--summary-export",
                           str(export), str(script)]
                    env = dict(os.environ, K6_NO_USAGE_REPORT="true")
                res, out, err = peers.run_measured(cmd, work, f"{tool}-{r}",
                                                   args.duration + 30, env=env)
                if res.exit_code != 0 or not export.exists():
                    print(f"{tool}: exit {res.exit_code}\n{out}\n{err}", file=sys.stderr)
                    return 1
                m = json.loads(export.read_text())["metrics"]
                n = int(m["iterations"]["count"])
                calls[tool].append(n)
                cpu[tool].append(res.cpu_s / n * 10_000)
                rss[tool].append(res.maxrss_mib)
                peers.log(f"round {r + 1} {tool}: {n} calls, {res.cpu_s:.2f} s CPU, "
                          f"{res.maxrss_mib:.0f} MiB")
    finally:
        server.kill()
        server.wait()
    k6_cpu = statistics.median(cpu["k6"])
    print(f"\n{args.rate} gRPC calls/s (grpc.health.v1.Health/Check) for {args.duration} s, "
          f"{args.rounds} rounds, grpcio server, 127.0.0.1\n")
    print("| tool | calls (median) | CPU s / 10k calls (median) | peak RSS MiB | vs k6 |")
    print("|---|---:|---:|---:|---:|")
    for tool in tools:
        c = statistics.median(cpu[tool])
        print(f"| {tool} | {int(statistics.median(calls[tool]))} | {c:.3f} | "
              f"{statistics.median(rss[tool]):.0f} | {c / k6_cpu:.2f}x |")
    ratio = statistics.median(cpu["sloburn"]) / k6_cpu
    print(f"\nsloburn / k6 CPU per call: {ratio:.2f}x (goal: at most 0.50x)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cpu_per_10k": {t: statistics.median(cpu[t]) for t in tools},
            "ratio": ratio,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

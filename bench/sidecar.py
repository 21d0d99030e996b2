#!/usr/bin/env python3
"""The sidecar at rest: `sloburn serve` with one profile every minute (10/s for 10 s against
`sloburn target`) and two SLOs, for --minutes (default 30). Every minute it reads the daemon's
RSS and CPU ticks from /proc at second 15 (the run is over) and second 55 (the next has not
started), and prints:

- the idle RSS between runs each minute, and RSS at minute N / RSS at minute 1;
- idle CPU (% of one core, only the seconds 15..55 of each minute, no scrapes) averaged over
  each 5-minute block, and the median of the blocks; and CPU over whole minutes (runs
  included), for comparison;
- blackbox_exporter's idle RSS beside it when `prometheus-blackbox-exporter` is installed
  (one ICMP-free HTTP module, idle for a minute), else "not installed".

    python3 -u bench/sidecar.py [--sloburn target/release/sloburn] [--minutes 30]

Outside CI. Only 127.0.0.1: the target and the daemon are started here on free ports. The load
is bounded (100 requests a minute) and so is the program (--minutes + about 2 minutes).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from common import free_port, require_binary, sloburn_arg, stop  # noqa: E402,F401  (bench/ is on sys.path)

HOST = "127.0.0.1"
TICK = os.sysconf("SC_CLK_TCK")


def config(port: int, tport: int, data: str) -> str:
    return f"""server: {{ listen: "{HOST}:{port}" }}
storage: {{ path: "{data}" }}
targets:
  app:
    url: http://{HOST}:{tport}/
    timeout: 2s
    checks:
      - status: 200
profiles:
  probe:
    target: app
    schedule: "* * * * *"
    overlap: skip
    executor: constant-arrival-rate
    rate: 10/s
    duration: 10s
    max_vus: 5
slos:
  app-availability: {{ target: app, sli: availability, objective: 99.9 }}
  app-latency: {{ target: app, sli: {{ latency: {{ under: 100ms }} }}, objective: 99 }}
"""


def rss_mib(pid: int) -> float:
    return rss_parts(pid)[0]


def rss_parts(pid: int) -> tuple[float, float, float]:
    """VmRSS, RssAnon and RssFile in MiB (the file part is code and constants, shared with the
    page cache)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = [int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1))
           for k in ("VmRSS", "RssAnon", "RssFile")]
    return kib[0] / 1024, kib[1] / 1024, kib[2] / 1024


def cpu_seconds(pid: int) -> float:
    # Fields after the command (which may hold spaces): utime is the 14th field, stime the 15th.
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def wait_http(url: str, proc, seconds: float = 20) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def blackbox_idle_rss(work: Path) -> str:
    binary = shutil.which("prometheus-blackbox-exporter") or shutil.which("blackbox_exporter")
    if not binary:
        return "not installed"
    port = free_port()
    cfg = work / "blackbox.yml"
    cfg.write_text("modules:\n  http_2xx:\n    prober: http\n    timeout: 2s\n")
    proc = subprocess.Popen([binary, f"--config.file={cfg}", f"--web.listen-address={HOST}:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_http(f"http://{HOST}:{port}/metrics", proc):
            return "did not start"
        time.sleep(60)
        return f"{rss_mib(proc.pid):.1f} MiB (idle 60 s, no probes)"
    finally:
        stop(proc)


def main() -> int:
    ap = argparse.ArgumentParser()
    sloburn_arg(ap)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--json", help="also write the figures here (bench/all.py reads it)")
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    tport, port = free_port(), free_port()
    target = subprocess.Popen([binary, "target", "--listen", f"{HOST}:{tport}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cfg = work / "sidecar.yaml"
        cfg.write_text(config(port, tport, f"{work}/data"))
        log = open(work / "serve.log", "w")
        daemon = subprocess.Popen([binary, "serve", "--config", str(cfg), "--no-watch"],
                                  stdout=log, stderr=log)
        try:
            if not wait_http(f"http://{HOST}:{port}/healthz", daemon):
                print((work / "serve.log").read_text())
                raise SystemExit("the daemon did not start")
            start_rss = rss_mib(daemon.pid)
            print(f"sidecar: 1 profile (10/s for 10 s, every minute), 2 SLOs, {args.minutes} min; "
                  f"daemon pid {daemon.pid}, binary {binary}; RSS at start {start_rss:.1f} MiB",
                  flush=True)
            print("| minute | idle RSS MiB (s 55) | anon / file MiB | idle CPU % (s 15-55) "
                  "| CPU % (whole minute) |\n|---:|---:|---:|---:|---:|", flush=True)
            first = (int(time.time()) // 60 + 1) * 60  # the first scheduled run
            rows = []
            prev_end = None
            for m in range(args.minutes):
                base = first + 60 * m
                time.sleep(max(0.0, base + 15 - time.time()))
                if daemon.poll() is not None:
                    raise SystemExit(f"the daemon exited with {daemon.returncode}")
                c15, t15 = cpu_seconds(daemon.pid), time.monotonic()
                time.sleep(max(0.0, base + 55 - time.time()))
                c55, t55 = cpu_seconds(daemon.pid), time.monotonic()
                rss, anon, file = rss_parts(daemon.pid)
                idle = 100 * (c55 - c15) / (t55 - t15)
                whole = None
                if prev_end is not None:
                    whole = 100 * (c55 - prev_end[0]) / (t55 - prev_end[1])
                prev_end = (c55, t55)
                rows.append((m + 1, rss, c55 - c15, t55 - t15, whole))
                print(f"| {m + 1} | {rss:.1f} | {anon:.1f} / {file:.1f} | {idle:.3f} | "
                      + (f"{whole:.3f}" if whole is not None else "n/a") + " |", flush=True)
            runs = 0.0
            with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("sloburn_runs_total{"):
                        runs += float(line.rsplit(" ", 1)[1])
            blocks = []
            for i in range(0, len(rows) - len(rows) % 5 or len(rows), 5):
                chunk = rows[i:i + 5]
                blocks.append(100 * sum(r[2] for r in chunk) / sum(r[3] for r in chunk))
            wholes = [r[4] for r in rows if r[4] is not None]
            rss1, rssn = rows[0][1], rows[-1][1]
            print("\n| figure | sloburn |\n|---|---:|")
            print(f"| RSS at start MiB | {start_rss:.1f} |")
            print(f"| idle RSS minute 1 / minute {rows[-1][0]} MiB | {rss1:.1f} / {rssn:.1f} |")
            print(f"| idle RSS minute {rows[-1][0]} / minute 1 | {rssn / rss1:.3f} |")
            print(f"| max idle RSS MiB | {max(r[1] for r in rows):.1f} |")
            print("| idle CPU % per 5-minute block | "
                  + ", ".join(f"{b:.3f}" for b in blocks) + " |")
            print(f"| idle CPU % (median of blocks) | {statistics.median(blocks):.3f} |")
            if wholes:
                print(f"| CPU % whole minutes, runs included (median) | "
                      f"{statistics.median(wholes):.3f} |")
            print(f"| runs finished | {runs:.0f} |")
            bb = blackbox_idle_rss(work)
            print(f"\nblackbox_exporter idle RSS: {bb}", flush=True)
            if args.json:
                # MB as the goals say them (10^6 bytes); the table above is in MiB.
                Path(args.json).write_text(json.dumps({
                    "idle_rss_mb": max(r[1] for r in rows) * 1.048576,
                    "idle_cpu_pct": statistics.median(blocks),
                    "rss_drift": rssn / rss1,
                    "minutes": args.minutes,
                    "peers": {"idle_rss_mb": f"blackbox_exporter: {bb}"},
                }, indent=2))
            return 0
        finally:
            stop(daemon, target, timeout=30)


if __name__ == "__main__":
    sys.exit(main())

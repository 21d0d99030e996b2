#!/usr/bin/env python3
"""Soak: `sloburn serve` with 20 profiles on 1-minute schedules against `sloburn target` with
faults (latency with a long tail, 2 % errors, resets, a stall every 45 s), for 30 minutes. Each
minute it prints the daemon's RSS, open descriptors, threads, the time one `/metrics` scrape
takes and the runs finished so far; at the end a table at minutes 1, 10 and 30. Flat is the bar:
a leak of memory, descriptors or tasks shows as a rising column.

RSS, descriptors and threads are read from /proc; tasks are the daemon's own
`sloburn_runtime_alive_tasks` (tokio's alive-task count) from the same scrape that is timed.

    python3 -u bench/soak.py [--sloburn target/release/sloburn] [--minutes 30] [--profiles 20]
                             [--hostile]

With `--hostile`, two more profiles send to `bench/hostile.py`: one HTTP target whose body never
ends, and one WebSocket target that floods pings and frames matching no `expect`.

Outside CI. Only 127.0.0.1: the target and the daemon are started here on free ports.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from common import free_port, require_binary, sloburn_arg, stop  # noqa: E402,F401  (bench/ is on sys.path)

EXECUTORS = [
    # (executor block, the rest of the profile), cycled over the profiles.
    "executor: constant-arrival-rate\n    rate: 20/s\n    duration: 20s\n    max_vus: 20",
    "executor: constant-vus\n    vus: 2\n    duration: 15s",
    "executor: ramping-arrival-rate\n    start_rate: 5/s\n    stages:\n"
    "      - { duration: 10s, target: 30/s }\n      - { duration: 10s, target: 0/s }\n"
    "    pre_allocated_vus: 5\n    max_vus: 20",
    "executor: shared-iterations\n    vus: 3\n    iterations: 200\n    max_duration: 30s",
]

# Query overrides on top of the target's own faults, one per target.
TARGET_PATHS = {
    "plain": "/",
    "slow": "/?latency=20ms&jitter=10ms",
    "flaky": "/?error_ratio=0.1",
    "big": "/?body_size=16KiB",
}


SAMPLE_EVERY = 5  # seconds between /proc samples within a minute


HOSTILE = """  hostile-body:
    url: http://127.0.0.1:{port}/endless
    timeout: 2s
  hostile-ws:
    url: ws://127.0.0.1:{port}/ws
    body: hello
    expect: never-sent
    timeout: 2s
"""

HOSTILE_PROFILES = """  h-body:
    target: hostile-body
    schedule: "* * * * *"
    overlap: skip
    executor: constant-arrival-rate
    rate: 5/s
    duration: 20s
    max_vus: 20
  h-ws:
    target: hostile-ws
    schedule: "* * * * *"
    overlap: skip
    executor: constant-arrival-rate
    rate: 5/s
    duration: 20s
    max_vus: 20
"""


def config(port: int, target_port: int, data: str, profiles: int,
           hostile_port: int | None = None) -> str:
    out = [f'server: {{ listen: "127.0.0.1:{port}", max_in_flight: 200 }}',
           f'storage: {{ path: "{data}", flush_interval: 5s }}', "targets:"]
    for name, path in TARGET_PATHS.items():
        out.append(f"  {name}:\n    url: http://127.0.0.1:{target_port}{path}\n    timeout: 2s\n"
                   "    checks:\n      - status: 200\n      - duration_under: 100ms")
    if hostile_port:
        out.append(HOSTILE.format(port=hostile_port).rstrip("\n"))
    out.append("profiles:")
    if hostile_port:
        out.append(HOSTILE_PROFILES.rstrip("\n"))
    names = list(TARGET_PATHS)
    for i in range(profiles):
        out.append(f"  p{i:02}:\n    target: {names[i % len(names)]}\n"
                   f"    schedule: \"* * * * *\"\n    jitter: 10s\n    overlap: skip\n"
                   f"    {EXECUTORS[i % len(EXECUTORS)]}\n"
                   "    thresholds:\n      http_req_duration: [\"p(95)<200\"]")
    out.append("slos:")
    for name in names:
        out.append(f"  {name}-availability:\n    target: {name}\n    sli: availability\n"
                   "    objective: 99")
        out.append(f"  {name}-latency:\n    target: {name}\n"
                   "    sli: { latency: { under: 50ms } }\n    objective: 95")
    return "\n".join(out) + "\n"


def proc_figures(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss": rss, "threads": threads, "fds": fds}


def scrape(port: int) -> tuple[float, int, str]:
    """The best of three scrapes (ms), the exposition's size and its text."""
    best, text = None, ""
    for _ in range(3):
        t0 = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        ms = (time.perf_counter() - t0) * 1000
        best = ms if best is None else min(best, ms)
    return best, len(text), text


def metric_sum(text: str, name: str, label_re: str = "") -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (not label_re or re.search(label_re, line)):
            rest = line[len(name):]
            if rest[:1] in ("{", " "):
                total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    sloburn_arg(ap)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--profiles", type=int, default=20)
    ap.add_argument("--hostile", action="store_true",
                    help="two more profiles against bench/hostile.py (endless body, ping flood)")
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    tport, port = free_port(), free_port()
    target = subprocess.Popen(
        [binary, "target", "--listen", f"127.0.0.1:{tport}", "--workers", "1",
         "--latency", "5ms", "--jitter", "3ms", "--distribution", "lognormal",
         "--error-ratio", "0.02", "--reset-ratio", "0.005",
         "--stall-every", "45s", "--stall-for", "1s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hport = free_port() if args.hostile else None
    hostile = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("hostile.py")), "--port", str(hport)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if hport else None
    with tempfile.TemporaryDirectory() as work:
        cfg = Path(work) / "soak.yaml"
        cfg.write_text(config(port, tport, f"{work}/data", args.profiles, hport))
        log = open(Path(work) / "serve.log", "w")
        daemon = subprocess.Popen([binary, "--log-format", "json", "serve", "--config", str(cfg),
                                   "--no-watch"], stdout=log, stderr=log)
        try:
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)
            else:
                print(Path(work, "serve.log").read_text())
                raise SystemExit("the daemon did not start")
            start = time.time()
            print(f"soak: {args.profiles} profiles, {args.minutes} min, daemon pid {daemon.pid}, "
                  f"binary {binary}")
            print("RSS and threads at the minute; fds as min-max over the minute's samples (every "
                  f"{SAMPLE_EVERY} s: connections come and go with the runs); scrape = best of 3")
            print("| minute | RSS MiB | RSS max MiB | open fds | threads | tasks | scrape ms "
                  "| scrape KiB | runs done | requests |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
            rows = {}
            for minute in range(1, args.minutes + 1):
                samples = []
                while True:
                    due = start + 60 * (minute - 1) + SAMPLE_EVERY * (len(samples) + 1)
                    if due > start + 60 * minute + 0.01:
                        break
                    time.sleep(max(0.0, due - time.time()))
                    if daemon.poll() is not None:
                        raise SystemExit(f"the daemon exited with {daemon.returncode}")
                    samples.append(proc_figures(daemon.pid))
                p = samples[-1]
                rss_max = max(x["rss"] for x in samples)
                fds = (min(x["fds"] for x in samples), max(x["fds"] for x in samples))
                threads = max(x["threads"] for x in samples)
                ms, size, text = scrape(port)
                tasks = metric_sum(text, "sloburn_runtime_alive_tasks")
                runs = metric_sum(text, "sloburn_runs_total")
                reqs = metric_sum(text, "sloburn_http_reqs_total")
                rows[minute] = (p["rss"], rss_max, fds, threads, tasks, ms)
                print(f"| {minute} | {p['rss']:.1f} | {rss_max:.1f} | {fds[0]}-{fds[1]} "
                      f"| {threads} | {tasks:.0f} | {ms:.1f} | {size / 1024:.0f} | {runs:.0f} "
                      f"| {reqs:.0f} |", flush=True)
            print("\nfinal:\n| minute | RSS MiB | RSS max MiB | open fds | threads | tasks "
                  "| scrape ms |\n|---:|---:|---:|---:|---:|---:|---:|")
            for m in (1, 10, 30):
                if m in rows:
                    rss, rss_max, fds, threads, tasks, ms = rows[m]
                    print(f"| {m} | {rss:.1f} | {rss_max:.1f} | {fds[0]}-{fds[1]} | {threads} "
                          f"| {tasks:.0f} | {ms:.1f} |")
            errors = sum(1 for line in Path(work, "serve.log").read_text().splitlines()
                         if '"level":"ERROR"' in line)
            print(f"\ndaemon log lines at ERROR: {errors}", flush=True)
            if hostile:
                ended = metric_sum(text, "sloburn_http_reqs_total", 'target="hostile')
                print(f"requests to the hostile targets that ended (each by a bound): {ended:.0f}")
            return 0
        finally:
            stop(daemon, target, timeout=60)
            if hostile:
                hostile.kill()
                hostile.wait()


if __name__ == "__main__":
    sys.exit(main())

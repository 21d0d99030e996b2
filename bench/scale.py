#!/usr/bin/env python3
"""Scale: one `sloburn serve` with N profiles (default 1000), each with its own target on one
local nginx (or `sloburn target` when nginx is missing), a small rate, a 1-minute schedule and
two SLOs. Prints, as markdown tables:

- growth: for a few N (default 100, 500 and N), the /metrics scrape's time (timed with curl
  when installed, as Prometheus' Go client reads a streamed body; Python's is slower), size, size per
  profile and series count, and the RSS after every profile's first run (a fresh daemon each);
- at N: schedule lateness (a run's `started_at` from /api/runs minus the minute it was due, for
  every scheduled run), the p99 of `sloburn_iteration_lateness_seconds` over all profiles, the
  RSS after each minute, the scrape, the daemon's CPU between runs (20 s to 40 s past each
  minute), and the time `POST /api/reload` takes to re-apply the whole config (median and max
  of --reloads);
- at N, the two scrape formats side by side (issue 33): the classic text and the protobuf
  exposition with native buckets only (`server.native_histograms: {classic_buckets: false}`),
  --format-rounds scrapes of each in alternating blocks, 40 s past the first watched minute:
  bytes, the protobuf's share of the text's, curl's time and the daemon's CPU per scrape.

    python3 -u bench/scale.py [--sloburn target/release/sloburn] [--profiles 1000]
                              [--sizes 100,500] [--minutes 3] [--rate 1] [--duration 5]
                              [--extra 'phase_histograms: false']

Outside CI. Only 127.0.0.1: nginx (or the target) and the daemon are started here on free ports;
each request loop is bounded (a profile runs `--duration` seconds at `--rate`), and the whole
program by --minutes plus start-up (at most a few minutes more).
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
from common import free_port  # noqa: E402  (bench/ is on sys.path when run as a script)

HOST = "127.0.0.1"
TOKEN = "scale-bench-token"


def start_nginx(work: Path, port: int):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not nginx:
        return None
    (work / "logs").mkdir(exist_ok=True)
    conf = work / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx.err warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000;
  client_body_temp_path {work}/tmp; proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp;
  uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
  server {{ listen {HOST}:{port} backlog=4096; location / {{ return 200 "ok\\n"; }} }}
}}
""")
    (work / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen([nginx, "-p", str(work), "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def config(port: int, tport: int, data: str, n: int, rate: int, duration: int, extra: str,
           slos: int = 2) -> str:
    out = [f'server: {{ listen: "{HOST}:{port}", admin_token: "${{env:SLOBURN_SCALE_TOKEN}}", '
           'native_histograms: { schema: 3, classic_buckets: false } }',
           f'storage: {{ path: "{data}", flush_interval: 10s }}', "targets:"]
    for i in range(n):
        out.append(f"  t{i:04}:\n    url: http://{HOST}:{tport}/p{i}\n    timeout: 2s\n"
                   "    checks:\n      - status: 200")
        if extra:
            out.append(f"    {extra}")
    out.append("profiles:")
    for i in range(n):
        out.append(f"  p{i:04}:\n    target: t{i:04}\n    schedule: \"* * * * *\"\n"
                   "    run_on_start: true\n    overlap: skip\n"
                   f"    executor: constant-arrival-rate\n    rate: {rate}/s\n"
                   f"    duration: {duration}s\n    max_vus: 4")
    out.append("slos:" if slos else "")
    for i in range(n if slos else 0):
        out.append(f"  t{i:04}-availability: {{ target: t{i:04}, sli: availability, "
                   "objective: 99 }")
        if slos > 1:
            out.append(f"  t{i:04}-latency: {{ target: t{i:04}, "
                       "sli: { latency: { under: 100ms } }, objective: 95 }")
    return "\n".join(out) + "\n"


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024
    hwm = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) / 1024
    return rss, hwm


def get(port: int, path: str, timeout: float = 30, accept: str | None = None) -> bytes:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


CURL = shutil.which("curl")


# What Prometheus sends with native histograms on (the protobuf format first).
PROTOBUF_ACCEPT = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                   "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3")


def timed_get(port: int, path: str, accept: str | None = None) -> float:
    """ms for a whole GET, the body read and dropped. With curl when installed: /metrics
    streams its text in chunks, and Python's http.client decodes a chunked body slowly enough
    (~15 ms of 21 MB) to be a good part of the figure; curl, like Prometheus' Go client, is not."""
    headers = [f"Authorization: Bearer {TOKEN}"] + ([f"Accept: {accept}"] if accept else [])
    if CURL:
        out = subprocess.run([CURL, "-sS", "--fail", "--max-time", "30", "-o", os.devnull,
                              "-w", "%{time_total}"]
                             + [a for h in headers for a in ("-H", h)]
                             + [f"http://{HOST}:{port}{path}"],
                             capture_output=True, text=True, check=True)
        return float(out.stdout) * 1000
    t0 = time.perf_counter()
    get(port, path, accept=accept)
    return (time.perf_counter() - t0) * 1000


def compare_formats(port: int, pid: int, rounds: int) -> dict:
    """The text and the native-only protobuf scrape side by side: `rounds` scrapes of each, in
    alternating blocks of 5 (so a neighbour's load falls on both), timed with curl and by the
    daemon's CPU over each block (clock ticks: a block is ~0.2 s of CPU, so a tick is ~5 %)."""
    out = {}
    for name, accept in (("text", None), ("protobuf", PROTOBUF_ACCEPT)):
        out[name] = {"bytes": len(get(port, "/metrics", accept=accept)), "ms": [], "cpu_ms": 0.0}
    done = 0
    while done < rounds:
        block = min(5, rounds - done)
        for name, accept in (("text", None), ("protobuf", PROTOBUF_ACCEPT)):
            c0 = cpu_s(pid)
            out[name]["ms"] += [timed_get(port, "/metrics", accept) for _ in range(block)]
            out[name]["cpu_ms"] += (cpu_s(pid) - c0) * 1000
        done += block
    for f in out.values():
        f["cpu_ms"] /= rounds
        f["ms"] = statistics.median(f["ms"])
    return out


def scrape(port: int, times: int = 5) -> tuple[float, float, int, str]:
    """Median and max scrape ms over `times` timed scrapes, then the size in bytes and the text
    of one more (untimed)."""
    ms = [timed_get(port, "/metrics") for _ in range(times)]
    body = get(port, "/metrics")
    return statistics.median(ms), max(ms), len(body), body.decode()


def series(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def metric_sum(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def lateness_p99(text: str) -> float | None:
    """p99 (seconds, the bucket's upper bound) of the summed iteration-lateness histograms."""
    name = "sloburn_iteration_lateness_seconds_bucket"
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            le = re.search(r'[{,]le="([^"]+)"', line).group(1)
            bound = float("inf") if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(line.split("}", 1)[1].split()[0])
    if not buckets or buckets.get(float("inf"), 0) == 0:
        return None
    total = buckets[float("inf")]
    for bound in sorted(buckets):
        if buckets[bound] >= 0.99 * total:
            return bound
    return None


def wait_ready(port: int, daemon, log: Path, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if daemon.poll() is not None:
            raise SystemExit(f"the daemon exited with {daemon.returncode}:\n{log.read_text()[-3000:]}")
        try:
            get(port, "/healthz", timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the daemon did not start:\n{log.read_text()[-3000:]}")


def runs_done(port: int) -> list[dict]:
    return [r for r in json.loads(get(port, "/api/runs"))["runs"] if r.get("finished_at")]


class Daemon:
    def __init__(self, binary: str, work: Path, tport: int, n: int, args, tag: str):
        self.port = free_port()
        self.cfg = work / f"scale-{tag}.yaml"
        self.cfg.write_text(config(self.port, tport, f"{work}/data-{tag}", n, args.rate,
                                   args.duration, args.extra, args.slos))
        self.log = work / f"serve-{tag}.log"
        env = dict(os.environ, SLOBURN_SCALE_TOKEN=TOKEN)
        self.started = time.time()
        self.proc = subprocess.Popen([binary, "--log-format", "json", "serve", "--config",
                                      str(self.cfg), "--no-watch"], env=env,
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        wait_ready(self.port, self.proc, self.log)

    def wait_runs(self, count: int, seconds: float) -> int:
        deadline = time.time() + seconds
        done = 0
        while time.time() < deadline:
            done = len(runs_done(self.port))
            if done >= count:
                break
            time.sleep(1)
        return done

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN", "target/release/sloburn"))
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--sizes", default="100,500", help="smaller N for the growth table")
    ap.add_argument("--minutes", type=int, default=3, help="scheduled minutes watched at N")
    ap.add_argument("--rate", type=int, default=1, help="requests per second per profile")
    ap.add_argument("--duration", type=int, default=5, help="seconds per run")
    ap.add_argument("--reloads", type=int, default=5)
    ap.add_argument("--slos", type=int, default=2, choices=(0, 1, 2), help="SLOs per target")
    ap.add_argument("--extra", default="", help="a line added to every target, e.g. "
                    "'phase_histograms: false'")
    ap.add_argument("--format-rounds", type=int, default=20,
                    help="scrapes of each format in the side-by-side comparison (0: none)")
    ap.add_argument("--json", help="also write the figures at N here (bench/all.py reads it)")
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    n = args.profiles
    sizes = sorted({int(s) for s in args.sizes.split(",") if s and int(s) < n}) + [n]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tport = free_port()
        server = start_nginx(work, tport)
        server_name = "nginx"
        if server is None:
            server_name = "sloburn target"
            server = subprocess.Popen([binary, "target", "--listen", f"{HOST}:{tport}",
                                       "--workers", "1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        print(f"scale: {n} profiles (1 target, {args.slos} SLOs, {args.rate}/s for {args.duration}s, "
              f"every minute) against {server_name} on {HOST}:{tport}; binary {binary}"
              + (f"; every target has `{args.extra}`" if args.extra else ""), flush=True)
        try:
            growth = []
            final = None
            for size in sizes:
                d = Daemon(binary, work, tport, size, args, str(size))
                try:
                    done = d.wait_runs(size, 60 + args.duration)
                    time.sleep(1)
                    med, worst, nbytes, text = scrape(d.port)
                    rss, hwm = rss_mib(d.proc.pid)
                    growth.append((size, done, med, worst, nbytes, series(text), rss, hwm))
                    print(f"  N={size}: {done} first runs, scrape {med:.1f} ms, "
                          f"{nbytes / 1024:.0f} KiB, RSS {rss:.1f} MiB", flush=True)
                finally:
                    if size != n:
                        d.stop()
                    else:
                        final = d
            print("\n| profiles | scrape ms (median / max of 5) | scrape KiB | bytes per profile "
                  "| series | series per profile | RSS MiB after first runs | peak RSS MiB |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|")
            for size, done, med, worst, nbytes, ser, rss, hwm in growth:
                print(f"| {size} | {med:.1f} / {worst:.1f} | {nbytes / 1024:.0f} | "
                      f"{nbytes / size:,.0f} | {ser:,} | {ser / size:.1f} | {rss:.1f} | {hwm:.1f} |")
            if len(growth) > 1:
                (n0, *_, b0, s0, r0, _), (n1, *_, b1, s1, r1, _) = growth[0], growth[-1]
                print(f"\ngrowth from {n0} to {n1} profiles: {(b1 - b0) / (n1 - n0):,.0f} "
                      f"bytes of scrape and {(r1 - r0) * 1024 / (n1 - n0):.1f} KiB of RSS per "
                      "added profile", flush=True)

            d = final
            print(f"\nat N={n}, {args.minutes} scheduled minutes:", flush=True)
            minutes = []
            formats = None
            first_minute = (int(time.time()) // 60 + 1) * 60
            between: list[float] = []
            for m in range(args.minutes):
                # The daemon's CPU from 20 s to 40 s past each minute, between runs (which
                # take a few seconds) and before this program's scrape.
                t20 = first_minute + 60 * m + 20
                time.sleep(max(0.0, t20 - time.time()))
                c20, w20 = cpu_s(d.proc.pid), time.monotonic()
                # Then RSS and scrape 40 s past the minute: the runs are over, the next has
                # not started.
                due = first_minute + 60 * m + 40
                time.sleep(max(0.0, due - time.time()))
                if d.proc.poll() is not None:
                    raise SystemExit(f"the daemon exited with {d.proc.returncode}")
                between.append((cpu_s(d.proc.pid) - c20) / (time.monotonic() - w20) * 100)
                rss, hwm = rss_mib(d.proc.pid)
                med, worst, nbytes, text = scrape(d.port)
                minutes.append((m + 1, rss, hwm, med, worst, nbytes))
                print(f"  minute {m + 1}: RSS {rss:.1f} MiB, scrape {med:.1f} ms, CPU between "
                      f"runs {between[-1]:.2f}% of a core", flush=True)
                if m == 0 and args.format_rounds:
                    formats = compare_formats(d.port, d.proc.pid, args.format_rounds)
            runs = runs_done(d.port)
            # Signed: a run's start minus the nearest minute (a schedule of "* * * * *"), for
            # the watched minutes only (a `run_on_start` run is triggered as "schedule" too).
            late = sorted(r["started_at"] - round(r["started_at"] / 60) * 60 for r in runs
                          if r["trigger"] == "schedule" and r["started_at"] >= first_minute - 5)
            text = scrape(d.port, 1)[3]
            p99_iter = lateness_p99(text)
            failed = metric_sum(text, 'sloburn_runs_total{profile="p0000",result="failed"}')
            reload_ms = []
            for _ in range(args.reloads):
                req = urllib.request.Request(f"http://{HOST}:{d.port}/api/reload", method="POST",
                                             headers={"Authorization": f"Bearer {TOKEN}"})
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=60) as r:
                    r.read()
                reload_ms.append((time.perf_counter() - t0) * 1000)
                time.sleep(1)
            rss_after_reload = rss_mib(d.proc.pid)[0]
            print("\n| minute | RSS MiB | peak RSS MiB | scrape ms (median / max of 5) "
                  "| scrape KiB |\n|---:|---:|---:|---:|---:|")
            for m, rss, hwm, med, worst, nbytes in minutes:
                print(f"| {m} | {rss:.1f} | {hwm:.1f} | {med:.1f} / {worst:.1f} "
                      f"| {nbytes / 1024:.0f} |")

            def pct(q: float) -> float:
                return late[min(len(late) - 1, int(q * len(late)))] * 1000 if late else float("nan")

            if formats:
                text_bytes = formats["text"]["bytes"]
                print(f"\n| format ({n} profiles, {args.format_rounds} scrapes each) | bytes "
                      "| share of the text's bytes | scrape ms (curl, median) "
                      "| daemon CPU ms per scrape |\n|---|---:|---:|---:|---:|")
                for name, label in (("text", "classic text 0.0.4"),
                                    ("protobuf", "protobuf, native buckets only")):
                    f = formats[name]
                    print(f"| {label} | {f['bytes']:,} | {f['bytes'] / text_bytes * 100:.1f} % "
                          f"| {f['ms']:.1f} | {f['cpu_ms']:.1f} |")
            print("\n| figure | value |\n|---|---:|")
            print(f"| scheduled runs seen | {len(late)} (expected {n * args.minutes}) |")
            print(f"| schedule lateness min / p50 / p99 / max ms | "
                  f"{late[0] * 1000 if late else float('nan'):.0f} / {pct(0.5):.0f} / "
                  f"{pct(0.99):.0f} / {late[-1] * 1000 if late else float('nan'):.0f} |")
            print("| iteration lateness p99 (bucket bound) ms | "
                  + (f"{p99_iter * 1000:g}" if p99_iter is not None else "n/a") + " |")
            print(f"| reload ms (median / max of {args.reloads}) | "
                  f"{statistics.median(reload_ms):.0f} / {max(reload_ms):.0f} |")
            print(f"| RSS MiB after the reloads | {rss_after_reload:.1f} |")
            print(f"| daemon CPU between runs, % of a core (median of {len(between)}) | "
                  f"{statistics.median(between):.2f} |")
            print(f"| failed runs of p0000 (sanity) | {failed:.0f} |")
            errors = sum(1 for line in d.log.read_text().splitlines()
                         if '"level":"ERROR"' in line)
            print(f"\ndaemon log lines at ERROR: {errors}", flush=True)
            if args.json:
                mib = 1.048576  # MB as the goals say them
                Path(args.json).write_text(json.dumps({
                    "profiles": n,
                    "lateness_p99_ms": pct(0.99) if late else None,
                    "scrape_ms": statistics.median(m[3] for m in minutes) if minutes else None,
                    "scrape_mb": max(m[5] for m in minutes) / 1e6 if minutes else None,
                    "rss_mb": max(m[1] for m in minutes) * mib if minutes else None,
                    "peak_rss_mb": max(m[2] for m in minutes) * mib if minutes else None,
                    "reload_s": max(reload_ms) / 1000,
                    "formats": formats,
                    "between_runs_cpu_pct": statistics.median(between),
                    "growth": [{"profiles": g[0], "scrape_bytes": g[4], "series": g[5],
                                "rss_mib": g[6]} for g in growth],
                }, indent=2))
            d.stop()
            return 0
        finally:
            if final is not None and final.proc.poll() is None:
                final.stop()
            server.terminate()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/run.py — sloburn vs its peers (wrk, hey, oha, k6, vegeta) in one run, one table.

Issue "load engine", item 7.  Python 3.11, standard library only.

What it does
  1. Writes a temp nginx config (worker_processes 1, access_log off, keepalive_requests 100000,
     a small static file) and starts nginx on 127.0.0.1:<free port>.  nginx runs for the whole
     benchmark.  All traffic goes to that address only; every load run is bounded in time
     (--duration, default 5 s) and killed after duration + a grace period if it hangs.
  2. For each tool, sequentially (no CPU pinning: the machine has 2 cores):
       a. saturation: 50 connections / VUs for D seconds, as fast as possible -> req/s
       b. fixed rate: 5000 req/s for D seconds (only tools with a rate limiter: oha -q,
          hey -q per worker, k6 constant-arrival-rate, vegeta, sloburn --rate; wrk has none and
          wrk2 is not packaged) -> CPU seconds (user+sys, from os.wait4 rusage, which includes
          reaped children) per 10,000 completed requests, peak RSS (ru_maxrss), and
          achieved/target = completed requests / (rate * D).
     Request counts come from each tool's own output (wrk/hey text, oha JSON, k6 and sloburn
     --summary-export JSON, vegeta report JSON).
  3. Prints a markdown table plus notes (errors, non-2xx, skips) and optionally writes JSON.

Usage
  python3 bench/run.py [--duration 5] [--tools wrk,hey,oha,k6,vegeta,sloburn]
                       [--sloburn PATH | env SLOBURN] [--json FILE] [--logs DIR]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field, asdict
from pathlib import Path

from common import free_port  # bench/ is on sys.path when run as a script

HOST = "127.0.0.1"  # the only address this benchmark ever sends traffic to
ALL_TOOLS = ["wrk", "hey", "oha", "k6", "vegeta", "sloburn", "sloburn-before"]
# `sloburn-before` runs only when --sloburn-before names a second binary (a before/after table).
DEFAULT_TOOLS = [t for t in ALL_TOOLS if t != "sloburn-before"]
REPO_ROOT = Path(__file__).resolve().parent.parent
BODY = b"sloburn bench: hello from nginx\n" * 4  # 128 bytes, a small static file


# --------------------------------------------------------------------------------------------
# results

@dataclass
class RunResult:
    """One measured run of one tool."""
    mode: str                      # "saturation" | "fixed"
    cmd: list[str]
    exit_code: int | None = None
    wall_s: float = 0.0
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    maxrss_mib: float = 0.0
    requests: int | None = None    # completed requests (any status), from the tool's output
    ok_2xx: int | None = None      # responses with 2xx status, when the tool reports it
    errors: int | None = None      # transport errors / non-2xx the tool reports
    tool_rps: float | None = None  # requests per second as the tool itself reports it
    dropped: int | None = None     # k6 dropped_iterations (fixed rate)
    aborted: int | None = None     # in flight at the deadline, cancelled (oha); not errors
    note: str = ""
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s


@dataclass
class ToolResult:
    tool: str
    binary: str | None = None
    version: str = ""
    skipped: str = ""              # reason, when the tool was not run at all
    saturation: RunResult | None = None
    fixed: RunResult | None = None
    # derived figures (filled by derive())
    sat_rps: float | None = None
    cpu_per_10k: float | None = None
    peak_rss_mib: float | None = None
    rss_from: str = ""             # "fixed" or "saturation" (tools without a rate limiter)
    achieved_ratio: float | None = None
    sat_cpu_per_10k: float | None = None   # CPU per 10k requests of the saturation run
    # With --rounds > 1: each round's figures; the fields above are then the medians.
    rounds: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# helpers

def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def find_binary(name: str, extra: list[Path] = ()) -> str | None:
    for p in extra:
        if p and p.is_file() and os.access(p, os.X_OK):
            return str(p)
    found = shutil.which(name)
    if found and "/.pyenv/shims/" in found:
        # pyenv shims are bash scripts that exec the real binary; measure the binary itself.
        real = Path(sysconfig.get_path("scripts")) / name
        if real.is_file():
            return str(real)
    return found


def tool_version(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0].split(" Copyright")[0].strip() if out else ""


def run_measured(cmd: list[str], workdir: Path, name: str, timeout_s: float,
                 env: dict | None = None) -> tuple[RunResult, str, str]:
    """Run cmd to completion, return rusage-based figures plus stdout/stderr text.

    Output goes to files (not pipes) so os.wait4 can reap the process directly and give its
    rusage: ru_utime/ru_stime/ru_maxrss of the tool, including children it waited for.
    """
    out_path = workdir / f"{name}.stdout"
    err_path = workdir / f"{name}.stderr"
    res = RunResult(mode="", cmd=cmd)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                cwd=workdir, env=env, start_new_session=True)
        killed = threading.Event()

        def _kill() -> None:
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, _kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from re-waiting
        res.wall_s = time.monotonic() - t0
    res.exit_code = proc.returncode
    res.timed_out = killed.is_set()
    res.cpu_user_s = ru.ru_utime
    res.cpu_sys_s = ru.ru_stime
    res.maxrss_mib = ru.ru_maxrss / 1024.0  # Linux: KiB
    return res, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")


# --------------------------------------------------------------------------------------------
# nginx

class Nginx:
    def __init__(self, workdir: Path, http2: bool = False):
        """`http2`: the port speaks HTTP/2 over cleartext with prior knowledge (h2c) only."""
        self.dir = workdir / "nginx"
        self.port = free_port()
        self.http2 = http2
        self.proc: subprocess.Popen | None = None
        self.binary = find_binary("nginx", [Path("/usr/sbin/nginx")])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/index.html"

    def start(self) -> None:
        if not self.binary:
            raise SystemExit("bench: nginx not found; run bash bench/setup.sh")
        html = self.dir / "html"
        for sub in ("html", "logs", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (html / "index.html").write_bytes(BODY)
        # The worker runs as `nobody` when started as root: make the tree readable.
        for p in (self.dir.parent, self.dir, html, self.dir / "tmp"):
            os.chmod(p, 0o755)
        os.chmod(html / "index.html", 0o644)
        user = "user nobody nogroup;" if os.geteuid() == 0 else ""
        conf = f"""
{user}
worker_processes 1;
daemon off;
master_process on;
pid {self.dir}/nginx.pid;
error_log {self.dir}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {self.dir}/tmp/body;
    proxy_temp_path {self.dir}/tmp/proxy;
    fastcgi_temp_path {self.dir}/tmp/fastcgi;
    uwsgi_temp_path {self.dir}/tmp/uwsgi;
    scgi_temp_path {self.dir}/tmp/scgi;
    default_type text/plain;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    open_file_cache max=16 inactive=60s;
    server {{
        listen {HOST}:{self.port} backlog=4096{" http2" if self.http2 else ""};
        root {html};
        location / {{ }}
    }}
}}
"""
        conf_path = self.dir / "nginx.conf"
        conf_path.write_text(conf)
        self.proc = subprocess.Popen(
            [self.binary, "-p", str(self.dir), "-c", str(conf_path)],
            stdout=open(self.dir / "logs" / "stdout.log", "wb"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                errlog = (self.dir / "logs" / "error.log")
                detail = errlog.read_text() if errlog.exists() else ""
                raise SystemExit(f"bench: nginx exited ({self.proc.returncode}): {detail}")
            if self.http2:
                # No HTTP/1.1 on an h2c-only port: a TCP connect is the readiness check.
                try:
                    socket.create_connection((HOST, self.port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.1)
                    continue
            try:
                c = http.client.HTTPConnection(HOST, self.port, timeout=1)
                c.request("GET", "/index.html")
                r = c.getresponse()
                body = r.read()
                c.close()
                if r.status == 200 and body == BODY:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise SystemExit("bench: nginx did not come up within 10 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful shutdown of master + worker
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# --------------------------------------------------------------------------------------------
# output parsers (each returns a dict of fields to set on RunResult)

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_wrk(out: str) -> dict:
    d: dict = {}
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if m:
        d["tool_rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h),", out)
    if m:
        d["requests"] = int(m.group(1))
    errs = 0
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    non2xx = int(m.group(1)) if m else 0
    errs += non2xx
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs += sum(int(x) for x in m.groups())
    d["errors"] = errs
    if "requests" in d:
        d["ok_2xx"] = d["requests"] - non2xx
    return d


def parse_hey(out: str) -> dict:
    d: dict = {}
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if m:
        d["tool_rps"] = float(m.group(1))
    sec = out.split("Status code distribution:", 1)
    statuses = {}
    if len(sec) == 2:
        for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", sec[1]):
            statuses[int(code)] = statuses.get(int(code), 0) + int(n)
    errors = 0
    if "Error distribution:" in out:
        tail = out.split("Error distribution:", 1)[1]
        errors = sum(int(n) for n in re.findall(r"^\s*\[(\d+)\]\s", tail, re.M))
    if statuses or errors:
        ok = sum(n for c, n in statuses.items() if 200 <= c < 300)
        d["ok_2xx"] = ok
        d["requests"] = sum(statuses.values())
        d["errors"] = errors + (d["requests"] - ok)
    return d


def parse_oha(out: str) -> dict:
    d: dict = {}
    try:
        j = json.loads(out)
    except json.JSONDecodeError:
        # oha prints one JSON document; tolerate leading noise.
        m = re.search(r"\{.*\}\s*$", out, re.S)
        if not m:
            return d
        j = json.loads(m.group(0))
    summ = j.get("summary", {})
    statuses = {int(k): int(v) for k, v in (j.get("statusCodeDistribution") or {}).items()}
    errdist = {k: int(v) for k, v in (j.get("errorDistribution") or {}).items()}
    # Without -w, oha cancels the requests still in flight at the -z deadline and lists them as
    # "aborted due to deadline": they never completed, so they are neither requests nor errors.
    d["aborted"] = sum(v for k, v in errdist.items() if "deadline" in k)
    errors = sum(errdist.values()) - d["aborted"]
    ok = sum(n for c, n in statuses.items() if 200 <= c < 300)
    d["requests"] = sum(statuses.values())
    # oha's requestsPerSec counts the aborted ones too; use completed / elapsed instead.
    if summ.get("total"):
        d["tool_rps"] = d["requests"] / float(summ["total"])
    elif summ.get("requestsPerSec") is not None:
        d["tool_rps"] = float(summ["requestsPerSec"])
    d["ok_2xx"] = ok
    d["errors"] = errors + (d["requests"] - ok)
    return d


def parse_k6_summary(path: Path) -> dict:
    """k6 --summary-export shape (also what sloburn writes): metrics.http_reqs.{count,rate}."""
    d: dict = {}
    if not path.exists():
        return d
    j = json.loads(path.read_text())
    m = j.get("metrics", {})
    reqs = m.get("http_reqs", {})
    if "count" in reqs:
        d["requests"] = int(reqs["count"])
    if "rate" in reqs:
        d["tool_rps"] = float(reqs["rate"])
    failed = m.get("http_req_failed", {})
    # k6 exports http_req_failed as a Rate: {"passes": failed, "fails": ok, "value": ratio}
    if "passes" in failed and "requests" in d:
        d["errors"] = int(failed["passes"])
        d["ok_2xx"] = d["requests"] - d["errors"]
    elif "value" in failed and "requests" in d:
        d["errors"] = round(float(failed["value"]) * d["requests"])
        d["ok_2xx"] = d["requests"] - d["errors"]
    dropped = m.get("dropped_iterations", {})
    if "count" in dropped:
        d["dropped"] = int(dropped["count"])
    return d


def parse_vegeta_report(out: str) -> dict:
    d: dict = {}
    j = json.loads(out)
    d["requests"] = int(j.get("requests", 0))
    d["tool_rps"] = float(j.get("throughput", 0.0))
    statuses = {int(k): int(v) for k, v in (j.get("status_codes") or {}).items()}
    d["ok_2xx"] = sum(n for c, n in statuses.items() if 200 <= c < 300)
    d["errors"] = d["requests"] - d["ok_2xx"]
    return d


# --------------------------------------------------------------------------------------------
# tools

K6_SCRIPT = """
import http from 'k6/http';
export const options = {{
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'p(99)'],
  scenarios: {{ main: {scenario} }},
}};
export default function () {{ http.get('{url}'); }}
"""


class Bench:
    def __init__(self, args, workdir: Path, url: str):
        self.args = args
        self.dir = workdir
        self.url = url
        self.D = args.duration
        self.C = args.connections
        self.rate = args.rate
        self.grace = 30.0

    # Each tool: returns (binary, version) or a skip reason, and a runner per mode that returns
    # (cmd, parse(stdout, stderr) -> dict) or None when the mode is not supported.

    def locate(self, tool: str) -> tuple[str | None, str]:
        cargo_bin = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin"
        if tool == "wrk":
            b = find_binary("wrk")
            return b, tool_version([b, "--version"]) if b else ""
        if tool == "hey":
            b = find_binary("hey")
            v = ""
            if b:
                v = "hey " + subprocess.run(["dpkg-query", "-W", "-f=${Version}", "hey"],
                                            capture_output=True, text=True).stdout.strip()
            return b, v
        if tool == "oha":
            b = find_binary("oha", [cargo_bin / "oha"])
            return b, tool_version([b, "--version"]) if b else ""
        if tool == "k6":
            b = find_binary("k6", [Path(sysconfig.get_path("scripts")) / "k6"])
            return b, tool_version([b, "version"]) if b else ""
        if tool == "vegeta":
            b = find_binary("vegeta", [Path.home() / "go" / "bin" / "vegeta"])
            return b, tool_version([b, "-version"]) if b else ""
        if tool in ("sloburn", "sloburn-before"):
            p = Path(self.args.sloburn if tool == "sloburn" else (self.args.sloburn_before or ""))
            if not p.is_absolute() and not p.exists():
                p = REPO_ROOT / p
            if p.is_file() and os.access(p, os.X_OK):
                return str(p), tool_version([str(p), "--version"])
            return None, ""
        raise ValueError(tool)

    def command(self, tool: str, binary: str, mode: str):
        D, C, R, url = self.D, self.C, self.rate, self.url
        dur = f"{D:g}s"
        tag = f"{tool}-{mode}"
        if tool == "wrk":
            if mode == "fixed":
                return None  # no rate limiter (that is wrk2, which is not packaged)
            return [binary, "-t1", f"-c{C}", f"-d{dur}", url], lambda o, e: parse_wrk(o)
        if tool == "hey":
            if mode == "saturation":
                return [binary, "-c", str(C), "-z", dur, url], lambda o, e: parse_hey(o)
            if R % C:
                log(f"hey: rate {R} is not a multiple of {C} workers; rounding")
            per_worker = max(1, round(R / C))  # hey -q is per worker
            return ([binary, "-c", str(C), "-q", str(per_worker), "-z", dur, url],
                    lambda o, e: parse_hey(o))
        if tool == "oha":
            cmd = [binary, "-c", str(C), "-z", dur, "--no-tui", "--output-format", "json"]
            if mode == "fixed":
                cmd += ["-q", str(R)]
            return cmd + [url], lambda o, e: parse_oha(o)
        if tool == "k6":
            if mode == "saturation":
                scen = (f"{{ executor: 'constant-vus', vus: {C}, duration: '{dur}', "
                        f"gracefulStop: '5s' }}")
            else:
                scen = (f"{{ executor: 'constant-arrival-rate', rate: {R}, timeUnit: '1s', "
                        f"duration: '{dur}', preAllocatedVUs: {self.args.k6_vus}, "
                        f"maxVUs: {self.args.k6_vus}, gracefulStop: '5s' }}")
            script = self.dir / f"{tag}.js"
            script.write_text(K6_SCRIPT.format(scenario=scen, url=url))
            summary = self.dir / f"{tag}.summary.json"
            summary.unlink(missing_ok=True)
            return ([binary, "run", "--quiet", "--no-color", "--no-usage-report",
                     "--summary-export", str(summary), str(script)],
                    lambda o, e: parse_k6_summary(summary))
        if tool == "vegeta":
            # vegeta attack writes binary results; `vegeta report` (not measured) reads them.
            results = self.dir / f"{tag}.bin"
            if mode == "saturation":
                rate_args = ["-rate=0", f"-max-workers={C}", f"-workers={C}"]
            else:
                rate_args = [f"-rate={R}/s", f"-workers={C}"]
            cmd = ([binary, "attack", f"-duration={dur}", "-keepalive=true",
                    f"-targets={self.dir / 'vegeta.targets'}", f"-output={results}"] + rate_args)
            (self.dir / "vegeta.targets").write_text(f"GET {url}\n")

            def parse(o, e, results=results):
                rep = subprocess.run([binary, "report", "-type=json", str(results)],
                                     capture_output=True, text=True, timeout=60)
                return parse_vegeta_report(rep.stdout)
            return cmd, parse
        if tool in ("sloburn", "sloburn-before"):
            summary = self.dir / f"{tag}.summary.json"
            summary.unlink(missing_ok=True)
            cmd = [binary, "run", "--url", url, "--duration", dur,
                   "--summary-export", str(summary)]
            cmd += ["--vus", str(C)] if mode == "saturation" else ["--rate", f"{R}/s"]
            return cmd, lambda o, e: parse_k6_summary(summary)
        raise ValueError(tool)

    def run_tool(self, tool: str) -> ToolResult:
        tr = ToolResult(tool=tool)
        binary, version = self.locate(tool)
        tr.binary, tr.version = binary, version
        if binary and tool in ("sloburn", "sloburn-before"):
            # The load engine's `run --url` CLI may not be merged yet in the binary given.
            try:
                h = subprocess.run([binary, "run", "--help"], capture_output=True, text=True,
                                   timeout=10)
                helptext = h.stdout + h.stderr
            except (OSError, subprocess.TimeoutExpired) as exc:
                h, helptext = None, repr(exc)
            missing = [f for f in ("--url", "--vus", "--rate", "--summary-export")
                       if f not in helptext]
            if h is None or h.returncode != 0 or missing:
                first = next((l for l in helptext.splitlines() if l.strip()), "")
                tr.skipped = (f"{binary} has no `run` with {', '.join(missing) or 'the needed flags'}"
                              f" yet ({first.strip()[:80]})")
                return tr
            if "/debug/" in binary:
                tr.notes.append("DEBUG build: figures are not representative")
        if not binary:
            if tool == "sloburn":
                tr.skipped = f"binary not found at {self.args.sloburn} (build it: cargo build --release)"
            elif tool == "sloburn-before":
                tr.skipped = f"binary not found at {self.args.sloburn_before} (give --sloburn-before PATH)"
            elif tool == "vegeta":
                tr.skipped = "not installed (optional; not packaged in Debian bookworm)"
            else:
                tr.skipped = "not installed (run bash bench/setup.sh)"
            return tr
        for mode in ("saturation", "fixed"):
            spec = self.command(tool, binary, mode)
            if spec is None:
                continue
            cmd, parse = spec
            # Loopback guard: every command targets our nginx on 127.0.0.1 only.
            assert all(("://" not in a) or a.startswith(f"http://{HOST}:") for a in cmd), cmd
            log(f"{tool} {mode}: {' '.join(cmd)}")
            time.sleep(self.args.pause)  # let the previous run's sockets settle
            env = dict(os.environ, K6_NO_USAGE_REPORT="true")
            res, out, err = run_measured(cmd, self.dir, f"{tool}-{mode}",
                                         self.D + self.grace, env=env)
            res.mode = mode
            try:
                for k, v in parse(out, err).items():
                    setattr(res, k, v)
            except Exception as exc:  # noqa: BLE001 - report, never crash the whole table
                res.note = f"could not parse output: {exc!r}"
            if res.timed_out:
                res.note = (res.note + "; " if res.note else "") + "killed after timeout"
            if res.exit_code not in (0, None) and not res.note:
                lines = [l for l in err.strip().splitlines() if l.strip()] or [""]
                first_err = next((l for l in lines if "error" in l.lower()), lines[-1])
                res.note = f"exit {res.exit_code}: {first_err.strip()[:160]}"
            if res.requests is None and not res.note:
                res.note = "no request count in output"
            setattr(tr, mode, res)
        derive(tr, self.D, self.rate)
        return tr


def merge_rounds(runs: list[ToolResult]) -> ToolResult:
    """One tool's rounds as one result: the medians of its figures, the round with the median
    saturation rate as the raw runs, and every round's figures in `rounds`."""
    if len(runs) == 1:
        return runs[0]
    import statistics

    def med(key: str) -> float | None:
        xs = [getattr(r, key) for r in runs if getattr(r, key) is not None]
        return statistics.median(xs) if xs else None

    ranked = sorted(runs, key=lambda r: r.sat_rps or 0.0)
    out = ranked[len(ranked) // 2]
    out.rounds = [{"sat_rps": r.sat_rps, "cpu_per_10k": r.cpu_per_10k,
                   "sat_cpu_per_10k": r.sat_cpu_per_10k, "peak_rss_mib": r.peak_rss_mib}
                  for r in runs]
    for key in ("sat_rps", "cpu_per_10k", "sat_cpu_per_10k", "peak_rss_mib", "achieved_ratio"):
        setattr(out, key, med(key))
    out.notes = sorted({n for r in runs for n in r.notes})
    return out


def derive(tr: ToolResult, D: float, rate: int) -> None:
    s, f = tr.saturation, tr.fixed
    if s and s.requests is not None:
        # Prefer the tool's own rate; fall back to count / nominal duration.
        tr.sat_rps = s.tool_rps if s.tool_rps else s.requests / D
        if s.requests:
            tr.sat_cpu_per_10k = s.cpu_s / s.requests * 10_000
    if s and s.note:
        tr.notes.append(f"saturation: {s.note}")
    if f and f.requests:
        tr.cpu_per_10k = f.cpu_s / f.requests * 10_000
        tr.achieved_ratio = f.requests / (rate * D)
    if f:
        tr.peak_rss_mib, tr.rss_from = f.maxrss_mib, "fixed"
        if f.note:
            tr.notes.append(f"fixed rate: {f.note}")
        if f.dropped:
            tr.notes.append(f"fixed rate: {f.dropped} dropped iterations")
    elif s:
        tr.peak_rss_mib, tr.rss_from = s.maxrss_mib, "saturation"
        tr.notes.append("no fixed-rate mode (wrk2 not packaged): CPU n/a, RSS from saturation run"
                        + (f"; saturation CPU {s.cpu_s / s.requests * 10_000:.3f} s/10k req"
                           if s.requests else ""))
    for r in (s, f):
        if r and r.requests and r.errors:
            tr.notes.append(f"{r.mode}: {r.errors} errors/non-2xx of {r.requests} "
                            f"({100.0 * r.errors / r.requests:.2f}%)")


# --------------------------------------------------------------------------------------------
# report

def fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def ratio(x: float | None, base: float | None) -> str:
    if x is None or not base:
        return "n/a"
    return f"{x / base:.2f}x"


def table(results: list[ToolResult], rate: int) -> str:
    oha = next((r for r in results if r.tool == "oha" and not r.skipped), None)
    base_sat = oha.sat_rps if oha else None
    base_cpu = oha.cpu_per_10k if oha else None
    lines = [
        f"| tool | saturation req/s | ratio vs oha | CPU s per 10k req @{rate}/s | ratio vs oha "
        "| peak RSS MiB | achieved/target |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r.skipped:
            lines.append(f"| {r.tool} | skipped: {r.skipped} | | | | | |")
            continue
        rss = fmt(r.peak_rss_mib, ".1f") + (" (sat)" if r.rss_from == "saturation" else "")
        lines.append(
            f"| {r.tool} | {fmt(r.sat_rps, ',.0f')} | {ratio(r.sat_rps, base_sat)} "
            f"| {fmt(r.cpu_per_10k, '.3f')} | {ratio(r.cpu_per_10k, base_cpu)} "
            f"| {rss} | {fmt(r.achieved_ratio, '.3f')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per load run (default 5)")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                    help=f"comma-separated subset of {','.join(ALL_TOOLS)}")
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN", "target/release/sloburn"),
                    help="sloburn binary (env SLOBURN; default target/release/sloburn)")
    ap.add_argument("--sloburn-before", metavar="PATH",
                    help="a second sloburn binary (e.g. the previous commit's release build): "
                         "its row `sloburn-before` runs the same commands, interleaved")
    ap.add_argument("--json", metavar="FILE", help="also write results as JSON")
    ap.add_argument("--connections", type=int, default=50, help="connections / VUs (default 50)")
    ap.add_argument("--rate", type=int, default=5000, help="fixed rate, req/s (default 5000)")
    ap.add_argument("--k6-vus", type=int, default=100, help="k6 preAllocatedVUs at fixed rate")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between runs (default 1)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every tool this many times, interleaved; figures are medians")
    ap.add_argument("--logs", metavar="DIR", help="keep tool outputs in DIR (default: temp, removed)")
    args = ap.parse_args()
    # Tools run with the scratch dir as cwd: make the binary path absolute first.
    args.sloburn = str(Path(args.sloburn).resolve())
    if args.sloburn_before:
        args.sloburn_before = str(Path(args.sloburn_before).resolve())

    if not 0 < args.duration <= 60:
        ap.error("--duration must be in (0, 60] seconds: load runs stay short")
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if args.sloburn_before and "sloburn-before" not in tools:
        tools.append("sloburn-before")
    bad = [t for t in tools if t not in ALL_TOOLS]
    if bad:
        ap.error(f"unknown tools: {','.join(bad)} (known: {','.join(ALL_TOOLS)})")

    if args.logs:
        workdir = Path(args.logs).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        cleanup = False
    else:
        workdir = Path(tempfile.mkdtemp(prefix="sloburn-bench-"))
        cleanup = True
    os.chmod(workdir, 0o755)

    nginx = Nginx(workdir)
    results: list[ToolResult] = []
    load0 = os.getloadavg()
    started = time.time()
    try:
        nginx.start()
        log(f"nginx {nginx.binary} serving {nginx.url} ({len(BODY)} B); loadavg {load0[0]:.2f}")
        bench = Bench(args, workdir, nginx.url)
        per_round: list[list[ToolResult]] = []
        for r in range(args.rounds):
            # Round-major: every tool once per round, so a slow minute of a shared machine
            # falls on all of them.
            if args.rounds > 1:
                log(f"round {r + 1} of {args.rounds}")
            per_round.append([bench.run_tool(t) for t in tools])
        results = [merge_rounds([rnd[i] for rnd in per_round]) for i in range(len(tools))]
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        nginx.stop()
        if cleanup:
            shutil.rmtree(workdir, ignore_errors=True)

    load1 = os.getloadavg()
    print(f"\nsloburn bench: {args.rounds} round(s), medians; "
          f"{args.connections} connections, saturation {args.duration:g}s; "
          f"fixed rate {args.rate}/s for {args.duration:g}s; nginx 1 worker, "
          f"{len(BODY)} B static file; {os.cpu_count()} CPUs; "
          f"loadavg {load0[0]:.2f} -> {load1[0]:.2f}\n")
    print(table(results, args.rate))
    notes = [(r.tool, n) for r in results for n in r.notes]
    if notes:
        print("\nNotes:")
        for tool, n in notes:
            print(f"- {tool}: {n}")
    print("\nVersions: " + "; ".join(f"{r.tool}={r.version or '?'}"
                                     for r in results if not r.skipped))

    if args.json:
        doc = {
            "started_unix": started,
            "params": {"duration_s": args.duration, "connections": args.connections,
                       "rate": args.rate, "k6_vus": args.k6_vus, "body_bytes": len(BODY),
                       "rounds": args.rounds,
                       "cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": load1},
            "baseline": "oha",
            "results": [asdict(r) for r in results],
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

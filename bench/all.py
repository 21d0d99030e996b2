#!/usr/bin/env python3
"""bench/all.py — every goal of issue "Performance, round two" in one table, each beside the
peers' figures from the same run.

It runs the sibling programs one after another (each starts its own servers on 127.0.0.1 and
stops by itself), reads the JSON each writes with --json, and prints one markdown table:
goal, sloburn's figure, the peers' figures, the bar, met or missed. Python 3.11, standard
library only.

  bench/run.py      HTTP/1.1 saturation (50 connections) and CPU per request at 5,000 req/s:
                    sloburn, wrk, oha, k6 (hey, vegeta when installed)
  bench/h2.py       HTTP/2 saturation: sloburn, h2load, oha --http2
  bench/journey.py  a 3-step journey against single requests
  bench/tracing.py  tracing off, at 0.01 and at 1.0 (CPU and, with valgrind, instructions)
  bench/sidecar.py  `serve` at rest: idle RSS and CPU, RSS drift   (when present)
  bench/scale.py    1,000 profiles in one daemon                    (when present)
  the release binary's size, read here

Usage
  python3 bench/all.py [--quick] [--sloburn PATH] [--skip h2,sidecar,...] [--keep DIR]
                       [--reuse sidecar=FILE,...]

--reuse takes a part's figures from the JSON an earlier run of that part wrote (--json, or
--keep's folder) instead of running it again, for the 30-minute sidecar above all; the table
names every reused part with its file and when it was written.

--quick shortens every part (fewer rounds, shorter runs, a 5-minute sidecar, 200 profiles):
for checking the program, not for the figures in BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MB = 1_000_000


def part(name: str, argv: list[str], out: Path, timeout_s: int) -> dict | None:
    """Runs one sibling with --json OUT; its table goes to stdout as it runs."""
    prog = HERE / f"{name}.py"
    if not prog.exists():
        print(f"bench/all: {prog.name} not found, its goals are skipped", file=sys.stderr)
        return None
    cmd = [sys.executable, str(prog), *argv, "--json", str(out)]
    print(f"\n## {name}: {' '.join(cmd[1:])}\n", flush=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"bench/all: {name} did not finish within {timeout_s} s", file=sys.stderr)
        return None
    print(f"({name}: {time.monotonic() - t0:.0f} s, exit {p.returncode})", flush=True)
    if p.returncode != 0 or not out.exists():
        return None
    return json.loads(out.read_text())


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def f2(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "n/a" if x is None else f"{format(x, spec)}{suffix}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN",
                    str(REPO / "target/release/sloburn")))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out")
    ap.add_argument("--keep", help="keep the parts' JSON in this directory")
    ap.add_argument("--reuse", default="",
                    help="comma-separated NAME=FILE: a part's JSON from an earlier run")
    args = ap.parse_args()
    sloburn = str(Path(args.sloburn).resolve())
    if not Path(sloburn).exists():
        print(f"no sloburn binary at {sloburn}: cargo build --release", file=sys.stderr)
        return 2
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="sloburn-all-"))
    work.mkdir(parents=True, exist_ok=True)
    q = args.quick
    sb = ["--sloburn", sloburn]
    parts = {
        "run": (["--duration", "3" if q else "8", "--rounds", "1" if q else "5",
                 "--tools", "wrk,hey,oha,k6,vegeta,sloburn", *sb], 3600),
        "h2": (["--duration", "3" if q else "5", "--rounds", "1" if q else "3", *sb], 600),
        "journey": (["--duration", "3" if q else "8", "--rounds", "1" if q else "5", *sb], 900),
        "tracing": (["--duration", "3" if q else "8", "--rounds", "1" if q else "10",
                     "--shapes", "off,0.01,1.0", *sb]
                    + (["--instructions", "--ir-rate", "800", "--ir-repeats", "3"]
                       if shutil.which("valgrind") and not q else []), 3600),
        "sidecar": (["--minutes", "5" if q else "30", *sb], 3 * 3600),
        "scale": (["--profiles", "200" if q else "1000", *sb], 3600),
    }
    reuse: dict[str, Path] = {}
    for item in filter(None, (s.strip() for s in args.reuse.split(","))):
        name, _, file = item.partition("=")
        if name not in parts or not file:
            print(f"bench/all: --reuse {item}: expected NAME=FILE with NAME one of "
                  f"{', '.join(parts)}", file=sys.stderr)
            return 2
        if not Path(file).is_file():
            print(f"bench/all: --reuse {item}: no such file", file=sys.stderr)
            return 2
        reuse[name] = Path(file).resolve()
    got: dict[str, dict | None] = {}
    for name, (argv, timeout_s) in parts.items():
        if name in reuse:
            got[name] = json.loads(reuse[name].read_text())
            print(f"\n## {name}: reused from {reuse[name]}\n", flush=True)
        else:
            got[name] = None if name in skip else part(name, argv, work / f"{name}.json",
                                                        timeout_s)

    rows: list[tuple[str, str, str, str, str]] = []

    def row(goal: str, ours: str, peers: str, bar: str, ok: bool | None) -> None:
        rows.append((goal, ours, peers, bar, verdict(ok)))

    # 1, 2: HTTP/1.1 against wrk (and oha, k6, hey).
    r = got.get("run")
    if r:
        by = {t["tool"]: t for t in r["results"] if not t.get("skipped")}

        def sat(t: str) -> float | None:
            return by.get(t, {}).get("sat_rps")

        def sat_cpu(t: str) -> float | None:
            return by.get(t, {}).get("sat_cpu_per_10k")

        def fixed_cpu(t: str) -> float | None:
            return by.get(t, {}).get("cpu_per_10k")

        ours, wrk = sat("sloburn"), sat("wrk")
        peers = ", ".join(f"{t} {sat(t):,.0f}" for t in ("wrk", "oha", "k6", "hey", "vegeta")
                          if sat(t))
        row("1. HTTP/1.1 saturation, 50 connections (req/s)",
            f"{f2(ours, ',.0f')} ({f2(ours / wrk if ours and wrk else None)}x wrk)",
            peers, ">= 1.0x wrk", ours / wrk >= 1.0 if ours and wrk else None)
        floor = sat_cpu("wrk")
        mine = fixed_cpu("sloburn")
        peers = ", ".join([f"wrk at saturation {f2(floor, '.3f')}"]
                          + [f"{t} {fixed_cpu(t):.3f}" for t in ("oha", "k6", "hey", "vegeta")
                             if fixed_cpu(t)])
        row("2. CPU s per 10k requests at 5,000 req/s",
            f"{f2(mine, '.3f')} ({f2(mine / floor if mine and floor else None)}x wrk's floor)",
            peers, "<= 1.5x wrk at saturation",
            mine / floor <= 1.5 if mine and floor else None)
    # 3: HTTP/2 against h2load.
    h = got.get("h2")
    if h:
        rps = h["rps"]
        ours, base = rps.get("sloburn"), rps.get("h2load")
        row(f"3. HTTP/2 saturation, {h['connections']} connections x {h['streams']} streams "
            "(req/s)",
            f"{f2(ours, ',.0f')} ({f2(ours / base if ours and base else None)}x h2load)",
            ", ".join(f"{t} {v:,.0f}" for t, v in rps.items() if t != "sloburn"),
            ">= 0.8x h2load", ours / base >= 0.8 if ours and base else None)
    # 4: the sidecar at rest, and the binary.
    s = got.get("sidecar")
    if s:
        for key, goal, bar, limit, unit in (
            ("idle_rss_mb", "4. idle RSS between runs", "<= 10 MB", 10.0, " MB"),
            ("idle_cpu_pct", "4. idle CPU, 5-minute average", "<= 0.1 % of a core", 0.1, " %"),
            ("rss_drift", "4. RSS at the end / RSS after 1 minute", "<= 1.10", 1.10, "x"),
        ):
            v = s.get(key)
            peer = s.get("peers", {}).get(key, "")
            row(goal, f2(v, ".3f" if key != "idle_rss_mb" else ".1f", unit), str(peer), bar,
                v <= limit if v is not None else None)
    size = Path(sloburn).stat().st_size / MB
    row("4. release binary", f"{size:.1f} MB", "", "<= 10 MB", size <= 10.0)
    # 5: 1,000 profiles.
    c = got.get("scale")
    if c:
        for key, goal, bar, limit, spec, unit in (
            ("lateness_p99_ms", "5. schedule lateness p99", "<= 100 ms", 100.0, ".1f", " ms"),
            ("scrape_ms", "5. one /metrics scrape", "<= 100 ms", 100.0, ".0f", " ms"),
            ("scrape_mb", "5. /metrics size", "<= 30 MB", 30.0, ".1f", " MB"),
            ("rss_mb", "5. RSS between runs", "<= 150 MB", 150.0, ".0f", " MB"),
            ("peak_rss_mb", "5. peak RSS, all runs at once", "<= 150 MB", 150.0, ".0f", " MB"),
            ("reload_s", "5. reload of the whole config (max)", "<= 1 s", 1.0, ".2f", " s"),
        ):
            v = c.get(key)
            row(f"{goal} ({c.get('profiles', '?')} profiles)", f2(v, spec, unit), "", bar,
                v <= limit if v is not None else None)
        v = c.get("between_runs_cpu_pct")
        if v is not None:
            row(f"5. daemon CPU between runs ({c.get('profiles', '?')} profiles)",
                f"{v:.2f}% of a core", "", "(a figure, no goal)", None)
    # 6: journeys and tracing.
    j = got.get("journey")
    if j:
        cpu = j["cpu_per_10k"]
        shapes = [k for k in cpu if k != "single"]
        worst = max(shapes, key=lambda k: cpu[k]) if shapes else None
        v = cpu[worst] / cpu["single"] if worst else None
        row("6. a 3-step journey, CPU per request vs single requests",
            f"{f2(v, '.2f', 'x')} ({worst})", "", "<= 1.2x", v <= 1.2 if v else None)
    t = got.get("tracing")
    if t:
        cpu = t["cpu_per_10k"]
        v = cpu["0.01"] / cpu["off"] if "0.01" in cpu else None
        ir = t.get("instructions_per_request", {})
        irv = ir["0.01"] / ir["off"] if "0.01" in ir and "off" in ir else None
        extra = f"; instructions {irv:.3f}x" if irv else ""
        row("6. tracing at sample_ratio 0.01, CPU per request vs off",
            f"{f2(v, '.3f', 'x')}{extra}", f"1.0: {cpu.get('1.0', 0) / cpu['off']:.2f}x",
            "<= 1.03x", v <= 1.03 if v else None)

    print(f"\n# Performance, round two: {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
          f"{'quick' if q else 'full'} run\n")
    print("| goal | sloburn | peers, same run | bar | |")
    print("|---|---|---|---|---|")
    for g in rows:
        print("| " + " | ".join(g) + " |")
    for name, file in reuse.items():
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(file.stat().st_mtime))
        print(f"\n{name}: figures reused from {file} (written {when}), not measured in this run.")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

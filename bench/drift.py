#!/usr/bin/env python3
"""The sidecar's RSS drift, accelerated and side by side: `sloburn serve` with the sidecar's
profile (10/s for 10 s against `sloburn target`) and two SLOs, but a run every 25 s instead of
every minute (the daemon hands memory back 12 s after a run ends, so 25 s still leaves it idle
between runs). One daemon per glibc malloc thread-cache size, all at once: `serve`'s own choice
(no `GLIBC_TUNABLES`, it re-executes itself with `glibc.malloc.tcache_count=0`) and the sizes
given with --tcache (glibc's default is 7), set through `GLIBC_TUNABLES`, which `serve` keeps.

Each daemon's anonymous RSS (`RssAnon`, the heap: code pages are file-backed) is read every
second; the table prints the lowest reading of each 25 s cycle (the idle one) every 5 cycles,
and the growth from the 2nd cycle to the last (the 1st holds start-up).

    python3 -u bench/drift.py [--sloburn target/release/sloburn] [--cycles 30] [--tcache 7,2,1]

Outside CI. Only 127.0.0.1: each target and daemon is started here on free ports. The load is
bounded (100 requests per daemon per cycle) and so is the program (--cycles x 25 s + a few s).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sidecar  # noqa: E402

CYCLE_S = 25


def anon_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise SystemExit(f"no RssAnon for {pid}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN", "target/release/sloburn"))
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--tcache", default="7,2,1", help="thread-cache sizes set by hand")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.cycles < 3:
        raise SystemExit("--cycles must be at least 3")
    binary = str(Path(args.sloburn).resolve())
    variants = [("serve's default (0)", None)] + [
        (f"tcache_count={n}", f"glibc.malloc.tcache_count={int(n)}")
        for n in filter(None, args.tcache.split(","))]
    procs = []
    daemons = []  # (name, process), one per variant
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i, (name, tunables) in enumerate(variants):
                tport, port = sidecar.free_port(), sidecar.free_port()
                target = subprocess.Popen([binary, "target", "--listen", f"{sidecar.HOST}:{tport}",
                                           "--workers", "1"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(target)
                cfg = Path(tmp) / f"drift-{i}.yaml"
                cfg.write_text(sidecar.config(port, tport, f"{tmp}/data-{i}")
                               .replace('schedule: "* * * * *"', f"every: {CYCLE_S}s"))
                env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
                if tunables:
                    env["GLIBC_TUNABLES"] = tunables
                daemon = subprocess.Popen([binary, "serve", "--config", str(cfg), "--no-watch"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          env=env)
                procs.append(daemon)
                if not sidecar.wait_http(f"http://{sidecar.HOST}:{port}/healthz", daemon):
                    raise SystemExit(f"{name}: the daemon did not start")
                daemons.append((name, daemon))
            print(f"drift: {len(daemons)} daemons, a 10 s run at 10/s every {CYCLE_S} s, "
                  f"{args.cycles} cycles; binary {binary}", flush=True)
            lows = {name: [] for name, _ in daemons}
            for _ in range(args.cycles):
                low = {name: 1 << 62 for name, _ in daemons}
                for _ in range(CYCLE_S):
                    time.sleep(1)
                    for name, daemon in daemons:
                        if daemon.poll() is not None:
                            raise SystemExit(f"{name}: the daemon exited with {daemon.returncode}")
                        low[name] = min(low[name], anon_kib(daemon.pid))
                for name in lows:
                    lows[name].append(low[name])
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
    shown = list(range(0, args.cycles, 5))
    print("\n| malloc thread cache | " + " | ".join(f"cycle {c + 1}" for c in shown)
          + " | growth, cycle 2 to last |")
    print("|---|" + "---:|" * (len(shown) + 1))
    for name, values in lows.items():
        print(f"| {name} | " + " | ".join(f"{values[c]} KiB" for c in shown)
              + f" | {values[-1] - values[1]} KiB |")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {name: {"anon_kib": v, "growth_kib": v[-1] - v[1]} for name, v in lows.items()},
            indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

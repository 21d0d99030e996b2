#!/usr/bin/env python3
"""Data-file memory (issue 30, items 2 and 3): peak RSS of `sloburn check`, and of an idle
`sloburn serve` that has loaded the same config, for CSV and JSON data files of several sizes
and shapes, printed as MiB and as bytes of RSS per byte of file.

Shapes:
- `tiny`: one one-byte value per row (`x` under a header `v`; `{"v":"x"}` objects), the worst
  case for per-row overhead;
- `users`: two short columns (`user000001,pw-000001`), a typical credentials file;
- `keys`: JSON only, every row a new key (`{"k000001":"x"}`), the distinct-key case (item 2);
- `empty`: CSV only, rows of two empty fields (`,`): the most offsets per byte of file.

"per byte" is (peak RSS − the RSS of the same command with a one-row file) / file size, so the
binary's own memory is not counted. A command that fails (exit code shown) is printed as such.
`check` is measured by GNU `/usr/bin/time` when installed (else `wait4`); `serve` by its
`VmHWM` in /proc once it is ready.

    python3 bench/data_memory.py [--sloburn target/debug/sloburn] [--sizes 1,60]
        [--shapes tiny,users,keys,empty] [--no-serve] [--keys-kib 60,120]

Only 127.0.0.1: `serve` listens on a free port there; the journey's target is never sent to
(no schedule runs). Files are written to a temp dir that is removed afterwards.
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from common import free_port  # noqa: E402  (bench/ is on sys.path when run as a script)

HOST = "127.0.0.1"


def write_data(path: Path, shape: str, fmt: str, size: int) -> int:
    """Writes about `size` bytes of `shape` rows; returns the row count."""
    rows = 0
    with open(path, "w") as f:
        written = 0
        if fmt == "csv":
            head = {"tiny": "v\n", "users": "user,password\n", "empty": "v,w\n"}[shape]
            f.write(head)
            written += len(head)
        else:
            f.write("[")
            written += 1
        chunk = []
        while written < size:
            i = rows + 1
            if fmt == "csv":
                line = {"tiny": "x\n", "empty": ",\n"}.get(shape, f"user{i:06},pw-{i:06}\n")
            else:
                sep = "," if rows else ""
                line = {
                    "tiny": f'{sep}{{"v":"x"}}',
                    "users": f'{sep}{{"user":"user{i:06}","password":"pw-{i:06}"}}',
                    "keys": f'{sep}{{"k{i:06}":"x"}}',
                }[shape]
            chunk.append(line)
            written += len(line)
            rows += 1
            if len(chunk) >= 65536:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))
        if fmt == "json":
            f.write("]\n")
    return rows


def config(dir: Path, data: str, column: str) -> Path:
    text = f"""storage: {{ path: "{dir / 'store'}" }}
targets:
  api:
    url: http://{HOST}:1/
journeys:
  j:
    target: api
    data: {{ file: {data}, order: sequential }}
    steps:
      - name: s
        path: /x?v=${{data.{column}}}
profiles:
  p:
    journey: j
    executor: constant-vus
    vus: 1
    duration: 1s
"""
    path = dir / f"{data}.yaml"
    path.write_text(text)
    return path


def check_rss(binary: str, cfg: Path) -> tuple[float, int]:
    """Peak RSS in MiB of `sloburn check`, and its exit code. Measured by GNU time when it is
    installed: a child forked from this Python process counts Python's pages in its ru_maxrss
    until it execs, which floors small figures at Python's own RSS."""
    if Path("/usr/bin/time").exists():
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "check", str(cfg)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        kib = int(proc.stderr.strip().splitlines()[-1])
        return kib / 1024.0, proc.returncode
    proc = subprocess.Popen([binary, "check", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    return ru.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def serve_rss(binary: str, cfg: Path) -> tuple[float, float, int]:
    """Peak (VmHWM) and current (VmRSS) MiB of `sloburn serve` once it is ready, or its exit
    code when it never gets there (within 120 s)."""
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--log-format", "json", "--listen",
                             f"{HOST}:{port}", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    ready = False
    buf = b""
    while time.monotonic() < deadline and proc.poll() is None:
        r, _, _ = select.select([proc.stderr], [], [], 1.0)
        if r:
            data = os.read(proc.stderr.fileno(), 65536)
            if not data:
                break
            buf += data
            if b"sloburn ready" in buf:
                ready = True
                break
    try:
        if not ready:
            proc.kill()
            return float("nan"), float("nan"), proc.wait()
        status = Path(f"/proc/{proc.pid}/status").read_text()
        hwm, rss = (int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) / 1024
                    for k in ("VmHWM", "VmRSS"))
        return hwm, rss, 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sloburn", default=os.environ.get("SLOBURN", "target/debug/sloburn"))
    ap.add_argument("--sizes", default="1,60", help="file sizes in MiB")
    ap.add_argument("--shapes", default="tiny,users,keys,empty")
    ap.add_argument("--keys-kib", default="60,120,1024",
                    help="sizes of the `keys` JSON files in KiB")
    ap.add_argument("--no-serve", action="store_true")
    args = ap.parse_args()
    binary = str(Path(args.sloburn).resolve())
    shapes = args.shapes.split(",")
    cases = []
    for shape in shapes:
        if shape == "keys":
            cases += [("keys", "json", int(k) << 10) for k in args.keys_kib.split(",") if k]
            continue
        if shape == "empty":
            cases += [("empty", "csv", int(float(s) * (1 << 20))) for s in args.sizes.split(",")]
            continue
        for fmt in ("csv", "json"):
            cases += [(shape, fmt, int(float(s) * (1 << 20))) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        dir = Path(tmp)
        base = {}
        for fmt in ("csv", "json"):
            name = f"base.{fmt}"
            write_data(dir / name, "tiny", fmt, 3)
            cfg = config(dir, name, "v")
            base[fmt] = (check_rss(binary, cfg)[0],
                         float("nan") if args.no_serve else serve_rss(binary, cfg)[0])
        print(f"binary: {binary}")
        print(f"baseline (a one-row file): check {base['csv'][0]:.1f} MiB, serve "
              f"{base['csv'][1]:.1f} MiB\n")
        print("| shape | format | file | rows | check peak MiB | check B/B | serve peak MiB "
              "| serve B/B | serve now MiB | exit |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for shape, fmt, size in cases:
            name = f"{shape}-{size}.{fmt}"
            rows = write_data(dir / name, shape, fmt, size)
            actual = (dir / name).stat().st_size
            column = {"tiny": "v", "users": "user", "keys": "k000001", "empty": "w"}[shape]
            cfg = config(dir, name, column)
            c_rss, c_code = check_rss(binary, cfg)
            if args.no_serve:
                s_hwm = s_rss = float("nan")
                s_code = 0
            else:
                s_hwm, s_rss, s_code = serve_rss(binary, cfg)
            per = lambda rss, b: (rss - b) * (1 << 20) / actual
            show = f"{actual / (1 << 20):.2f} MiB" if actual >= 1 << 20 else f"{actual >> 10} KiB"
            print(f"| {shape} | {fmt} | {show} | {rows} | {c_rss:.1f} | "
                  f"{per(c_rss, base[fmt][0]):.2f} | {s_hwm:.1f} | {per(s_hwm, base[fmt][1]):.2f} "
                  f"| {s_rss:.1f} | check {c_code}, serve {s_code} |", flush=True)
            (dir / name).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
